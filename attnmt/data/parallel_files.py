"""Parallel text in files, and the user's own corpora made of it.

Line-aligned pairs, tab-separated pairs, test files with their references; the corpora `files`
(a path prefix completed by each language) and `tsv` (source<TAB>target lines): their files
found by the prefix rules (`locate_user_data`, for `corpora.locate_corpus`), then read from the
`CorpusFiles` found. The paths of user data are used as given; only the built-in corpora are
looked up in `data.data_dir` (`corpora`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from attnmt.config import DataConfig
from attnmt.data.distillation_record import check_student
from attnmt.data.splits import CorpusFiles, CorpusSplits, CorpusStream, Example, assemble, streamed
from attnmt.data.textfiles import read_input, stream_corpus_lines
from attnmt.utils import UserError


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> list[tuple[str, str]]:
    """(src, tgt) pairs from two line-aligned files."""
    return list(stream_parallel(src_path, tgt_path))


def stream_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> Iterator[tuple[str, str]]:
    """(src, tgt) pairs from two line-aligned files, read lazily; files of different lengths are
    a UserError giving both line counts, raised when the shorter one ends."""
    sources, targets = stream_corpus_lines(src_path), stream_corpus_lines(tgt_path)
    for paired, (src, tgt) in enumerate(itertools.zip_longest(sources, targets)):
        if src is None or tgt is None:
            total = paired + 1 + sum(1 for _ in (sources if tgt is None else targets))
            n_src, n_tgt = (total, paired) if tgt is None else (paired, total)
            raise UserError(
                f"{src_path} has {n_src} lines but {tgt_path} has {n_tgt}; "
                "parallel files must have the same number of lines"
            )
        yield src.strip(), tgt.strip()


def read_tsv(path: str | os.PathLike) -> list[tuple[str, str]]:
    """(first, second) column pairs of a tab-separated file; further columns are ignored
    (newer manythings.org files add an attribution column)."""
    return list(stream_tsv(path))


def stream_tsv(path: str | os.PathLike) -> Iterator[tuple[str, str]]:
    """`read_tsv`'s pairs, read lazily."""
    for line_number, line in enumerate(stream_corpus_lines(path), 1):
        fields = line.split("\t")
        if len(fields) < 2:
            raise UserError(f"{path}:{line_number}: no tab; expected source<TAB>target")
        src, tgt = fields[0].strip(), fields[1].strip()
        if not src or not tgt:
            raise UserError(f"{path}:{line_number}: empty {'source' if not src else 'target'}")
        yield src, tgt


def read_test_files(src_path: str, ref_paths: Sequence[str]) -> list[Example]:
    """Examples from a source file and one or more line-aligned reference files. A reference
    line left empty just means fewer references for that sentence."""
    if not ref_paths:
        raise UserError("the source file needs at least one reference file", field="ref")
    sources = read_input(src_path)
    columns = []
    for ref_path in ref_paths:
        refs = read_input(ref_path)
        if len(refs) != len(sources):
            raise UserError(f"{ref_path} has {len(refs)} lines but {src_path} has {len(sources)}")
        columns.append(refs)
    examples = []
    for line, (source, *refs) in enumerate(zip(sources, *columns, strict=True), 1):
        kept = tuple(ref.strip() for ref in refs if ref.strip())
        if not kept:
            raise UserError(f"{ref_paths[0]}:{line}: no reference for this sentence in any reference file")
        examples.append(Example(src=source.strip(), refs=kept))
    return examples


def prefix_paths(prefix: str, key: str, cfg: DataConfig) -> tuple[Path, Path]:
    """`{prefix}.{src_lang}` and `{prefix}.{tgt_lang}`, each possibly gzipped; `key` names the
    config field (train, valid, test) that holds `prefix`."""

    def path_for(lang: str) -> Path:
        plain, packed = Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")
        if plain.is_file():
            return plain
        if packed.is_file():
            return packed
        if Path(prefix).is_dir():
            raise UserError(
                f"data.{key}: {prefix} is a directory; give a path prefix such as {Path(prefix) / 'train'} "
                f"(attnmt reads {{prefix}}.{lang} or {{prefix}}.{lang}.gz)"
            )
        raise UserError(
            f"{plain}: file not found (nor {packed.name}); data.{key} must be a path prefix, "
            f"completed by .{lang} or .{lang}.gz"
        )

    return path_for(cfg.src_lang), path_for(cfg.tgt_lang)


def locate_user_data(cfg: DataConfig) -> CorpusFiles:
    """The files of the user's corpus (files: a prefix's two files; tsv: one file), for
    `corpora.locate_corpus`: data.train's, and data.valid's and data.test's where set."""
    if cfg.train is None:
        expected = "a path prefix (.{lang} is appended)" if cfg.corpus == "files" else "a src<TAB>tgt file"
        raise UserError(f"data.train: corpus {cfg.corpus} needs data.train, {expected}")
    if cfg.corpus == "files":
        check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)

    def files(path: str | None, key: str) -> tuple[Path, ...]:
        if path is None:  # a split the corpus splits off by source
            return ()
        return prefix_paths(path, key, cfg) if cfg.corpus == "files" else (Path(path),)

    return CorpusFiles(train=files(cfg.train, "train"), valid=files(cfg.valid, "valid"), test=files(cfg.test, "test"))


def _read_user_pairs(cfg: DataConfig, files: tuple[Path, ...]) -> Iterator[tuple[str, str]]:
    return stream_parallel(*files) if cfg.corpus == "files" else stream_tsv(files[0])


def load_user_data(cfg: DataConfig, files: CorpusFiles) -> CorpusSplits:
    """User data without its own valid and test files, read from `files` (`locate_user_data`):
    those splits are split off by source."""

    def read(split_files: tuple[Path, ...]) -> list[tuple[str, str]] | None:
        return list(_read_user_pairs(cfg, split_files)) if split_files else None

    return assemble(cfg, list(_read_user_pairs(cfg, files.train)), read(files.valid), read(files.test), None)


def stream_user_data(cfg: DataConfig, files: CorpusFiles) -> CorpusStream:
    """User data with its own valid and test files (`streamable`), read from `files`
    (`locate_user_data`): the training file(s) are streamed."""
    return streamed(
        cfg,
        None,
        list(_read_user_pairs(cfg, files.valid)),
        list(_read_user_pairs(cfg, files.test)),
        files,
        lambda: _read_user_pairs(cfg, files.train),
        replacing=False,
    )


def streamable(cfg: DataConfig) -> bool:
    """Whether user data's training pairs can be read as a stream: its valid and test splits
    come from files of their own (nothing has to be split off by source first)."""
    return cfg.corpus in ("files", "tsv") and None not in (cfg.valid, cfg.test)
