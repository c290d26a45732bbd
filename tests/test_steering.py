"""Steering that combines: a prefix and required phrases asked of one sentence, in the search for
every decoder and score, on the command line, in the API and in the beam replay (`explain`).

With both, an output begins with its prefix and contains its phrases wherever its length limit
leaves room; a sentence with only one of them is searched as that rule alone would search it,
whatever its batch-mates ask for."""

import pytest
import torch

from attnmt.loading import ModelSpec, load
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions, never_generated
from attnmt.search.phrases import missing_required_phrases
from attnmt.search.prefix import Prefix
from attnmt.vocab import BOS, EOS
from tests.cli_helpers import run_error, run_ok
from tests.search_helpers import KINDS, SOURCES, TGT_VOCAB, assert_same_search, kind_name, untrained
from tests.serve_helpers import serving

BOTH, PREFIX_ONLY, PHRASES_ONLY = 1, 4, 9  # the steered sentences of SOURCES; the others are free
BEAMS = [SearchOptions(), SearchOptions(beam_size=3, n_best=3)]


def steering_for(sentences: set[int], prefixed: set[int], phrased: set[int]):
    """Prefixes (two forced tokens) and phrases (one of two tokens) for the SOURCES in `sentences`."""
    prefixes = [Prefix((4 + n % 5, 9), (), TGT_VOCAB) if n in prefixed & sentences else None for n in range(12)]
    required_phrases = [[[6, 7 + n % 3]] if n in phrased & sentences else [] for n in range(12)]
    return prefixes, required_phrases


@pytest.mark.parametrize("options", BEAMS, ids=["greedy", "beam 3"])
@pytest.mark.parametrize("kind", KINDS, ids=kind_name)
def test_a_prefix_and_phrases_together_and_each_alone_as_its_rule_alone(kind, options):
    model = untrained(kind)
    everyone = {BOTH, PREFIX_ONLY, PHRASES_ONLY}
    prefixes, required_phrases = steering_for(everyone, {BOTH, PREFIX_ONLY}, {BOTH, PHRASES_ONLY})
    together = decode_all(model, SOURCES, options, batch_size=12, prefixes=prefixes, required_phrases=required_phrases)
    for hypothesis in together[BOTH]:
        assert hypothesis.tokens[:2] == list(prefixes[BOTH].forced)
        assert missing_required_phrases(hypothesis.tokens, required_phrases[BOTH]) == []
    only_prefixes = decode_all(model, SOURCES, options, batch_size=12, prefixes=prefixes)
    only_phrases = decode_all(model, SOURCES, options, batch_size=12, required_phrases=required_phrases)
    plain = decode_all(model, SOURCES, options, batch_size=12)
    assert_same_search(together[PREFIX_ONLY], only_prefixes[PREFIX_ONLY], PREFIX_ONLY)
    assert_same_search(together[PHRASES_ONLY], only_phrases[PHRASES_ONLY], PHRASES_ONLY)
    for sentence in set(range(12)) - everyone:
        assert_same_search(together[sentence], plain[sentence], sentence)


def test_a_phrase_inside_the_prefix_is_met_by_it():
    model = untrained(KINDS[0])
    prefix = Prefix((5, 6, 8), (), TGT_VOCAB)
    [[hypothesis]] = decode_all(model, [SOURCES[3]], SearchOptions(), prefixes=[prefix], required_phrases=[[[6, 8]]])
    assert hypothesis.tokens[:3] == [5, 6, 8] and missing_required_phrases(hypothesis.tokens, [[6, 8]]) == []


@pytest.mark.parametrize("options", BEAMS, ids=["greedy", "beam 3"])
def test_when_the_limit_holds_the_prefix_but_not_the_phrase_the_prefix_wins(options):
    """Four tokens before EOS: the prefix's three, and no room for a phrase of two after them."""
    model = untrained(KINDS[3])
    prefix = Prefix((5, 9, 4), (), TGT_VOCAB)
    limited = SearchOptions(beam_size=options.beam_size, n_best=options.n_best, max_length=5)
    results = decode_all(model, [SOURCES[6]], limited, prefixes=[prefix], required_phrases=[[[7, 8]]])
    for hypothesis in results[0]:
        assert hypothesis.tokens[:3] == [5, 9, 4] and len(hypothesis.tokens) <= 4
    assert missing_required_phrases(results[0][0].tokens, [[7, 8]]) == [
        0
    ]  # one token after the prefix: no room for two


def test_the_command_line_takes_a_prefix_with_required_phrases(reverse_run, tmp_path, capsys):
    output = run_ok(capsys, "translate", str(reverse_run), "a b c d", "--prefix", "d c", "--require", "a")
    assert output.startswith("d c") and "a" in output.split()
    lines = tmp_path / "lines.tsv"
    lines.write_text("a b c d\td c\ta\ne f g\nh a b\t\tb\n", encoding="utf-8")
    columns = ["--prefix-column", "--require-column", "--beam", "3"]
    first, second, third = run_ok(capsys, "translate", str(reverse_run), "--input", str(lines), *columns).splitlines()
    assert first.startswith("d c") and "a" in first.split()
    assert second == run_ok(capsys, "translate", str(reverse_run), "e f g", "--beam", "3").strip()
    assert "b" in third.split()  # an empty prefix column: phrases only
    refused = run_error(capsys, "translate", str(reverse_run), "a b", "--prefix", "zebra ", "--require", "a")
    assert refused.startswith("attnmt: error: --prefix: sentence 1: prefix 'zebra ': every token is unknown")


def test_the_api_and_the_replay_take_a_prefix_with_required_phrases(reverse_run):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    options = translator.search_options(beam_size=3, n_best=3)
    [translated] = translator.translate(["a b c d"], options, prefixes=["d c"], required_phrases=[["a"]])
    explained = translator.explain("a b c d", options, prefix="d c", required_phrases=["a"])
    assert explained.translation.text == translated.text and explained.translation.missing_required_phrases == []
    assert [t.text for t in explained.translation.alternatives] == [t.text for t in translated.alternatives]
    first_step = [candidate for candidate in explained.steps[0] if candidate.status == "kept"]
    assert [candidate.tokens for candidate in first_step] == [["d"]]  # the prefix's first token, alone
    _, client = serving(str(reverse_run))
    with client:
        body = {"sentences": ["a b c d", "e f g"], "prefixes": ["d c", ""], "required_phrases": [["a"], ["h"]]}
        answer = client.post("/v1/translate", json=body | {"beam_size": 3})
        assert answer.status_code == 200, answer.text
        first, second = answer.json()["translations"]
        assert first["hypotheses"][0]["text"].startswith("d c") and "a" in first["hypotheses"][0]["text"].split()
        assert "h" in second["hypotheses"][0]["text"].split() and second["missing_required_phrases"] == []
        replay = client.post("/v1/explain", json={"sentence": "a b c d", "prefix": "d c", "required_phrases": ["a"]})
        assert replay.status_code == 200, replay.text
        assert replay.json()["hypotheses"][0]["text"].startswith("d c")
        for request, field in (({"prefix": "zebra "}, "prefix"), ({"required_phrases": ["zebra"]}, "required_phrases")):
            refused = client.post("/v1/explain", json={"sentence": "a b c d", **request})
            assert refused.status_code == 422 and refused.json()["field"] == field, refused.text


def reference_min_length(model, source: list[int], options: SearchOptions) -> list[int]:
    """Greedy search under a minimum length, from its definition: at each step the most probable
    token, EOS excluded while fewer than `min_length` tokens are out, and EOS at the length limit."""
    src = torch.tensor([source])
    limit = int(options.length_limits(torch.tensor([len(source)]))[0])
    encoder_output = model.encode(src, torch.tensor([len(source)]))
    state, prev, tokens = model.init_state(encoder_output), torch.tensor([BOS]), []
    for step in range(limit):
        log_probs, state, _ = model.next_log_probs(prev, state, encoder_output)
        log_probs = never_generated(log_probs)[0]
        if step + 1 == limit:
            return tokens
        if step < options.min_length:
            log_probs[EOS] = float("-inf")
        token = int(log_probs.argmax())
        if token == EOS:
            return tokens
        tokens.append(token)
        prev = torch.tensor([token])
    return tokens


@pytest.mark.parametrize("kind", KINDS[:3], ids=kind_name)
def test_a_minimum_length_keeps_outputs_open_until_it_and_the_limit_wins(kind):
    model = untrained(kind)
    for minimum in (0, 3, 6, 40):
        options = SearchOptions(min_length=minimum)
        for source in SOURCES:  # one sentence a batch, as the reference: no batch-size rounding between them
            [[hypothesis]] = decode_all(model, [source], options)
            assert hypothesis.tokens == reference_min_length(model, source, options)
            limit = int(options.length_limits(torch.tensor([len(source)]))[0])
            assert len(hypothesis.tokens) >= min(minimum, limit - 1)
    beam = decode_all(model, SOURCES, SearchOptions(beam_size=3, n_best=3, min_length=5))
    assert all(len(h.tokens) >= 5 for hypotheses in beam for h in hypotheses)


def test_the_minimum_length_from_the_command_line(reverse_run, capsys):
    short = run_ok(capsys, "translate", str(reverse_run), "a b", "--beam", "1")
    longer = run_ok(capsys, "translate", str(reverse_run), "a b", "--beam", "1", "--min-length", "5")
    assert len(longer.split()) >= 5 > len(short.split())
    assert run_error(capsys, "translate", str(reverse_run), "a b", "--min-length", "-1").startswith(
        "attnmt: error: --min-length: min length must be >= 0 tokens, got -1"
    )
