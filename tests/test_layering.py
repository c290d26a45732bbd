"""Imports flow one way (DESIGN.md): leaves import nothing from the package above them."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "attnmt"

# module -> the attnmt modules it may import (directly). Anything absent may import nothing.
ALLOWED = {
    "utils": set(),
    "config": {"utils"},
    "metrics": {"utils"},
    "plot": {"utils"},
    "tokenize": {"utils"},
    "vocab": {"utils"},
    "synthetic": {"utils"},
    "download": {"utils"},
    "corpora": {"utils", "config", "tokenize", "synthetic", "download"},
    "data": {"utils", "config", "corpora", "download", "tokenize", "vocab"},
    "stats": {"utils", "config", "data", "vocab"},
    "attention": set(),
    "encoder": set(),
    "decoder": {"attention", "vocab"},
    "model": {"attention", "encoder", "decoder", "config", "vocab"},
    "search": {"utils", "model", "vocab", "decoder"},
    "schedules": set(),
    "runlog": {"utils"},
    "tables": set(),
    "distributed": set(),
    "textfiles": {"utils", "corpora"},
    "checkpoint": {"utils", "config", "model", "vocab", "tokenize"},
    "train": {
        "utils",
        "config",
        "data",
        "model",
        "search",
        "metrics",
        "checkpoint",
        "vocab",
        "corpora",
        "plot",
        "schedules",
        "distributed",
        "runlog",
    },
    "translate": {
        "utils",
        "config",
        "data",
        "model",
        "search",
        "metrics",
        "checkpoint",
        "vocab",
        "tokenize",
        "plot",
        "corpora",
    },
    "sweepspec": {"config"},
    "sweepstore": {"utils"},
    "sweepreport": {"utils", "plot", "runlog", "sweepspec", "sweepstore"},
    "sweep": {
        "utils",
        "config",
        "data",
        "train",
        "checkpoint",
        "metrics",
        "runlog",
        "translate",
        "sweepspec",
        "sweepstore",
        "sweepreport",
    },
}
# Light modules: importing them must not load torch (config validation and data tools stay fast).
NO_TORCH = (
    "config",
    "utils",
    "tokenize",
    "vocab",
    "synthetic",
    "download",
    "corpora",
    "metrics",
    "sweepspec",
    "sweep",
    "textfiles",
)


def attnmt_imports(path: Path) -> tuple[set[str], set[str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package, top_level = set(), set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            if name.startswith("attnmt."):
                package.add(name.split(".")[1])
            top_level.add(name.split(".")[0])
    return package, top_level


def test_imports_follow_the_layering():
    for path in sorted(PACKAGE.glob("*.py")):
        module = path.stem
        if module in ("__init__", "__main__", "cli"):
            continue
        imported, _ = attnmt_imports(path)
        allowed = ALLOWED.get(module)
        assert allowed is not None, f"attnmt/{path.name} is not in the layering table of this test (DESIGN.md)"
        assert imported <= allowed, f"attnmt/{path.name} imports {sorted(imported - allowed)}, not allowed"


def test_light_modules_do_not_import_torch():
    present = [module for module in NO_TORCH if (PACKAGE / f"{module}.py").exists()]
    code = "import sys\n" + "".join(f"import attnmt.{m}\n" for m in present) + "print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", f"one of {present} imports torch at import time"
