"""MkDocs hooks of the documentation site (mkdocs.yml names this file): what the site builds
from the code instead of from pages someone keeps in step with it by hand.

- `reference/cli.md`, from the argparse parsers the `attnmt` command itself runs;
- `reference/config.md`, from the pydantic models' fields, types, defaults and descriptions;
- the raw results and other repository files the pages link to outside docs/ (`../benchmarks/
  results/x.json`): copied into the site under `repository/`, and the links rewritten to the
  copies, so a link on the site opens the very file behind a figure.

The generators are plain functions (`cli_reference`, `config_reference`, `links_to_rewrite`), so
tests can check them without building the site.
"""

from __future__ import annotations

import argparse
import posixpath
import re
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COPIES = "repository"  # where the site keeps copies of the repository files its pages link to
# A Markdown link's target: ](target) or ](target#anchor), the target relative to the page.
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Repository files outside docs/ that the site makes pages of, and the pages.
ROOT_PAGES = {"CONTRIBUTING.md": "contributing.md", "CHANGELOG.md": "changelog.md"}
# Links to these go to a page of the site that stands for them: the home page for the README,
# and the notebook through docs/notebook.ipynb, a symbolic link to it.
STANDS_FOR = {"README.md": "index.md", "notebooks/attention_seq2seq.ipynb": "notebook.ipynb"}


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def cli_reference() -> str:
    """Every `attnmt` command and subcommand with its --help text, as a Markdown page."""
    from attnmt.cli import build_parser

    parser = build_parser()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the parsers `attnmt` runs, when the site is built: each command's `--help`.",
        "",
    ]

    def add(prog: str, command: argparse.ArgumentParser, level: int) -> None:
        lines.extend([f"{'#' * level} {prog}", "", "```text", command.format_help().rstrip(), "```", ""])
        for name, sub in _subcommands(command):
            add(f"{prog} {name}", sub, level + 1)

    lines.extend(["## attnmt", "", "```text", parser.format_help().rstrip(), "```", ""])
    for name, command in _subcommands(parser):
        add(f"attnmt {name}", command, 3)
    return "\n".join(lines)


def _type_name(annotation) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(repr(value) for value in typing.get_args(annotation))
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(_type_name(part) for part in typing.get_args(annotation))
    return str(annotation).replace("typing.", "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_reference() -> str:
    """Every config key of every section: type, default and description, as a Markdown page."""
    from attnmt.config import Config

    lines = [
        "# Configuration reference",
        "",
        "A config is YAML with the sections below; every key is optional and takes the default shown. "
        "Generated from the pydantic models in `attnmt/config.py` when the site is built, so it says "
        "what the code accepts. `attnmt validate CONFIG` prints a config with every default filled in.",
        "",
    ]
    for section, field in Config.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel), section
        lines.extend([f"## {section}", "", "| key | type | default | what it sets |", "|---|---|---|---|"])
        for name, info in model.model_fields.items():
            default = "" if info.default is PydanticUndefined else f"`{info.default!r}`"
            row = [f"`{section}.{name}`", f"`{_type_name(info.annotation)}`", default, info.description or ""]
            lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
        lines.append("")
    return "\n".join(lines)


def site_path(repository_path: str) -> str:
    """Where the repository file `repository_path` is on the site."""
    if repository_path.startswith("docs/"):
        return repository_path.removeprefix("docs/")
    return {**ROOT_PAGES, **STANDS_FOR}.get(repository_path, f"{COPIES}/{repository_path}")


def page_source(src_uri: str) -> str:
    """The repository path a site page is made from."""
    return {page: path for path, page in ROOT_PAGES.items()}.get(src_uri, f"docs/{src_uri}")


def links_to_rewrite(src_uri: str, markdown: str) -> dict[str, str]:
    """The links of the site page `src_uri` to repository files that are elsewhere on the site
    than the link says (from a page made of a file outside docs/, or from docs/ to the rest of the
    repository, or out of docs/ and back in):
    {the link as written: the target's repository path}. Links to other sites are not read."""
    source, found = page_source(src_uri), {}
    for match in LINK.finditer(markdown):
        target = match["target"]
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
        if (ROOT / resolved).is_file() and site_link(src_uri, resolved) != target:
            found[target] = resolved
    return found


def site_link(src_uri: str, repository_path: str) -> str:
    """The link from the site page `src_uri` to the repository file `repository_path`."""
    return posixpath.relpath(site_path(repository_path), posixpath.dirname(src_uri) or ".")


# The pages made from the code, by their place under docs/ (where no file of that name may be).
GENERATED = {"reference/cli.md": cli_reference, "reference/config.md": config_reference}


# --- the hooks MkDocs calls -----------------------------------------------------------------


def on_files(files, config):
    from mkdocs.structure.files import File

    for page, make in GENERATED.items():
        files.append(File.generated(config, page, content=make()))
    pages = {page.relative_to(DOCS).as_posix(): page.read_text(encoding="utf-8") for page in DOCS.rglob("*.md")}
    for path, page in ROOT_PAGES.items():
        pages[page] = (ROOT / path).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=pages[page]))
    copied = set()
    for src_uri, markdown in pages.items():
        for repository_path in links_to_rewrite(src_uri, markdown).values():
            on_site = site_path(repository_path)
            if on_site.startswith(COPIES) and on_site not in copied:
                copied.add(on_site)
                files.append(File.generated(config, on_site, abs_src_path=str(ROOT / repository_path)))
    return files


def on_page_markdown(markdown, page, config, files):
    src_uri = page.file.src_uri
    # The figure markers are for the results test; Markdown would read their `a[0][2]` as links.
    markdown = COMMENT.sub("", markdown)
    links = links_to_rewrite(src_uri, markdown)

    def rewrite(match: re.Match) -> str:
        target = match["target"]
        if target not in links:
            return match[0]
        return f"]({site_link(src_uri, links[target])}{match['anchor'] or ''})"

    return LINK.sub(rewrite, markdown) if links else markdown
