"""Where a raw result came from, and a check that it was not edited afterwards.

A raw result (a benchmark's JSON, a sweep's trials) records the code that made it twice, when
the run started and when it ended (`code_state`: the git commit, whether tracked files differed
from it and which, and the machine's load average, which says whether other heavy work ran), so an
edit or a commit made while it ran shows. `content_hash` is a digest of the result's content
without its `annotations` field (notes added after the fact) and without the hash itself: a raw
file stores it, and a file edited by hand no longer matches it.

Leaf module: imports nothing from attnmt, and no torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

ANNOTATIONS = "annotations"
HASH = "content_sha256"
CHECKOUT = Path(__file__).resolve().parents[1]


def _git(where: Path, *arguments: str) -> str | None:
    try:
        done = subprocess.run(["git", *arguments], cwd=where, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def code_state(checkout: str | Path | None = None) -> dict[str, Any]:
    """The code running now: the commit of the checkout holding attnmt (or `checkout`), whether
    tracked files differ from it and which (`dirty_paths`), all None outside a git checkout (an
    installed wheel), and the 1-minute load average (None where the system has none)."""
    where = Path(checkout) if checkout is not None else CHECKOUT
    commit = _git(where, "rev-parse", "HEAD")
    status = _git(where, "status", "--porcelain", "--untracked-files=no") if commit else None
    try:
        load = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        load = None
    if commit is None or status is None:
        return {"commit": None, "dirty": None, "dirty_paths": None, "load_average": load}
    paths = sorted(line[3:] for line in status.splitlines() if line.strip())
    return {"commit": commit.strip(), "dirty": bool(paths), "dirty_paths": paths, "load_average": load}


def code_span(at_start: dict[str, Any], at_end: dict[str, Any]) -> dict[str, Any]:
    """A run's code from two `code_state`s: both (`code_at_start`, `code_at_end`), whether the
    commit or the edited files changed between them (`code_changed`), and `git_commit`,
    `git_dirty` and `dirty_paths` saying the worst of the two (None where git is absent)."""
    changed = (at_start["commit"], at_start["dirty_paths"]) != (at_end["commit"], at_end["dirty_paths"])
    return {
        "git_commit": at_start["commit"],
        "git_dirty": None if at_end["dirty"] is None else bool(at_start["dirty"] or at_end["dirty"] or changed),
        "dirty_paths": sorted(set(at_start["dirty_paths"] or []) | set(at_end["dirty_paths"] or [])),
        "code_at_start": at_start,
        "code_at_end": at_end,
        "code_changed": changed,
    }


def content_hash(results: dict[str, Any]) -> str:
    """sha256 of the result's JSON with sorted keys, without `annotations` and the hash itself."""
    content = {key: value for key, value in results.items() if key not in (ANNOTATIONS, HASH)}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def with_content_hash(results: dict[str, Any]) -> dict[str, Any]:
    """The result with its `content_sha256` as the last field."""
    content = {key: value for key, value in results.items() if key != HASH}
    return {**content, HASH: content_hash(content)}
