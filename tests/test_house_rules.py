"""The house limits: no module in attnmt/, benchmarks/ or tools/ over 450 lines and no function over 80 (docstring
included) unless docs/design.md names it, with its size and why, under "Modules over the house
limits, and why". A named one may not grow past the size written there, and leaves the list once
it is back under its limit, so the list stays true and growth after a refactor fails CI."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES, FUNCTION_LINES = 450, 80
SECTION = "## Modules over the house limits, and why"
ENTRY = re.compile(
    r"^- `(?P<name>(?:attnmt|benchmarks|tools)/[\w/]+\.py(?::\w+)?)` \((?P<lines>\d+) lines\)", re.MULTILINE
)
CHECKED = ("attnmt", "benchmarks", "tools")  # the project's code: the library, its measurements, its tools


def over_the_limits(root: Path = ROOT) -> dict[str, int]:
    """Every module of root's CHECKED folders over MODULE_LINES ("attnmt/x.py") and function over
    FUNCTION_LINES ("attnmt/x.py:name"), with its size in lines."""
    found = {}
    for path in sorted(path for folder in CHECKED for path in (root / folder).rglob("*.py")):
        name = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        if (lines := len(source.splitlines())) > MODULE_LINES:
            found[name] = lines
        for node in ast.walk(ast.parse(source)):
            is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_function and (lines := node.end_lineno - node.lineno + 1) > FUNCTION_LINES:
                found[f"{name}:{node.name}"] = lines
    return found


def named_in_the_design() -> dict[str, int]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/design.md lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return {match["name"]: int(match["lines"]) for match in ENTRY.finditer(section)}


def test_every_module_and_function_over_a_limit_is_named_with_its_reason():
    over, named = over_the_limits(), named_in_the_design()
    unnamed = {name: lines for name, lines in over.items() if name not in named}
    assert not unnamed, f"over the house limits and not named in docs/design.md: {unnamed}"
    grown = {name: (named[name], lines) for name, lines in over.items() if lines > named[name]}
    assert not grown, f"grown past the size docs/design.md names (named, now): {grown}"
    back = sorted(set(named) - set(over))
    assert not back, f"back under the limits: take them out of docs/design.md's list: {back}"


def test_the_check_finds_a_long_module_and_a_long_method_and_nothing_at_the_limits(tmp_path):
    package = tmp_path / "attnmt" / "wing"
    package.mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES - 1))  # with its def: at the limit
    at_limits = f"def fits():\n{body}" + "\n" * (MODULE_LINES - FUNCTION_LINES)
    (package / "fits.py").write_text(at_limits, encoding="utf-8")
    method = "".join(f"        x{i} = {i}\n" for i in range(FUNCTION_LINES))  # with its def: one over
    (package / "grown.py").write_text(f"class Wing:\n    def grown(self):\n{method}" + "\n" * MODULE_LINES)
    assert len(at_limits.splitlines()) == MODULE_LINES
    assert over_the_limits(tmp_path) == {
        "attnmt/wing/grown.py": MODULE_LINES + FUNCTION_LINES + 2,
        "attnmt/wing/grown.py:grown": FUNCTION_LINES + 1,
    }
    for name, lines in over_the_limits(tmp_path).items():  # the design's list can name each
        assert ENTRY.match(f"- `{name}` ({lines} lines)")["name"] == name


def test_no_test_module_imports_another_or_conftest():
    """What tests share lives in the tests/*_helpers.py modules (or fixtures), so that a test
    module can be read, run and deleted alone."""
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            parts = [name.split(".") for name in names]
            if any(
                p[:1] == ["tests"] and len(p) > 1 and (p[1].startswith("test_") or p[1] == "conftest") for p in parts
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"imports of a test module or conftest.py: {offenders}"
