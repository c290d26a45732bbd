"""Small shared pieces: the user-error type, seeding, device choice, atomic writes.

This module is a leaf: it imports nothing from attnmt, so every other module may use it.
Torch is imported lazily so that `config` and the data tools stay light.
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

Say = Callable[[str], None]  # how the library tells the user something: one line, no markup


class UserError(Exception):
    """A mistake in the user's input (file, config, argument).

    The CLI prints its message as one line on stderr and exits with code 2, never a
    traceback. The message must name the file/line/key and say what was expected.

    When one setting is at fault, `field` names it neutrally (`decode.beam_size`, `checkpoint`,
    `data_dir`, `train.device`) and `problem` says what is wrong with it; each face renders the
    field in its own words before the problem: the CLI as its flag (`--beam`), a config as its
    key, the API as its request field (`beam_size`). `str()` renders the field as it is named.
    """

    def __init__(self, problem: str, *, field: str | None = None):
        super().__init__(problem)
        self.problem, self.field = problem, field

    def __str__(self) -> str:
        return self.rendered(self.field)

    def rendered(self, name: str | None) -> str:
        """The message with the field called `name` (None: no field shown)."""
        return f"{name}: {self.problem}" if name else self.problem

    def __reduce__(self):  # worker processes send errors back pickled: keep the field
        return (type(self), (self.problem,), {"field": self.field})


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


def choose_device(requested: str = "auto", *, field: str = "train.device") -> str:
    """`auto` picks cuda, then mps, then cpu; an explicit device that is absent is a UserError
    naming `field`, the setting `requested` came from."""
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
        raise UserError(f"unknown device {requested!r}; expected auto, cpu, cuda or mps", field=field)
    if not available[kind]:
        raise UserError(f"{requested!r} was requested but is not available on this machine", field=field)
    return requested


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "processor\t: ")) and ":" in line:
                name = line.split(":", 1)[1].strip()
                if name and not name.isdigit():
                    return name
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def describe_machine(device=None) -> dict:
    """CPU, cores, memory, torch and thread count, GPU name: what a reader needs to compare
    numbers. `device`: a torch.device or its name (default cpu)."""
    import torch

    device = torch.device(device or "cpu")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        memory_gib = None
    machine = {
        "cpu": cpu_model(),
        "cores": cores,
        "memory_gib": memory_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    return machine


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
    """SIGINT/SIGTERM as a person expects them during a long job.

    The first signal sets `received`, which the loop checks between steps (it then saves and
    stops). A second signal, or no step ending within `grace_seconds` of the first, ends the
    process at once with exit code 130: whatever was saved before stays complete, since every
    save is atomic. Python runs signal handlers only between bytecodes, so a step stuck in a
    long C call would never see them; a watchdog thread reads the signals from the wakeup file
    descriptor instead, which the interpreter writes the moment a signal arrives.
    Inert outside the main thread (where signals cannot be handled).
    """

    EXIT_CODE = 130

    def __init__(self, grace_seconds: float | None = None, what: str = "the job") -> None:
        self.received: int | None = None
        self.grace_seconds, self.what = grace_seconds, what
        self.previous_handlers: dict = {}
        self.previous_wakeup_fd = -1
        self._reader = self._writer = None
        self._done = threading.Event()

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)
        for number in (signal.SIGINT, signal.SIGTERM):
            self.previous_handlers[number] = signal.signal(number, self._handle)
        self.previous_wakeup_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="attnmt-stop-signal", daemon=True).start()
        return self

    def _handle(self, number, frame) -> None:
        self.received = number  # also set by the watchdog; this runs once the main thread is back in Python

    def _watch(self) -> None:
        deadline, count = None, 0
        while not self._done.is_set():
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._reader.settimeout(0.5 if timeout is None else min(0.5, timeout))
            try:
                numbers = self._reader.recv(64)
            except (TimeoutError, OSError):
                numbers = b""
            if self._done.is_set():
                return
            for number in numbers:
                if number in (signal.SIGINT, signal.SIGTERM):
                    count += 1
                    self.received = number
                    if count == 1 and self.grace_seconds is not None:
                        deadline = time.monotonic() + self.grace_seconds
            if count >= 2:
                self._exit_now("a second signal")
            if deadline is not None and time.monotonic() >= deadline:
                self._exit_now(f"no step ended within {self.grace_seconds:g} s of the signal")

    def _exit_now(self, why: str) -> None:
        print(f"attnmt: {why}: stopping {self.what} at once; the last complete checkpoint is kept", file=sys.stderr)
        sys.stderr.flush()
        os._exit(self.EXIT_CODE)

    def __exit__(self, *exc) -> None:
        if self._reader is None:
            return
        self._done.set()
        signal.set_wakeup_fd(self.previous_wakeup_fd)
        for number, handler in self.previous_handlers.items():
            signal.signal(number, handler)
        self._writer.close()
        self._reader.close()
