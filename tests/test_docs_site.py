"""The documentation site's sources: every page reachable from the navigation, and the pages the
site generates from the code (tools/docs_site.py) complete. `make docs` builds the site itself
with strict checks in CI; these tests need no MkDocs."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from attnmt.cli import COMMANDS, build_parser
from attnmt.config import Config
from tools import docs_site

ROOT = Path(__file__).resolve().parents[1]


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _site_config() -> dict:
    # mkdocs.yml may hold Python tags in other projects; this one is plain YAML
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def test_every_page_is_in_the_navigation_once_and_every_navigation_entry_exists():
    nav = _nav_pages(_site_config()["nav"])
    generated = {*docs_site.GENERATED, *docs_site.ROOT_PAGES.values()}
    pages = {path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")}
    assert len(nav) == len(set(nav))
    assert set(nav) == pages | generated | {"notebook.ipynb"}
    assert (ROOT / "docs" / "notebook.ipynb").resolve() == (ROOT / "notebooks" / "attention_seq2seq.ipynb")
    assert _site_config()["strict"] is True and "tools/docs_site.py" in _site_config()["hooks"]


def _commands(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    found = []
    for name, sub in docs_site._subcommands(parser):
        found += [f"{prog} {name}", *_commands(sub, f"{prog} {name}")]
    return found


def test_the_cli_reference_has_every_command_and_subcommand_with_its_options():
    page = docs_site.cli_reference()
    commands = _commands(build_parser(), "attnmt")
    assert len(commands) > len(COMMANDS)  # data and plot have subcommands of their own
    for command in commands:
        assert f"# {command}\n" in page
    assert "--beam" in page and "--glossary" in page and "--max-document-chars" in page


def test_the_config_reference_has_every_key_with_its_type_default_and_description():
    page = docs_site.config_reference()
    for section, field in Config.model_fields.items():
        assert f"## {section}\n" in page
        for name, info in field.annotation.model_fields.items():
            assert info.description, f"{section}.{name} has no description: the reference would show none"
            (row,) = [line for line in page.splitlines() if line.startswith(f"| `{section}.{name}` |")]
            assert docs_site._cell(info.description) in row
    assert "| `decode.stopping` | `'k_finished' | 'best_finished'` | `'k_finished'` |" in page.replace("\\|", "|")


def test_links_that_leave_docs_go_to_copies_or_to_the_pages_that_stand_for_them():
    page = (
        "[raw](../benchmarks/results/documents.json) [same folder](../docs/results/demo-evaluation.json) "
        "[inside](results.md#the-table) [readme](../README.md) [site](https://example.org/x.json) "
        "[missing](../benchmarks/results/no-such-file.json)"
    )
    links = docs_site.links_to_rewrite("performance.md", page)
    assert links == {
        "../benchmarks/results/documents.json": "benchmarks/results/documents.json",
        "../docs/results/demo-evaluation.json": "docs/results/demo-evaluation.json",
        "../README.md": "README.md",
    }
    assert (
        docs_site.site_link("performance.md", links["../docs/results/demo-evaluation.json"])
        == "results/demo-evaluation.json"
    )
    assert docs_site.site_link("guide/data.md", "benchmarks/results/documents.json") == (
        "../repository/benchmarks/results/documents.json"
    )
    assert docs_site.site_link("guide/data.md", "README.md") == "../index.md"
    # a page made from a file at the repository's root: its links are read from there
    contributing = docs_site.links_to_rewrite("contributing.md", "[design](docs/design.md) [log](CHANGELOG.md)")
    assert contributing == {"docs/design.md": "docs/design.md", "CHANGELOG.md": "CHANGELOG.md"}
    assert docs_site.site_link("contributing.md", "CHANGELOG.md") == "changelog.md"


def test_the_hook_rewrites_links_and_drops_the_figure_markers():
    class File:
        src_uri = "guide/data.md"

    class Page:
        file = File()

    markdown = "58.47<!-- figure: x.json a[0][2] {:.2f} --> BLEU ([raw](../../benchmarks/results/documents.json#top))"
    assert docs_site.on_page_markdown(markdown, Page(), None, None) == (
        "58.47 BLEU ([raw](../repository/benchmarks/results/documents.json#top))"
    )
