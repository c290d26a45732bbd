"""The configs that ship inside the package, so that a pip install can train without a clone.

They are copies of the repository's `configs/` (a test holds them to the same bytes), kept as
package data under `attnmt/resources/configs/` and read through `importlib.resources`, which
finds them in a wheel, a zip or a checkout alike.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from attnmt.utils import UserError

SUFFIX = ".yaml"
SUMMARY = 90  # characters of a config's description in the list


def _folder():
    return resources.files("attnmt") / "resources" / "configs"


def config_names() -> list[str]:
    """The shipped configs' names (the file names without .yaml), sorted."""
    return sorted(item.name[: -len(SUFFIX)] for item in _folder().iterdir() if item.name.endswith(SUFFIX))


def config_text(name: str) -> str:
    """A shipped config's YAML text; UserError naming the shipped ones for another name."""
    if name.endswith(SUFFIX):
        name = name[: -len(SUFFIX)]
    if name not in config_names():
        raise UserError(f"no shipped config {name!r}; the shipped configs are {', '.join(config_names())}")
    return (_folder() / f"{name}{SUFFIX}").read_text(encoding="utf-8")


def summary(name: str) -> str:
    """What a config is for: its opening comment up to the first colon or full stop."""
    comment = []
    for line in config_text(name).splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    first = re.split(r"[:.](?:\s|$)", " ".join(comment), maxsplit=1)[0]
    return first if len(first) <= SUMMARY else first[: SUMMARY - 3].rstrip() + "..."


@contextlib.contextmanager
def config_path(name: str) -> Iterator[Path]:
    """A file path holding the shipped config `name`, while the block runs."""
    config_text(name)  # the UserError for an unknown name, before anything else
    with resources.as_file(_folder() / f"{name.removesuffix(SUFFIX)}{SUFFIX}") as path:
        yield path
