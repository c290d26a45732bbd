"""Small shared pieces: the user-error type, seeding, device choice, atomic and durable writes.

This module is a leaf: it imports nothing from attnmt, so every other module may use it.
Torch is imported lazily so that `config` and the data tools stay light.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

Say = Callable[[str], None]  # how the library tells the user something: one line, no markup


def silent(line: str) -> None:
    """The `say` of a caller that wants no progress lines: tell nobody."""


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


# A write failed for lack of room: a full disk, a full quota, or a file-size limit (RLIMIT_FSIZE).
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class WriteFailed(UserError):
    """A file or folder could not be written; `intact` says what is still whole (the previous
    version, the records before). `failure` alone says what failed ("PATH: cannot write MEMBER
    (REASON)"), for a caller that knows more about what is intact (the trainer: the last
    complete checkpoint and the command that resumes)."""

    def __init__(self, path: Path, error: OSError, member: str | None = None, *, intact: str) -> None:
        self.path, self.member, self.reason = path, member, error.strerror or str(error)
        self.failure = f"{path}: cannot write{f' {member}' if member else ''} ({self.reason})"
        super().__init__(f"{self.failure}; {intact}")


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


def choose_device(requested: str = "auto", *, field: str = "train.device", auto_mps: bool = True) -> str:
    """`auto` picks cuda, then mps (unless `auto_mps` is False: then only when named), then cpu;
    an explicit device that is absent is a UserError naming `field`, the setting `requested` came from."""
    import torch

    available = {
        "cuda": torch.cuda.is_available(),
        "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
        "cpu": True,
    }
    if requested == "auto":
        return next(name for name in ("cuda", "mps", "cpu") if available[name] and (auto_mps or name != "mps"))
    kind = requested.split(":")[0]
    if kind not in available:
        raise UserError(f"unknown device {requested!r}; expected auto, cpu, cuda or mps", field=field)
    if not available[kind]:
        raise UserError(f"{requested!r} was requested but is not available on this machine", field=field)
    return requested


def cache_root() -> Path:
    """Where attnmt keeps what it downloads or builds once: `$ATTNMT_CACHE`, else `~/.cache/attnmt`."""
    return Path(os.environ.get("ATTNMT_CACHE") or Path.home() / ".cache" / "attnmt")


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
        # the vector instructions torch's CPU kernels use: float results, and so weights trained
        # from one seed, differ between them (an AVX2 and an AVX-512 machine both say "AMD EPYC")
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    return machine


def shared_machine(machines: list[dict]) -> dict | None:
    """Several runs' `describe_machine` records as one: a field all of them share as it is, and a
    field on which they differ (a kernel build, or the processor of a seed run on another machine)
    as the list of its values, so a file of several runs says where they ran without picking one."""
    if not machines:
        return None
    shared = {}
    for key in dict.fromkeys(key for machine in machines for key in machine):
        values = [machine.get(key) for machine in machines]
        distinct = [value for index, value in enumerate(values) if value not in values[:index]]
        shared[key] = distinct[0] if len(distinct) == 1 else distinct
    return shared


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: done once, at import
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def sync_file(path: str | os.PathLike) -> None:
    """Wait until the file's data is on the disk (fsync), not only in the page cache."""
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows syncs only what it may write
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(path: str | os.PathLike) -> None:
    """fsync a folder, so that the names created or renamed in it are on the disk too.

    Windows cannot open a folder, and some file systems refuse to sync one (EINVAL): there the
    renames are as durable as the file system makes them on its own."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def naming_file(path: str | os.PathLike) -> Iterator[None]:
    """Name `path` in an OSError raised while the block writes it: a failed write() names no
    file, and the error message should say which file of a folder could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def _sync_tree(folder: Path) -> None:
    for parent, _, files in os.walk(folder):
        for name in files:
            sync_file(Path(parent) / name)
        sync_folder(parent)


def _member(error: OSError, inside: Path) -> str | None:
    """The file inside a staging folder that an OSError names, relative to the folder."""
    with contextlib.suppress(TypeError, ValueError):
        return str(Path(error.filename).relative_to(inside))
    return None


@contextlib.contextmanager
def atomic_path(final_path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `final_path`; on success, sync it to the disk and rename it
    into place, then sync the folder: once the block is left, the file is on the disk.

    A kill while writing leaves the previous file (if any) untouched and no half-written file
    under the final name. A write that fails for lack of room (`NO_ROOM`), or a failure of the
    temporary file's creation, sync or rename, is a `WriteFailed` naming `final_path`.
    """
    final_path = Path(final_path)
    had_previous = final_path.exists()
    tmp_path = None
    try:
        with _writing(final_path, had_previous):
            final_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{final_path.name}.", suffix=".tmp", dir=final_path.parent)
            os.close(fd)
            tmp_path = Path(tmp_name)
            # mkstemp makes the file private (0600); the result should get the permissions any
            # file the user creates gets (0666 less the umask), like the folder's other files.
            os.chmod(tmp_path, 0o666 & ~_UMASK)
        with _writing(final_path, had_previous, only_no_room=True):
            yield tmp_path
        with _writing(final_path, had_previous):
            sync_file(tmp_path)
            os.replace(tmp_path, final_path)
            sync_folder(final_path.parent)
    finally:
        if tmp_path is not None and tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_folder(final_path: str | os.PathLike, *, rename: bool = True) -> Iterator[Path]:
    """The folder twin of `atomic_path`: yield an empty hidden folder beside `final_path`
    (`.NAME.XXXX`) to fill; on success, sync every file in it, rename it to `final_path` and
    sync the parent folder. A folder already at `final_path` is moved aside to a hidden name
    and deleted once the new one is in place: a kill between the two renames leaves no folder
    under the final name, never a partial one.

    `rename=False` leaves the complete, synced folder under its hidden name, for a caller whose
    own protocol gives it its name (checkpoints, which the index must name at every moment).
    On failure the hidden folder is removed; a lack of room while filling it, or a failure of
    the steps here, is a `WriteFailed` naming `final_path` and the file inside it.
    """
    final_path = Path(final_path)
    had_previous = final_path.exists()
    staging = None
    try:
        with _writing(final_path, had_previous):
            final_path.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{final_path.name}.", dir=final_path.parent))
            os.chmod(staging, 0o777 & ~_UMASK)  # mkdtemp's folder is private (0700), like mkstemp's file
        with _writing(final_path, had_previous, inside=staging, only_no_room=True):
            yield staging
        if rename:
            replace_folder(staging, final_path)
            staging = None
        else:
            with _writing(final_path, had_previous, inside=staging):
                _sync_tree(staging)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise


def replace_folder(built: Path, final_path: Path) -> None:
    """Sync the complete folder `built` (beside `final_path`) to the disk and rename it to
    `final_path`, then sync the parent. A folder already there is moved aside to a hidden name
    and deleted once the new one is in place. A failure is a `WriteFailed` naming `final_path`."""
    had_previous = final_path.exists()
    with _writing(final_path, had_previous, inside=built):
        _sync_tree(built)
        if had_previous:
            old = final_path.with_name(f".replaced-{final_path.name}-{os.getpid()}")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final_path, old)
            os.replace(built, final_path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(built, final_path)
        sync_folder(final_path.parent)


@contextlib.contextmanager
def _writing(final_path: Path, had_previous: bool, *, inside: Path | None = None, only_no_room: bool = False):
    """OSErrors of the block as `WriteFailed` (with `only_no_room`, those of `NO_ROOM` only:
    the caller's own block may fail on other files for other reasons)."""
    try:
        yield
    except OSError as exc:
        if only_no_room and exc.errno not in NO_ROOM:
            raise
        member = _member(exc, inside) if inside is not None else None
        intact = "the previous version is untouched" if had_previous else "nothing was left under that name"
        raise WriteFailed(final_path, exc, member, intact=intact) from None


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
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None
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
        assert self._reader is not None  # __enter__ opens the sockets before starting this thread
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
        if self._reader is None or self._writer is None:  # never entered, or entered off the main thread
            return
        self._done.set()
        signal.set_wakeup_fd(self.previous_wakeup_fd)
        for number, handler in self.previous_handlers.items():
            signal.signal(number, handler)
        self._writer.close()
        self._reader.close()
