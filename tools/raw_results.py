"""Which raw results may be quoted, and where: a recorded commit for every run and every training,
no edit of attnmt/ or benchmarks/ while a run ran, and the content hash the file was written with.

A raw result (JSON under benchmarks/results/ or docs/results/) is quotable when the code that
made it is known. Every code state it records, wherever it lies in the JSON (a dict with a
`commit` or `git_commit`, or one under `code_at_start`, `code_at_end`, `code_at_report`,
`provenance_at_start` or `provenance`: the file's own, each sweep trial's, each table row's, each
run's of a multi-run file), names a commit and was not dirty in attnmt/ or benchmarks/ (a dirty
document, plot or raw result is allowed: it does not change what was measured). A run whose
commit changed between its start and its end (`code_at_start` to `code_at_end`,
`provenance_at_start` to `provenance`) is refused unless `git diff` between the two commits
touches nothing in attnmt/ or benchmarks/ outside the result folders: a commit of documents while
a run ran changes nothing it measured, a commit of code does. A commit git does not know (a
rewritten history) cannot be compared and is refused; a shallow clone, which holds no history to
compare, leaves this one check to a full clone. A problem is named by its
path into the JSON, as `tools.quote` reads paths (`systems.attnmt.runs[1].provenance`).

Trainings record their code too: a checkpoint's `training` record (it has a `step`, `run_steps`
or `checkpoint`) names the code that trained it under `code`, a `distillation` record the code
that distilled under `code`, and every item of a `runs` or `trials` list that trained (it has
`steps`, `updates` or a sweep's `state`) carries its own code state. A file that only collects
trainings made elsewhere (a report over run folders) records its own code, not theirs, so
without these it says nothing of the code that trained what it quotes.

Its `content_sha256` must match its content without `annotations` (`attnmt.provenance`), so a
file edited by hand is refused. `annotations` are notes added after the fact, each
`{"at": ISO-8601 date-time with its zone, "note": text}`, so a reader sees when a note came and
what the run could have known. A note may only restate what the raw data shows or say how the run
was made (what else ran beside it, which commit trained which seed); it may never change or add a
figure. No check can tell this: it is a rule for contributors and reviewers.

`tools.quote` refuses a table or figure from a file that fails, except on a history page (a
Markdown page whose first line is `<!-- history: one sentence -->`: figures from runs that predate
these rules, marked as such), which may quote a refused file but never one whose content no longer
matches its hash. `tests/test_results.py` checks every raw file and holds the share of figures
outside history pages that come from refused or LEGACY files under a limit. LEGACY names the files
written before the first rules (a recorded commit, no dirty code, a hash), each with what it fails;
it may only shrink: a file leaves it by being measured again, and a file that was not in the
repository when the rules came cannot join it (`tests/test_results.py`); MOVED names the path a
LEGACY file had then, where it has moved since.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from attnmt.provenance import ANNOTATIONS, HASH, content_hash

ROOT = Path(__file__).resolve().parents[1]
RESULT_FOLDERS = ("benchmarks/results", "docs/results")
GUARDED = ("attnmt/", "benchmarks/")
# The commit before these rules: every LEGACY file was in the repository there.
RULES_FROM = "c96936fab181f2ee1a9232ebeacd79771941b8de"
# The commit that brought the pace probe (attnmt.pace): a raw result added after it that records its
# machine records the probe too (`pace_missing`).
PACE_FROM = "4ffbb308507407754f60a9f3b61309667e2079d8"
# The code states of one run, at its start and at its end.
STATE_PAIRS = (("code_at_start", "code_at_end"), ("provenance_at_start", "provenance"))
STATE_KEYS = ("code_at_start", "code_at_end", "code_at_report", "provenance_at_start", "provenance")
RUN_LISTS = ("runs", "trials")
# The markers of a document: a quoted table, a figure in prose, a history page (`tools.quote`).
MARKER = re.compile(r"<!-- results: (\S+) (\S+) -->")
FIGURE = re.compile(r"<!-- figure: (\S+) (.+?) (\S+) -->")
HISTORY = re.compile(r"<!-- history: (\S.*?) -->")
EDITED = "content differs from its hash (edited after it was written?)"


def _guarded(paths: list[str] | tuple[str, ...]) -> list[str]:
    # a results file is data, not code: a run that writes its own results file as it goes
    # (after each of several runs) leaves that path dirty at its end
    return [path for path in paths if path.startswith(GUARDED) and not path.startswith(RESULT_FOLDERS)]


def _state_problems(where: str, state: dict[str, Any]) -> list[str]:
    commit = state.get("commit", state.get("git_commit"))
    dirty = state.get("dirty", state.get("git_dirty"))
    paths = state.get("dirty_paths")
    if not commit:
        return [f"{where}no commit recorded"]
    if dirty and paths is None:
        return [f"{where}dirty, its paths not recorded"]
    guarded = _guarded(paths or [])
    return [f"{where}dirty in {', '.join(guarded)}"] if guarded else []


@functools.cache
def _known(root: Path, commit: str) -> bool:
    done = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    return done.returncode == 0


@functools.cache
def _shallow(root: Path) -> bool:
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True
    )
    return done.stdout.strip() == "true"


@functools.cache
def _changed_paths(root: Path, first: str, second: str) -> tuple[str, ...]:
    done = subprocess.run(
        ["git", "-C", str(root), "diff", "--name-only", first, second], capture_output=True, text=True
    )
    return tuple(done.stdout.splitlines())


def _commit_change_problems(where: str, at_start: dict[str, Any], at_end: dict[str, Any]) -> list[str]:
    """A run whose commit changed while it ran: refused when the change touched code it measured."""
    first, second = (state.get("commit", state.get("git_commit")) for state in (at_start, at_end))
    if not first or not second or first == second:
        return []  # a missing commit is the state rule's problem
    unknown = [commit for commit in (first, second) if not _known(ROOT, commit)]
    if unknown and _shallow(ROOT):
        return []  # a shallow clone holds no history to compare: a full clone checks it
    if unknown:
        return [f"{where}its commit changed while it ran, and git does not know {', '.join(unknown)}"]
    guarded = _guarded(_changed_paths(ROOT, first, second))
    if not guarded:
        return []
    shown = ", ".join(guarded[:3]) + (f" and {len(guarded) - 3} more" if len(guarded) > 3 else "")
    return [f"{where}its commit changed while it ran ({first[:10]} to {second[:10]}), in {shown}"]


def _is_state(key: str, value: Any) -> bool:
    return isinstance(value, dict) and (key in STATE_KEYS or "commit" in value or "git_commit" in value)


def _training_problems(key: str, value: Any, where: str) -> list[str]:
    """A training, a distillation or a trained run recorded without the code that made it."""
    if not isinstance(value, dict):
        return []
    if key == "training" and value.keys() & {"step", "run_steps", "checkpoint"} and not value.get("code"):
        return [f"{where}: no record of the code that trained it"]
    if key == "distillation" and not value.get("code"):
        return [f"{where}: no record of the code that distilled it"]
    return []


def _trained_without_code(item: Any) -> bool:
    """An item of a `runs` or `trials` list that trained and records no code state of its own."""
    if not isinstance(item, dict) or not item.keys() & {"steps", "updates", "state"}:
        return False
    own = any(_is_state(key, value) for key, value in item.items())
    return not own and not (item.get("training") or {}).get("code")


def _walk(node: Any, where: str, key: str = "") -> list[str]:
    """The problems of every code state and training record under `node`, the value of `key` at the
    JSON path `where`."""
    problems: list[str] = []
    if isinstance(node, list):
        for index, item in enumerate(node):
            if _is_state("", item):  # a list of states, one per size or machine
                problems += _state_problems(f"{where}[{index}]: ", item)
            if key in RUN_LISTS and _trained_without_code(item):
                problems.append(f"{where}[{index}]: trained with no record of its code")
            problems += _walk(item, f"{where}[{index}]")
        return problems
    if not isinstance(node, dict):
        return []
    prefix = f"{where}." if where else ""
    for key, value in node.items():
        path = f"{prefix}{key}"
        if key == ANNOTATIONS and not where:
            continue  # notes made after the fact: annotation_problems
        if _is_state(key, value):
            problems += _state_problems(f"{path}: ", value)
        problems += _training_problems(key, value, path)
        problems += _walk(value, path, key)
    for start, end in STATE_PAIRS:
        if _is_state(start, node.get(start)) and _is_state(end, node.get(end)):
            problems += _commit_change_problems(f"{prefix}{start} to {end}: ", node[start], node[end])
    return problems


def annotation_problems(annotations: Any) -> list[str]:
    """What is wrong with `annotations`: a list of `{"at": ISO-8601 date-time with its zone, "note": text}`."""
    shape = 'each note is {"at": an ISO-8601 date-time with its zone, "note": its text}'
    if not isinstance(annotations, list):
        return [f"{ANNOTATIONS}: not a list; {shape}"]
    problems = []
    for index, note in enumerate(annotations):
        if not (isinstance(note, dict) and note.keys() == {"at", "note"} and isinstance(note["note"], str)):
            problems.append(f"{ANNOTATIONS}[{index}]: not a note with its time; {shape}")
            continue
        try:
            zone = datetime.fromisoformat(note["at"]).tzinfo if isinstance(note["at"], str) else None
        except ValueError:
            zone = None
        if zone is None:
            problems.append(f"{ANNOTATIONS}[{index}].at: {note['at']!r} is not an ISO-8601 date-time with its zone")
    return problems


def hash_problems(results: dict[str, Any]) -> list[str]:
    if HASH not in results:
        return ["no content hash"]
    return [] if results[HASH] == content_hash(results) else [EDITED]


AVERAGED = "/checkpoints/averaged"


def _averaged_with_their_runs(results: dict[str, Any]) -> set[str]:
    """The `training` paths of entries that score a run's averaged checkpoint (RUN/checkpoints/averaged)
    where the same file scores RUN itself with the code that trained it, over the same updates: an
    average of a run's checkpoints was trained by that run's code (checkpoints averaged before
    averaging recorded its members' code carry none of their own)."""
    entries = results.get("entries") if isinstance(results.get("entries"), list) else []
    trained = {
        (entry.get("name"), (entry.get("training") or {}).get("run_steps"))
        for entry in entries
        if isinstance(entry, dict) and (entry.get("training") or {}).get("code")
    }
    return {
        f"entries[{index}].training"
        for index, entry in enumerate(entries)
        if isinstance(entry, dict)
        and str(entry.get("checkpoint", "")).endswith(AVERAGED)
        and (str(entry["checkpoint"]).removesuffix(AVERAGED), (entry.get("training") or {}).get("run_steps")) in trained
    }


def provenance_problems(results: dict[str, Any]) -> list[str]:
    """What makes a raw result unquotable: unknown or edited code (its own, a run's or a training's),
    undated annotations, a missing or wrong content hash."""
    problems: list[str] = []
    if "git_commit" in results or not any(_is_state(key, results.get(key)) for key in STATE_KEYS):
        problems += _state_problems("", results)
    inherited = {f"{path}: no record of the code that trained it" for path in _averaged_with_their_runs(results)}
    problems += [problem for problem in _walk(results, "") if problem not in inherited]
    if ANNOTATIONS in results:
        problems += annotation_problems(results[ANNOTATIONS])
    return problems + hash_problems(results)


def raw_files() -> list[Path]:
    return sorted(path for folder in RESULT_FOLDERS for path in (ROOT / folder).glob("*.json"))


def is_history(text: str) -> bool:
    """Whether a Markdown page is a history page: its first line `<!-- history: one sentence -->`."""
    return bool(HISTORY.fullmatch(text.split("\n", 1)[0].strip()))


@functools.lru_cache(maxsize=256)
def _problems_of(text: str, history: bool) -> tuple[str, ...]:
    results = json.loads(text)
    return tuple(hash_problems(results) if history else provenance_problems(results))


def refusal(path: str | Path, *, history: bool = False) -> str | None:
    """Why a figure may not be quoted from the raw result at `path` (relative to the repository), or
    None; on a history page only a file whose content no longer matches its hash is refused."""
    relative = Path(path).as_posix()
    if relative in LEGACY or not relative.startswith(RESULT_FOLDERS):
        return None
    text = (ROOT / relative).read_text(encoding="utf-8")
    problems = _problems_of(text, history)
    if not problems:
        return None
    shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
    return f"{relative}: not quotable{' even on a history page' if history else ''}: {shown}"


def _keys(node: Any) -> set[str]:
    """Every key of `node`'s dicts whose value is not null, at any depth."""
    if isinstance(node, list):
        return set().union(*(_keys(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    own = {key for key, value in node.items() if value is not None}
    return own.union(*(_keys(value) for value in node.values()))


def pace_missing(results: dict[str, Any]) -> bool:
    """Whether a raw result records the machine it ran on but no pace probe taken on it (`attnmt.pace`):
    minutes without the machine's pace cannot be compared with minutes measured elsewhere."""
    keys = _keys(results)
    return "machine" in keys and "pace" not in keys


def counts_as_legacy(path: str) -> bool:
    """Whether a figure quoted from `path` is one the rules do not vouch for: LEGACY, refused or missing."""
    if path in LEGACY:
        return True
    try:
        return refusal(path) is not None
    except (OSError, ValueError):
        return True


def quoted_sources(text: str) -> list[list[str]]:
    """The results files of each quoted table and each figure in prose of a page, one list per quote."""
    tables = [[match[1]] for line in text.splitlines() if (match := MARKER.fullmatch(line.strip()))]
    return tables + [match[1].split(",") for match in FIGURE.finditer(text)]


def legacy_share(documents: list[Path]) -> dict[str, tuple[int, int]]:
    """Per page that is not a history page: (its quotes from a LEGACY or refused file, all its quotes)."""
    share = {}
    for document in documents:
        text = Path(document).read_text(encoding="utf-8")
        if not is_history(text):
            quotes = quoted_sources(text)
            share[str(document)] = (sum(any(map(counts_as_legacy, files)) for files in quotes), len(quotes))
    return share


def share_report(documents: list[Path]) -> list[str]:
    """The legacy share of `documents` in all, then each page's with quotes, most legacy quotes first."""
    share = legacy_share(documents)
    legacy, total = sum(count for count, _ in share.values()), sum(quotes for _, quotes in share.values())
    history = len(documents) - len(share)
    lines = [
        f"legacy share: {legacy:,} of {total:,} quoted figures ({legacy / max(total, 1):.1%}) in {len(share)} pages,"
        f" {history} history page{'' if history == 1 else 's'} excluded"
    ]
    pages = sorted(share.items(), key=lambda item: (-item[1][0], item[0]))
    return lines + [f"  {page}: {count:,} of {quotes:,}" for page, (count, quotes) in pages if quotes]


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
