"""Translating a large file: `attnmt translate RUN_DIR --input FILE --output FILE`.

    python -m benchmarks.large_file --checkpoint RUN_DIR [--lines 100000] [--workers 1 2] [--beam 1]
        [--json docs/results/large-file.json]

The input is the run's training sources repeated to `--lines` lines. The command runs as a user
runs it, in a process of its own with its stderr on a pseudo-terminal (so it draws its progress
bar, whose last state is kept), once for a tenth of the lines and once for all of them, for each
`--workers`. Reported: wall-clock seconds, lines and words per second, and the peak resident
memory of the command's processes together (sampled every 50 ms), which stays flat from a tenth
of the file to all of it when memory does not grow with the file. Then the same lines are
translated in this process by one `Translator.translate` call over all of them, and the streamed
output is compared with it line by line.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import os
import pty
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import torch
from rich.console import Console

from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from benchmarks.measure import describe_machine, positive_int, write_results
from benchmarks.report import markdown_table

DEFAULT_JSON = Path("docs/results/large-file.json")
SAMPLE_SECONDS = 0.05


def write_input(sentences: list[str], lines: int, path: Path) -> Path:
    """`sentences` repeated (in order) to exactly `lines` lines."""
    with path.open("w", encoding="utf-8") as file:
        for sentence in itertools.islice(itertools.cycle(sentences), lines):
            file.write(sentence + "\n")
    return path


def _tree_rss(process: psutil.Process) -> int:
    """Resident bytes of a process and all its descendants (worker processes included)."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a worker that just ended
            total += member.memory_info().rss
    return total


def _drain(fd: int, chunks: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed with the process
            return
        if not chunk:
            return
        chunks.append(chunk)


def last_progress(terminal_output: bytes) -> str:
    """The progress bar's last state, from what the command drew on its terminal."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal_output.decode("utf-8", "replace"))
    states = [part.strip() for part in re.split(r"[\r\n]", text) if part.strip().startswith("translate")]
    return states[-1] if states else ""


def run_command(run_dir: Path, source: Path, output: Path, beam: int, workers: int) -> dict:
    """One `attnmt translate --input --output` as a user runs it: seconds, peak memory of its
    processes, and the last state of its progress bar."""
    command = [sys.executable, "-m", "attnmt", "translate", str(run_dir), "--input", str(source),
               "--output", str(output), "--beam", str(beam), "--workers", str(workers)]  # fmt: skip
    leader, follower = pty.openpty()
    chunks: list[bytes] = []
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    reader = threading.Thread(target=_drain, args=(leader, chunks), daemon=True)
    reader.start()
    watched, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):  # the command ending between poll and sample
            peak = max(peak, _tree_rss(watched))
        time.sleep(SAMPLE_SECONDS)
    seconds = time.perf_counter() - start
    reader.join(timeout=5)
    os.close(leader)
    if process.returncode != 0:
        tail = last_progress(b"".join(chunks)) or b"".join(chunks)[-500:].decode("utf-8", "replace")
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {tail}")
    lines = output.read_text(encoding="utf-8").splitlines()
    words = sum(len(line.split()) for line in lines)
    return {
        "lines": len(lines),
        "seconds": seconds,
        "lines_per_s": len(lines) / seconds,
        "words_per_s": words / seconds,
        "peak_rss_mib": peak / 2**20,
        "progress_bar": last_progress(b"".join(chunks)),
    }


def benchmark(run_dir: Path, lines: int, workers: list[int], beam: int, data_dir: str | None, console: Console) -> dict:
    translator = load(ModelSpec(run_dir, device="cpu", data_dir=data_dir))
    pairs = split_examples(translator.config.data, "train")  # (src, tgt)
    sentences = [src for src, _ in pairs]
    with tempfile.TemporaryDirectory(prefix="attnmt-large-file-") as folder:
        folder = Path(folder)
        rows, outputs = [], {}
        for size in (lines // 10, lines):
            source = write_input(sentences, size, folder / f"input-{size}.txt")
            for count in workers:
                output = folder / f"output-{size}-{count}.txt"
                row = {"input_lines": size, "workers": count, **run_command(run_dir, source, output, beam, count)}
                rows.append(row)
                outputs[(size, count)] = output.read_text(encoding="utf-8").splitlines()
                seconds, mib = row["seconds"], row["peak_rss_mib"]
                console.print(f"{size:,} lines, {count} worker(s): {seconds:.1f} s, {mib:.0f} MiB")
        whole = source.read_text(encoding="utf-8").splitlines()
        start = time.perf_counter()
        reference = [t.text for t in translator.translate(whole, translator.search_options(beam_size=beam))]
        reference_seconds = time.perf_counter() - start
    equal = {
        str(count): sum(a == b for a, b in zip(outputs[(lines, count)], reference, strict=True)) for count in workers
    }
    return {
        "checkpoint": str(translator.checkpoint.relative_to(run_dir.parent)),
        "beam": beam,
        "decode_batching": translator.config.decode.model_dump(include={"batch_size", "batch_tokens"}),
        "runs": rows,
        "one_call": {"lines": len(reference), "seconds": reference_seconds, "equal_lines_by_workers": equal},
    }


def large_file_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The Markdown table of a large-file result: one row per input size and worker count."""
    header = ["input lines", "workers", "seconds", "lines/s", "words/s", "peak RSS MiB", "output equal to one call"]
    equal = results["one_call"]["equal_lines_by_workers"]
    largest = max(row["input_lines"] for row in results["runs"])
    body = [
        [
            f"{row['input_lines']:,}",
            str(row["workers"]),
            f"{row['seconds']:,.0f}",
            f"{row['lines_per_s']:,.0f}",
            f"{row['words_per_s']:,.0f}",
            f"{row['peak_rss_mib']:,.0f}",
            f"{equal[str(row['workers'])]:,}/{largest:,}" if row["input_lines"] == largest else "",
        ]
        for row in results["runs"]
    ]
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.large_file", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained attnmt run directory")
    parser.add_argument("--lines", type=positive_int, default=100_000)
    parser.add_argument("--workers", type=positive_int, nargs="+", default=[1, 2])
    parser.add_argument("--beam", type=positive_int, default=1)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    results = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": describe_machine(torch.device("cpu")),
        **benchmark(args.checkpoint, args.lines, args.workers, args.beam, args.data_dir, console),
    }
    write_results(args.json, results, "benchmarks.large_file", argv)
    console.print("\n".join(markdown_table(*large_file_rows(results))), markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
