"""Which raw results may be quoted: a recorded commit, no edit of attnmt/ or benchmarks/ while the
run ran, and the content hash the file was written with.

A raw result (JSON under benchmarks/results/ or docs/results/) is quotable when the code that
made it is known: every code state it records (top level: `git_commit`, `git_dirty`,
`dirty_paths`, `code_at_start`, `code_at_end`, `code_at_report`; each trial's `code_at_start` and
`code_at_end`) names a commit, and none was dirty in attnmt/ or benchmarks/ (a dirty document,
plot or raw result is allowed: it does not change what was measured). Its `content_sha256` must match its
content without `annotations` (`attnmt.provenance`), so a file edited by hand is refused; notes
made after the fact go into `annotations`.

`tools.quote` refuses a table or figure from a file that fails, and `tests/test_results.py`
checks every raw file. LEGACY names the files written before these rules, each with what it
fails; it may only shrink: a file leaves it by being measured again, and a file that was not in
the repository when the rules came cannot join it (`tests/test_results.py`); MOVED names the
path a LEGACY file had then, where it has moved since.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attnmt.provenance import HASH, content_hash

ROOT = Path(__file__).resolve().parents[1]
RESULT_FOLDERS = ("benchmarks/results", "docs/results")
GUARDED = ("attnmt/", "benchmarks/")
# The commit before these rules: every LEGACY file was in the repository there.
RULES_FROM = "c96936fab181f2ee1a9232ebeacd79771941b8de"


def _state_problems(where: str, state: dict[str, Any]) -> list[str]:
    commit = state.get("commit", state.get("git_commit"))
    dirty = state.get("dirty", state.get("git_dirty"))
    paths = state.get("dirty_paths")
    if not commit:
        return [f"{where}no commit recorded"]
    if dirty and paths is None:
        return [f"{where}dirty, its paths not recorded"]
    # a results file is data, not code: a run that writes its own results file as it goes
    # (after each of several runs) leaves that path dirty at its end
    guarded = [path for path in paths or [] if path.startswith(GUARDED) and not path.startswith(RESULT_FOLDERS)]
    return [f"{where}dirty in {', '.join(guarded)}"] if guarded else []


def provenance_problems(results: dict[str, Any]) -> list[str]:
    """What makes a raw result unquotable: unknown or edited code, a missing or wrong content hash."""
    problems: list[str] = []
    states = [(key, results[key]) for key in ("code_at_start", "code_at_end", "code_at_report") if key in results]
    if "git_commit" in results or not states:
        states.insert(0, ("", results))
    for key, state in states:
        problems += _state_problems(f"{key}: " if key else "", state)
    for trial in results.get("trials", []) if isinstance(results.get("trials"), list) else []:
        if not isinstance(trial, dict) or ("code_at_start" not in trial and "state" not in trial):
            continue
        name = trial.get("name", "?")
        if "code_at_start" not in trial:
            problems.append(f"trial {name}: no record of its code")
            continue
        for key in ("code_at_start", "code_at_end"):
            problems += _state_problems(f"trial {name} {key}: ", trial.get(key) or {})
    for entry in results.get("entries", []) if isinstance(results.get("entries"), list) else []:
        if not isinstance(entry, dict) or "code_at_start" not in entry:
            continue  # a row collected before entries recorded their evaluation's code
        name = entry.get("name", "?")
        for key in ("code_at_start", "code_at_end"):
            problems += _state_problems(f"entry {name} {key}: ", entry.get(key) or {})
        trained_by = (entry.get("training") or {}).get("code")
        if trained_by is not None:  # checkpoints record the code that trained them
            problems += _state_problems(f"entry {name} training: ", trained_by)
    if HASH not in results:
        problems.append("no content hash")
    elif results[HASH] != content_hash(results):
        problems.append("content differs from its hash (edited after it was written?)")
    return problems


def raw_files() -> list[Path]:
    return sorted(path for folder in RESULT_FOLDERS for path in (ROOT / folder).glob("*.json"))


def refusal(path: str | Path) -> str | None:
    """Why a figure may not be quoted from the raw result at `path` (relative to the repository), or None."""
    relative = Path(path).as_posix()
    if relative in LEGACY or not relative.startswith(RESULT_FOLDERS):
        return None
    problems = provenance_problems(json.loads((ROOT / relative).read_text(encoding="utf-8")))
    return f"{relative}: not quotable: {'; '.join(problems)}" if problems else None


# Written before the rules above, each with what it fails (re-measure it to take it off the list).
LEGACY: dict[str, str] = {
    "benchmarks/results/ab-search-cpu.json": "dirty, its paths not recorded; no content hash",
    "benchmarks/results/engines-cpu.json": "no commit recorded; no content hash",
    "benchmarks/results/fast-preset-cpu.json": "no content hash",
    "benchmarks/results/fsync-cpu.json": "no commit recorded; no content hash",
    "benchmarks/results/gpu-h100.json": "no content hash; its command and commit were edited by hand",
    "benchmarks/results/kernels-cpu.json": "no commit recorded; no content hash",
    "benchmarks/results/pareto-cpu.json": (
        "dirty, its paths not recorded; no content hash; dirty only through its own plot, written before it"
    ),
    "benchmarks/results/pareto-gpu.json": "no content hash",
    "benchmarks/results/peers-speed.json": (
        "no content hash; stamped clean at the top and dirty in every attnmt row (stamped when written, 70 minutes in)"
    ),
    "benchmarks/results/profile-decode-cpu.json": "dirty, its paths not recorded; no content hash",
    "benchmarks/results/profile-decode-student-small-cpu.json": "no content hash",
    "benchmarks/results/scale-cpu.json": "no content hash",
    "benchmarks/results/speed-cpu.json": "no commit recorded; no content hash",
    "benchmarks/results/speed-h100.json": "no commit recorded; no content hash",
    "benchmarks/results/steering-cpu.json": "no content hash",
    "docs/results/decoder-scorer-attention.json": "dirty, its paths not recorded; no content hash",
    "docs/results/decoder-scorer.json": "no commit recorded; no content hash; 24 trials without a record of their code",
    "docs/results/distillation-runs.json": "no content hash",
    "docs/results/initialization-attention.json": "no commit recorded; no content hash",
    "docs/results/initialization-parts.json": "dirty, its paths not recorded; no content hash",
    "docs/results/initialization.json": "no commit recorded; no content hash; 2 trials without a record of their code",
    "docs/results/large-file.json": "no commit recorded; no content hash",
    "docs/results/multi30k-en-de-beam5.json": "no commit recorded; no content hash",
    "docs/results/multi30k-en-de-greedy.json": "no commit recorded; no content hash",
    "docs/results/multi30k-en-de-luong-tuned.json": "no commit recorded; no content hash",
    "docs/results/multi30k-en-de-luong-untied.json": "no commit recorded; no content hash",
    "docs/results/multi30k-en-fr-tuned.json": "no commit recorded; no content hash",
    "docs/results/multi30k-table-gru.json": "no commit recorded; no content hash",
    "docs/results/notebook-questions.json": "no commit recorded; no content hash",
    "docs/results/peers-quality-identical.json": (
        "dirty, its paths not recorded; no content hash; the race spans four commits under one label"
    ),
    "docs/results/peers-quality-joeynmt.json": "no content hash",
    "docs/results/peers-quality-recipes.json": "dirty, its paths not recorded; no content hash",
    "docs/results/peers-quality.json": "no commit recorded; no content hash",
    "docs/results/recipes.json": "no commit recorded; no content hash; 8 trials without a record of their code",
    "docs/results/serving.json": "no commit recorded; no content hash",
    "docs/results/web-tokenizers.json": "no content hash",
    "docs/results/web.json": "no content hash",
}

# LEGACY files moved since the rules came, each with the path it had then: moving a file keeps its
# bytes, so it stays LEGACY (the name it had is now another, newer file's).
MOVED: dict[str, str] = {
    "docs/results/multi30k-table-gru.json": "docs/results/multi30k-table.json",
}
