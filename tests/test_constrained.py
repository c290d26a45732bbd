"""Required phrases by dynamic beam allocation (lexically constrained decoding): the bookkeeping and the
beam's sharing among banks against references written from Post and Vilar (2018); every
satisfiable required phrase appears in every output, for every decoder and engine; a sentence
whose length limit leaves no room gets its best translation with the phrase reported missing,
and the rest of its batch is unaffected."""

import random

import pytest
import torch

from attnmt.cli import main
from attnmt.loading import ModelSpec, load
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions
from attnmt.search.phrases import RequiredPhraseIds, _allocate, _Progress, missing_required_phrases
from tests.cli_helpers import run_error, run_ok
from tests.search_helpers import ENGINES, translator_for
from tests.search_helpers import TINY_SOURCES as SOURCES
from tests.serve_helpers import serving


def reference_after(state, token, phrases):
    """One hypothesis's (met, phrase, position) after `token`, as the paper's bookkeeping reads:
    continue the phrase in progress, or abandon it and perhaps start an unmet one."""
    met, phrase, position = list(state[0]), state[1], state[2]
    if phrase >= 0 and phrases[phrase][position] == token:
        if position + 1 == len(phrases[phrase]):
            met[phrase] = True
            return met, -1, 0
        return met, phrase, position + 1
    for index, candidate in enumerate(phrases):
        if candidate and not met[index] and candidate[0] == token:
            if len(candidate) == 1:
                met[index] = True
                return met, -1, 0
            return met, index, 1
    return met, -1, 0


def test_the_bookkeeping_follows_each_hypothesis_through_its_tokens():
    rng = random.Random(2)
    phrases = [[5, 6, 7], [6], [8, 5]]
    required_phrases = RequiredPhraseIds.of([phrases], None, "cpu")
    hypotheses = 6
    states = [([False] * 3, -1, 0) for _ in range(hypotheses)]
    progress = _Progress(
        torch.zeros(1, hypotheses, 3, dtype=torch.bool),
        torch.full((1, hypotheses), -1, dtype=torch.long),
        torch.zeros(1, hypotheses, dtype=torch.long),
    )
    for _ in range(30):
        tokens = [rng.choice([5, 6, 7, 8, 9]) for _ in range(hypotheses)]
        states = [reference_after(state, token, phrases) for state, token in zip(states, tokens, strict=True)]
        progress = progress.after(torch.tensor([tokens]), required_phrases.phrases, required_phrases.lengths)
        assert progress.met[0].tolist() == [state[0] for state in states]
        assert progress.phrase[0].tolist() == [state[1] for state in states]
        assert progress.position[0].tolist() == [state[2] for state in states]
        counts = [sum(len(p) for p, m in zip(phrases, state[0], strict=True) if m) + state[2] for state in states]
        assert progress.count(required_phrases.lengths)[0].tolist() == counts


def reference_allocate(scores, counts, total, beam):
    """The K kept: each bank (phrase-token count 0..total) its share K // banks, the remainder to the
    highest banks, best-scoring first within a bank; slots left go to the best of the rest."""
    banks = total + 1
    quota = {bank: beam // banks + (1 if bank >= banks - beam % banks else 0) for bank in range(banks)}
    order = sorted((i for i in range(len(scores)) if scores[i] > float("-inf")), key=lambda i: -scores[i])
    kept, taken = [], dict.fromkeys(range(banks), 0)
    for i in order:
        if taken[counts[i]] < quota[counts[i]]:
            kept.append(i)
            taken[counts[i]] += 1
    kept += [i for i in order if i not in kept]
    return kept[:beam]


@pytest.mark.parametrize("beam", [1, 2, 3, 5])
def test_the_beam_is_shared_among_banks_as_the_paper_says(beam):
    rng = random.Random(beam)
    for _ in range(50):
        total, size = rng.randint(0, 4), rng.randint(beam, 12)
        scores = [rng.choice([float("-inf"), *(-rng.random() * 5 for _ in range(4))]) for _ in range(size)]
        counts = [rng.randint(0, total) for _ in range(size)]
        picked = _allocate(torch.tensor([scores]), torch.tensor([counts]), torch.tensor([total]), beam)[0].tolist()
        expected = reference_allocate(scores, counts, total, beam)
        assert picked[: len(expected)] == expected


def random_required_phrases(size: int, seed: int) -> list[list[list[int]]]:
    rng = random.Random(seed)
    return [
        [[rng.randrange(4, size) for _ in range(rng.randint(1, 2))] for _ in range(rng.randint(1, 3))] for _ in SOURCES
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_output_contains_every_required_phrase(tiny, engine):
    translator = translator_for(tiny, engine)
    required_phrases = random_required_phrases(len(translator.codec.tgt_vocab), 4)
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=3)):
        results = decode_all(
            translator.model, SOURCES, options, shortlist=translator.shortlist, required_phrases=required_phrases
        )
        for phrases, hypotheses in zip(required_phrases, results, strict=True):
            assert hypotheses
            for hypothesis in hypotheses:
                assert missing_required_phrases(hypothesis.tokens, phrases) == [], (phrases, hypothesis.tokens)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_limit_that_just_fits_the_phrases_still_gets_them_all(tiny, beam):
    translator = translator_for(tiny, "torch")
    required_phrases = [[[5, 6], [7]]] * len(SOURCES)
    options = SearchOptions(beam_size=beam, max_length=4)  # three phrase tokens, then EOS: no slack
    for phrases, hypotheses in zip(
        required_phrases, decode_all(translator.model, SOURCES, options, required_phrases=required_phrases), strict=True
    ):
        assert missing_required_phrases(hypotheses[0].tokens, phrases) == [] and len(hypotheses[0].tokens) == 3


def test_a_limit_too_short_reports_the_phrase_and_leaves_the_batch_alone(tiny):
    translator = translator_for(tiny, "torch")
    options = SearchOptions(beam_size=3, max_length=3)  # two tokens, then EOS
    required_phrases = [[[5, 6, 7]], [[5]], [[6, 7]]]
    sources = SOURCES[4:7]
    together = decode_all(translator.model, sources, options, required_phrases=required_phrases)
    assert missing_required_phrases(together[0][0].tokens, required_phrases[0]) == [0]  # three tokens cannot fit in two
    assert (
        missing_required_phrases(together[1][0].tokens, required_phrases[1]) == []
        and missing_required_phrases(together[2][0].tokens, required_phrases[2]) == []
    )
    for source, phrases, result in zip(sources, required_phrases, together, strict=True):
        alone = decode_all(translator.model, [source], options, required_phrases=[phrases])
        assert alone[0][0].tokens == result[0].tokens


def test_required_text_phrases_on_the_command_line_and_in_the_api(reverse_run, tmp_path, capsys):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    translations = translator.translate(["a b c d", "e f"], required_phrases=[["x y"], []])
    assert "x y" in translations[0].text and translations[0].missing_required_phrases == []
    assert translations[1].text == translator.translate(["e f"])[0].text  # a free sentence searched as ever
    output = run_ok(capsys, "translate", str(reverse_run), "a b c", "e f g", "--require", "q")
    assert all("q" in line.split() for line in output.splitlines())
    lines = tmp_path / "lines.tsv"
    lines.write_text("a b c\tz\ne f g\n", encoding="utf-8")
    from_file = run_ok(capsys, "translate", str(reverse_run), "--input", str(lines), "--require-column")
    assert "z" in from_file.splitlines()[0].split()
    assert main(["translate", str(reverse_run), "a", "--require", "x y z w v u t s r q p o"]) == 0
    short = capsys.readouterr()
    assert short.out.strip()  # its best translation, and a warning naming what it lacks
    assert "sentence 1: its length limit left no room for 'x y z w v u t s r q p o'" in short.err
    refused = {
        ("a b", "--require", ""): "--require: sentence 1: a required phrase is empty",
        ("a b", "--require", "zebra"): "--require: sentence 1: required phrase 'zebra': every token is unknown",
    }
    for arguments, message in refused.items():
        assert run_error(capsys, "translate", str(reverse_run), *arguments).startswith(f"attnmt: error: {message}")
    _, client = serving(str(reverse_run))
    with client:
        body = {"sentences": ["a b c d", "e f"], "required_phrases": [["x"], []], "beam_size": 3}
        answer = client.post("/v1/translate", json=body)
        assert answer.status_code == 200, answer.text
        first, second = answer.json()["translations"]
        assert "x" in first["hypotheses"][0]["text"].split() and first["missing_required_phrases"] == []
        assert second["missing_required_phrases"] == []  # it had none to meet
        plain = client.post("/v1/translate", json={"sentences": ["a b c d"]}).json()["translations"][0]
        assert "missing_required_phrases" not in plain
        for required_phrases, message in (
            ([["x"]], "1 lists of required phrases for 2 sentences"),
            ([["zebra"], []], "unknown"),
        ):
            body = {"sentences": ["a b c d", "e f"], "required_phrases": required_phrases}
            answer = client.post("/v1/translate", json=body)
            assert answer.status_code == 422 and answer.json()["field"] == "required_phrases", answer.text
            assert message in answer.json()["error"]
