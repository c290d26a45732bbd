"""Sequence-level knowledge distillation (Kim and Rush, 2016): a teacher's beam-search translations
of its own training sources, written as a parallel corpus that a student then trains on.

A student trained on what the teacher's beam search outputs learns to produce that output with
greedy search, so a smaller student, searching greedily, can come close to the teacher's beam.

`distill(translator, sources, prefix, options)` writes `{prefix}.{src_lang}` (the sources, one
per distinct training source, in the order of first appearance) and `{prefix}.{tgt_lang}` (the
teacher's translations), and beside them `{prefix}.distill.json`: the teacher's checkpoints, the
search, a digest of the sources, and how far the work has come. A student config points
`data.train` at the prefix (`corpora.load_corpus`).

Resuming: the sources are translated CHUNK lines at a time, each chunk as one window of
`Translator.translate` (so its batches are the same whatever came before), appended to
`{prefix}.{lang}.partial`, synced to the disk, and only then counted in the record (written
atomically). A killed run leaves at most a chunk that the record does not count; the next run
with the same teacher, search and sources cuts the partial files back to what the record counts
and goes on, so its output is byte for byte that of an uninterrupted run on the same machine and
thread count. The final names appear, by rename, only once every line is written: a student
never reads half a corpus.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.data.distillation_record import read_record, record_path
from attnmt.search.options import SearchOptions
from attnmt.translate import Translator
from attnmt.utils import NO_ROOM, Say, UserError, WriteFailed, sync_file, sync_folder, write_text_atomic

CHUNK = 1000  # sentences translated as one window and committed together


@dataclass(frozen=True)
class Distilled:
    """What a finished (or already finished) distillation wrote."""

    source: Path
    target: Path
    record: Path
    lines: int
    resumed_from: int  # lines a previous run had written (0: a fresh start)
    seconds: float  # translating, this run


def distinct_sources(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Each training source once, in the order it first appears: a source with several
    references (Tatoeba) has one teacher translation, so translating it again adds nothing."""
    return list(dict.fromkeys(src for src, _ in pairs))


def _digest(lines: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _what(translator: Translator, sources: Sequence[str], options: SearchOptions) -> dict:
    """What makes two distillations the same: resuming is only allowed between equal ones."""
    data = translator.config.data
    return {
        "teacher": [str(Path(checkpoint).resolve()) for checkpoint in translator.members],
        "search": dataclasses.asdict(options),
        "src_lang": data.src_lang,
        "tgt_lang": data.tgt_lang,
        "sources": {"lines": len(sources), "sha256": _digest(sources)},
        "chunk": CHUNK,
    }


def _paths(prefix: str | os.PathLike, record: dict) -> dict[str, Path]:
    return {lang: Path(f"{prefix}.{record[lang]}") for lang in ("src_lang", "tgt_lang")}


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def distill(
    translator: Translator,
    sources: Sequence[str],
    prefix: str | os.PathLike,
    options: SearchOptions,
    *,
    say: Say = print,
) -> Distilled:
    """Translate `sources` with `translator` (the teacher: one run or an ensemble) into the corpus
    `prefix`, resuming an interrupted distillation of the same teacher, search and sources."""
    prefix = Path(prefix)
    what = _what(translator, sources, options)
    if what["src_lang"] == what["tgt_lang"]:
        raise UserError(
            f"the teacher translates {what['src_lang']}->{what['tgt_lang']}: its two sides would be written to "
            f"one file, {prefix}.{what['src_lang']}"
        )
    paths = _paths(prefix, what)
    partial = {lang: _partial(path) for lang, path in paths.items()}
    record = read_record(prefix)
    if record is None:
        clashing = [path for path in (*paths.values(), *partial.values()) if path.exists()]
        if clashing:
            raise UserError(
                f"{clashing[0]}: exists and no distillation record ({record_path(prefix).name}) says what wrote it; "
                "remove it or choose another --output"
            )
        record = {**what, "lines_done": 0, "bytes": {"src_lang": 0, "tgt_lang": 0}, "complete": False, "seconds": 0.0}
        try:
            prefix.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"{prefix.parent}: cannot create the output folder ({error.strerror or error})") from None
        _save(prefix, record)
    else:
        differs = [key for key in what if record.get(key) != what[key]]
        if differs:
            raise UserError(
                f"{record_path(prefix)}: a distillation with another {', '.join(differs)} is there; "
                "remove its files or choose another --output"
            )
        if not _renamed(prefix, paths, partial, record):
            _cut_back(prefix, paths, partial, record, sources)
    resumed_from = record["lines_done"]
    if record["complete"]:
        say(f"{paths['tgt_lang']}: already distilled ({resumed_from:,} lines)")
    elif resumed_from:
        say(f"resuming after line {resumed_from:,} of {len(sources):,}")
    started = time.perf_counter()
    for first in range(resumed_from, len(sources), CHUNK):
        chunk = sources[first : first + CHUNK]
        translations = translator.translate(chunk, options, first_number=first + 1)
        texts = {"src_lang": chunk, "tgt_lang": [translation.text for translation in translations]}
        for lang, lines in texts.items():
            record["bytes"][lang] = _append(partial[lang], lines, record["bytes"][lang])
        record["lines_done"] = first + len(chunk)
        record["seconds"] += time.perf_counter() - started
        started = time.perf_counter()
        _save(prefix, record)
        say(f"{record['lines_done']:,} of {len(sources):,} lines distilled")
    if not record["complete"]:
        for lang, path in paths.items():
            if partial[lang].exists() or not path.exists():  # no source at all: empty files
                partial[lang].touch()
                os.replace(partial[lang], path)
        sync_folder(paths["tgt_lang"].parent)
        record["complete"] = True
        _save(prefix, record)
    seconds = record["seconds"] if resumed_from < len(sources) else 0.0
    return Distilled(paths["src_lang"], paths["tgt_lang"], record_path(prefix), len(sources), resumed_from, seconds)


def _save(prefix: Path, record: dict) -> None:
    write_text_atomic(record_path(prefix), json.dumps(record, indent=2) + "\n")


def _renamed(prefix: Path, paths: dict[str, Path], partial: dict[str, Path], record: dict) -> bool:
    """Whether every line is written and the files already carry their final names (a finished
    run, or one killed between the renames and the record saying so)."""
    finals = all(path.exists() for path in paths.values())
    if record["complete"] and not finals:
        missing = next(path for path in paths.values() if not path.exists())
        raise UserError(
            f"{missing}: missing, though {record_path(prefix).name} says it was written; "
            "remove the record to start over"
        )
    return (
        record["lines_done"] == record["sources"]["lines"] and finals and not any(p.exists() for p in partial.values())
    )


def _append(path: Path, lines: Sequence[str], expected_size: int) -> int:
    """Append `lines` to `path` (whose first `expected_size` bytes are the committed ones), sync
    it, and return its new size. A full disk is a WriteFailed that keeps the committed lines."""
    text = "".join(line.replace("\n", " ") + "\n" for line in lines).encode("utf-8")
    try:
        with open(path, "ab") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        if error.errno in NO_ROOM:
            os.truncate(path, expected_size)
        raise WriteFailed(
            path, error, intact="the lines distilled before are kept; rerun the same command to go on"
        ) from None
    return expected_size + len(text)


def _cut_back(
    prefix: Path, paths: dict[str, Path], partial: dict[str, Path], record: dict, sources: Sequence[str]
) -> None:
    """Make the partial files hold exactly the lines the record counts (a killed run may have
    written part of a chunk after them), and check their sources are the record's. A file
    renamed to its final name by a run killed between the two renames is named back."""
    done = record["lines_done"]
    for lang, path in partial.items():
        if not path.exists() and paths[lang].exists():
            os.replace(paths[lang], path)
        size = record["bytes"][lang]
        if done and (not path.exists() or path.stat().st_size < size):
            raise UserError(
                f"{path}: holds less than the {done:,} lines {record_path(prefix).name} counts; "
                "the partial output no longer matches its record: remove the partial files and the record to start over"
            )
        if path.exists():
            os.truncate(path, size)
            sync_file(path)
    if done:
        written = partial["src_lang"].read_text(encoding="utf-8").split("\n")[:-1]
        if written != list(sources[:done]):
            raise UserError(
                f"{partial['src_lang']}: its {done:,} lines are not the first {done:,} training sources; "
                "the partial output no longer matches its source lines: remove the partial files and the record "
                "to start over"
            )
