"""Run the guided notebook top to bottom and save it with its outputs: `make notebook`.

The notebook is committed with its outputs, so its figures show on the repository's web page
without running anything; after changing the notebook or the library, run this and commit the
result. Runs go to a temporary folder; the corpora are read from $ATTNMT_DATA (or downloaded
once into the cache). `tests/test_notebook.py` executes it the same way and checks that the
committed outputs match what a fresh run produces, cell by cell.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().with_name("attention_seq2seq.ipynb")


def execute(notebook: nbformat.NotebookNode, workdir: str | Path, timeout: int) -> nbformat.NotebookNode:
    """Execute `notebook` in place with `workdir` as its working folder; each cell may take `timeout` s.

    Raises nbclient's CellExecutionError, naming the cell and its traceback, when a cell fails.
    """
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,  # no timestamps in the committed file: a re-run changes only what it shows
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    stamp_sources(notebook)
    return notebook


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


def main() -> int:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attnmt-notebook-") as workdir:
        execute(notebook, workdir, timeout=15 * 60)
    nbformat.write(notebook, NOTEBOOK)
    print(f"executed in {time.perf_counter() - started:.0f} s; outputs saved in {NOTEBOOK.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
