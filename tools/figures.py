"""A figure's expression, computed from raw results: paths into their JSON and arithmetic over them.

A figure in prose carries a comment `<!-- figure: FILE EXPR {FORMAT} -->` (`tools.quote` finds it
and writes the figure); EXPR is computed here. It is arithmetic (`+ - * /`, parentheses, numbers,
`min max mean median sd abs`) over paths into the JSON: keys joined by dots
(`systems.opennmt-py.parameters`; put spaces around a minus sign), `[2]` for a list's item,
`['a key, with spaces']` for such a key, and `[clients=8,batching=true]` for the one item of a
list with those fields. A ratio or a difference is computed here from the raw values, so its
rounding is the format's, never a rounded figure's. A figure computed from two results files names
both, joined by a comma, and its paths then start with each file's name without `.json`
(`a.json,b.json a.runs[0].bleu - b.runs[0].bleu {:+.2f}`). A results file is read only if
`tools.raw_results` lets it be quoted (`read_result`); `tools.verdicts` reads its evidence here too.
"""

from __future__ import annotations

import ast
import json
import re
import statistics
from pathlib import Path

from tools.raw_results import refusal

ROOT = Path(__file__).resolve().parents[1]

_PATH = re.compile(r"[A-Za-z_][\w-]*(?:\.[\w-]+|\[[^\]]*\])*")
_SEGMENT = re.compile(r"\.?([\w-]+)|\[([^\]]*)\]")
FUNCTIONS = {
    "min": min,
    "max": max,
    "mean": lambda *values: statistics.mean(values),
    "median": lambda *values: statistics.median(values),  # of the seeds, as every table's summary gives it
    "sd": lambda *values: statistics.stdev(values),  # the sample deviation, as the sweep report's tables give it
    "abs": abs,
}
_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd)
_NODES += (ast.Constant, ast.Name, ast.Load, ast.Call)


def read_result(path: str, *, history: bool = False) -> dict:
    """The data of the results file `path` (relative to the repository); ValueError if it may not be
    quoted, on a history page if `history` (unknown or edited code, or edited by hand: `tools.raw_results`)."""
    refused = refusal(path, history=history)
    if refused:
        raise ValueError(refused)
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def _select(items: list, selector: str, path: str):
    """The one item of `items` whose fields equal `selector`'s (`clients=8,batching=true`)."""
    wanted = {}
    for pair in selector.split(","):
        key, _, value = pair.partition("=")
        try:
            wanted[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            wanted[key.strip()] = value.strip()
    found = [item for item in items if all(item.get(key) == value for key, value in wanted.items())]
    if len(found) != 1:
        raise ValueError(f"{path}: [{selector}] matches {len(found)} items, expected one")
    return found[0]


def lookup(data, path: str):
    """The value at `path` (`systems.attnmt.training.tokens_per_s.median`, `runs[2]`, `modes['a b']`,
    `configurations[clients=8,batching=true]`) in the JSON `data`."""
    value, position = data, 0
    for match in _SEGMENT.finditer(path):
        if match.start() != position:
            break
        position = match.end()
        key, bracket = match[1], match[2]
        try:
            if key is not None:
                value = value[key]
            elif bracket.isdigit():
                value = value[int(bracket)]
            elif bracket[:1] in "'\"" and bracket[-1:] == bracket[:1]:
                value = value[bracket[1:-1]]
            else:
                value = _select(value, bracket, path)
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"{path}: no {key or '[' + bracket + ']'} there") from None
    if position != len(path):
        raise ValueError(f"{path}: cannot read it as a path after {path[:position]!r}")
    return value


def evaluate(data, expression: str) -> float:
    """`expression` (arithmetic over paths into `data`, see the module docstring) computed."""
    names: dict[str, object] = dict(FUNCTIONS)

    def name(match: re.Match) -> str:
        if match[0] in FUNCTIONS and expression[match.end() :].lstrip().startswith("("):
            return match[0]
        names[f"_{len(names)}"] = lookup(data, match[0])
        return f"_{len(names) - 1}"

    code = _PATH.sub(name, expression)
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        raise ValueError(f"{expression}: not an expression") from None
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        if not isinstance(node, _NODES) or (called and getattr(called, "id", None) not in FUNCTIONS):
            raise ValueError(f"{expression}: only + - * /, numbers, paths and {', '.join(FUNCTIONS)}")
    return eval(compile(tree, "<figure>", "eval"), {"__builtins__": {}}, names)  # the nodes are checked above


def _figure_data(paths: str, history: bool) -> dict:
    """The data a figure's expression reads: one results file's, or several (`a.json,b.json`) under
    their names without `.json`."""
    files = paths.split(",")
    if len(files) == 1:
        return read_result(files[0], history=history)
    return {Path(file).stem: read_result(file, history=history) for file in files}


def render_figure(path: str, expression: str, template: str, *, history: bool = False) -> str:
    """The figure's text: `template` (`{:.1f}x`) filled with `expression` over the results file(s) `path`."""
    return template.format(evaluate(_figure_data(path, history), expression))
