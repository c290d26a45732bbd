"""The guided notebook: its sections and 34 questions are all there, in order, each answered by
prose and code; it is committed without outputs; and it runs top to bottom without an error.

Executing it trains several small models on the real Tatoeba corpus (read from $ATTNMT_DATA,
default ../shared/data): about 4 minutes on 2 CPU cores. `pytest -m "not notebook"` leaves it out.
"""

import os
import re
import time
from pathlib import Path

import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "attention_seq2seq.ipynb"
SHARED_DATA = Path(os.environ.get("ATTNMT_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")

# (section title, its questions), in the order of the notebook's outline.
SECTIONS = [
    ("Understanding attention in seq2seq models", []),
    ("Setting up", [1, 2, 3, 4]),
    ("The dataset", [5, 6, 7, 8]),
    ("The encoder", [9, 10, 11]),
    ("The attention mechanism", [12, 13, 14]),
    ("The decoder with attention", [15, 16, 17]),
    ("The full model", [18, 19, 20]),
    ("Training", [21, 22, 23, 24]),
    ("Evaluation", [25, 26, 27]),
    ("Visualizing attention", [28, 29, 30]),
    ("Hyperparameters", [31, 32, 33, 34]),
    ("Conclusion", []),
]
SECTION_HEADING = re.compile(r"^## (\d+)\. (.+)$")
QUESTION_HEADING = re.compile(r"^### Q(\d+)\. \S")
# How long executing may take before the test fails: twice the notebook's time budget (6 minutes
# on 2 cores), so a slower CI machine passes but a notebook that grew far too slow does not.
TIME_LIMIT_S = 12 * 60


def read_notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def outline(notebook: nbformat.NotebookNode) -> list[tuple]:
    """("section", number, title) and ("question", number) headings in order, and ("prose",) /
    ("code",) for each markdown cell's text after its headings and each non-empty code cell."""
    items: list[tuple] = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            if cell.source.strip():
                items.append(("code",))
            continue
        for line in cell.source.splitlines():
            if section := SECTION_HEADING.match(line):
                items.append(("section", int(section.group(1)), section.group(2).strip()))
            elif question := QUESTION_HEADING.match(line):
                items.append(("question", int(question.group(1))))
            elif line.strip() and not line.startswith("#"):
                items.append(("prose",))
    return items


def test_sections_and_questions_are_in_order():
    headings = [item for item in outline(read_notebook()) if item[0] in ("section", "question")]
    expected = []
    for number, (title, questions) in enumerate(SECTIONS, 1):
        expected.append(("section", number, title))
        expected += [("question", q) for q in questions]
    assert headings == expected
    assert [q for item in headings if item[0] == "question" for q in item[1:]] == list(range(1, 35))


def test_every_question_has_prose_and_code():
    items = outline(read_notebook())
    starts = [i for i, item in enumerate(items) if item[0] == "question"]
    for start in starts:
        end = next((i for i in range(start + 1, len(items)) if items[i][0] in ("section", "question")), len(items))
        answer = {item[0] for item in items[start + 1 : end]}
        assert {"prose", "code"} <= answer, f"Q{items[start][1]} needs prose and a code cell"


def test_committed_without_outputs():
    """Outputs would go stale with every change of the library and bloat diffs; CI runs the
    notebook instead, and a reader runs it in a few minutes."""
    for index, cell in enumerate(read_notebook().cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {index}: clear its outputs"


@pytest.mark.notebook
@pytest.mark.skipif(
    not (SHARED_DATA / "tatoeba-eng-fra" / "fra.txt.gz").is_file(), reason="no local Tatoeba copy (set ATTNMT_DATA)"
)
def test_notebook_runs(tmp_path, monkeypatch):
    """Every cell runs without an error (its asserts included), in a scratch folder, offline."""
    from nbclient import NotebookClient

    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "cache"))  # never the user's cache, never the network
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's runs go to a temporary folder: this one
    notebook = read_notebook()
    client = NotebookClient(
        notebook, timeout=TIME_LIMIT_S, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    started = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    elapsed = time.perf_counter() - started
    print(f"notebook executed in {elapsed:.0f} s")
    assert elapsed < TIME_LIMIT_S
