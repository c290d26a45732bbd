"""What a training run reports: metrics.jsonl, TensorBoard, and a progress bar in a terminal.

metrics.jsonl holds one JSON record per line, each with a "step" (training records:
train_loss, lr, tokens_per_s, elapsed; validation records: valid_loss, valid_ppl, valid_bleu,
best). It is what `attnmt plot curves` and sweeps read.

A record is appended as one write of one line. A write cut short (a full disk, a power loss,
a reader looking while a line is written) can leave a torn last line: readers skip it, and a
resume drops it. A line that does not parse anywhere else is an error naming the line.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from attnmt.utils import NO_ROOM, UserError, WriteFailed, write_text_atomic


class MetricsLog:
    """metrics.jsonl (one JSON record per line) plus TensorBoard when it is installed."""

    def __init__(self, run_dir: Path, resume_step: int | None, enabled: bool) -> None:
        self.path = run_dir / "metrics.jsonl"
        self.enabled = enabled
        self.writer = None
        self.torn_line: int | None = None  # the number of a torn last line a resume dropped
        if not enabled:
            return
        if resume_step is not None and self.path.exists():  # drop records a killed run wrote after its checkpoint
            lines, self.torn_line = _record_lines(self.path)
            kept = [line for line in lines if line.record["step"] <= resume_step]
            write_text_atomic(self.path, "".join(line.text + "\n" for line in kept))
        elif resume_step is None:
            write_text_atomic(self.path, "")
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        except ImportError:
            self.writer = None

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        line = (json.dumps(record) + "\n").encode("utf-8")
        with self.path.open("ab", buffering=0) as handle:  # unbuffered: a failed write fails here
            end = handle.seek(0, os.SEEK_END)
            try:
                written = 0
                while written < len(line):  # a write may stop short of a size limit before failing
                    written += handle.write(line[written:])
            except OSError as exc:
                if exc.errno not in NO_ROOM:
                    raise
                handle.truncate(end)  # no torn line left behind: the records before it stay whole
                raise WriteFailed(self.path, exc, "a record", intact="the records before it are intact") from None
        if self.writer is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, int | float) and math.isfinite(value):
                    self.writer.add_scalar(key, value, record["step"])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class ProgressDisplay:
    """A rich progress bar (loss, tokens/s, lr, ETA) when stdout is a terminal; plain log
    lines otherwise (CI logs, files). Measures progress in steps when the run has a step
    limit, else in minutes of its time limit."""

    def __init__(self, *, total_steps: int | None, total_minutes: float | None, enabled: bool) -> None:
        self.by_steps = total_steps is not None
        total = total_steps if self.by_steps else (60.0 * total_minutes if total_minutes else None)
        self.progress: Progress | None = None
        if enabled and sys.stdout.isatty():
            self.progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                TextColumn("step {task.fields[step]}  loss {task.fields[loss]}  {task.fields[speed]} tok/s"),
                TextColumn("lr {task.fields[lr]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(),
            )
            self.task = self.progress.add_task("train", total=total, step=0, loss="-", speed="-", lr="-")
            self.progress.start()

    def update(
        self,
        *,
        step: int,
        elapsed: float,
        loss: float | None = None,
        speed: float | None = None,
        lr: float | None = None,
    ) -> None:
        if self.progress is None:
            return
        fields: dict[str, Any] = {"step": step}  # rich takes any value for the bar's columns
        if loss is not None:
            fields.update(loss=f"{loss:.3f}", speed=f"{speed:,.0f}", lr=f"{lr:.2e}")
        self.progress.update(self.task, completed=step if self.by_steps else elapsed, **fields)

    def print(self, message: str) -> bool:
        """Print above the bar; False when there is no bar (the caller logs instead)."""
        if self.progress is None:
            return False
        self.progress.console.print(message, markup=False, highlight=False)
        return True

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The records of a run's metrics.jsonl, oldest first (a UserError naming a bad line; a torn
    last line is left out)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir}: no metrics.jsonl here; expected a run directory written by attnmt train")
    return [line.record for line in _record_lines(path)[0]]


@dataclass(frozen=True)
class _Line:
    text: str
    record: dict


def _record_lines(path: Path) -> tuple[list[_Line], int | None]:
    """The records of `path` with their text, and the number of a torn last line left out (None
    if none). A record must be a JSON object with a "step"; a bad line before the last is a UserError."""
    numbered = [
        (number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if line.strip()
    ]
    lines = []
    for number, text in numbered:
        try:
            record = json.loads(text)
            problem = None if isinstance(record, dict) and isinstance(record.get("step"), int) else "no step"
        except json.JSONDecodeError as exc:
            problem = exc.msg
        if problem is None:
            lines.append(_Line(text, record))
        elif number == numbered[-1][0]:
            return lines, number
        else:
            raise UserError(f"{path}:{number}: not a JSON record with a step ({problem})")
    return lines, None
