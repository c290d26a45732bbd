"""Vocabulary shortlists: built by the Dice coefficient as written, decoding over the whole
vocabulary when the shortlist holds it, and otherwise choosing each token as the argmax of the
full model's scores among the batch's candidates, for every decoder, engine and ensemble."""

import json
import random
from collections import Counter
from fractions import Fraction

import pytest
import torch

from attnmt.export import export_onnx
from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions
from attnmt.shortlist import FILENAME, Shortlist, build, save, vocab_digest
from attnmt.translate import Translator
from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS, SPECIALS, Vocab
from tests.cli_helpers import run_error, run_ok
from tests.run_helpers import assert_same_translations


def vocab(size: int, prefix: str) -> Vocab:
    return Vocab(SPECIALS + tuple(f"{prefix}{i}" for i in range(size - len(SPECIALS))))


def reference_dice(src_ids, tgt_ids) -> tuple[dict, Counter]:
    """dice(s, t) = 2 c(s, t) / (c(s) + c(t)) over sentence co-occurrence, specials left out."""
    c_src, c_tgt, c_pair = Counter(), Counter(), Counter()
    for source, target in zip(src_ids, tgt_ids, strict=True):
        s_set, t_set = {i for i in source if i >= 4}, {i for i in target if i >= 4}
        c_src.update(s_set)
        c_tgt.update(t_set)
        c_pair.update((s, t) for s in s_set for t in t_set)
    return {(s, t): Fraction(2 * c, c_src[s] + c_tgt[t]) for (s, t), c in c_pair.items()}, c_tgt


def test_candidates_are_each_sources_targets_of_highest_dice_and_frequent_the_commonest_targets():
    rng = random.Random(3)
    src_vocab, tgt_vocab = vocab(30, "s"), vocab(25, "t")
    src_ids = [[rng.randrange(len(src_vocab)) for _ in range(rng.randint(1, 8))] for _ in range(300)]
    tgt_ids = [[rng.randrange(len(tgt_vocab)) for _ in range(rng.randint(1, 8))] for _ in range(300)]
    built = build(src_ids, tgt_ids, src_vocab, tgt_vocab, per_source=3, frequent=5)
    dice, c_tgt = reference_dice(src_ids, tgt_ids)
    assert built.candidates.shape == (30, 3)
    for s in range(30):
        ranked = sorted((t for (source, t) in dice if source == s), key=lambda t: (-dice[s, t], -c_tgt[t], t))
        assert built.candidates[s].tolist() == [*ranked, -1, -1, -1][:3], s
    assert built.candidates[: len(SPECIALS)].eq(-1).all()  # specials never get candidates
    commonest = sorted(c_tgt, key=lambda t: (-c_tgt[t], t))[:5]
    assert built.frequent.tolist() == sorted(commonest)
    assert (built.src_digest, built.tgt_digest) == (vocab_digest(src_vocab), vocab_digest(tgt_vocab))


def test_a_batch_vocabulary_is_sorted_and_holds_the_specials_the_frequent_and_its_sources_candidates():
    candidates = torch.tensor([[-1, -1], [-1, -1], [-1, -1], [-1, -1], [9, 7], [7, -1], [12, 5]])
    shortlist = Shortlist(candidates, torch.tensor([4, 20]), "a", "b")
    src = torch.tensor([[4, 5, 0], [5, 0, 0]])  # 6 appears nowhere: its candidates stay out
    assert shortlist.vocabulary(src).tolist() == [0, 1, 2, 3, 4, 7, 9, 20]


ENGINES = ["torch", "onnxruntime", "onnxruntime-renormalized", "ensemble"]


def translators(tiny, engine: str) -> Translator:
    if engine == "ensemble":  # the run with itself: the mean of two members
        return load(ModelSpec((tiny / "run", tiny / "run"), device="cpu"))
    if engine == "torch":
        return load(ModelSpec(tiny / "run", device="cpu"))
    translator = load(ModelSpec(tiny / "export"))
    assert "step_shortlist" in translator.model.sessions
    if engine == "onnxruntime-renormalized":  # as an export made before its run had a shortlist
        del translator.model.sessions["step_shortlist"]
    return translator


SENTENCES = [" ".join(str(token) for token in random.Random(n).choices(range(1, 9), k=n)) for n in range(1, 12)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_shortlist_holding_the_whole_vocabulary_decodes_as_the_full_search(tiny, engine):
    translator = translators(tiny, engine)
    size = len(translator.codec.tgt_vocab)
    whole = Shortlist(
        torch.arange(size).repeat(len(translator.codec.src_vocab), 1), torch.zeros(0, dtype=torch.long), "", ""
    )
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=2)):
        translator.shortlist = None
        expected = translator.translate(SENTENCES, options)
        translator.shortlist = whole
        got = translator.translate(SENTENCES, options)
        assert_same_translations(expected, got, score_abs=1e-5, atol=1e-6, rtol=1e-5)


def full_scores(translator: Translator, sentence: str, tokens: list[int]) -> torch.Tensor:
    """The full model's log-probabilities (T + 1, V) at each step of forcing `tokens` then EOS."""
    model = translator.model
    src = torch.tensor([translator.codec.encode_source(sentence)])
    encoded = model.encode(src, torch.tensor([src.size(1)]))
    state = model.init_state(encoded)
    prev, rows = torch.tensor([BOS]), []
    for token in [*tokens, EOS]:
        log_probs, state, _ = model.next_log_probs(prev, state, encoded)
        rows.append(log_probs[0])
        prev = torch.tensor([token])
    return torch.stack(rows)


@pytest.mark.parametrize("engine", ENGINES)
def test_with_a_real_shortlist_each_token_is_the_full_models_argmax_among_the_candidates(tiny, engine):
    translator = translators(tiny, engine)
    codec = translator.codec
    pairs = [(s, " ".join(reversed(s.split()))) for s in SENTENCES * 3]
    small = build(
        [codec.encode_source(s) for s, _ in pairs],
        [codec.encode_target(t) for _, t in pairs],
        codec.src_vocab,
        codec.tgt_vocab,
        per_source=2,
        frequent=1,
    )
    translator.shortlist = small
    restricted = 0
    for sentence in SENTENCES:  # one sentence a batch: its own candidates
        allowed = small.vocabulary(torch.tensor([codec.encode_source(sentence)]))
        restricted += len(allowed) < len(codec.tgt_vocab)
        (translation,) = translator.translate([sentence], SearchOptions(max_length=12))
        tokens = codec.tgt_vocab.encode(translation.tokens)
        scores = full_scores(translator, sentence, tokens)
        for step, token in enumerate([*tokens, EOS][: len(scores)]):
            if step + 1 >= min(12, int(1.5 * len(sentence.split())) + 10):
                break  # the last allowed step forces EOS
            masked = torch.full_like(scores[step], float("-inf"))
            masked[allowed] = scores[step][allowed]
            masked[[0, 2]] = float("-inf")  # PAD and BOS are never generated
            assert int(masked.argmax()) == token, (sentence, step)
    assert restricted > 0  # the check ran on vocabularies smaller than the whole


def test_int8_decodes_with_a_shortlist(tiny):
    translator = load(ModelSpec(tiny / "run", device="cpu", quantize="int8"))
    size = len(translator.codec.tgt_vocab)
    translator.shortlist = Shortlist(
        torch.arange(size).repeat(len(translator.codec.src_vocab), 1), torch.zeros(0, dtype=torch.long), "", ""
    )
    assert len(translator.translate(SENTENCES, SearchOptions(beam_size=2))) == len(SENTENCES)


def test_attnmt_shortlist_builds_checks_and_stores_it_and_decoding_uses_it(copied_run, tmp_path, capsys):
    output = run_ok(capsys, "shortlist", str(copied_run), "--per-source", "4", "--frequent", "2")
    assert "of valid reference tokens" in output and "outputs identical" in output
    report = json.loads((copied_run / "shortlist.json").read_text())
    assert report["per_source"] == 4 and report["frequent"] == 2 and 0 <= report["recall"] <= 1
    assert set(report["searches"]) >= {"greedy"}
    assert all(0 <= search["identical"] <= report["sentences"] for search in report["searches"].values())
    translated = run_ok(capsys, "translate", str(copied_run), "--shortlist", "1 2 3 4")
    assert translated.strip()
    export_onnx(copied_run, tmp_path / "export")
    assert (tmp_path / "export" / FILENAME).is_file()  # the export carries it, and a step over it
    assert "step_shortlist" in json.loads((tmp_path / "export" / "manifest.json").read_text())["graphs"]
    assert run_ok(capsys, "translate", str(tmp_path / "export"), "--shortlist", "1 2 3 4") == translated
    ensemble = ["translate", str(copied_run), "--ensemble", str(copied_run), "--shortlist", "1 2 3 4"]
    assert run_ok(capsys, *ensemble) == translated  # the members share the first run's shortlist


def test_shortlist_mistakes_are_one_line(copied_run, dot_reverse_run, tmp_path, capsys):
    line = run_error(capsys, "translate", str(dot_reverse_run), "--shortlist", "1 2")
    assert line == (
        f"attnmt: error: --shortlist: {dot_reverse_run}: has no vocabulary shortlist ({FILENAME}); build one with "
        f"`attnmt shortlist {dot_reverse_run}`"
    )
    codec = load(ModelSpec(copied_run, device="cpu")).codec
    save(
        Shortlist(
            torch.full((len(codec.src_vocab), 2), -1), torch.tensor([4]), "another", vocab_digest(codec.tgt_vocab)
        ),
        copied_run,
    )
    line = run_error(capsys, "translate", str(copied_run), "--shortlist", "1 2")
    assert line.endswith(
        f"{copied_run / FILENAME}: built for another source vocabulary than the model's; build it again with "
        "`attnmt shortlist RUN_DIR`"
    )
    (copied_run / FILENAME).write_bytes(b"not a shortlist")
    assert "not a shortlist attnmt can read" in run_error(capsys, "translate", str(copied_run), "--shortlist", "1 2")
    with pytest.raises(SystemExit):
        run_error(capsys, "shortlist", str(copied_run), "--per-source", "0")
    assert "expected a whole number of at least 1, got '0'" in capsys.readouterr().err
    with pytest.raises(UserError, match="need per_source >= 1"):
        build([[4]], [[4]], vocab(5, "s"), vocab(5, "t"), per_source=0)
