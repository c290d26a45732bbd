"""Imports flow one way: every attnmt module imports only the attnmt modules its row of ALLOWED names.

ALLOWED is the one copy of the layering table. docs/design.md quotes it, rendered with each
module's job (its docstring's summary) and whether it is light (NO_TORCH) by
`python -m tools.quote docs/design.md`, and a test below fails when the quote differs.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "attnmt"
DESIGN = ROOT / "docs" / "design.md"
MARKER = "<!-- results: tests/test_layering.py layering -->"

# module -> the attnmt modules it may import (directly), in the order the docs' table lists them.
# Every module has a row, sub-packages' modules by dotted name ("sweep.spec"; "sweep" is
# sweep/__init__.py, "__init__" the package's own). A new module needs its row, or the test fails.
COMMANDS = (
    "demo",
    "configs",
    "validate",
    "train",
    "data",
    "translate",
    "score",
    "distill",
    "shortlist",
    "evaluate",
    "average",
    "plot",
    "export",
    "sweep",
    "serve",
)
ALLOWED = {
    "__init__": set(),
    "utils": set(),
    "provenance": set(),
    "config_files": {"utils"},
    "config": {"utils", "config_files"},
    "metrics": {"utils"},
    "plot": {"utils"},
    "tokenize": {"utils"},
    "vocab": {"utils"},
    "data": set(),
    "data.synthetic": {"utils"},
    "data.download": {"utils"},
    "data.distillation_record": {"utils"},
    "data.pair_filters": {"config", "tokenize"},
    "data.splits": {"utils", "config", "data.pair_filters"},
    "data.parallel_files": {"utils", "config", "data.distillation_record", "data.splits", "data.textfiles"},
    "data.corpora": {
        "utils",
        "config",
        "data.distillation_record",
        "data.synthetic",
        "data.download",
        "data.parallel_files",
        "data.splits",
        "data.textfiles",
    },
    "data.binarized": {"utils"},
    "codec": {"utils", "config", "tokenize", "vocab"},
    "data.prepare": {
        "__init__",
        "utils",
        "config",
        "data.corpora",
        "data.pair_filters",
        "data.splits",
        "data.binarized",
        "codec",
        "data.textfiles",
        "tokenize",
        "vocab",
    },
    "data.batching": {"config", "data.corpora", "data.splits", "codec", "data.prepare", "tokenize", "vocab"},
    "data.mixing": {"config", "data.batching"},
    "data.stats": {"config", "data.batching", "vocab"},
    "models": set(),
    "models.attention": set(),
    "models.dropout": set(),
    "models.encoder": {"models.dropout", "models.rnn"},
    "models.rnn": set(),
    "models.decoder": {"models.dropout", "models.rnn", "vocab"},
    "models.multihead": set(),
    "models.transformer": {"models.decoder", "models.dropout", "models.multihead", "vocab"},
    "models.seq2seq": {"models.attention", "models.encoder", "models.decoder", "models.transformer", "config", "vocab"},
    "feeding": set(),
    "data.shares": {"data.batching", "feeding", "vocab"},
    "search": set(),
    "search.options": {"utils", "config", "vocab"},
    "search.hypotheses": {"vocab"},
    "search.rules": set(),
    "search.prefix": {"utils", "vocab"},
    "search.forcing": {"vocab", "search.prefix", "search.rules"},
    "search.phrases": {"utils", "vocab", "search.rules"},
    "search.min_length": {"vocab", "search.rules"},
    "search.greedy": {"vocab", "search.hypotheses", "search.options", "search.rules"},
    "search.beam": {"vocab", "search.hypotheses", "search.options", "search.rules"},
    "search.teacher": {"vocab", "search.options"},
    "search.graphed": {"vocab", "search.hypotheses", "search.options"},
    "search.decode": {
        "utils",
        "vocab",
        "search.beam",
        "search.forcing",
        "search.graphed",
        "search.greedy",
        "search.hypotheses",
        "search.min_length",
        "search.options",
        "search.phrases",
        "search.prefix",
        "search.rules",
    },
    "alignment": set(),
    "shortlist": {"utils", "vocab"},
    "schedules": {"config"},
    "runlog": {"utils"},
    "tables": set(),
    "distributed": set(),
    "data.textfiles": {"utils"},
    "checkpoint": {"utils", "config", "models.seq2seq", "vocab"},
    "export": {"__init__", "utils", "checkpoint", "models.decoder", "models.rnn", "models.seq2seq", "shortlist"},
    "engine": {"utils", "models.decoder", "export"},
    "ensemble": {"utils", "tokenize", "search.options"},
    "quantize": {"utils", "export"},
    "average": {"utils", "checkpoint"},
    "subwords": {"codec", "tokenize", "vocab"},
    "shipped": {"utils"},
    "jobs": set(),
    "jobs.glossary": {"utils", "tokenize", "vocab"},
    "jobs.documents": {"utils"},
    "jobs.markup": {"utils", "alignment"},
    "loss": {"vocab"},
    "pace": {"utils", "config", "loss", "models.seq2seq"},
    "precision": set(),
    "validation": {
        "config",
        "data.batching",
        "loss",
        "metrics",
        "precision",
        "search.decode",
        "search.options",
        "tokenize",
        "vocab",
    },
    "continued": {"utils", "config", "checkpoint", "codec", "data.batching", "data.mixing", "data.prepare"},
    "train": {
        "utils",
        "continued",
        "config",
        "codec",
        "data.batching",
        "data.shares",
        "models.seq2seq",
        "provenance",
        "checkpoint",
        "schedules",
        "distributed",
        "runlog",
        "subwords",
        "loss",
        "precision",
        "validation",
    },
    "translation": set(),
    "translate": {
        "utils",
        "config",
        "codec",
        "alignment",
        "vocab",
        "translation",
        "search.beam",
        "search.decode",
        "search.hypotheses",
        "search.options",
        "search.phrases",
        "search.prefix",
        "search.teacher",
    },
    "loading": {
        "utils",
        "config",
        "checkpoint",
        "codec",
        "engine",
        "ensemble",
        "export",
        "models.seq2seq",
        "quantize",
        "shortlist",
        "translate",
    },
    "evaluation": {
        "utils",
        "provenance",
        "config",
        "checkpoint",
        "data.splits",
        "data.corpora",
        "loading",
        "metrics",
        "plot",
        "tokenize",
        "translate",
        "vocab",
        "search.options",
    },
    "int8_export": {"utils", "evaluation", "export", "loading", "quantize"},
    "shortlist_check": {
        "utils",
        "checkpoint",
        "data.corpora",
        "evaluation",
        "export",
        "loading",
        "shortlist",
        "data.splits",
        "translate",
    },
    "heatmaps": {"utils", "plot", "translation"},
    "attention_heads": {"utils", "vocab", "models.transformer", "translate", "translation"},
    "stream": {"loading", "translate", "translation", "search.options"},
    "jobs.job": {
        "utils",
        "translate",
        "translation",
        "search.options",
        "jobs.documents",
        "jobs.glossary",
        "jobs.markup",
    },
    "fast": {
        "__init__",
        "utils",
        "checkpoint",
        "data.splits",
        "evaluation",
        "export",
        "loading",
        "metrics",
        "quantize",
        "shortlist",
        "translate",
    },
    "distill": {"utils", "data.distillation_record", "translate", "search.options"},
    "sweep": set(),
    "sweep.spec": {"config", "config_files"},
    "sweep.store": {"utils"},
    "sweep.report": {"utils", "provenance", "plot", "runlog", "sweep.spec", "sweep.store"},
    "sweep.run": {
        "utils",
        "provenance",
        "config",
        "config_files",
        "data.batching",
        "train",
        "checkpoint",
        "metrics",
        "runlog",
        "loading",
        "evaluation",
        "pace",
        "sweep.spec",
        "sweep.store",
        "sweep.report",
    },
    "serve": set(),
    "serve.schemas": {"utils"},
    "serve.server": {"utils", "loading", "serve.schemas", "serve.app", "serve.catalog"},
    "serve.batcher": {"translation", "search.options"},
    "serve.catalog": {
        "attention_heads",
        "checkpoint",
        "utils",
        "evaluation",
        "jobs.glossary",
        "loading",
        "metrics",
        "tokenize",
        "translate",
        "translation",
        "search.options",
    },
    "serve.state": {"translation", "serve.batcher", "serve.catalog", "serve.schemas", "search.options"},
    "serve.routes": {
        "utils",
        "jobs.job",
        "translation",
        "attention_heads",
        "search.options",
        "serve.catalog",
        "serve.schemas",
        "serve.state",
    },
    "serve.app": {"__init__", "utils", "views", "serve.catalog", "serve.routes", "serve.schemas", "serve.state"},
    "views": set(),
    "web": set(),
    "web.tokenizers": {"utils", "tokenize"},
    "web.runtime": {"utils", "data.download"},
    "web.export": {
        "utils",
        "codec",
        "shortlist",
        "export",
        "checkpoint",
        "loading",
        "translate",
        "evaluation",
        "int8_export",
        "views",
        "web.runtime",
        "web.tokenizers",
    },
    "cli": {f"cli.{command}" for command in ("common", *COMMANDS)} | {"utils", "provenance", "__init__"},
    "cli.common": {"utils", "config", "quantize", "loading", "fast", "search.options"},
    "cli.validate": {"config", "cli.common"},
    "cli.train": {"utils", "config", "train", "cli.common"},
    "cli.data": {"utils", "config", "data.batching", "data.prepare", "data.stats", "tables", "cli.common"},
    "cli.translate": {
        "utils",
        "alignment",
        "attention_heads",
        "heatmaps",
        "loading",
        "stream",
        "data.textfiles",
        "translation",
        "jobs.job",
        "jobs.markup",
        "cli.common",
    },
    "cli.configs": {"utils", "shipped"},
    "cli.demo": {"shipped", "cli.common", "cli"},
    "cli.score": {"utils", "alignment", "loading", "data.textfiles", "translation", "cli.common"},
    "cli.distill": {"data.corpora", "distill", "loading", "cli.common"},
    "cli.shortlist": {"config", "shortlist", "shortlist_check", "cli.common"},
    "cli.evaluate": {"utils", "provenance", "data.parallel_files", "evaluation", "tables", "cli.common"},
    "cli.average": {"average", "cli.common"},
    "cli.plot": {"utils", "evaluation", "heatmaps", "loading", "plot", "runlog", "cli.common", "cli.evaluate"},
    "cli.export": {"config", "export", "int8_export", "loading", "quantize", "cli.common", "web.export"},
    "cli.sweep": {"utils", "sweep.run", "sweep.spec", "sweep.report", "cli.common"},
    "cli.serve": {"utils", "serve.schemas", "serve.server", "cli.common"},
    "__main__": {"cli"},
}
# Light modules: importing them must not load torch (config validation and data tools stay fast).
NO_TORCH = (
    "cli",  # the parser, --help and `validate` stay fast: commands import torch when they run
    "config",
    "config_files",
    "utils",
    "provenance",
    "shipped",
    "jobs",
    "jobs.documents",
    "jobs.markup",
    "subwords",
    "tokenize",
    "vocab",
    "data.synthetic",
    "data.download",
    "data.corpora",
    "data.distillation_record",
    "data.pair_filters",
    "data.splits",
    "data.parallel_files",
    "data.binarized",
    "codec",
    "data.prepare",
    "shortlist",
    "search",
    "search.prefix",
    "data",
    "alignment",
    "metrics",
    "sweep",
    "sweep.spec",
    "sweep.run",
    "data.textfiles",
    "jobs.glossary",
    "quantize",
    "serve",
    "serve.schemas",
    "views",
    "web",
    "web.tokenizers",
    "web.runtime",
)


def module_path(module: str) -> Path:
    """ "sweep.spec" -> attnmt/sweep/spec.py; "sweep" -> attnmt/sweep/__init__.py; "__init__" -> attnmt/__init__.py."""
    base = PACKAGE.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def module_name(path: Path) -> str:
    """attnmt/sweep/spec.py -> "sweep.spec"; attnmt/sweep/__init__.py -> "sweep"; attnmt/__init__.py -> "__init__"."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def resolved(dotted: str) -> str | None:
    """The attnmt module a dotted name refers to, its longest prefix that is one: attnmt.sweep.spec.Sweep ->
    "sweep.spec", attnmt.utils.UserError -> "utils", attnmt.__version__ -> "__init__"; None outside attnmt."""
    parts = dotted.split(".")
    if parts[0] != "attnmt":
        return None
    for end in range(len(parts), 1, -1):
        if module_path(".".join(parts[1:end])).is_file():
            return ".".join(parts[1:end])
    return "__init__"


def attnmt_imports(source: str, package: str) -> set[str]:
    """The attnmt modules `source` (a module of `package`, such as "attnmt.sweep") imports: `import attnmt.x`,
    `from attnmt.x import y`, `from attnmt import x` and relative imports alike."""
    dotted = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            dotted += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x: level 1 is the package itself, 2 the one above
                base = ".".join([package.rsplit(".", node.level - 1)[0], *([node.module] if node.module else [])])
            dotted += [f"{base}.{alias.name}" for alias in node.names]
    return {module for module in map(resolved, dotted) if module is not None}


def imports_of(path: Path) -> set[str]:
    package = ".".join(["attnmt", *path.relative_to(PACKAGE).parent.parts])
    return attnmt_imports(path.read_text(encoding="utf-8"), package)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def test_imports_follow_the_layering():
    for module, path in package_modules().items():
        allowed = ALLOWED.get(module)
        where = path.relative_to(ROOT)
        assert allowed is not None, f"{where} ({module!r}) has no row in ALLOWED of tests/test_layering.py"
        imported = imports_of(path) - {module}
        assert imported <= allowed, f"{where} imports {sorted(imported - allowed)}, which its row does not allow"


def test_the_table_has_a_row_only_for_modules_that_exist_and_each_says_its_job():
    modules = package_modules()
    assert set(ALLOWED) <= set(modules), f"rows for modules that are gone: {sorted(set(ALLOWED) - set(modules))}"
    assert set(NO_TORCH) <= set(ALLOWED), sorted(set(NO_TORCH) - set(ALLOWED))
    assert all(allowed <= set(ALLOWED) for allowed in ALLOWED.values())
    for path in modules.values():  # the docs' table shows each module's docstring summary as its job
        assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{path.relative_to(ROOT)}: no docstring"


def test_relative_and_package_imports_are_resolved_to_their_modules():
    """`from attnmt import x`, `from . import x` and `from ..x import y` are checked as much as `import attnmt.x`."""
    source = "import attnmt\nfrom attnmt.data import synthetic\nfrom . import store\nfrom ..utils import UserError\n"
    source += "from .spec import SweepSpec\nfrom attnmt.serve import app\nimport attnmt.sweep.run\nimport torch\n"
    imported = attnmt_imports(source, "attnmt.sweep")
    assert imported == {"__init__", "data.synthetic", "sweep.store", "utils", "sweep.spec", "serve.app", "sweep.run"}


def test_the_design_document_quotes_this_table():
    from tools.quote import render

    lines = DESIGN.read_text(encoding="utf-8").splitlines()
    assert MARKER in lines, f"docs/design.md lost its layering table's marker {MARKER}"
    start = lines.index(MARKER) + 1
    expected = render(*MARKER.split()[2:4])
    assert lines[start : start + len(expected)] == expected, "docs/design.md: run python -m tools.quote docs/design.md"
    assert not lines[start + len(expected)].startswith("|"), "docs/design.md's table has rows this table has not"


def test_light_modules_do_not_import_torch():
    code = "import sys\n" + "".join(f"import attnmt.{m}\n" for m in NO_TORCH) + "print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", f"one of {NO_TORCH} imports torch at import time"
