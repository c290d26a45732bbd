"""Checkpoints: atomic, pruned, safe to load, clear errors on damage or mismatch."""

import multiprocessing
import os
import signal

import pytest
import torch
from torch import nn

from attnmt import checkpoint
from attnmt.checkpoint import (
    load_trainer_state,
    load_weights,
    read_index,
    resolve_checkpoint,
    save_checkpoint,
)
from attnmt.utils import UserError


class Tiny(nn.Module):
    def __init__(self, vocab: int = 7, tie: bool = True) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, 4)
        self.output = nn.Linear(4, vocab)
        if tie:
            self.output.weight = self.embedding.weight


def state(step: int) -> dict:
    return {"step": step, "rng": torch.get_rng_state(), "position": [0, step]}


def test_round_trip_with_tied_weights(tmp_path):
    model = Tiny()
    save_checkpoint(tmp_path, 10, model, state(10), {"note": "x"}, score=1.0)
    fresh = Tiny()
    load_weights(fresh, resolve_checkpoint(tmp_path))
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert fresh.output.weight is fresh.embedding.weight
    assert load_trainer_state(resolve_checkpoint(tmp_path, "last"))["position"] == [0, 10]


def test_keeps_last_n_and_best(tmp_path):
    model = Tiny()
    for step, score in [(1, 5.0), (2, 9.0), (3, 7.0), (4, 6.0), (5, 8.0)]:
        save_checkpoint(tmp_path, step, model, state(step), {}, score=score, keep=2)
    index = read_index(tmp_path)
    assert index.last == "step-0000005" and index.best == "step-0000002" and index.best_score == 9.0
    on_disk = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir())
    assert on_disk == ["step-0000002", "step-0000004", "step-0000005"]


def test_lower_is_better_for_loss(tmp_path):
    for step, loss in [(1, 3.0), (2, 2.0), (3, 2.5)]:
        save_checkpoint(tmp_path, step, Tiny(), state(step), {}, score=loss, higher_is_better=False)
    assert read_index(tmp_path).best == "step-0000002"


def test_corrupted_weights_are_a_clear_error_and_others_stay_loadable(tmp_path):
    model = Tiny()
    save_checkpoint(tmp_path, 1, model, state(1), {}, score=1.0)
    damaged = save_checkpoint(tmp_path, 2, model, state(2), {}, score=0.5)
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:20])
    with pytest.raises(UserError, match="corrupted or truncated"):
        load_weights(Tiny(), damaged)
    load_weights(Tiny(), resolve_checkpoint(tmp_path, "best"))  # step 1, untouched
    (damaged / "trainer.pt").write_bytes(b"garbage")
    with pytest.raises(UserError, match="trainer state"):
        load_trainer_state(damaged)


def test_mismatched_vocabulary_is_named(tmp_path):
    save_checkpoint(tmp_path, 1, Tiny(vocab=7), state(1), {})
    with pytest.raises(UserError, match="has shape"):
        load_weights(Tiny(vocab=9), resolve_checkpoint(tmp_path))


def test_unknown_run_directory(tmp_path):
    with pytest.raises(UserError, match="no such run directory"):
        resolve_checkpoint(tmp_path / "absent")
    with pytest.raises(UserError, match="not a run directory"):
        resolve_checkpoint(tmp_path)


SCENARIO = [  # (step, score): a first save, the same step saved again, a new best, a worse one
    (3, 1.0),
    (3, None),
    (4, 2.0),
    (5, 0.5),
]


def _run_scenario(run_dir) -> None:
    for step, score in SCENARIO:
        save_checkpoint(run_dir, step, nn.Linear(3, 2), state(step), {}, score=score, keep=1)


def _killed_at(point: int, run_dir) -> None:
    """The scenario in a child process that SIGKILLs itself at its `point`-th filesystem operation."""
    calls = 0

    def kill_here(what: str) -> None:
        nonlocal calls
        calls += 1
        if calls == point:
            os.kill(os.getpid(), signal.SIGKILL)

    checkpoint._fault_point = kill_here
    _run_scenario(run_dir)


def _assert_loadable(run_dir) -> None:
    """Every checkpoint the index names, and every visible step folder, loads completely."""
    index = read_index(run_dir)
    named = {index.last, index.best, *index.kept} - {None}
    visible = {p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith("step-")}
    assert index.last in named and index.best in named
    for name in named | visible:
        folder = run_dir / "checkpoints" / name
        load_weights(nn.Linear(3, 2), folder)
        assert load_trainer_state(folder)["step"] == int(name.split("-")[1].split(".")[0])


def test_a_kill_between_any_two_filesystem_operations_of_a_save_leaves_a_run_that_loads_and_resumes(
    tmp_path, monkeypatch
):
    operations = []
    monkeypatch.setattr(checkpoint, "_fault_point", operations.append)
    _run_scenario(tmp_path / "count")
    monkeypatch.undo()
    assert len(operations) >= 20
    fork = multiprocessing.get_context("fork")
    for point in range(1, len(operations) + 1):
        run_dir = tmp_path / f"killed-at-{point}"
        for step, score in [(1, 0.5), (2, 0.7)]:  # an existing run, so the scenario has something to prune
            save_checkpoint(run_dir, step, nn.Linear(3, 2), state(step), {}, score=score, keep=1)
        child = fork.Process(target=_killed_at, args=(point, run_dir))
        child.start()
        child.join()
        assert child.exitcode == -signal.SIGKILL, f"operation {point} ({operations[point - 1]}) was not reached"
        _assert_loadable(run_dir)
        resumed = resolve_checkpoint(run_dir, "last")  # what `attnmt train --resume` reads
        next_step = load_trainer_state(resumed)["step"] + 1
        save_checkpoint(run_dir, next_step, nn.Linear(3, 2), state(next_step), {}, keep=1)
        _assert_loadable(run_dir)
        leftovers = [p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".")]
        assert leftovers == [], f"killed at operation {point}: debris {leftovers} survived the next save"
