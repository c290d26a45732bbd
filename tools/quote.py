"""Tables and figures in the README, docs and CHANGELOG quoted from committed raw results, and kept equal to them.

    python -m tools.quote README.md docs/performance.md    # rewrite every quoted table and figure
    python -m tools.quote --check README.md ...            # exit 1 if one differs
    python -m tools.quote --share README.md docs/*.md ...  # the share of figures the rules do not vouch for

A quoted table follows a marker line naming the results file and the table:

    <!-- results: benchmarks/results/peers-speed.json peers-speed -->

and is exactly what the benchmark's own report renders from that file: the block is every line
after the marker up to the first blank line, a `<!-- end results -->` line or the end of the
file, so a row added under a quoted table is a difference too. One table's source is a test
instead: docs/design.md's layering table is the import table of `tests/test_layering.py`
(`<!-- results: tests/test_layering.py layering -->`).

A figure in prose is followed, with nothing between, by a comment naming the results file, an
expression over it and the figure's format:

    trains 1.4x<!-- figure: benchmarks/results/peers-speed.json a.b / c.d {:.1f}x --> as many

The expression is arithmetic over paths into the results' JSON, computed from the raw values by
`tools.figures`, whose docstring gives its syntax (paths, list selectors, functions, a figure from
two files). The format is `str.format`'s, one field, with the figure's unit if any and no spaces
(`{:.1f}x`, `{:,.0f}`, `{:.0f}%`, `256<!-- ... {:.0f} --> ms`, and `{:+.2f}` for a difference that
may be negative: a sign before a figure is part of it, a hyphen after a digit is a range's).
A table or figure is refused from a raw result whose code is unknown or was edited while it ran,
or whose content no longer matches its hash (`tools.raw_results`, which lists the older files
exempted), except on a history page (first line `<!-- history: one sentence -->`: figures from
runs older than the rules), which refuses only a file whose content no longer matches its hash.
`--share` gives, over the pages named that are not history pages, the share of quotes (a quoted
table or a figure comment counts one) from a LEGACY or refused file. `tests/test_results.py` runs
the check over the README, docs/ and CHANGELOG.md, so a document cannot drift from its data, and
fails on a figure that looks measured (two or more decimals, or a ratio or share such as `1.4x`,
`12%`) with no figure comment: one that is not a result says so,
`0.75<!-- not a result: a setting -->`.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from benchmarks.adaptation_report import adaptation_rows
from benchmarks.engines import engine_rows
from benchmarks.gpu import gpu_rows
from benchmarks.large_file import large_file_rows
from benchmarks.pareto import pareto_rows
from benchmarks.peers.report import (
    bootstrap_rows,
    equal_updates_rows,
    quality_rows,
    same_weights_rows,
    speed_rows,
    stopping_rows,
)
from benchmarks.report import headlines, markdown_table, tables
from benchmarks.scale import scale_rows
from benchmarks.serving import serving_rows
from benchmarks.web import web_rows
from tools.attention_focus import focus_rows
from tools.distillation_runs import run_rows
from tools.figures import ROOT, read_result, render_figure
from tools.init_parts import parts_rows
from tools.machines import check_machines
from tools.multi30k_table import summary_rows, table_rows
from tools.raw_results import FIGURE, MARKER, is_history, share_report
from tools.screen_results import screen_table


def _speed_table(index: int) -> Callable[[dict], list[str]]:
    def render(results: dict) -> list[str]:
        _, header, body = tables(results)[index]
        return markdown_table(header, body)

    return render


# The notebook's questions (docs/results/notebook-questions.json, from `attnmt sweep report`): per point
# of an experiment the mean ± standard deviation over its seeds, as the sweep report's tables give it.
SEED_EXPERIMENTS = ("attention", "learning_rate", "hidden_size", "teacher_forcing", "rnn")
_POINT_HEADERS = {
    "attention": "attention",
    "learning_rate": "lr",
    "hidden_size": "hidden",
    "teacher_forcing": "ratio",
    "rnn": "rnn",
}


def _mean_sd(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def _points(results: dict, experiment: str) -> list[tuple[str, list[dict]]]:
    """(label, the point's trials) of an experiment, in its order; the base's label says so."""
    trials = {trial["name"]: trial for trial in results["trials"]}
    rows = []
    for point in results["experiments"][experiment]["points"]:
        label = point["label"]
        if experiment != "attention" and results["base"] in point["trials"]:
            label += " (base)"
        rows.append((label, [trials[name] for name in point["trials"]]))
    return rows


def _experiment_table(experiment: str) -> Callable[[dict], list[str]]:
    """Valid/test BLEU, valid loss, training loss at the end and parameters of each point."""

    def render(results: dict) -> list[str]:
        header = [_POINT_HEADERS[experiment], "valid BLEU", "test BLEU", "valid loss", "train loss (end)", "parameters"]
        body = []
        for label, trials in _points(results, experiment):
            figures = [_mean_sd([t[key] for t in trials]) for key in ("valid_bleu", "test_bleu")]
            figures += [_mean_sd([t[key] for t in trials]) for key in ("valid_loss", "train_loss_end")]
            parameters = sorted({t["parameters"] for t in trials})
            body.append([label, *figures, "/".join(f"{p / 1e6:.2f}M" for p in parameters)])
        return markdown_table(header, body)

    return render


def _steps_table(experiment: str) -> Callable[[dict], list[str]]:
    """Validation BLEU at each validation step, the mean over a point's seeds."""

    def render(results: dict) -> list[str]:
        points = _points(results, experiment)
        steps = sorted({v["step"] for _, trials in points for t in trials for v in t["validation"]})
        body = []
        for label, trials in points:
            by_step = {
                step: [v["valid_bleu"] for t in trials for v in t["validation"] if v["step"] == step] for step in steps
            }
            body.append([label, *(f"{statistics.mean(by_step[step]):.2f}" if by_step[step] else "-" for step in steps)])
        return markdown_table([_POINT_HEADERS[experiment], *(f"{step:,}" for step in steps)], body)

    return render


def _length_table(experiment: str) -> Callable[[dict], list[str]]:
    """Test BLEU by source length (mean over seeds), then each point's difference from the first."""

    def render(results: dict) -> list[str]:
        points = _points(results, experiment)
        buckets = [(bucket, sentences) for bucket, sentences, _ in points[0][1][0]["test_by_length"]]
        means = {
            label: [statistics.mean(t["test_by_length"][i][2] for t in trials) for i in range(len(buckets))]
            for label, trials in points
        }
        header = [_POINT_HEADERS[experiment]]
        for bucket, sentences in buckets:  # "5-5" is the sources of 5 words
            low, _, high = bucket.partition("-")
            header.append(f"{low if low == high else bucket} ({sentences})")
        body = [[label, *(f"{score:.2f}" for score in scores)] for label, scores in means.items()]
        first = points[0][0]
        for label, scores in list(means.items())[1:]:
            body.append([f"{label} - {first}", *(f"{a - b:+.2f}" for a, b in zip(scores, means[first], strict=True))])
        return markdown_table(header, body)

    return render


def _seed_trials_table(results: dict) -> list[str]:
    """Every trial: † marks one that ran in more than one attempt (its minutes include the pause)."""
    header = ["trial", "valid BLEU", "test BLEU", "valid loss", "train loss (end)", "train min", "tok/s", "params (M)"]
    body = [
        [
            trial["name"] + (" †" if trial["attempts"] > 1 else ""),
            f"{trial['valid_bleu']:.2f}",
            f"{trial['test_bleu']:.2f}",
            f"{trial['valid_loss']:.3f}",
            f"{trial['train_loss_end']:.2f}",
            f"{trial['train_seconds'] / 60:.1f}",
            f"{trial['tokens_per_s']:,.0f}",
            f"{trial['parameters'] / 1e6:.2f}",
        ]
        for trial in results["trials"]
    ]
    return markdown_table(header, body)


def _layering_table(test: ModuleType) -> list[str]:
    """The layering test's ALLOWED, row by row: a module's job is its docstring's first paragraph, "light" its
    place in NO_TORCH."""
    order = {module: index for index, module in enumerate(test.ALLOWED)}
    body = []
    for module, allowed in test.ALLOWED.items():
        docstring = ast.get_docstring(ast.parse(test.module_path(module).read_text(encoding="utf-8"))) or ""
        imports = sorted(allowed, key=lambda name: (order.get(name, len(order)), name))
        summary = " ".join(docstring.split("\n\n")[0].split()).replace("|", "\\|")
        light = "yes" if module in test.NO_TORCH else ""
        body.append([f"`{module}`", summary, ", ".join(f"`{name}`" for name in imports) or "nothing", light])
    return markdown_table(["module", "its job (its docstring's summary)", "may import from attnmt", "light"], body)


RENDERERS: dict[str, Callable[[dict], list[str]]] = {
    "peers-speed": lambda results: markdown_table(*speed_rows(results)),
    "peers-quality": lambda results: markdown_table(*quality_rows(results)),
    "peers-bootstrap": lambda results: markdown_table(*bootstrap_rows(results)),
    "peers-equal-updates": lambda results: markdown_table(*equal_updates_rows(results)),
    "peers-stopping": lambda results: markdown_table(*stopping_rows(results)),
    "peers-same-weights": lambda results: markdown_table(*same_weights_rows(results)),
    "adaptation": lambda results: markdown_table(*adaptation_rows(results)),
    "attention-focus": lambda results: markdown_table(*focus_rows(results)),
    "init-parts": lambda results: markdown_table(*parts_rows(results)),
    "speed-training": _speed_table(0),
    "speed-greedy": _speed_table(1),
    "speed-beam": _speed_table(2),
    "serving": lambda results: markdown_table(*serving_rows(results)),
    "web": lambda results: markdown_table(*web_rows(results)),
    "gpu": lambda results: markdown_table(*gpu_rows(results)),
    "engines": lambda results: markdown_table(*engine_rows(results)),
    "large-file": lambda results: markdown_table(*large_file_rows(results)),
    "scale": lambda results: markdown_table(*scale_rows(results)),
    "pareto": lambda results: markdown_table(*pareto_rows(results)),
    "distillation-runs": lambda results: markdown_table(*run_rows(results)),
    "multi30k-table": lambda results: markdown_table(*table_rows(results)),
    "multi30k-summary": lambda results: markdown_table(*summary_rows(results)),
    "speed-headlines": lambda results: [f"- {line}" for line in headlines(results)],
    **{f"experiments-{name}": _experiment_table(name) for name in SEED_EXPERIMENTS},
    **{f"experiments-{name}-steps": _steps_table(name) for name in SEED_EXPERIMENTS},
    "experiments-attention-length": _length_table("attention"),
    "experiments-trials": _seed_trials_table,
    "layering": _layering_table,
    "screen": lambda results: screen_table(results["points"]),
}


def _source(path: str, history: bool = False) -> dict | ModuleType:
    """A results file's data, or a Python file (the layering test) loaded as a module without running its tests."""
    file = ROOT / path
    if file.suffix != ".py":
        return read_result(path, history=history)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(path: str, table: str, *, history: bool = False) -> list[str]:
    """The lines of `table` rendered from the results file `path` (relative to the repository), on a
    history page if `history`."""
    if table not in RENDERERS:
        raise ValueError(f"unknown table {table!r}; known: {', '.join(RENDERERS)}")
    try:
        return RENDERERS[table](_source(path, history))
    except (KeyError, IndexError, TypeError) as error:  # a results file older than the table it is quoted in
        raise ValueError(f"{path}: the table {table!r} reads a field this file lacks ({error!r})") from None


END_MARKER = "<!-- end results -->"


def _quoted_length(lines: list[str], start: int) -> int:
    """How many lines of the quoted block begin at `start` (a table's or a list's lines)."""
    end = start
    while end < len(lines) and lines[end].startswith(("|", "- ")):
        end += 1
    return end - start


# --- figures in prose ----------------------------------------------------------------------------

# a number as prose writes it: digits with thousands commas and a fraction, a sign only where it is
# not part of a range ("1.3-1.45x") or the end of a comment ("-->-1.45x")
_NUMBER = r"(?:(?<![\w.,>])[+\-−])?(?<![\d.,])\d[\d,]*(?:\.\d+)?"


def _figure_pattern(template: str) -> re.Pattern:
    """What a figure written with `template` looks like, at the end of the text before its comment."""
    parts = re.fullmatch(r"([^{}]*)\{[^{}]*\}([^{}]*)", template)
    if not parts:
        raise ValueError(f"{template!r}: a figure's format has one {{}} field")
    prefix, suffix = parts.groups()
    return re.compile(re.escape(prefix) + _NUMBER + re.escape(suffix) + "$")


def _requote_figures(line: str, where: str, history: bool) -> str:
    """`line` with the figure before every figure comment rendered from its results file."""
    out, position = [], 0
    for match in FIGURE.finditer(line):
        try:  # searched in the whole line, so that the text before `position` counts for the sign
            written = _figure_pattern(match[3]).search(line, position, match.start())
            figure = render_figure(match[1], match[2], match[3], history=history)
        except (OSError, ValueError, ZeroDivisionError) as error:
            raise ValueError(f"{where}: {match[1]}: {error}") from None
        if not written:
            raise ValueError(f"{where}: no figure like {match[3]!r} right before its comment")
        out += [line[position : written.start()], figure, match[0]]
        position = match.end()
    return "".join(out) + line[position:]


def requote(text: str, name: str = "<text>") -> str:
    """`text` with the block after every marker replaced by what its results file renders, and every
    figure in prose by what its expression gives. ValueError names the line of a block not followed by
    a blank line (or `<!-- end results -->`), or of a figure that cannot be rendered."""
    lines, history = text.splitlines(), is_history(text)
    out, index = [], 0
    while index < len(lines):
        out.append(_requote_figures(lines[index], f"{name}:{index + 1}", history))
        check_machines(lines[index], f"{name}:{index + 1}", lambda path: _source(path, history))
        match = MARKER.fullmatch(lines[index].strip())
        index += 1
        if match:
            try:
                out += render(match[1], match[2], history=history)
            except ValueError as error:
                raise ValueError(f"{name}:{index}: {error}") from None
            index += _quoted_length(lines, index)
            if index < len(lines) and lines[index].strip() not in ("", END_MARKER):
                raise ValueError(f"{name}:{index + 1}: a quoted block ends with a blank line or {END_MARKER}")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.quote", description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table or figure differs")
    parser.add_argument("--share", action="store_true", help="change nothing; print the legacy share per page")
    args = parser.parse_args(argv)
    if args.share:
        print("\n".join(share_report(args.documents)))
        return 0
    stale = []
    for document in args.documents:
        text = document.read_text(encoding="utf-8")
        try:
            quoted = requote(text, str(document))
        except ValueError as error:
            print(f"python -m tools.quote: {error}", file=sys.stderr)
            return 2
        if quoted != text:
            stale.append(document)
            if not args.check:
                document.write_text(quoted, encoding="utf-8")
    for document in stale:
        print(f"{document}: {'differs from' if args.check else 'requoted from'} its results", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
