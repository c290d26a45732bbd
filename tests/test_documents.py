"""Documents: a line cut into sentences and put back with its own spacing, long sentences cut to
the model's limit, paragraphs streamed back in order, through the CLI and the API."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnmt.jobs.documents import Documents, Paragraph, split_paragraph
from tests.cli_helpers import run_error, run_ok


def words(text: str) -> int:
    return len(text.split())


def split(line: str, limit: int = 250, said: list | None = None) -> Paragraph:
    return split_paragraph(line, 1, "en", words, limit, (said if said is not None else []).append)


def test_sentences_are_cut_and_the_spacing_is_kept():
    paragraph = split("  A man rides a bike.   Two dogs play!\tWhere is the cat?  ")
    assert paragraph.sentences == ["A man rides a bike.", "Two dogs play!", "Where is the cat?"]
    assert paragraph.leading == "  " and paragraph.gaps == ["   ", "\t", "  "]
    assert paragraph.join(["X.", "Y!", "Z?"]) == "  X.   Y!\tZ?  "
    blank = split(" \t ")
    assert blank.sentences == [] and blank.join([]) == " \t "
    with pytest.raises(ValueError, match="2 translations for 3 sentences"):
        paragraph.join(["X.", "Y!"])


SENTENCE = st.lists(st.sampled_from(["a", "man", "Dr.", "3.5", "kg", "x,", "U.S.", '"hi."', "(so)"]), min_size=1)
END = st.sampled_from([".", "!", "?", "...", ""])
SPACE = st.text(alphabet=" \t\u00a0", max_size=3)


@given(st.lists(st.tuples(SENTENCE, END, SPACE), max_size=6), SPACE, st.integers(2, 12))
def test_putting_the_sentences_back_gives_the_line_whatever_its_text(parts, leading, limit):
    """Lossless: the sentences (or parts of long ones) joined with their gaps are the line."""
    line = leading + "".join(" ".join(tokens) + end + " " + space for tokens, end, space in parts)
    paragraph = split(line, limit)
    assert paragraph.join(paragraph.sentences) == line
    assert all(sentence == sentence.strip() and sentence for sentence in paragraph.sentences)
    assert all(words(sentence) <= limit for sentence in paragraph.sentences)


def test_a_sentence_over_the_limit_is_cut_at_its_last_clause_end_and_said():
    said = []
    paragraph = split("one two, three four five; six seven eight nine ten", limit=4, said=said)
    assert paragraph.sentences == ["one two,", "three four five;", "six seven eight nine", "ten"]
    assert said == ["line 1: a sentence of 10 tokens is longer than the model's limit of 4; translated in 4 parts"]
    # one word longer than the limit (text without spaces) is cut into runs of characters
    runs = split_paragraph("x" * 1000, 7, "en", lambda text: len(text) // 10, 30, said.append)
    assert "".join(runs.sentences) == "x" * 1000 and all(len(run) // 10 <= 30 for run in runs.sentences)
    assert said[-1].startswith("line 7: a sentence of 100 tokens")


@pytest.mark.parametrize("chunk", [1, 2, 5, 100])
def test_paragraphs_come_back_in_order_as_soon_as_they_are_complete(chunk):
    lines = ["A b c. D e f!", "", "G h.", "  ", "I j. K l. M n.", ""]
    read = []

    def reading():
        for line in lines:
            read.append(line)
            yield line

    documents = Documents("en", words, 250, lambda message: None)
    sentences = documents.sentences(reading())

    def translated():  # "translates" each sentence into itself, `chunk` at a time, lazily
        batch = []
        for sentence in sentences:
            batch.append(sentence)
            if len(batch) == chunk:
                yield list(batch)
                batch.clear()
        if batch:
            yield batch

    out = []
    for paragraph, translations in documents.joined(translated()):
        out.append(paragraph.join(translations))
        if len(out) == 1 and chunk == 1:
            assert len(read) == 1, "the first paragraph comes back before the rest is read"
    assert out == lines and not documents.pending


def test_the_command_line_translates_a_document_as_its_sentences(reverse_run, tmp_path, capsys):
    paragraphs = ["  a b c. d e f!  ", "", "g h i j?\tk l.", "m n o"]
    document = tmp_path / "document.txt"
    document.write_text("".join(line + "\n" for line in paragraphs))
    out = run_ok(capsys, "translate", str(reverse_run), "--input", str(document), "--document").splitlines()
    # the reference: the same sentences translated as sentence lines, in one batch, then put back
    cut = [split(line) for line in paragraphs]
    sentences = [sentence for paragraph in cut for sentence in paragraph.sentences]
    alone = iter(run_ok(capsys, "translate", str(reverse_run), *sentences).splitlines())
    expected = [paragraph.join([next(alone) for _ in paragraph.sentences]) for paragraph in cut]
    assert out == expected and len(out) == 4 and out[1] == "" and out[0].startswith("  ") and out[0].endswith("  ")
    assert "\t" in out[2]


def test_a_line_of_100000_characters_is_translated_in_parts_with_a_warning(reverse_run, tmp_path, capsys):
    from attnmt.cli import main

    document = tmp_path / "long.txt"
    document.write_text("a b c d " * 12_500 + "\n")
    assert main(["translate", str(reverse_run), "--input", str(document), "--document"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1 and captured.out.strip()
    assert "line 1: a sentence of 50,000 tokens is longer than the model's limit of 250" in captured.err


@pytest.mark.parametrize("option", [["--alignment"], ["--require", "a"], ["--prefix", "a"]])
def test_options_given_per_sentence_are_refused_with_a_document(reverse_run, capsys, option):
    line = run_error(capsys, "translate", str(reverse_run), "a b. c d.", "--document", *option)
    assert line.startswith(f"attnmt: error: {option[0]}: {option[0]} cannot be combined with --document")


def test_a_document_writes_n_best_paragraphs_heatmaps_and_a_glossary_report(reverse_run, tmp_path, capsys):
    """A paragraph's best hypothesis is its one-best translation; heatmaps and the report go by sentence."""
    glossary, report, heatmaps = tmp_path / "terms.tsv", tmp_path / "report.jsonl", tmp_path / "maps"
    glossary.write_text("b\tb\n", encoding="utf-8")
    paragraphs = ["a b c! d e f?", "g h."]
    common = ["translate", str(reverse_run), *paragraphs, "--document", "--beam", "2", "--glossary", str(glossary)]
    best = run_ok(capsys, *common).splitlines()
    more = ["--n-best", "2", "--attention", str(heatmaps), "--glossary-report", str(report)]
    lines = [line.split(" ||| ") for line in run_ok(capsys, *common, *more).splitlines()]
    assert [fields[0] for fields in lines] == ["0", "0", "1", "1"]
    assert [lines[0][1], lines[2][1]] == best
    assert float(lines[0][2]) >= float(lines[1][2]) and float(lines[2][2]) >= float(lines[3][2]), "best first"
    assert sorted(path.name for path in heatmaps.glob("0*.png")) == ["0001.png", "0002.png", "0003.png"]
    assert len(report.read_text().splitlines()) == 3, "one line a sentence"


def test_the_api_translates_paragraphs_and_refuses_what_a_document_cannot_take(reverse_run):
    from tests.serve_helpers import serving

    _, client = serving(str(reverse_run))
    with client:
        body = {"sentences": ["a b c! d e f?", " g h. "], "document": True}
        answer = client.post("/v1/translate", json=body)
        assert answer.status_code == 200, answer.text
        reply = answer.json()
        sentences = client.post("/v1/translate", json={"sentences": ["a b c!", "d e f?", "g h."]}).json()
        texts = [t["hypotheses"][0]["text"] for t in sentences["translations"]]
        assert [t["source"] for t in reply["translations"]] == ["a b c!", "d e f?", "g h."]
        assert reply["paragraphs"] == [
            {"text": f"{texts[0]} {texts[1]}", "sentences": 2},
            {"text": f" {texts[2]} ", "sentences": 1},
        ]
        assert "paragraphs" not in client.post("/v1/translate", json={"sentences": ["a b"]}).json()
        for extra, field, message in (
            ({"prefixes": ["a", "b"]}, "prefixes", "a document is cut into sentences"),
            ({"required_phrases": [[], []]}, "required_phrases", "a document is cut into sentences"),
            ({"sentences": ["a b. " * 5000]}, "sentences[0]", "at most 20000 characters (max_document_chars)"),
            ({"sentences": ["a b! " * 300]}, "sentences", "at most 256 (max_document_sentences)"),
        ):
            refused = client.post("/v1/translate", json={**body, **extra})
            assert refused.status_code == 422 and refused.json()["field"] == field, refused.text
            assert message in refused.json()["error"]


def test_a_job_joins_paragraphs_whose_sentences_fall_in_different_windows(reverse_run):
    """The job's paragraphs are the same whether a window holds them whole or cuts them (a window
    of two sentences cuts the first paragraph), and blank lines come back blank."""
    from attnmt.jobs.job import TranslationJob
    from attnmt.loading import ModelSpec, load
    from attnmt.stream import translate_windows

    translator = load(ModelSpec(reverse_run))
    paragraphs = ["a b c! d e f? g h.", "", "a b c.", "", ""]

    def translated(window: int) -> list[str]:
        bound = TranslationJob(document=True).bind(translator)
        chunks = translate_windows(
            bound.sources(paragraphs), translator.search_options(), translator=translator, window=window
        )
        return [unit.translation.text for units in bound.finish(chunks) for unit in units]

    whole = translated(1000)
    assert translated(2) == whole and translated(1) == whole
    assert len(whole) == 5 and whole[1] == whole[3] == whole[4] == ""
