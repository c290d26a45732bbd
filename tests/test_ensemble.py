"""Checkpoint averaging, ensembles and search tuning, on the tiny reverse runs of conftest.py.

References come from the definitions: an average is (w_1 + ... + w_N) / N parameter by
parameter; an ensemble's step is the mean of its members' log-probabilities at that step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from cli_helpers import run_error, run_ok
from safetensors.torch import load_file

from attnmt.average import average_checkpoints, choose_checkpoints
from attnmt.checkpoint import training_summary
from attnmt.ensemble import Ensemble
from attnmt.evaluation import Tuning, choose_search, evaluate, split_examples, tune_search
from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions
from attnmt.translate import Translator
from attnmt.utils import UserError

SENTENCES = ["a b c", "d e f g", "h", "b a d c e", ""]


def kept(run: Path) -> list[Path]:
    return sorted(p for p in (run / "checkpoints").glob("step-*") if (p / "model.safetensors").is_file())


def outputs(translator: Translator, beam: int) -> list[list[tuple[str, float]]]:
    """Every sentence's n-best list (up to 2) as (text, score) pairs."""
    options = translator.search_options(beam_size=beam, n_best=min(beam, 2))
    translations = translator.translate(SENTENCES, options)
    return [[(t.text, t.score) for t in (best, *best.alternatives)] for best in translations]


# --- averaging ------------------------------------------------------------------------------


def test_the_average_of_one_checkpoint_is_that_checkpoint(copied_run, capsys):
    step = kept(copied_run)[0]
    run_ok(
        capsys,
        "average",
        str(copied_run),
        "--steps",
        step.name.removeprefix("step-"),
        "--output",
        str(copied_run / "checkpoints" / "one"),
    )
    averaged, original = (load_file(str(p / "model.safetensors")) for p in (copied_run / "checkpoints" / "one", step))
    assert averaged.keys() == original.keys()
    assert all(torch.equal(averaged[key], original[key]) for key in original)
    meta = json.loads((copied_run / "checkpoints" / "one" / "meta.json").read_text())
    assert meta["averaged"] == [step.name]
    assert outputs(load(ModelSpec(copied_run / "checkpoints" / "one")), 3) == outputs(load(ModelSpec(step)), 3)


def test_the_average_of_the_last_checkpoints_is_their_mean_and_loads_like_any_checkpoint(copied_run, capsys):
    first, second = kept(copied_run)[-2:]
    out = run_ok(capsys, "average", str(copied_run), "--last", "2")
    assert "averaged" in out and first.name in out and second.name in out
    averaged = load_file(str(copied_run / "checkpoints" / "averaged" / "model.safetensors"))
    a, b = (load_file(str(p / "model.safetensors")) for p in (first, second))
    for key, value in averaged.items():
        reference = ((a[key].double() + b[key].double()) / 2).to(a[key].dtype)
        assert torch.equal(value, reference), key
    # Training's index never names it: resuming or pruning leaves it alone.
    index = json.loads((copied_run / "checkpoints" / "index.json").read_text())
    assert "averaged" not in {index["last"], index["best"], *index["kept"]}
    # It records the code that trained its members, so an evaluation of it names that code.
    members_code = json.loads((second / "meta.json").read_text())["code"]
    assert members_code and training_summary(copied_run / "checkpoints" / "averaged")["code"] == members_code
    assert run_ok(capsys, "translate", str(copied_run / "checkpoints" / "averaged"), "a b c", "--beam", "2").strip()
    # A second average replaces the first whole.
    run_ok(capsys, "average", str(copied_run), "--steps", second.name.removeprefix("step-"))
    again = load_file(str(copied_run / "checkpoints" / "averaged" / "model.safetensors"))
    assert all(torch.equal(again[key], b[key]) for key in b)
    assert not [p for p in (copied_run / "checkpoints").iterdir() if p.name.startswith(".")]


def test_average_bad_requests_are_one_line_errors(copied_run, tmp_path, capsys):
    names = [p.name for p in kept(copied_run)]
    assert "kept 2" in run_error(capsys, "average", str(copied_run), "--last", "5")
    line = run_error(capsys, "average", str(copied_run), "--steps", "12345")
    assert "step-0012345" in line and names[0] in line
    assert "must be a folder in" in run_error(
        capsys, "average", str(copied_run), "--last", "1", "--output", str(tmp_path / "elsewhere")
    )
    clash = str(copied_run / "checkpoints" / names[0])
    assert "the trainer's" in run_error(capsys, "average", str(copied_run), "--last", "1", "--output", clash)
    assert "not a run directory" in run_error(capsys, "average", str(tmp_path / "nothing"), "--last", "1")
    assert "at least 1" in run_error(capsys, "average", str(copied_run), "--last", "0")


def test_averaging_checkpoints_of_different_models_names_the_parameter(copied_run, dot_reverse_run):
    ours = kept(copied_run)[-1]
    theirs = kept(dot_reverse_run)[-1]
    mixed = copied_run / "checkpoints" / "step-9999999"
    shutil.copytree(theirs, mixed)
    with pytest.raises(UserError, match=r"checkpoints of different models|other parameters"):
        average_checkpoints([ours, mixed], copied_run / "checkpoints" / "mixed")
    assert not (copied_run / "checkpoints" / "mixed").exists()
    assert choose_checkpoints(copied_run, steps=[9999999]) == [mixed]


# --- ensembles ------------------------------------------------------------------------------


@pytest.mark.parametrize("beam", [1, 3])
def test_an_ensemble_of_one_run_or_of_a_run_with_itself_translates_as_the_run(reverse_run, beam):
    alone = outputs(load(ModelSpec(reverse_run)), beam)
    assert outputs(load(ModelSpec([reverse_run])), beam) == alone
    assert outputs(load(ModelSpec([reverse_run, reverse_run])), beam) == alone


def test_an_ensemble_step_is_the_mean_of_its_members_log_probabilities(reverse_run, dot_reverse_run):
    members = [load(ModelSpec(run)).model for run in (reverse_run, dot_reverse_run)]
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 4, 0]])
    lengths = torch.tensor([4, 3])
    prev = torch.tensor([1, 1])
    for attention in ("mean", 0, 1):
        ensemble = Ensemble(members, attention=attention)
        encoded = ensemble.encode(src, lengths)
        log_probs, _, weights = ensemble.next_log_probs(prev, ensemble.init_state(encoded), encoded)
        each = []
        for member in members:
            member_encoded = member.encode(src, lengths)
            each.append(member.next_log_probs(prev, member.init_state(member_encoded), member_encoded))
        torch.testing.assert_close(log_probs, (each[0][0] + each[1][0]) / 2)
        expected = (each[0][2] + each[1][2]) / 2 if attention == "mean" else each[attention][2]
        torch.testing.assert_close(weights, expected)


def test_ensemble_from_the_command_line_and_its_errors(reverse_run, dot_reverse_run, copied_run, capsys):
    both = run_ok(capsys, "translate", str(reverse_run), "--ensemble", str(dot_reverse_run), "a b c", "--beam", "2")
    assert both.strip()
    itself = run_ok(capsys, "translate", str(reverse_run), "--ensemble", str(reverse_run), "d e f", "--beam", "2")
    assert itself == run_ok(capsys, "translate", str(reverse_run), "d e f", "--beam", "2")
    # Two tokens swapped: the model still loads, but the ids no longer mean the same words.
    vocab_path = copied_run / "tgt.vocab.json"
    vocab = json.loads(vocab_path.read_text())
    vocab["tokens"][-1], vocab["tokens"][-2] = vocab["tokens"][-2], vocab["tokens"][-1]
    vocab_path.write_text(json.dumps(vocab))
    line = run_error(capsys, "translate", str(reverse_run), "--ensemble", str(copied_run), "a b")
    assert str(copied_run) in line and "tgt vocabulary differs" in line
    line = run_error(
        capsys, "translate", str(reverse_run), "--ensemble", str(dot_reverse_run), "--ensemble-attention", "2", "a b"
    )
    assert "--ensemble-attention: 2: expected 'mean' or a member from 0 to 1" in line


def test_evaluate_an_ensemble_as_one_system(reverse_run, dot_reverse_run, tmp_path, capsys):
    out_dir = tmp_path / "eval"
    run_ok(
        capsys,
        "evaluate",
        str(reverse_run),
        str(dot_reverse_run),
        "--ensemble",
        "--beam",
        "1",
        "--output-dir",
        str(out_dir),
    )
    [system] = json.loads((out_dir / "evaluation.json").read_text())["runs"]
    assert system["name"] == f"{reverse_run.name} + {dot_reverse_run.name}"
    assert len(system["members"]) == 2 and system["search"]["beam_size"] == 1


# --- tuning -----------------------------------------------------------------------------------


def test_tuning_tries_every_setting_on_valid_and_keeps_the_best(reverse_run):
    translator = load(ModelSpec(reverse_run))
    valid = split_examples(translator.config.data, "valid")[:40]
    tuning = tune_search(translator, valid, beams=[1, 2], penalties=[0.0, 2.0])
    tried = [(t["beam_size"], t["length_penalty"]) for t in tuning.trials]
    assert tried == [(1, translator.config.decode.length_penalty), (2, 0.0), (2, 2.0)]
    for trial in tuning.trials:  # each figure is the valid score of its setting
        options = translator.search_options(beam_size=trial["beam_size"], length_penalty=trial["length_penalty"])
        assert trial["bleu"] == evaluate(translator, valid, options).bleu.score
    best = max(t["bleu"] for t in tuning.trials)
    first_best = next(t for t in tuning.trials if t["bleu"] == best)  # ties: the smaller beam and penalty
    assert (tuning.options.beam_size, tuning.options.length_penalty) == (
        first_best["beam_size"],
        first_best["length_penalty"],
    )


@pytest.mark.parametrize(
    ("beam", "penalty", "at_edge"),
    [
        (1, 1.0, []),  # greedy: the penalty was not tuned, and 1 is the smallest beam
        (2, 0.0, []),
        (2, 2.0, ["length penalty"]),
        (3, 0.0, ["beam size"]),
        (3, 2.0, ["beam size", "length penalty"]),
    ],
)
def test_tuning_names_each_setting_chosen_at_the_largest_value_tried(beam, penalty, at_edge):
    trials = [{"beam_size": 1, "length_penalty": 1.0, "bleu": 1.0}]
    trials += [{"beam_size": b, "length_penalty": a, "bleu": 1.0} for b in (2, 3) for a in (0.0, 2.0)]
    chosen = SearchOptions(beam_size=beam, length_penalty=penalty)
    assert Tuning(chosen, "valid", trials).largest_chosen() == at_edge
    one_penalty = [t for t in trials if t["length_penalty"] != 2.0 or t["beam_size"] == 1]
    assert "length penalty" not in Tuning(chosen, "valid", one_penalty).largest_chosen()  # a grid of one has no edge


@pytest.mark.parametrize(("sign", "warnings"), [(1, 2), (-1, 0)])
def test_tuning_says_when_its_choice_is_the_largest_value_tried(reverse_run, monkeypatch, sign, warnings):
    translator = load(ModelSpec(reverse_run))

    def valid_bleu(translator, examples, options):  # grows (or shrinks) with both settings
        return SimpleNamespace(bleu=SimpleNamespace(score=sign * (options.beam_size + options.length_penalty)))

    monkeypatch.setattr("attnmt.evaluation.evaluate", valid_bleu)
    said: list[str] = []
    tuning = choose_search(
        translator, tune=True, tune_beams=[1, 2], tune_penalties=[0.0, 1.0], valid=lambda: ["x"], say=said.append
    )
    assert tuning.options.beam_size == (2 if sign > 0 else 1)
    assert sum("chosen is the largest tried" in line for line in said) == warnings


def test_evaluate_tune_scores_test_with_the_setting_chosen_on_valid(reverse_run, tmp_path, capsys):
    out_dir = tmp_path / "eval"
    said = run_ok(
        capsys,
        "evaluate",
        str(reverse_run),
        "--tune",
        "--tune-beams",
        "1,2",
        "--tune-penalties",
        "0,1",
        "--output-dir",
        str(out_dir),
    )
    figures = json.loads((out_dir / "evaluation.json").read_text())
    [system] = figures["runs"]
    assert figures["split"] == "test" and system["search"]["tuned_on"] == "valid"
    trials = system["search"]["trials"]
    best = max(trials, key=lambda t: (t["bleu"], -t["beam_size"], -t["length_penalty"]))
    assert (system["search"]["beam_size"], system["search"]["length_penalty"]) == (
        best["beam_size"],
        best["length_penalty"],
    )
    # the tuning says when its choice sits at the largest value tried (beams 1,2; penalties 0,1),
    # on the channel that carries its other lines
    assert "tuned on valid: beam" in said
    assert ("the beam size chosen is the largest tried" in said) == (best["beam_size"] == 2)
    at_largest_penalty = best["beam_size"] == 2 and best["length_penalty"] == 1
    assert ("the length penalty chosen is the largest tried" in said) == at_largest_penalty
    valid = run_ok(
        capsys,
        "evaluate",
        str(reverse_run),
        "--split",
        "valid",
        "--beam",
        str(best["beam_size"]),
        "--length-penalty",
        str(best["length_penalty"]),
    )
    assert f"{best['bleu']:.2f}" in valid


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tune", "--beam", "3"], "--tune: tuning chooses the beam size and the length penalty: give neither"),
        (["--tune", "--split", "valid"], "--tune: tunes on the valid split and scores the test split"),
        (["--tune-beams", "1,2"], "--tune-beams: a tuning grid needs tuning asked for too"),
        (["--tune", "--tune-beams", "0,2"], "--tune-beams: expected beam sizes of at least 1, got [0, 2]"),
    ],
)
def test_evaluate_tune_bad_requests(reverse_run, capsys, extra, message):
    assert message in run_error(capsys, "evaluate", str(reverse_run), *extra)
