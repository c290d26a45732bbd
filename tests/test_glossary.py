"""attnmt.jobs.glossary and `attnmt translate --glossary`: terms found in a sentence (whole words, the
longest at each position) become required phrases of its translation, and a bad glossary is one
line naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnmt.jobs.glossary import read_glossary
from attnmt.utils import UserError
from attnmt.vocab import UNK
from tests.cli_helpers import run_error, run_ok

KNOWN = {"x", "y", "q", "new", "york", "city", "paris"}


def encode(text: str) -> list[int]:
    """A target vocabulary of KNOWN words, every other word unknown."""
    return [5 if word in KNOWN else UNK for word in text.split()]


def glossary_file(folder: Path, text: str) -> Path:
    path = folder / "terms.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_terms_match_whole_words_longest_first_without_overlap(tmp_path):
    path = glossary_file(
        tmp_path, "# place names\nnew york\tnew york\nnew york city\tcity\nyork\ty\n\ncity\tx\nnewark\tq\n"
    )
    glossary = read_glossary(path, "en", True, encode)
    assert len(glossary) == 5
    found = glossary.match("The New York City marathon goes through York, not Newarkish city.")
    assert [term.source for term in found] == ["new york city", "york", "city"]
    assert glossary.required_phrases("new york and new york") == ("new york",), "each target once"
    assert glossary.match("newyork yorkshire") == (), "whole words only"
    applied = glossary.applied("york city", missing_required_phrases=["x"])
    assert applied.record() == {"applied": [["york", "y"]], "missing": [["city", "x"]]}


def test_a_cased_run_matches_case_as_it_is_and_a_term_may_keep_its_source(tmp_path):
    glossary = read_glossary(glossary_file(tmp_path, "Paris\tParis\n"), "en", False, lambda t: [5])
    assert glossary.required_phrases("I love Paris .") == ("Paris",) and glossary.match("i love paris .") == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("new york\tnew york\nyork\n", "terms.tsv:2: expected SOURCE<TAB>TARGET (one tab), got 'york'"),
        ("york\tx\tq\n", "terms.tsv:1: expected SOURCE<TAB>TARGET (one tab)"),
        ("york\tx\n \tq\n", "terms.tsv:2: an empty source term"),
        ("york\t \n", "terms.tsv:1: an empty target term"),
        ("york\tx\ncity\tq\nYork\ty\n", "terms.tsv:3: 'York' is already translated 'x' ("),
        ("york\tzurich\n", "terms.tsv:1: target 'zurich' has 1 token(s) unknown to the model's target vocabulary"),
        ("# nothing\n\n", "terms.tsv: the glossary holds no terms"),
    ],
)
def test_a_bad_glossary_is_one_error_naming_its_line(tmp_path, text, expected):
    with pytest.raises(UserError) as raised:
        read_glossary(glossary_file(tmp_path, text), "en", True, encode)
    assert expected in str(raised.value) and raised.value.field == "glossary"
    if "already" in expected:
        assert str(raised.value).endswith("terms.tsv:1)"), "where the first target was given"


def test_the_same_line_twice_is_one_term(tmp_path):
    assert len(read_glossary(glossary_file(tmp_path, "york\tx\nyork\tx\n"), "en", True, encode)) == 1


def test_the_command_line_requires_the_matched_terms_and_reports_them(reverse_run, tmp_path, capsys):
    plain = run_ok(capsys, "translate", str(reverse_run), "a b c d", "e f g").splitlines()
    terms = glossary_file(tmp_path, "b\tq\nb c\tx y\nz z\tp\n")  # "b c" wins over "b" in "a b c d"
    report = tmp_path / "report.jsonl"
    code_args = ["translate", str(reverse_run), "a b c d", "e f g", "--glossary", str(terms)]
    from attnmt.cli import main

    assert main([*code_args, "--glossary-report", str(report)]) == 0
    captured = capsys.readouterr()
    first, second = captured.out.splitlines()
    assert "x y" in first and "q" not in first.split() and second == plain[1], "only the sentence with a term changes"
    assert "glossary: 1 terms applied in 1 of 2 sentences" in captured.err
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert lines == [
        {"line": 1, "applied": [["b c", "x y"]], "missing": []},
        {"line": 2, "applied": [], "missing": []},
    ]
    inputs = tmp_path / "input.txt"
    inputs.write_text("a b c d\ne f g\n")
    assert (
        run_ok(capsys, "translate", str(reverse_run), "--input", str(inputs), "--glossary", str(terms)).splitlines()[0]
        == first
    )


def test_the_command_line_refuses_a_bad_glossary_in_one_line(reverse_run, tmp_path, capsys):
    terms = glossary_file(tmp_path, "b\tq\nc\n")
    line = run_error(capsys, "translate", str(reverse_run), "a b c", "--glossary", str(terms))
    assert line == f"attnmt: error: --glossary: {terms}:2: expected SOURCE<TAB>TARGET (one tab), got 'c'"
    unknown = glossary_file(tmp_path, "b\tnot-a-letter\n")
    assert "unknown to the model's target vocabulary" in run_error(
        capsys, "translate", str(reverse_run), "a b c", "--glossary", str(unknown)
    )
    assert run_error(capsys, "translate", str(reverse_run), "a b", "--glossary-report", "r.jsonl") == (
        "attnmt: error: --glossary: --glossary-report goes with --glossary"
    )


def test_the_api_takes_a_glossary_and_says_what_it_applied(reverse_run):
    from tests.serve_helpers import serving

    _, client = serving(str(reverse_run))
    with client:
        body = {"sentences": ["a b c d", "e f g"], "glossary": [["b c", "x y"], ["b", "q"]]}
        answer = client.post("/v1/translate", json=body)
        assert answer.status_code == 200, answer.text
        first, second = answer.json()["translations"]
        assert "x y" in first["hypotheses"][0]["text"]
        assert first["glossary"] == {"applied": [["b c", "x y"]], "missing": []}
        assert second["glossary"] == {"applied": [], "missing": []}
        assert "glossary" not in client.post("/v1/translate", json={"sentences": ["a b"]}).json()["translations"][0]
        for terms, message in (
            ([["b", " "]], "glossary[0]: an empty target term"),
            ([["b", "q"], ["b", "x"]], "glossary[1]: 'b' is already translated 'q' (glossary[0])"),
            ([["b", "zebra"]], "unknown to the model's target vocabulary"),
            ([["b", "q", "x"]], "glossary[0]: expected [source, target], got 3 strings"),
        ):
            refused = client.post("/v1/translate", json={"sentences": ["a b"], "glossary": terms})
            assert refused.status_code == 422 and refused.json()["field"] == "glossary", refused.text
            assert message in refused.text


def test_a_server_glossary_serves_every_request_that_sends_none(reverse_run, tmp_path):
    from tests.serve_helpers import serving

    terms = glossary_file(tmp_path, "b c\tx y\n")
    _, client = serving(str(reverse_run), "--glossary", str(terms))
    with client:
        [answer] = client.post("/v1/translate", json={"sentences": ["a b c d"]}).json()["translations"]
        assert "x y" in answer["hypotheses"][0]["text"] and answer["glossary"]["applied"] == [["b c", "x y"]]
        own = client.post("/v1/translate", json={"sentences": ["a b c d"], "glossary": []}).json()
        assert own["translations"][0]["glossary"] == {"applied": [], "missing": []}, "a request's own replaces it"
    bad = glossary_file(tmp_path, "b\tzebra\n")
    with pytest.raises(UserError, match=r"terms\.tsv:1: target 'zebra'"):
        serving(str(reverse_run), "--glossary", str(bad))
