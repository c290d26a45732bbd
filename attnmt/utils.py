"""Small shared pieces: the user-error type, seeding, device choice, atomic writes.

This module is a leaf: it imports nothing from attnmt, so every other module may use it.
Torch is imported lazily so that `config` and the data tools stay light.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path


class UserError(Exception):
    """A mistake in the user's input (file, config, argument).

    The CLI prints its message as one line on stderr and exits with code 2, never a
    traceback. The message must name the file/line/key and say what was expected.
    """


class Interrupted(Exception):
    """SIGINT/SIGTERM stopped a long job after it saved what is needed to resume it."""


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (if present) and torch so that CPU runs repeat bit for bit."""
    import torch

    random.seed(seed)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def choose_device(requested: str = "auto") -> str:
    """`auto` picks cuda, then mps, then cpu; an explicit device that is absent is a UserError."""
    import torch

    available = {
        "cuda": torch.cuda.is_available(),
        "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
        "cpu": True,
    }
    if requested == "auto":
        return next(name for name in ("cuda", "mps", "cpu") if available[name])
    kind = requested.split(":")[0]
    if kind not in available:
        raise UserError(f"train.device: unknown device {requested!r}; expected auto, cpu, cuda or mps")
    if not available[kind]:
        raise UserError(f"train.device: {requested!r} was requested but is not available on this machine")
    return requested


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: done once, at import
    os.umask(mask)
    return mask


_UMASK = _read_umask()


@contextlib.contextmanager
def atomic_path(final_path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `final_path`; rename it into place only on success.

    A crash or kill while writing leaves the previous file (if any) untouched and no
    half-written file under the final name.
    """
    final_path = Path(final_path)
    final_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final_path.name}.", suffix=".tmp", dir=final_path.parent)
    os.close(fd)
    tmp_path = Path(tmp_name)
    # mkstemp makes the file private (0600); the result should get the permissions any file
    # the user creates gets (0666 less the umask), like the folder's other files.
    os.chmod(tmp_path, 0o666 & ~_UMASK)
    try:
        yield tmp_path
        os.replace(tmp_path, final_path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


class StopSignal:
    """Turns SIGINT/SIGTERM into a flag the loop checks between steps."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous = {}

    def __enter__(self) -> StopSignal:
        for number in (signal.SIGINT, signal.SIGTERM):
            self.previous[number] = signal.signal(number, self._handle)
        return self

    def _handle(self, number, frame) -> None:
        self.received = number

    def __exit__(self, *exc) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)
