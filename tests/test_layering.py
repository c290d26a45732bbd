"""Imports flow one way (DESIGN.md): leaves import nothing from the package above them."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "attnmt"

COMMANDS = ("validate", "train", "data", "translate", "evaluate", "average", "plot", "export", "sweep", "serve")
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
    "corpora": {"utils", "config", "tokenize", "synthetic", "download", "textfiles"},
    "data": {"utils", "config", "corpora", "download", "tokenize", "vocab"},
    "stats": {"utils", "config", "data", "vocab"},
    "attention": set(),
    "encoder": set(),
    "decoder": {"vocab"},
    "model": {"attention", "encoder", "decoder", "config", "vocab"},
    "search": {"utils", "model", "vocab", "decoder"},
    "schedules": set(),
    "runlog": {"utils"},
    "tables": set(),
    "distributed": set(),
    "textfiles": {"utils"},
    "checkpoint": {"utils", "config", "model", "vocab", "tokenize"},
    "export": {"utils", "checkpoint", "decoder", "model"},
    "engine": {"utils", "decoder", "export"},
    "ensemble": {"utils", "search", "tokenize"},
    "quantize": {"utils", "export"},
    "average": {"utils", "checkpoint"},
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
    "translate": {"utils", "config", "data", "search", "plot"},
    "loading": {
        "utils",
        "config",
        "checkpoint",
        "data",
        "engine",
        "ensemble",
        "export",
        "model",
        "quantize",
        "translate",
    },
    "evaluation": {
        "utils",
        "config",
        "checkpoint",
        "corpora",
        "export",
        "loading",
        "metrics",
        "plot",
        "quantize",
        "search",
        "tokenize",
        "translate",
    },
    "stream": {"loading", "search", "translate"},
    "sweep": set(),
    "sweep.spec": {"config"},
    "sweep.store": {"utils"},
    "sweep.report": {"utils", "plot", "runlog", "sweep.spec", "sweep.store"},
    "sweep.run": {
        "utils",
        "config",
        "data",
        "train",
        "checkpoint",
        "metrics",
        "runlog",
        "loading",
        "evaluation",
        "sweep.spec",
        "sweep.store",
        "sweep.report",
    },
    "serve": set(),
    "serve.schemas": set(),
    "serve.server": {"utils", "loading", "serve.schemas", "serve.app", "serve.catalog"},
    "serve.batcher": {"search", "translate"},
    "serve.catalog": {"utils", "evaluation", "loading", "metrics", "search", "tokenize", "translate"},
    "serve.app": {"utils", "search", "translate", "serve.batcher", "serve.catalog", "serve.schemas"},
    # the command line: one module per command, on top of everything it runs
    "cli": {"utils", "cli", *(f"cli.{command}" for command in COMMANDS), "cli.common"},
    "cli.common": {"utils", "quantize", "loading"},
    "cli.validate": {"config", "cli.common"},
    "cli.train": {"utils", "config", "train", "cli.common"},
    "cli.data": {"utils", "config", "data", "stats", "tables", "cli.common"},
    "cli.translate": {"utils", "loading", "stream", "textfiles", "translate", "cli.common"},
    "cli.evaluate": {"utils", "corpora", "evaluation", "tables", "cli.common"},
    "cli.average": {"average", "cli.common"},
    "cli.plot": {"utils", "evaluation", "loading", "plot", "runlog", "translate", "cli.common", "cli.evaluate"},
    "cli.export": {"evaluation", "export", "loading", "quantize", "cli.common"},
    "cli.sweep": {"utils", "sweep.run", "sweep.spec", "sweep.report", "cli.common"},
    "cli.serve": {"utils", "serve.schemas", "serve.server", "cli.common"},
}
# Light modules: importing them must not load torch (config validation and data tools stay fast).
NO_TORCH = (
    "cli",  # the parser, --help and `validate` stay fast: commands import torch when they run
    "config",
    "utils",
    "tokenize",
    "vocab",
    "synthetic",
    "download",
    "corpora",
    "metrics",
    "sweep",
    "sweep.spec",
    "sweep.run",
    "textfiles",
    "quantize",
    "serve",
    "serve.schemas",
)


def module_name(path: Path) -> str:
    """attnmt/sweep/spec.py -> "sweep.spec"; attnmt/sweep/__init__.py -> "sweep"."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def imported_module(name: str) -> str:
    """The attnmt module an import names: attnmt.sweep.spec -> "sweep.spec", attnmt.train -> "train"."""
    parts = name.split(".")[1:]
    return ".".join(parts[:2]) if (PACKAGE / parts[0]).is_dir() and len(parts) > 1 else parts[0]


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
                package.add(imported_module(name))
            top_level.add(name.split(".")[0])
    return package, top_level


def test_imports_follow_the_layering():
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module in ("__init__", "__main__"):
            continue
        imported, _ = attnmt_imports(path)
        allowed = ALLOWED.get(module)
        assert allowed is not None, f"{path.relative_to(PACKAGE.parent)} is not in the layering table of this test"
        assert imported <= allowed, f"{path.relative_to(PACKAGE.parent)} imports {sorted(imported - allowed)}"


def test_light_modules_do_not_import_torch():
    present = [
        module
        for module in NO_TORCH
        if (PACKAGE / (module.replace(".", "/") + ".py")).exists() or (PACKAGE / module / "__init__.py").exists()
    ]
    code = "import sys\n" + "".join(f"import attnmt.{m}\n" for m in present) + "print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", f"one of {present} imports torch at import time"
    assert len(present) == len(NO_TORCH), set(NO_TORCH) - set(present)
