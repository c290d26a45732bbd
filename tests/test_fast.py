"""The fast preset: of int8 x shortlist x smaller beams, the fastest setting within the BLEU bound of
the run's own search on the validation split, chosen once, stored with the run and reused."""

import json

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file, save_file

from attnmt import fast
from attnmt.checkpoint import WEIGHTS, resolve_checkpoint
from attnmt.cli import build_parser
from attnmt.cli.serve import models
from attnmt.evaluation import evaluate, split_examples
from attnmt.export import export_onnx
from attnmt.loading import ModelSpec, load
from attnmt.shortlist import Shortlist, save, vocab_digest
from attnmt.utils import UserError
from tests.cli_helpers import run_error, run_ok


def records(run) -> list[dict]:
    return json.loads((run / fast.FILENAME).read_text())["choices"]


def test_the_preset_is_the_fastest_setting_within_the_bound_stored_and_reused(copied_run, monkeypatch):
    codec = load(ModelSpec(copied_run, device="cpu")).codec
    save(
        Shortlist(
            torch.arange(len(codec.tgt_vocab)).repeat(len(codec.src_vocab), 1),
            torch.tensor([4]),
            vocab_digest(codec.src_vocab),
            vocab_digest(codec.tgt_vocab),
        ),
        copied_run,
    )
    chosen = fast.fast_spec(ModelSpec(copied_run, device="cpu"), bound=0.3)
    [record] = records(copied_run)
    own_beam = load(ModelSpec(copied_run, device="cpu")).config.decode.beam_size
    tried = {(t["quantize"], t["shortlist"], t["beam_size"]) for t in record["trials"]}
    beams = sorted({1, 2, 3, own_beam} & set(range(1, own_beam + 1)))
    expected = {(q, s, b) for q in ("none", "int8") for s in (False, True) for b in beams}
    assert tried == expected - {("none", False, own_beam)}  # the reference is measured, not a candidate
    reference = record["reference"]
    within = [t for t in record["trials"] if reference["bleu"] - t["bleu"] <= 0.3 + 1e-9]
    fastest = min(within, key=lambda t: t["seconds"])
    assert (chosen.quantize, chosen.shortlist, chosen.beam_size) == (
        fastest["quantize"],
        fastest["shortlist"],
        fastest["beam_size"],
    )
    assert record["chosen"] == {k: fastest[k] for k in ("quantize", "shortlist", "beam_size")}
    translator = load(chosen)  # what the preset loads scores what its trial scored
    assert translator.search_options().beam_size == chosen.beam_size
    examples = split_examples(translator.config.data, "valid")
    assert evaluate(translator, examples).bleu.score == pytest.approx(fastest["bleu"], abs=1e-6)

    def no_decoding(*args, **kwargs):
        raise AssertionError("a stored choice is reused, not chosen again")

    monkeypatch.setattr(fast, "_trial", no_decoding)
    assert fast.fast_spec(ModelSpec(copied_run, device="cpu"), bound=0.3) == chosen


def scripted_trials(monkeypatch, reference_bleu: float, candidate_bleu: float) -> list[int]:
    """Trials that score `reference_bleu` for the first (the reference) and `candidate_bleu` after,
    the later the faster; returns the beams asked for, in order."""
    asked: list[int] = []

    def trial(translator, examples, beam_size):
        asked.append(beam_size)
        bleu = reference_bleu if len(asked) == 1 else candidate_bleu
        return {"bleu": bleu, "seconds": 10.0 / len(asked), "sentences_per_second": len(asked)}

    monkeypatch.setattr(fast, "_trial", trial)
    return asked


def test_nothing_within_the_bound_is_one_line_and_stored_so_it_is_not_tried_again(copied_run, monkeypatch):
    asked = scripted_trials(monkeypatch, 40.0, 39.5)
    with pytest.raises(UserError, match=r"no fast setting is within 0\.3 BLEU .* \(40.00\); the closest"):
        fast.fast_spec(ModelSpec(copied_run, device="cpu"), bound=0.3)
    assert asked and records(copied_run)[0]["chosen"] is None
    asked.clear()
    with pytest.raises(UserError, match=r"no fast setting is within 0\.3 BLEU"):
        fast.fast_spec(ModelSpec(copied_run, device="cpu"), bound=0.3)
    assert asked == []  # read back
    chosen = fast.fast_spec(ModelSpec(copied_run, device="cpu"), bound=0.5)  # another bound: chosen anew
    assert asked and len(records(copied_run)) == 2
    last = records(copied_run)[-1]  # every candidate within 0.5: the last tried, timed fastest, is chosen
    assert last["chosen"] == {k: last["trials"][-1][k] for k in ("quantize", "shortlist", "beam_size")}
    assert (chosen.quantize, chosen.shortlist, chosen.beam_size) == tuple(last["chosen"].values())


def test_retrained_weights_are_chosen_for_again(copied_run, monkeypatch):
    asked = scripted_trials(monkeypatch, 40.0, 40.0)
    fast.fast_spec(ModelSpec(copied_run, device="cpu"))
    weights = resolve_checkpoint(copied_run, "best") / WEIGHTS
    weights.write_bytes(weights.read_bytes())  # rewritten, the same bytes: the same choice
    asked.clear()
    fast.fast_spec(ModelSpec(copied_run, device="cpu"))
    assert asked == []
    tensors = load_file(weights)
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, weights)
    fast.fast_spec(ModelSpec(copied_run, device="cpu"))
    assert asked and len(records(copied_run)) == 2


def test_a_model_spec_sets_the_default_beam_and_keeps_n_best_within_it(reverse_run):
    translator = load(ModelSpec(reverse_run, device="cpu", beam_size=2))
    assert translator.search_options().beam_size == 2
    assert translator.config.decode.n_best <= 2
    with pytest.raises(UserError, match="beam size must be at least 1"):
        ModelSpec(reverse_run, beam_size=0)


def test_translate_and_serve_use_the_preset(copied_run, monkeypatch, capsys):
    scripted_trials(monkeypatch, 40.0, 40.0)  # every candidate qualifies: the last, timed fastest, is chosen
    output = run_ok(capsys, "translate", str(copied_run), "--fast", "1 2 3 4", "5 6")
    [record] = records(copied_run)
    chosen = record["chosen"]
    assert chosen == {
        "quantize": "int8",
        "shortlist": False,
        "beam_size": max(t["beam_size"] for t in record["trials"]),
    }
    explicit = ["--quantize", "int8", "--beam", str(chosen["beam_size"])]
    assert output == run_ok(capsys, "translate", str(copied_run), *explicit, "1 2 3 4", "5 6")
    args = build_parser().parse_args(["serve", str(copied_run), "--fast"])
    [spec] = models(args, Console())
    assert (spec.quantize, spec.shortlist, spec.beam_size) == ("int8", False, chosen["beam_size"])


def test_fast_preset_mistakes_are_one_line(copied_run, tmp_path, capsys):
    line = run_error(capsys, "translate", str(copied_run), "--fast", "--quantize", "int8", "1 2")
    assert (
        line
        == "attnmt: error: --fast: the fast preset chooses int8, the shortlist and the beam itself: give none of them"
    )
    assert run_error(capsys, "translate", str(copied_run), "--fast", "--beam", "2", "1 2").endswith(
        "the fast preset chooses the beam size itself: drop --beam"
    )
    assert run_error(capsys, "translate", str(copied_run), "--fast-bound", "0.5", "1 2").endswith(
        "--fast-bound: a bound for the fast preset needs --fast too"
    )
    assert run_error(capsys, "translate", str(copied_run), "--fast", "--fast-bound", "-1", "1 2").endswith(
        "--fast-bound: the fast preset's BLEU bound must be at least 0, got -1.0"
    )
    export_onnx(copied_run, tmp_path / "export")
    assert run_error(capsys, "translate", str(tmp_path / "export"), "--fast", "1 2").endswith(
        "an ONNX export; the fast preset is chosen for a run"
    )
    (copied_run / fast.FILENAME).write_text("{not json")
    assert run_error(capsys, "translate", str(copied_run), "--fast", "1 2") == (
        f"attnmt: error: --fast: {copied_run / fast.FILENAME}: not a fast-preset record; remove it to choose again"
    )
    assert run_error(capsys, "evaluate", str(copied_run), "--fast", "--tune").endswith(
        "the fast preset and --tune each choose the search: give one"
    )
