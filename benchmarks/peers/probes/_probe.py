"""What every probe shares; runs inside a peer's own environment, so it imports only torch.

A probe calls `record_training(events, max_minutes, count_tokens)` before handing control to
its system's trainer. From then on every optimizer step (torch's global step hook, whatever
optimizer class the system builds) appends one JSON line to `events`; the system-specific
part tells the recorder each batch's target tokens through `Recorder.add_tokens`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook


class Recorder:
    """Writes `{"started"}` first, `{"parameters"}` at the first step, then `{"step", "time",
    "target_tokens"}` per optimizer step; times are time.perf_counter() seconds."""

    def __init__(self, events: Path, max_minutes: float | None):
        self.file = open(events, "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        self.started = time.perf_counter()
        self.deadline = None if max_minutes is None else self.started + 60 * max_minutes
        self.step = 0
        self.pending_tokens = 0
        self.counted_parameters = False
        self._write({"started": self.started})

    def add_tokens(self, count: int) -> None:
        """Called by the system's hook with a batch's non-pad target tokens (EOS included)."""
        self.pending_tokens += int(count)

    def after_step(self, optimizer: torch.optim.Optimizer, *_) -> None:
        if not self.counted_parameters:
            parameters = sum(p.numel() for group in optimizer.param_groups for p in group["params"])
            self._write({"parameters": parameters})
            self.counted_parameters = True
        self.step += 1
        self._write({"step": self.step, "time": time.perf_counter(), "target_tokens": self.pending_tokens})
        self.pending_tokens = 0

    def over_budget(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def _write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()


def record_training(events: Path, max_minutes: float | None) -> Recorder:
    recorder = Recorder(events, max_minutes)
    register_optimizer_step_post_hook(recorder.after_step)
    return recorder


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)


def write_translation_result(result: Path, seconds: float, output: Path) -> None:
    lines = output.read_text(encoding="utf-8").splitlines()
    result.write_text(
        json.dumps(
            {"seconds": seconds, "sentences": len(lines), "generated_tokens": sum(len(line.split()) for line in lines)}
        )
        + "\n",
        encoding="utf-8",
    )


def write_attention_focus(path: Path, rows: list[torch.Tensor]) -> None:
    """Where a model's attention goes, as `tools.attention_focus` measures it for attnmt: over
    every output step (EOS included) of `rows` (each (steps, source positions) of one sentence,
    the positions the system attends over), the mean weight on position 0, the share of steps
    whose largest weight is there, and the weight an even spread would give it."""
    rows = [row for row in rows if row.numel()]
    weight = torch.cat([row[:, 0] for row in rows])
    argmax = torch.cat([row.argmax(dim=1) == 0 for row in rows]).float()
    steps = len(weight)
    focus = {
        "sentences": len(rows),
        "steps": steps,
        "mean_weight_first": round(weight.mean().item(), 4),
        "share_argmax_first": round(argmax.mean().item(), 4),
        "uniform_weight": round(sum(row.shape[0] / row.shape[1] for row in rows) / steps, 4),
    }
    path.write_text(json.dumps(focus) + "\n", encoding="utf-8")
