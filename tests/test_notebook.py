"""The guided notebook: its sections and 34 questions are all there, in order, each answered by
prose and code, each section closed by exercises whose answers are checked; it is committed with
its outputs and figures, its study figures showing the numbers of docs/experiments.md; its device
is chosen once and everything goes to it; and it runs top to bottom without an error, showing
what the committed copy shows.

Executing it trains several small models on the real Tatoeba corpus (read from $ATTNMT_DATA,
default ../shared/data), on the CPU: a few minutes on 2 CPU cores. `pytest -m "not notebook"`
leaves it out.
"""

import ast
import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests.wheel_helpers import installed_from_wheel

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "attention_seq2seq.ipynb"
EXPERIMENTS_PAGE = NOTEBOOKS.parent / "docs" / "experiments.md"
PACKAGED_STUDY = NOTEBOOKS.parent / "attnmt" / "resources" / "notebook-questions.json"
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
# An absolute path of a build machine in a committed output (a temporary folder, a home).
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:tmp|home|root|work|Users|var|private)/")


def _load_executor():
    """notebooks/execute.py, the script `make notebook` runs: one way to run the notebook and stamp it."""
    spec = importlib.util.spec_from_file_location("notebook_execute", NOTEBOOKS / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


executor = _load_executor()
execute = executor.execute


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


ANSWERS_HEADING = "## Answers to the exercises"
EXERCISES_ANCHOR = re.compile(r'<a id="exercises-(\d+)"></a>')
ANSWERS_ANCHOR = re.compile(r'<a id="answers-(\d+)"></a>')


def test_every_section_ends_with_exercises_whose_answers_are_in_the_appendix():
    """Sections 1-11 each close with an "### Exercises" cell that links to its answers; the
    answers are in an appendix after the conclusion (so a static render does not show them under
    the question), each section's under its own anchor: code that asserts what the exercise asks
    for (so executing the notebook checks it), tagged `answer` and collapsed in JupyterLab, code
    and printed answer both. At least two answers retrain a changed model."""
    cells = read_notebook().cells
    section_starts = [i for i, cell in enumerate(cells) if SECTION_HEADING.match(cell.source.split("\n")[0])]
    appendix = next(i for i, cell in enumerate(cells) if cell.source.startswith(ANSWERS_HEADING))
    assert len(section_starts) == len(SECTIONS) and appendix > section_starts[-1], "the appendix after the conclusion"
    assert not any("answer" in cell.metadata.get("tags", []) for cell in cells[:appendix]), "no answer above it"
    for number, (start, end) in enumerate(itertools.pairwise(section_starts), 1):
        exercises = [cell for cell in cells[start:end] if cell.source.startswith("### Exercises")]
        assert len(exercises) == 1, f"section {number}: one Exercises cell"
        assert EXERCISES_ANCHOR.findall(exercises[0].source) == [str(number)], f"section {number}: its anchor"
        assert f"](#answers-{number})" in exercises[0].source, f"section {number}: a link to its answers"
    answers: dict[int, list] = {}
    current = None
    for cell in cells[appendix + 1 :]:
        if cell.cell_type == "markdown":
            anchors = ANSWERS_ANCHOR.findall(cell.source)
            current = int(anchors[0]) if anchors else None
            assert current is None or f"](#exercises-{current})" in cell.source, "a link back to the exercises"
        elif "answer" in cell.metadata.get("tags", []):
            assert current is not None, "an answer cell under a section's answers heading"
            answers.setdefault(current, []).append(cell)
    assert sorted(answers) == list(range(1, len(SECTIONS))), "every section's answers, in order"
    retrained = 0
    for number, section_answers in answers.items():
        for cell in section_answers:
            assert cell.cell_type == "code" and cell.metadata.get("tags") == ["answer"], f"section {number}"
            hidden = cell.metadata.get("jupyter", {})
            assert hidden.get("source_hidden") is True, f"section {number}: its code collapsed"
            assert hidden.get("outputs_hidden") is True, f"section {number}: its printed answer collapsed too"
            assert any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(cell.source))), f"section {number}"
            retrained += "short_run(" in cell.source or ".backward()" in cell.source
    assert retrained >= 2, "at least two exercises change the model and retrain it"


def test_every_question_has_prose_and_code():
    items = outline(read_notebook())
    starts = [i for i, item in enumerate(items) if item[0] == "question"]
    for start in starts:
        end = next((i for i in range(start + 1, len(items)) if items[i][0] in ("section", "question")), len(items))
        answer = {item[0] for item in items[start + 1 : end]}
        assert {"prose", "code"} <= answer, f"Q{items[start][1]} needs prose and a code cell"


def output_kinds(cell: nbformat.NotebookNode) -> list[str]:
    """What a code cell showed, in order, without the values: "stdout", "stderr", "image", "text"."""
    kinds = []
    for output in cell.outputs:
        if output.output_type == "stream":
            kind = output.name
        elif output.output_type in ("display_data", "execute_result"):
            kind = "image" if "image/png" in output.data else "text"
        else:
            kind = output.output_type
        if not kinds or kinds[-1] != kind:  # a stream may arrive in several chunks
            kinds.append(kind)
    return kinds


def draws(source: str) -> bool:
    """Whether a cell shows a figure itself (`plt.show()`, `display(Image(...))`), outside the
    functions it only defines. A cell with IPython magics is not Python: it draws nothing here."""
    try:
        module = ast.parse(source)
    except SyntaxError:
        return False
    top_level = [node for node in module.body if not isinstance(node, ast.FunctionDef | ast.ClassDef)]
    shown = "".join(ast.unparse(node) for node in top_level)
    return "plt.show()" in shown or "display(Image(" in shown


def code_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_a_record_run_says_which_cell_failed_and_leaves_the_notebook_alone(tmp_path, monkeypatch):
    """`execute.py --record` (how the notebook is run on a GPU): a raw result with each cell's time
    and printed text, the number of asserts, and the first failing cell with its error."""
    import json

    from attnmt.provenance import HASH, content_hash

    small = nbformat.v4.new_notebook()
    small.cells = [
        nbformat.v4.new_markdown_cell("# a small notebook"),
        nbformat.v4.new_code_cell("x = 1\nassert x == 1"),
        nbformat.v4.new_code_cell('print("hello")'),
        nbformat.v4.new_code_cell('assert x == 2, "broken"'),
        nbformat.v4.new_code_cell('print("never")'),
    ]
    source = tmp_path / "small.ipynb"
    nbformat.write(small, source)
    before = source.read_bytes()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["execute.py", "--record", "small.json"])
    path = tmp_path / "small.json"

    assert executor.record("cpu", path, None, timeout=60, source=source) == 1
    result = json.loads(path.read_text())
    assert source.read_bytes() == before, "the notebook itself is not rewritten"
    assert result["failure"] == {"code_cell": 3, "error": "AssertionError: broken"}
    assert (result["all_cells_ran"], result["code_cells"], result["code_cells_run"], result["asserts"]) == (
        False,
        4,
        2,
        2,
    )
    assert result["printed_by_code_cell"] == ["", "hello\n", "", ""]
    assert result["seconds_by_code_cell"][3] is None and all(s >= 0 for s in result["seconds_by_code_cell"][:2])
    assert result["device"] == "cpu" and result["machine"]["device"] == "cpu"
    assert result["command"] == "python notebooks/execute.py --record small.json"
    assert result[HASH] == content_hash(result)

    with pytest.raises(SystemExit) as refused:  # before running anything
        executor.main(["--record", str(tmp_path / "no-folder" / "r.json")])
    assert refused.value.code == 2

    small.cells[3].source = "assert x == 1"
    nbformat.write(small, source)
    assert executor.record("cpu", path, tmp_path / "ran.ipynb", timeout=60, source=source) == 0
    result = json.loads(path.read_text())
    assert (result["all_cells_ran"], result["failure"], result["code_cells_run"]) == (True, None, 4)
    assert nbformat.read(tmp_path / "ran.ipynb", as_version=4).cells[4].outputs[0]["text"] == "never\n"


def test_committed_with_its_outputs():
    """The committed notebook shows its results and figures on the repository's web page without
    being run: executed top to bottom in one go (`make notebook`), no errors, every figure there,
    no path of the machine it ran on, and small enough to read in a browser."""
    cells = code_cells(read_notebook())
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1)), "run `make notebook`"
    edited = [
        index + 1
        for index, cell in enumerate(cells)
        if cell.metadata.get("attnmt", {}).get("source_sha256") != executor.source_hash(cell.source)
    ]
    assert not edited, f"code cells {edited} were edited after the notebook was executed: run `make notebook`"
    load = read_notebook().metadata.get("attnmt", {}).get("load_average", {})
    assert set(load) == {"before", "after"}, "the load average while it ran, beside the timings it prints"
    texts = []
    for index, cell in enumerate(cells):
        kinds = output_kinds(cell)
        assert "error" not in kinds, f"code cell {index + 1} failed when the notebook was executed"
        if draws(cell.source):
            assert "image" in kinds, f"code cell {index + 1} draws a figure, but none was saved"
        texts += [output.get("text", "") for output in cell.outputs]
    assert sum("image/png" in output.get("data", {}) for cell in cells for output in cell.outputs) >= 15
    assert not MACHINE_PATH.search("".join(texts)), "an output shows a path of the machine that ran it"
    assert NOTEBOOK.stat().st_size < 2_000_000


@pytest.mark.notebook
@pytest.mark.skipif(
    not (SHARED_DATA / "tatoeba-eng-fra" / "fra.txt.gz").is_file(), reason="no local Tatoeba copy (set ATTNMT_DATA)"
)
def test_notebook_runs_from_an_installed_wheel_and_shows_what_is_committed(tmp_path):
    """Every cell runs without an error (its asserts included) with attnmt installed from a wheel
    outside the checkout, in a scratch folder, offline, and shows the same kinds of output as the
    committed notebook (printed text, figures), cell by cell: the numbers may differ between
    machines, the claims and pictures may not."""
    python = installed_from_wheel(tmp_path)
    where = subprocess.run([python, "-c", "import attnmt; print(attnmt.__file__)"], cwd=tmp_path, capture_output=True)
    assert Path(where.stdout.decode().strip()).is_relative_to(tmp_path / "venv"), "attnmt from the wheel"
    environment = {
        **os.environ,
        "ATTNMT_DATA": str(SHARED_DATA),
        "ATTNMT_CACHE": str(tmp_path / "cache"),  # never the user's cache, never the network
        "TMPDIR": str(tmp_path),  # the notebook's runs go to a temporary folder: this one
    }
    environment.pop("PYTHONPATH", None)
    record, executed = tmp_path / "record.json", tmp_path / "executed.ipynb"
    started = time.perf_counter()
    command = [python, NOTEBOOKS / "execute.py", "--device", "cpu", "--record", record, "--output", executed]
    command += ["--timeout", str(TIME_LIMIT_S)]
    ran = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    print(f"notebook executed in {elapsed:.0f} s from the wheel")
    result = json.loads(record.read_text(encoding="utf-8"))
    assert ran.returncode == 0 and result["all_cells_ran"], result["failure"] or ran.stderr[-2000:]
    assert elapsed < TIME_LIMIT_S
    notebook, committed = nbformat.read(executed, as_version=4), read_notebook()
    for index, (cell, saved) in enumerate(zip(code_cells(notebook), code_cells(committed), strict=True)):
        assert output_kinds(cell) == output_kinds(saved), f"code cell {index + 1}: outputs differ; run `make notebook`"
    assert study_tables(notebook) == study_tables(committed), "the study's figures changed; run `make notebook`"
    assert "device: cpu" in "".join(o.get("text", "") for cell in code_cells(notebook) for o in cell.outputs)


# Torch calls that make a tensor (or a random generator) on the default device unless told where.
TENSOR_FACTORIES = {
    "tensor", "as_tensor", "arange", "zeros", "ones", "full", "empty", "eye", "linspace",
    "rand", "randn", "randint", "randperm", "Generator",
}  # fmt: skip
# What the notebook builds that holds weights or takes tensors: each goes to DEVICE as it is made.
MODULE_BUILDERS = {
    "build_model", "Encoder", "AdditiveAttention", "DotAttention", "GeneralAttention", "NoAttention",
    "ReadableEncoder", "ReadableDecoder", "ReadableSeq2Seq", "collate",
}  # fmt: skip
DEVICE_VARIABLE = "ATTNMT_NOTEBOOK_DEVICE"


def _called_name(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


def _moved_to_device(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether `call` is the receiver of `.to(DEVICE)`: `build_model(...).to(DEVICE)`."""
    attribute = parents.get(call)
    outer = parents.get(attribute)
    return (
        isinstance(attribute, ast.Attribute)
        and attribute.attr == "to"
        and isinstance(outer, ast.Call)
        and [ast.unparse(arg) for arg in outer.args] == ["DEVICE"]
    )


def device_problems(source: str) -> list[str]:
    """Where a code cell would put a tensor or a model somewhere else than DEVICE: a tensor made
    without `device=`, a model or batch built and not moved with `.to(DEVICE)`, `.numpy()` on a
    tensor that may be on a GPU, or a device named in the code. Class bodies are left out: a
    module's layers go wherever the module is moved."""
    try:
        module = ast.parse(source)
    except SyntaxError:  # IPython magics: no Python to check
        return []
    parents = {child: node for node in ast.walk(module) for child in ast.iter_child_nodes(node)}
    in_class = {node for cls in ast.walk(module) if isinstance(cls, ast.ClassDef) for node in ast.walk(cls)}
    problems = []
    for node in ast.walk(module):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.match(r"(cuda|mps)\b", node.value):
            problems.append(f"names a device: {node.value!r}")
        if not isinstance(node, ast.Call) or node in in_class:
            continue
        line = ast.unparse(node)[:80]
        func = node.func
        is_torch = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch"
        if is_torch and func.attr in TENSOR_FACTORIES and "device" not in {k.arg for k in node.keywords}:
            problems.append(f"a tensor on the default device: {line}")
        if isinstance(func, ast.Attribute) and func.attr in ("cuda", "mps"):
            problems.append(f"moves to a device of its own: {line}")
        on_cpu = isinstance(func, ast.Attribute) and ast.unparse(func.value).endswith(".cpu()")
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and not on_cpu:
            problems.append(f".numpy() of a tensor that may be on the GPU (use .cpu().numpy()): {line}")
        if _called_name(node) in MODULE_BUILDERS and not _moved_to_device(node, parents):
            problems.append(f"built and not moved to DEVICE: {line}")
        loads = isinstance(func, ast.Attribute) and func.attr == "from_checkpoint"
        if loads and "device=DEVICE" not in [ast.unparse(k) for k in node.keywords]:
            problems.append(f"loaded without device=DEVICE: {line}")
    return problems


def test_the_device_is_chosen_once_and_everything_is_put_on_it():
    """One `DEVICE`, chosen once from $ATTNMT_NOTEBOOK_DEVICE (default auto: cuda or cpu; mps when named),
    and no cell that makes a tensor or a model anywhere else, so the notebook that runs on the
    CPU in the tests runs the same on a GPU."""
    sources = [cell.source for cell in code_cells(read_notebook())]
    choices = [source for source in sources if "choose_device(" in source]
    assert len(choices) == 1 and sum(source.count("choose_device(") for source in sources) == 1
    assert f'DEVICE = choose_device(os.environ.get("{DEVICE_VARIABLE}", "auto"), auto_mps=False)' in choices[0]
    # float32 in full on a GPU: cuDNN's RNNs default to TF32, which the checks' tolerances do not allow
    assert "torch.backends.cudnn.allow_tf32 = False" in choices[0]
    assert "torch.backends.cuda.matmul.allow_tf32 = False" in choices[0]
    assert "train.device={DEVICE}" in "".join(sources), "the runs the notebook trains use DEVICE too"
    problems = [f"code cell {n + 1}: {problem}" for n, text in enumerate(sources) for problem in device_problems(text)]
    assert problems == []


def test_the_device_check_finds_what_would_break_on_a_gpu():
    """Guards the guard: each kind of mistake that fails with a GPU and passes on the CPU is found."""
    assert device_problems("x = torch.arange(5, device=DEVICE)\nm = build_model(c, 3, 4).to(DEVICE)") == []
    for mistake in (
        "x = torch.tensor([1, 2])",
        "g = torch.Generator().manual_seed(0)",
        "m = build_model(c, 3, 4)",
        "b = collate(indices, src, tgt)",
        "m = build_model(c, 3, 4).cuda()",
        "m = model.to('cuda')",
        "w = weights[0].numpy()",
        "t = Translator.from_checkpoint(run)",
    ):
        assert device_problems(mistake), mistake
    assert device_problems("class M(nn.Module):\n    def __init__(self):\n        self.x = torch.zeros(3)") == []


# A study table the notebook prints above the figure it draws from the same numbers, and the
# docs/experiments.md table it must equal: "the study's teacher_forcing experiment" is the page's
# `experiments-teacher_forcing`, "...: validation BLEU by step" its `experiments-...-steps`.
STUDY_TITLE = re.compile(r"^the study's (\w+) experiment(: validation BLEU by step)?$")
PAGE_MARKER = re.compile(r"^<!-- results: (\S+) (\S+) -->$")


def study_tables(notebook: nbformat.NotebookNode) -> dict[str, tuple[list[str], list[list[str]]]]:
    """The study tables a notebook's outputs show, by the name of the page's table they stand for:
    (header, rows), each a list of cells. Each must be followed, in its cell, by the figure."""
    tables = {}
    for index, cell in enumerate(code_cells(notebook)):
        lines = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream").splitlines()
        for number, line in enumerate(lines):
            if title := STUDY_TITLE.match(line):
                rows = list(itertools.takewhile(lambda text: " | " in text, lines[number + 1 :]))
                cells = [[cell.strip() for cell in row.split(" | ")] for row in rows]
                name = f"experiments-{title[1]}" + ("-steps" if title[2] else "")
                tables[name] = (cells[0], cells[1:])
                assert "image" in output_kinds(cell)[1:], f"code cell {index + 1}: no figure after {name}"
    return tables


def page_tables() -> dict[str, tuple[str, list[str], list[list[str]]]]:
    """docs/experiments.md's quoted tables: name -> (results file, header, rows)."""
    lines = EXPERIMENTS_PAGE.read_text(encoding="utf-8").splitlines()
    tables = {}
    for number, line in enumerate(lines):
        if marker := PAGE_MARKER.match(line.strip()):
            rows = list(itertools.takewhile(lambda text: text.startswith("|"), lines[number + 1 :]))
            cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not row.startswith("|---")]
            tables[marker[2]] = (marker[1], cells[0], cells[1:])
    return tables


def test_the_study_figures_show_the_numbers_of_docs_experiments():
    """Q31-Q34 draw the study's figures from the raw results docs/experiments.md quotes, and print
    what they plot: the committed notebook's numbers are the page's, row for row, so a notebook
    saved before the study was last run (or a page left behind) fails here."""
    notebook = read_notebook()
    shown, page = study_tables(notebook), page_tables()
    assert set(shown) == {
        "experiments-learning_rate-steps",
        "experiments-hidden_size-steps",
        "experiments-teacher_forcing",
        "experiments-attention",
    }
    for name, (header, rows) in shown.items():
        results_file, page_header, page_rows = page[name]
        # the notebook reads the copy that ships in the package: the page's raw results, byte for byte
        assert '"notebook-questions.json"' in "".join(cell.source for cell in code_cells(notebook))
        assert PACKAGED_STUDY.read_bytes() == (NOTEBOOKS.parent / results_file).read_bytes(), "the shipped copy"
        columns = [page_header.index(column) for column in header[1:]]  # "test BLEU", or a step: "1,200"
        assert rows == [[row[0], *(row[k] for k in columns)] for row in page_rows], f"{name} differs from the page"
