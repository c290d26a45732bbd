"""The house limits: no module in attnmt/, benchmarks/ or tools/ over 450 lines and no function over 80 (docstring
included), held with room to spare: a module within 20 lines of its limit or a function within 5
of its own is split by concept before it nears it, or docs/design.md names it, with its size and
why, under "Modules over the house limits, and why". A named one may not grow past the size
written there, and leaves the list once it is back out of the margins, so the list stays true
and growth after a refactor fails CI. The package's top level is held too: at most 45 modules
beside its wings."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES, FUNCTION_LINES = 450, 80
# The room kept under the limits: code is split by concept while there is room to, never
# squeezed line by line to stay under a number.
MODULE_MARGIN, FUNCTION_MARGIN = 20, 5
TOP_LEVEL_MODULES = 45  # attnmt/*.py, __init__ and __main__ included
SECTION = "## Modules over the house limits, and why"
ENTRY = re.compile(
    r"^- `(?P<name>(?:attnmt|benchmarks|tools)/[\w/]+\.py(?::\w+)?)` \((?P<lines>\d+) lines\)", re.MULTILINE
)
CHECKED = ("attnmt", "benchmarks", "tools")  # the project's code: the library, its measurements, its tools


def within_the_margins(root: Path = ROOT) -> dict[str, int]:
    """Every module of root's CHECKED folders over MODULE_LINES - MODULE_MARGIN ("attnmt/x.py")
    and function over FUNCTION_LINES - FUNCTION_MARGIN ("attnmt/x.py:name"), with its size in
    lines: those at or over a limit and those close to it."""
    found = {}
    for path in sorted(path for folder in CHECKED for path in (root / folder).rglob("*.py")):
        name = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        if (lines := len(source.splitlines())) > MODULE_LINES - MODULE_MARGIN:
            found[name] = lines
        for node in ast.walk(ast.parse(source)):
            is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_function and (lines := node.end_lineno - node.lineno + 1) > FUNCTION_LINES - FUNCTION_MARGIN:
                found[f"{name}:{node.name}"] = lines
    return found


def named_in_the_design() -> dict[str, int]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/design.md lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return {match["name"]: int(match["lines"]) for match in ENTRY.finditer(section)}


def test_every_module_and_function_near_or_over_a_limit_is_named_with_its_reason():
    near, named = within_the_margins(), named_in_the_design()
    unnamed = {name: lines for name, lines in near.items() if name not in named}
    assert not unnamed, (
        f"within {MODULE_MARGIN} lines of the module limit ({MODULE_LINES}) or {FUNCTION_MARGIN} of the function "
        f"limit ({FUNCTION_LINES}), or over one: split by concept, or name with its reason in docs/design.md: {unnamed}"
    )
    grown = {name: (named[name], lines) for name, lines in near.items() if lines > named[name]}
    assert not grown, f"grown past the size docs/design.md names (named, now): {grown}"
    back = sorted(set(named) - set(near))
    assert not back, f"back out of the margins: take them out of docs/design.md's list: {back}"


def test_the_check_finds_a_module_and_a_method_within_the_margins_and_nothing_below_them(tmp_path):
    package = tmp_path / "attnmt" / "wing"
    package.mkdir(parents=True)
    longest_function, longest_module = FUNCTION_LINES - FUNCTION_MARGIN, MODULE_LINES - MODULE_MARGIN
    body = "".join(f"    x{i} = {i}\n" for i in range(longest_function - 1))  # with its def: the most that fits
    fits = f"def fits():\n{body}" + "\n" * (longest_module - longest_function)
    (package / "fits.py").write_text(fits, encoding="utf-8")
    method = "".join(f"        x{i} = {i}\n" for i in range(longest_function))  # with its def: one too many
    (package / "near.py").write_text(f"class Wing:\n    def near(self):\n{method}" + "\n" * (longest_module - 200))
    assert len(fits.splitlines()) == longest_module
    assert within_the_margins(tmp_path) == {"attnmt/wing/near.py:near": longest_function + 1}
    (package / "fits.py").write_text(fits + "\n", encoding="utf-8")  # one line into the module's margin
    assert within_the_margins(tmp_path) == {
        "attnmt/wing/fits.py": longest_module + 1,
        "attnmt/wing/near.py:near": longest_function + 1,
    }
    for name, lines in within_the_margins(tmp_path).items():  # the design's list can name each
        assert ENTRY.match(f"- `{name}` ({lines} lines)")["name"] == name


def test_the_package_top_level_holds_at_most_45_modules():
    """What joins the wings lives at the top; a concept of several modules gets a wing of its own."""
    package = ROOT / "attnmt"
    top_level = sorted(path.name for path in package.glob("*.py"))
    wings = sorted(f"{path.parent.name}/" for path in package.glob("*/__init__.py"))
    assert len(top_level) <= TOP_LEVEL_MODULES, (
        f"attnmt/ has {len(top_level)} top-level modules, at most {TOP_LEVEL_MODULES}: put the new one in the wing "
        f"of its concept ({', '.join(wings)}), or gather a concept's modules in a wing of their own"
    )


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
