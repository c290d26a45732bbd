"""Run the guided notebook top to bottom and save it with its outputs: `make notebook`.

    python notebooks/execute.py                                  # execute, save into the notebook
    python notebooks/execute.py --device cuda --record FILE.json [--output COPY.ipynb]

The notebook is committed with its outputs, so its figures show on the repository's web page
without running anything; after changing the notebook or the library, run this and commit the
result. Runs go to a temporary folder; the corpora are read from $ATTNMT_DATA (or downloaded
once into the cache). `tests/test_notebook.py` executes it the same way and checks that the
committed outputs match what a fresh run produces, cell by cell.

`--record` runs it on another device (`$ATTNMT_NOTEBOOK_DEVICE`) and leaves the committed
notebook alone: it writes a raw result instead, saying where it ran (machine, GPU, torch, the
code's commit), how long each cell took, how many asserts the cells hold, and whether every cell
ran (the first failure's cell and error if not; exit code 1), with each cell's printed text.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOK = Path(__file__).resolve().with_name("attention_seq2seq.ipynb")


def execute(notebook: nbformat.NotebookNode, workdir: str | Path, timeout: int, **hooks) -> nbformat.NotebookNode:
    """Execute `notebook` in place with `workdir` as its working folder; each cell may take `timeout` s.
    `hooks`: nbclient's `on_cell_start` / `on_cell_executed` callbacks.

    Raises nbclient's CellExecutionError, naming the cell and its traceback, when a cell fails.
    """
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,  # no timestamps in the committed file: a re-run changes only what it shows
        resources={"metadata": {"path": str(workdir)}},
        **hooks,
    )
    before = load_average()
    client.execute()
    stamp_sources(notebook)
    # what else ran on the machine meanwhile: the timings the notebook prints are read beside it
    notebook.metadata.setdefault("attnmt", {})["load_average"] = {"before": before, "after": load_average()}
    return notebook


def load_average() -> float | None:
    """The 1-minute load average (None where the system keeps none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def source_hash(source: str) -> str:
    """The SHA-256 of a code cell's source: what its stored outputs were made from."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def stamp_sources(notebook: nbformat.NotebookNode) -> None:
    """Store each code cell's source hash in its metadata (`attnmt.source_sha256`), so that an edit
    made after the execution is found (`tests/test_notebook.py`) instead of showing outputs of
    code that is no longer there."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.metadata.setdefault("attnmt", {})["source_sha256"] = source_hash(cell.source)


def assert_count(notebook: nbformat.NotebookNode) -> int:
    """How many `assert` statements the code cells hold (cells with IPython magics are read without them)."""
    count = 0
    for cell in notebook.cells:
        if cell.cell_type == "code":
            python = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            count += sum(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(python)))
    return count


def printed(cell: nbformat.NotebookNode) -> str:
    """What a code cell printed (its stdout), without figures."""
    return "".join(output.get("text", "") for output in cell.outputs if output.get("name") == "stdout")


def record(device: str, path: Path, output: Path | None, timeout: int, source: Path = NOTEBOOK) -> int:
    """Execute the notebook (`source`) on `device` without saving it and write the run's raw result to `path`."""
    import torch

    from attnmt.provenance import code_span, code_state, with_content_hash
    from attnmt.utils import atomic_path, describe_machine

    os.environ["ATTNMT_NOTEBOOK_DEVICE"] = device  # read by the notebook's device cell
    notebook = nbformat.read(source, as_version=4)
    code_cells = [index for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    seconds: dict[int, float] = {}
    began: dict[int, float] = {}
    failed: list[int] = []

    def on_cell_start(cell, cell_index):
        began[cell_index] = time.perf_counter()

    def on_cell_executed(cell, cell_index, **_):
        seconds[cell_index] = round(time.perf_counter() - began[cell_index], 2)

    def on_cell_error(cell, cell_index, **_):
        failed.append(cell_index)

    at_start = code_state()
    started = time.perf_counter()
    failure = None
    with tempfile.TemporaryDirectory(prefix="attnmt-notebook-") as workdir:
        try:
            execute(
                notebook,
                workdir,
                timeout,
                on_cell_start=on_cell_start,
                on_cell_executed=on_cell_executed,
                on_cell_error=on_cell_error,
            )
        except CellExecutionError as error:
            failure = {
                "code_cell": code_cells.index(failed[0]) + 1 if failed else None,
                "error": f"{error.ename}: {error.evalue}",
            }
    elapsed = time.perf_counter() - started
    cells = [notebook.cells[index] for index in code_cells]
    result = {
        "command": " ".join(["python notebooks/execute.py", *sys.argv[1:]]),
        **code_span(at_start, code_state()),
        "machine": describe_machine(device),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": device,
        "notebook": source.name,
        "code_cells": len(cells),
        "code_cells_run": len(seconds) - len(failed),
        "asserts": assert_count(notebook),
        "all_cells_ran": failure is None,
        "failure": failure,
        "seconds": round(elapsed, 1),
        "seconds_by_code_cell": [seconds.get(index) for index in code_cells],
        "source_sha256_by_code_cell": [source_hash(cell.source) for cell in cells],
        "printed_by_code_cell": [printed(cell) for cell in cells],
    }
    with atomic_path(path) as temporary:
        temporary.write_text(json.dumps(with_content_hash(result), indent=2) + "\n", encoding="utf-8")
    if output is not None:
        nbformat.write(notebook, output)
    verdict = "every cell ran, its asserts held" if failure is None else f"code cell {failure['code_cell']} failed"
    print(f"executed on {device} in {elapsed:.0f} s: {verdict}; record in {path}")
    return 0 if failure is None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="the notebook's device with --record (cpu, cuda, mps)")
    parser.add_argument("--record", type=Path, help="write the run's raw result here; the notebook is not saved")
    parser.add_argument("--output", type=Path, help="with --record: save the executed copy here")
    parser.add_argument("--timeout", type=int, default=15 * 60, help="seconds a cell may take")
    args = parser.parse_args(argv)
    for path, flag in ((args.record, "--record"), (args.output, "--output")):
        if path is not None and not path.resolve().parent.is_dir():  # found before minutes of running, not after
            parser.error(f"{flag} {path}: its folder {path.parent} does not exist")
    if args.record is not None:
        return record(args.device, args.record, args.output, args.timeout)
    if args.output is not None:
        parser.error("--output goes with --record")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attnmt-notebook-") as workdir:
        execute(notebook, workdir, timeout=args.timeout)
    nbformat.write(notebook, NOTEBOOK)
    print(f"executed in {time.perf_counter() - started:.0f} s; outputs saved in {NOTEBOOK.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
