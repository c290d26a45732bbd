"""The figures in README.md, docs/ and CHANGELOG.md are the ones in the committed raw results.

Every block quoted after a `<!-- results: FILE TABLE -->` marker must be exactly, and only, what
the benchmark's report renders from FILE, and every figure followed by a `<!-- figure: ... -->`
comment what its expression gives (`tools.quote`); every file a document links exists, and every
results file it links says how it was made (command, machine).
"""

import functools
import json
import re
import subprocess

import pytest
import torch

import attnmt
from attnmt.provenance import content_hash, with_content_hash
from benchmarks.measure import write_results
from tools import docs_site
from tools.figures import render_figure
from tools.quote import END_MARKER, FIGURE, MARKER, RENDERERS, ROOT, main, render, requote
from tools.raw_results import (
    LEGACY,
    MOVED,
    PACE_FROM,
    RULES_FROM,
    annotation_problems,
    hash_problems,
    is_history,
    legacy_share,
    pace_missing,
    provenance_problems,
    raw_files,
)

DOCUMENTS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
# The pages whose legacy share is held under SHARE_LIMIT (history pages among them are left out).
SHARED_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHARE_LIMIT = 0.15
LINK = re.compile(r"\]\(([^)\s]+)\)")
RESULTS = ("benchmarks/results/", "docs/results/")


def _markers():
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines()):
            match = MARKER.fullmatch(line.strip())
            if match:
                yield pytest.param(document, number, match[1], match[2], id=f"{document.name}:{number + 1}")


def _figures():
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines()):
            for match in FIGURE.finditer(line):
                yield pytest.param(document, number, match, id=f"{document.name}:{number + 1}:{match[2]}")


def _prose_lines(document):
    """(number, line) of a document outside its fenced code blocks, where links are links."""
    fenced = False
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines()):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def _links():
    for document in DOCUMENTS:
        for number, line in _prose_lines(document):
            for target in LINK.findall(line):
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: leave the repository
                    yield pytest.param(document, number, target, id=f"{document.name}:{number + 1}:{target}")


def _block(lines, start):
    """The lines of the block quoted after a marker at `start - 1`: up to a blank line, the end marker or the end."""
    end = start
    while end < len(lines) and lines[end].strip() not in ("", END_MARKER):
        end += 1
    return lines[start:end]


@pytest.mark.parametrize(("document", "line", "path", "table"), list(_markers()))
def test_a_quoted_block_is_the_table_its_results_file_renders_and_nothing_more(document, line, path, table):
    text = document.read_text(encoding="utf-8")
    quoted = _block(text.splitlines(), line + 1)
    rendered = render(path, table, history=is_history(text))
    assert quoted == rendered, f"{document.name}:{line + 2}: differs from {path}; run python -m tools.quote"


@pytest.mark.parametrize(("document", "line", "match"), list(_figures()))
def test_a_figure_in_prose_is_the_one_its_results_file_gives(document, line, match):
    text = document.read_text(encoding="utf-8")
    written = text.splitlines()[line][: match.start()]
    figure = render_figure(match[1], match[2], match[3], history=is_history(text))
    assert written.endswith(figure), f"{document.name}:{line + 1}: {match[2]} gives {figure}; run python -m tools.quote"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda document: document.name)
def test_a_document_is_what_python_m_tools_quote_check_accepts(document):
    """The whole check of `python -m tools.quote --check`, figure signs and block ends included."""
    text = document.read_text(encoding="utf-8")
    quoted = requote(text, document.name)
    pairs = enumerate(zip(text.splitlines(), quoted.splitlines(), strict=False))
    differing = [f"{number + 1}: {line}" for number, (line, fresh) in pairs if line != fresh]
    assert quoted == text, f"{document.name} differs from its results at {differing[:5]}; run python -m tools.quote"


# A figure as a measurement gives it: two or more decimals, or a ratio or share (`1.4x`, `12%`). A
# setting (`dropout 0.3`), a count or a version (`2.13.0`) does not look like one.
RESULT_LIKE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d{2,}|(?:\.\d+)?(?:x|%))(?![\w.]?\d|\w)")
ACCOUNTED = re.compile(r"\S*<!-- (?:figure|not a result): .*? -->")  # a figure with its comment, whole


def _unquoted_figures(line):
    """The result-like figures of a prose line that have neither a figure comment nor a `<!-- not a
    result: why -->` one after them: in code, link targets and other comments nothing is a figure."""
    line = ACCOUNTED.sub(" ", line)
    line = re.sub(r"<!--.*?-->|`[^`]*`|\]\([^)]*\)|https?://\S+", " ", line)
    return RESULT_LIKE.findall(line)


def _prose_outside_quotes(document):
    """(number, line) of a document's prose: outside code blocks and the blocks quoted under markers."""
    lines = document.read_text(encoding="utf-8").splitlines()
    quoted = set()
    for number, line in enumerate(lines):
        if MARKER.fullmatch(line.strip()):
            quoted.update(range(number + 1, number + 1 + len(_block(lines, number + 1))))
    return [(number, line) for number, line in _prose_lines(document) if number not in quoted]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda document: document.name)
def test_every_figure_in_prose_is_quoted_from_a_result_or_says_why_not(document):
    """A measured figure typed by hand would not fail when its result changes, nor when it is edited:
    each one carries its figure comment, or a `<!-- not a result: published -->`-style reason."""
    lines = _prose_outside_quotes(document)
    bare = [f"{number + 1}: {figure}" for number, line in lines for figure in _unquoted_figures(line)]
    assert not bare, f"{document.name}: figures with no figure comment at {bare}"


def test_the_figure_lint_sees_a_hand_typed_figure_and_nothing_else():
    typed = "trains 1.4x as fast, 12% of outputs, BLEU 39.32 (and 2.13.0, lr 0.3)"
    assert _unquoted_figures(typed) == ["1.4x", "12%", "39.32"]
    quoted = "trains 1.4x<!-- figure: a.json b {:.1f}x --> as fast; 28.77<!-- not a result: published -->"
    assert _unquoted_figures(quoted) == []
    assert _unquoted_figures("`lr 3.25` and [a link](x/1.25x.md) <!-- 2.50 -->") == []


def _anchors(document):
    """The anchors GitHub gives a document's headings: lowercased, punctuation dropped, spaces to hyphens."""
    headings = (line.lstrip("#").strip() for _, line in _prose_lines(document) if line.startswith("#"))
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize(("document", "line", "target"), list(_links()))
def test_a_link_to_the_repository_resolves(document, line, target):
    path, _, anchor = target.partition("#")
    file = (document.parent / path).resolve() if path else document
    where = f"{document.name}:{line + 1}"
    if file.is_relative_to(ROOT / "docs") and file.relative_to(ROOT / "docs").as_posix() in docs_site.GENERATED:
        assert not anchor and not file.exists(), f"{where}: a page the site generates: no file, no anchor"
        return
    assert file.is_relative_to(ROOT) and file.exists(), f"{where} links {target}, which is not in the repository"
    if anchor and file.suffix == ".md":
        assert anchor in _anchors(file), f"{where} links {target}: {file.name} has no heading with that anchor"
    if file.suffix == ".json" and file.relative_to(ROOT).as_posix().startswith(RESULTS):
        results = json.loads(file.read_text(encoding="utf-8"))
        assert results.get("command"), f"{where}: {path}: no command"
        assert results.get("machine", {}).get("cpu"), f"{where}: {path}: no machine"


def test_the_documents_quote_results():
    """Guards the guard: a renamed or mistyped marker or comment would silently skip the checks above. The
    README quotes figures (its tables live in the docs); the docs quote both."""
    tables = {document.name for document, *_ in (param.values for param in _markers())}
    assert tables >= {"results.md", "performance.md"}
    figures = {document.name for document, *_ in (param.values for param in _figures())}
    assert figures >= {"README.md", "performance.md", "serving.md"}
    assert any(target.startswith("results/") for _, _, target in (param.values for param in _links()))


def test_requote_replaces_a_stale_table_and_keeps_the_rest(tmp_path):
    marker = "<!-- results: benchmarks/results/peers-speed.json peers-speed -->"
    stale = f"# Title\n\n{marker}\n| old | table |\n|---|---|\n| 1 | 2 |\n\nAfter.\n"
    fresh = requote(stale)
    assert fresh == f"# Title\n\n{marker}\n" + "\n".join(render(*marker.split()[2:4])) + "\n\nAfter.\n"
    assert requote(fresh) == fresh


def test_a_row_added_under_a_quoted_table_is_a_difference(tmp_path):
    marker = "<!-- results: benchmarks/results/peers-speed.json peers-speed -->"
    table = "\n".join(render(*marker.split()[2:4]))
    document = tmp_path / "doc.md"
    for after in ("\n", f"\n{END_MARKER}\n", "\n\nAfter.\n"):
        document.write_text(f"{marker}\n{table}{after}", encoding="utf-8")
        assert main(["--check", str(document)]) == 0
    padded = f"{marker}\n{table}\n| made-up | row |\n\nAfter.\n"
    assert _block(padded.splitlines(), 1) != render(*marker.split()[2:4])
    document.write_text(padded, encoding="utf-8")
    assert main(["--check", str(document)]) == 1
    text_line = 2 + len(table.splitlines())  # the marker's, the table's, then the text's
    with pytest.raises(ValueError, match=rf"doc.md:{text_line}: a quoted block ends with a blank line"):
        requote(f"{marker}\n{table}\nText right under the table.\n", "doc.md")


def test_a_table_quoted_from_a_file_without_its_fields_is_one_clear_line():
    marker = "<!-- results: docs/results/serving.json peers-equal-updates -->"
    message = r"doc.md:3: docs/results/serving.json: the table 'peers-equal-updates' reads a field this file lacks"
    with pytest.raises(ValueError, match=message + r" \(KeyError\('systems'\)\)"):
        requote(f"Text.\n\n{marker}\n| old |\n\nAfter.\n", "doc.md")


SERVING = "docs/results/serving.json"
KERNELS = "benchmarks/results/kernels-cpu.json"


def _serving():
    return {(c["clients"], c["batching"]): c for c in json.loads((ROOT / SERVING).read_text())["configurations"]}


def test_a_figure_is_computed_from_the_raw_values_with_the_prose_rounding():
    one, dynamic = _serving()[(1, False)], _serving()[(32, True)]
    ratio = "configurations[clients=32,batching=true].sentences_per_s / configurations[0].sentences_per_s"
    assert render_figure(SERVING, ratio, "{:.2f}x") == f"{dynamic['sentences_per_s'] / one['sentences_per_s']:.2f}x"
    assert render_figure(SERVING, "configurations[2].p99_ms", "{:,.0f}") == f"{_serving()[(8, True)]['p99_ms']:,.0f}"
    difference = "configurations[clients=1,batching=false].p99_ms - configurations[clients=8,batching=true].p99_ms"
    assert render_figure(SERVING, difference, "{:+.1f}").startswith("-")
    assert render_figure(SERVING, "max(settings.repeats, 2) * 2", "{}") == str(max(3, 2) * 2)
    assert render_figure(SERVING, "model.training['valid_metric']", "{}") == "bleu"
    assert render_figure(SERVING, "sd(1, 2, 3) + mean(2, 4)", "{:.1f}") == "4.0"  # the sample deviation
    assert render_figure(SERVING, "median(5, 1, 3) + median(1, 2, 4, 8)", "{:.1f}") == "6.0"  # 3 + (2 + 4) / 2


def test_a_figure_from_two_results_files_names_each_by_its_stem():
    kernels = json.loads((ROOT / KERNELS).read_text())
    both = f"{SERVING},{KERNELS}"
    expected = _serving()[(8, True)]["p99_ms"] / kernels["batch"]
    assert render_figure(both, "serving.configurations[2].p99_ms / kernels-cpu.batch", "{:.3f}") == f"{expected:.3f}"
    with pytest.raises(ValueError, match="no configurations there"):
        render_figure(both, "configurations[2].p99_ms", "{}")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("configurations[clients=3].p99_ms", "matches 0 items"),
        ("configurations[batching=true].p99_ms", "matches 2 items"),
        ("model.nothing", "no nothing there"),
        ("configurations[9].p99_ms", r"no \[9\] there"),
        ("settings.repeats ** 2", "only"),
        ("settings.repeats.real", "no real there"),
        ("settings.repeats +", "not an expression"),
    ],
)
def test_a_figure_that_cannot_be_computed_is_a_clear_error(expression, message):
    with pytest.raises(ValueError, match=message):
        render_figure(SERVING, expression, "{}")


def test_requote_rewrites_a_stale_figure_and_check_fails_on_it(tmp_path):
    p99 = f"{_serving()[(8, True)]['p99_ms']:.0f}"
    comment = f"<!-- figure: {SERVING} configurations[clients=8,batching=true].p99_ms {{:.0f}} -->"
    line = f"a p99 of {p99}{comment} ms at 8 clients (and 1.2-{p99}{comment} ms)\n"
    document = tmp_path / "doc.md"
    document.write_text(line, encoding="utf-8")
    assert main(["--check", str(document)]) == 0
    for stale in ("156", "1,256", "25.6", "2566", f"-{p99}", f"+{p99}"):
        document.write_text(line.replace(f"{p99}{comment} ms at", f"{stale}{comment} ms at"), encoding="utf-8")
        assert main(["--check", str(document)]) == 1, stale
        assert main([str(document)]) == 0 and document.read_text(encoding="utf-8") == line
    with pytest.raises(ValueError, match=r"doc.md:1: no figure like '\{:.0f\}'"):
        requote(f"a p99 of {p99} {comment}", "doc.md")


def test_the_experiments_page_quotes_its_tables():
    """docs/experiments.md keeps its tables under markers, so the study's figures cannot drift."""
    quoted = {
        table for document, _, _, table in (param.values for param in _markers()) if document.name == "experiments.md"
    }
    assert {"experiments-attention", "experiments-attention-steps", "experiments-attention-length"} <= quoted
    assert "experiments-trials" in quoted


def test_an_experiment_table_gives_mean_and_sample_deviation_over_seeds():
    def trial(name, bleu):
        validation = [{"step": 300, "valid_bleu": bleu / 2, "valid_loss": 2.0}]
        return {
            "name": name,
            "parameters": 2_560_000,
            "valid_bleu": bleu,
            "test_bleu": bleu - 1,
            "valid_loss": 1.5,
            "train_loss_end": 1.4,
            "validation": validation,
        }

    results = {
        "base": "base",
        "experiments": {
            "rnn": {"points": [{"label": "gru", "trials": ["base", "b2"]}, {"label": "lstm", "trials": ["l"]}]}
        },
        "trials": [trial("base", 40.0), trial("b2", 42.0), trial("l", 35.0)],
    }
    assert RENDERERS["experiments-rnn"](results)[2:] == [
        "| gru (base) | 41.00 ± 1.41 | 40.00 ± 1.41 | 1.50 ± 0.00 | 1.40 ± 0.00 | 2.56M |",
        "| lstm | 35.00 | 34.00 | 1.50 | 1.40 | 2.56M |",
    ]
    assert RENDERERS["experiments-rnn-steps"](results)[2:] == ["| gru (base) | 20.50 |", "| lstm | 17.50 |"]


def test_a_raw_result_records_the_code_that_made_it(tmp_path):
    """attnmt's version, the git commit and whether the tree differed from it, and torch's version."""
    results = json.loads(write_results(tmp_path / "r.json", {"x": 1}, "benchmarks.x", ["--y"]).read_text())
    assert results["command"] == "python -m benchmarks.x --y" and results["x"] == 1
    assert (results["attnmt_version"], results["torch"]) == (attnmt.__version__, torch.__version__)
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    assert results["git_commit"] == head.stdout.strip()
    assert results["git_dirty"] is bool(status.stdout.strip())


def test_a_raw_result_records_its_code_at_start_and_end_and_a_hash_of_its_content(tmp_path, monkeypatch):
    from benchmarks import measure

    written = json.loads(write_results(tmp_path / "r.json", {"x": 1}, "benchmarks.x", []).read_text())
    assert written["code_at_start"]["commit"] == written["code_at_end"]["commit"] == written["git_commit"]
    assert written["content_sha256"] == content_hash(written)
    if not written["git_dirty"]:  # run from a clean checkout here: quotable as written
        assert provenance_problems(written) == []
    # a commit made while the run ran shows, and the result then counts as dirty
    earlier = {**measure.CODE_AT_START, "commit": "0" * 40}
    monkeypatch.setattr(measure, "CODE_AT_START", earlier)
    changed = json.loads(write_results(tmp_path / "c.json", {"x": 1}, "benchmarks.x", []).read_text())
    assert changed["code_changed"] is True and changed["git_dirty"] is True and changed["git_commit"] == "0" * 40


CLEAN = {"commit": "a" * 40, "dirty": False, "dirty_paths": [], "load_average": 0.1}


def _raw(**fields):
    return with_content_hash(
        {
            "command": "python -m benchmarks.x",
            "git_commit": "a" * 40,
            "git_dirty": False,
            "dirty_paths": [],
            "code_at_start": CLEAN,
            "code_at_end": CLEAN,
            **fields,
        }
    )


def test_a_raw_result_is_quotable_only_from_known_unedited_code_and_unedited_content():
    assert provenance_problems(_raw(figure=1.5)) == []
    docs_only = {**CLEAN, "dirty": True, "dirty_paths": ["README.md", "docs/results/plot.png"]}
    assert provenance_problems(_raw(code_at_end=docs_only)) == []  # a document or plot changes no measurement
    own_results = {**CLEAN, "dirty": True, "dirty_paths": ["benchmarks/results/peers-stopping.json"]}
    assert provenance_problems(_raw(code_at_end=own_results)) == []  # the results file the run writes as it goes
    edited = {**CLEAN, "dirty": True, "dirty_paths": ["attnmt/train.py"]}
    assert provenance_problems(_raw(code_at_end=edited)) == ["code_at_end: dirty in attnmt/train.py"]
    assert provenance_problems(_raw(git_commit=None)) == ["no commit recorded"]
    assert provenance_problems(_raw(git_dirty=True, dirty_paths=None)) == ["dirty, its paths not recorded"]
    by_hand = {**_raw(figure=1.5), "figure": 1.6}
    assert provenance_problems(by_hand) == ["content differs from its hash (edited after it was written?)"]
    trials = [
        {"name": "t", "state": "complete", "code_at_start": CLEAN, "code_at_end": edited},
        {"name": "u", "state": "x"},
    ]
    assert provenance_problems(_raw(trials=trials)) == [
        "trials[0].code_at_end: dirty in attnmt/train.py",
        "trials[1]: trained with no record of its code",
    ]
    entries = [  # a table's rows: each its evaluation's code and the code that trained the weights
        {"name": "a", "code_at_start": CLEAN, "code_at_end": CLEAN, "training": {"step": 9, "code": edited}},
        {"name": "b", "code_at_start": {**CLEAN, "commit": None}, "code_at_end": CLEAN, "training": {}},
    ]
    assert provenance_problems(_raw(entries=entries)) == [
        "entries[0].training.code: dirty in attnmt/train.py",
        "entries[1].code_at_start: no commit recorded",
    ]


# Two commits of this repository: the first pair's diff edits attnmt/, the second's only the README.
CODE_CHANGED = ("91eda89638e0916b18fd51be9419b5ef20f0c586", "35cdfa8daac3e974825286424f6dc0b6a05ecbfe")
DOCS_CHANGED = ("9ab5e2abecd9ccc25b502b725d8343271eac8129", "be6847be639c9cbe24235ca35062c1f9f08a5942")


def _commits_known(*commits):
    git = ["git", "-C", str(ROOT), "cat-file", "-e"]
    return all(
        subprocess.run([*git, f"{commit}^{{commit}}"], capture_output=True).returncode == 0 for commit in commits
    )


def test_a_run_whose_commit_changed_in_code_while_it_ran_is_refused():
    if not _commits_known(*CODE_CHANGED, *DOCS_CHANGED):
        pytest.skip("the history these commits are in is not in this checkout")

    def run(commits, start="code_at_start", end="code_at_end"):
        return {start: {**CLEAN, "commit": commits[0]}, end: {**CLEAN, "commit": commits[1]}}

    assert provenance_problems(_raw(**run(DOCS_CHANGED))) == []  # a commit of documents changes nothing measured
    (problem,) = provenance_problems(_raw(**run(CODE_CHANGED)))
    assert problem.startswith(
        "code_at_start to code_at_end: its commit changed while it ran (91eda89638 to 35cdfa8daa)"
    )
    assert "attnmt/" in problem
    runs = [{"seed": 1, "updates": 10, **run(DOCS_CHANGED, "provenance_at_start", "provenance")}]
    runs.append({"seed": 2, "updates": 10, **run(CODE_CHANGED, "provenance_at_start", "provenance")})
    (problem,) = provenance_problems(_raw(systems={"attnmt": {"runs": runs}}))
    assert problem.startswith("systems.attnmt.runs[1].provenance_at_start to provenance: its commit changed")
    unknown = run((CODE_CHANGED[0], "f" * 40))
    assert provenance_problems(_raw(**unknown)) == [
        f"code_at_start to code_at_end: its commit changed while it ran, and git does not know {'f' * 40}"
    ]


def test_each_run_of_a_multi_run_file_is_held_to_the_rules_by_its_json_path():
    provenance = {"git_commit": "a" * 40, "git_dirty": False, "dirty_paths": []}
    edited = {**provenance, "git_dirty": True, "dirty_paths": ["benchmarks/peers/train.py"]}
    runs = [{"seed": 1, "updates": 9, "provenance_at_start": provenance, "provenance": provenance}]
    assert provenance_problems(_raw(systems={"attnmt": {"runs": runs}})) == []
    runs.append({"seed": 2, "updates": 9, "provenance_at_start": provenance, "provenance": edited})
    runs.append({"seed": 3, "updates": 9, "provenance": {**provenance, "git_commit": None}})
    assert provenance_problems(_raw(systems={"attnmt": {"runs": runs}})) == [
        "systems.attnmt.runs[1].provenance: dirty in benchmarks/peers/train.py",
        "systems.attnmt.runs[2].provenance: no commit recorded",
    ]


def test_a_training_or_distillation_recorded_without_its_code_is_refused():
    trained = {"run": "teacher-s1", "steps": 7000, "best": {"checkpoint": "step-0006500"}}
    distillation = {"teachers": ["teacher-s1/step-0006500"], "lines": 10}
    assert provenance_problems(_raw(runs=[trained], distillation=distillation)) == [
        "runs[0]: trained with no record of its code",
        "distillation: no record of the code that distilled it",
    ]
    recorded = _raw(runs=[{**trained, "code_at_start": CLEAN}], distillation={**distillation, "code": CLEAN})
    assert provenance_problems(recorded) == []
    row = {"name": "a", "code_at_start": CLEAN, "code_at_end": CLEAN, "training": {"step": 4400, "code": None}}
    assert provenance_problems(_raw(entries=[row])) == ["entries[0].training: no record of the code that trained it"]
    assert provenance_problems(_raw(entries=[{**row, "training": {"step": 4400, "code": CLEAN}}])) == []


def test_an_averaged_checkpoint_takes_its_code_from_its_run_scored_beside_it():
    """RUN/checkpoints/averaged, scored in the same file as RUN over the same updates, was trained by
    RUN's code; without RUN's row, or with another run length, it is refused like any training."""
    evaluated = {"code_at_start": CLEAN, "code_at_end": CLEAN}
    single = {**evaluated, "name": "s1", "checkpoint": "s1/checkpoints/step-0004400"}
    single["training"] = {"step": 4400, "run_steps": 4400, "code": CLEAN}
    averaged = {**evaluated, "name": "s1/checkpoints/averaged", "checkpoint": "s1/checkpoints/averaged"}
    averaged["training"] = {"step": 4400, "run_steps": 4400, "code": None}
    refused = ["entries[0].training: no record of the code that trained it"]
    assert provenance_problems(_raw(entries=[single, averaged])) == []
    assert provenance_problems(_raw(entries=[averaged])) == refused
    longer = {**single, "training": {**single["training"], "run_steps": 7000}}
    assert provenance_problems(_raw(entries=[averaged, longer])) == refused


def test_annotations_are_dated_notes():
    dated = [{"at": "2026-12-05T14:08:18+00:00", "note": "seed 3 ran alone"}]
    assert provenance_problems({**_raw(figure=1.5), "annotations": dated}) == []  # outside the content hash
    assert provenance_problems({**_raw(figure=1.5), "annotations": ["a note made later"]}) == [
        'annotations[0]: not a note with its time; each note is {"at": an ISO-8601 date-time with its zone, '
        '"note": its text}'
    ]
    assert annotation_problems([{"at": "2026-12-05T14:08:18", "note": "x"}]) == [
        "annotations[0].at: '2026-12-05T14:08:18' is not an ISO-8601 date-time with its zone"
    ]
    assert annotation_problems([{"at": "yesterday", "note": "x"}]) != []
    assert annotation_problems("a note") != []


def _results_root(tmp_path, monkeypatch):
    import tools.figures
    import tools.quote
    import tools.raw_results

    for module in (tools.figures, tools.quote, tools.raw_results):
        monkeypatch.setattr(module, "ROOT", tmp_path)
    (tmp_path / "docs" / "results").mkdir(parents=True)
    return tmp_path


def test_a_figure_from_a_raw_result_of_edited_code_is_refused(tmp_path, monkeypatch):
    root = _results_root(tmp_path, monkeypatch)
    edited = {**CLEAN, "dirty": True, "dirty_paths": ["benchmarks/speed.py"]}
    (root / "docs/results/ok.json").write_text(json.dumps(_raw(figure=2.5)))
    (root / "docs/results/bad.json").write_text(json.dumps(_raw(figure=2.5, code_at_start=edited)))
    assert render_figure("docs/results/ok.json", "figure", "{:.1f}") == "2.5"
    with pytest.raises(ValueError, match=r"bad.json: not quotable: code_at_start: dirty in benchmarks/speed\.py"):
        render_figure("docs/results/bad.json", "figure", "{:.1f}")


def test_a_history_page_may_quote_a_refused_result_but_never_an_edited_one(tmp_path, monkeypatch):
    import tools.raw_results

    root = _results_root(tmp_path, monkeypatch)
    edited = {**CLEAN, "dirty": True, "dirty_paths": ["attnmt/train.py"]}
    (root / "docs/results/old.json").write_text(json.dumps(_raw(figure=2.5, code_at_end=edited)))
    (root / "docs/results/by-hand.json").write_text(json.dumps({**_raw(figure=2.5), "figure": 3.5}))
    (root / "docs/results/legacy.json").write_text(json.dumps({"figure": 4.5}))
    monkeypatch.setitem(tools.raw_results.LEGACY, "docs/results/legacy.json", "no commit recorded; no content hash")
    history = "<!-- history: figures from runs made before the rules. -->\n"
    page = "a figure of 2.5<!-- figure: docs/results/old.json figure {:.1f} -->"
    page += " and 4.5<!-- figure: docs/results/legacy.json figure {:.1f} -->\n"
    assert is_history(history + page) and not is_history(page) and not is_history("text\n" + history)
    assert requote(history + page, "old.md") == history + page
    with pytest.raises(ValueError, match=r"old.md:1: .*old.json: not quotable: code_at_end: dirty in attnmt/train.py"):
        requote(page, "old.md")
    by_hand = history + "a figure of 3.5<!-- figure: docs/results/by-hand.json figure {:.1f} -->\n"
    with pytest.raises(ValueError, match=r"by-hand.json: not quotable even on a history page: content differs"):
        requote(by_hand, "old.md")


def test_the_legacy_share_counts_each_quote_from_a_legacy_or_refused_file_outside_history_pages(tmp_path, monkeypatch):
    import tools.raw_results

    root = _results_root(tmp_path, monkeypatch)
    (root / "docs/results/ok.json").write_text(json.dumps(_raw(figure=2.5)))
    (root / "docs/results/old.json").write_text(json.dumps(_raw(figure=2.5, git_commit=None)))
    monkeypatch.setitem(tools.raw_results.LEGACY, "docs/results/legacy.json", "no content hash")
    figure = "2.5<!-- figure: {} figure {{:.1f}} -->"
    sources = ("ok.json", "old.json", "legacy.json", "ok.json,docs/results/legacy.json")
    page = " ".join(figure.format(f"docs/results/{files}") for files in sources)
    table = "<!-- results: docs/results/old.json peers-speed -->\n| a |\n"
    (root / "page.md").write_text(f"{page}\n\n{table}")
    (root / "history.md").write_text(f"<!-- history: older runs. -->\n{page}\n")
    assert legacy_share([root / "page.md", root / "history.md"]) == {str(root / "page.md"): (4, 5)}
    assert main(["--share", str(root / "page.md"), str(root / "history.md")]) == 0


def test_the_legacy_share_of_the_readme_and_docs_is_under_its_limit(capsys):
    """Figures from LEGACY or refused files belong on history pages; elsewhere they are a small share."""
    share = legacy_share(SHARED_PAGES)
    legacy, total = sum(count for count, _ in share.values()), sum(quotes for _, quotes in share.values())
    worst = sorted(((count, page.removeprefix(f"{ROOT}/")) for page, (count, _) in share.items() if count))[::-1][:5]
    assert legacy <= SHARE_LIMIT * total, f"legacy share {legacy} of {total} is over {SHARE_LIMIT:.0%}: {worst}"


@functools.cache
def _quoted_outside_history_pages():
    """The results files quoted by a page that is not a history page."""
    quoted = set()
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        if not is_history(text):
            quoted |= {match[1] for match in MARKER.finditer(text)}
            quoted |= {file for match in FIGURE.finditer(text) for file in match[1].split(",")}
    return quoted


@pytest.mark.parametrize("path", [p.relative_to(ROOT).as_posix() for p in raw_files()])
def test_every_raw_result_passes_the_rules_or_is_legacy_or_quoted_only_on_history_pages(path):
    """A file the rules refuse may stay as the record of a run older than them, quoted on history
    pages only, and its content still matches its hash; a LEGACY file fails the rules."""
    results = json.loads((ROOT / path).read_text(encoding="utf-8"))
    problems = provenance_problems(results)
    if path in LEGACY:
        assert problems, f"{path} passes the rules now: take it off tools.raw_results.LEGACY"
        return
    assert not hash_problems(results), f"{path}: {'; '.join(hash_problems(results))}"
    if path in _quoted_outside_history_pages():
        assert not problems, f"{path}, quoted outside history pages: {'; '.join(problems)}"


@pytest.mark.parametrize("path", [p.relative_to(ROOT).as_posix() for p in raw_files()])
def test_a_raw_result_added_since_the_pace_probe_records_it_beside_its_machine(path):
    """Timed results name the machine's pace (attnmt.pace) as well as its processor; files older
    than the probe are what they were."""
    git = ["git", "-C", str(ROOT)]
    if subprocess.run([*git, "cat-file", "-e", f"{PACE_FROM}^{{commit}}"], capture_output=True).returncode != 0:
        pytest.skip("the commit that brought the pace probe is not in this checkout")
    if subprocess.run([*git, "cat-file", "-e", f"{PACE_FROM}:{path}"], capture_output=True).returncode == 0:
        return  # in the repository before the probe
    results = json.loads((ROOT / path).read_text(encoding="utf-8"))
    assert not pace_missing(results), f"{path} records its machine but no pace probe (attnmt.pace)"


def test_pace_missing_sees_a_machine_without_its_pace_at_any_depth():
    machine = {"cpu": "AMD EPYC", "threads": 2}
    assert pace_missing({"runs": [{"machine": machine, "pace": None}]})
    assert not pace_missing({"runs": [{"machine": machine, "pace": {"seconds_per_update": 0.49}}]})
    assert not pace_missing({"entries": [{"machine": machine, "training": {"pace": {"seconds_per_update": 0.5}}}]})
    assert not pace_missing({"figure": 1.5})  # nothing timed, no machine


def test_the_legacy_list_only_shrinks_and_its_files_are_as_they_were():
    """A LEGACY file was in the repository when the rules came, byte for byte as it is now: a new
    file cannot join the list, and a file measured again must pass the rules to stay quotable."""
    git = ["git", "-C", str(ROOT)]
    if subprocess.run([*git, "cat-file", "-e", f"{RULES_FROM}^{{commit}}"], capture_output=True).returncode != 0:
        pytest.skip("the history before the rules is not in this checkout")
    assert set(MOVED) <= set(LEGACY), "MOVED names LEGACY files only"
    for path in LEGACY:
        then = subprocess.run([*git, "show", f"{RULES_FROM}:{MOVED.get(path, path)}"], capture_output=True)
        assert then.returncode == 0, f"{path} was not in the repository when the rules came: it cannot be LEGACY"
        assert then.stdout == (ROOT / path).read_bytes(), f"{path} was rewritten: it must pass the rules, not be LEGACY"
