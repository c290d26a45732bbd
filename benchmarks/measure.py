"""The machine and the code a benchmark ran on, and its peak memory while a piece of work ran.

Peak memory on a CPU is the rise of the process's peak resident set (VmHWM) over its size
when the work started: torch's CPU allocator is malloc, which tracemalloc does not see.
Linux lets a process reset its own VmHWM (writing 5 to /proc/self/clear_refs), so each
measurement gets its own peak; where that is not possible the rise of ru_maxrss is used,
which under-reports work that fits in memory an earlier, larger one already reached. On a
GPU it is torch.cuda.max_memory_allocated (tensors only, not the caching allocator's slack).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import resource
import statistics
import sys
from contextlib import contextmanager, suppress
from pathlib import Path

import torch

from attnmt.provenance import code_span, code_state, with_content_hash
from attnmt.utils import describe_machine as describe_machine  # the benchmarks import it from here

MIB = 2**20
CHECKOUT = Path(__file__).resolve().parents[1]


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def release_memory() -> None:
    """Collect garbage and hand freed heap back to the system, so the next peak starts clean."""
    gc.collect()
    with suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakMemory:
    """The result of `peak_memory()`: `mib` is filled in when the block ends."""

    def __init__(self) -> None:
        self.mib: float | None = None
        self.method = ""


@contextmanager
def peak_memory(device: torch.device):
    """with peak_memory(device) as peak: ... ; then peak.mib is the block's peak in MiB."""
    result = PeakMemory()
    release_memory()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        yield result
        torch.cuda.synchronize(device)
        result.mib, result.method = torch.cuda.max_memory_allocated(device) / MIB, "cuda max_memory_allocated"
        return
    start_kib = _status_kib("VmRSS")
    if start_kib is not None and _reset_peak_rss():
        yield result
        result.mib, result.method = (_status_kib("VmHWM") - start_kib) / 1024, "rise of VmHWM over VmRSS"
        return
    start_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield result
    rise = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start_kib
    result.mib, result.method = rise / 1024, "rise of ru_maxrss"


# --- repeated measurements ---------------------------------------------------------------------


def rotated(items: list, turn: int) -> list:
    """`items` started at a different place each turn, so none is always measured first (or last)."""
    shift = turn % len(items) if items else 0
    return items[shift:] + items[:shift]


def spread(values: list[float]) -> dict:
    """Median and range of repeated measurements, with the values themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def combine_repeats(runs: list[dict], keys: tuple[str, ...]) -> dict:
    """One result from repeats of a measurement: the first run's fields, `keys` replaced by their
    medians, and `spread` holding each key's median, range and values."""
    combined = dict(runs[0])
    combined["repeats"] = len(runs)
    combined["spread"] = {key: spread([run[key] for run in runs]) for key in keys}
    for key in keys:
        combined[key] = combined["spread"][key]["median"]
    return combined


# The code when this process started: a benchmark imports this module first thing, so a result
# written at its end can say whether the code changed while it ran.
CODE_AT_START = code_state(CHECKOUT)


def provenance() -> dict:
    """The code measuring now: attnmt's version, the checkout's git commit and whether tracked
    files differed from it (None for both outside a git checkout), which (`dirty_paths`), the load
    average, and torch's version. A race that runs several invocations records one per run."""
    import attnmt

    state = code_state(CHECKOUT)
    return {
        "attnmt_version": attnmt.__version__,
        "git_commit": state["commit"],
        "git_dirty": state["dirty"],
        "dirty_paths": state["dirty_paths"],
        "load_average": state["load_average"],
        "torch": torch.__version__,
    }


def write_results(path: Path, results: dict, program: str, argv: list[str] | None) -> Path:
    """Write a benchmark's results as JSON (atomically), with the command that made them and the
    code that did: its state when the process started and now (`code_at_start`, `code_at_end`,
    and `code_changed` if the commit or the edited files differ), `git_commit`/`git_dirty` saying
    the worst of the two, and a hash of the content (`attnmt.provenance`); the raw result a figure
    in the README or docs is quoted from."""
    from attnmt.utils import atomic_path

    arguments = argv if argv is not None else sys.argv[1:]
    code = {**provenance(), **code_span(CODE_AT_START, code_state(CHECKOUT))}
    results = {"command": " ".join([f"python -m {program}", *arguments]), **code, **results}
    with atomic_path(path) as temporary:
        temporary.write_text(json.dumps(with_content_hash(results), indent=2) + "\n", encoding="utf-8")
    return path


def positive_int(text: str) -> int:
    """argparse type for counts such as --repeats: a clear usage error (exit 2) for 0 or less."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def run_parser(program: str, doc: str, default_json: Path, beam: int = 5) -> argparse.ArgumentParser:
    """The command line of a benchmark that measures one trained run: RUN_DIR, --beam, --data-dir
    and --json (default `default_json`); the benchmark adds its own options."""
    parser = argparse.ArgumentParser(prog=f"python -m {program}", description=doc.split("\n\n")[0])
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--beam", type=positive_int, default=beam)
    parser.add_argument("--data-dir", metavar="DIR", help="where the run's corpus is (default: as it was trained)")
    parser.add_argument("--json", type=Path, default=default_json)
    return parser


def measured(program: str, measure, *arguments):
    """`measure(*arguments)`, or None once a UserError (a run or corpus that is not there, an input
    the model cannot take) is said in one line on stderr."""
    from attnmt.utils import UserError

    try:
        return measure(*arguments)
    except UserError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return None
