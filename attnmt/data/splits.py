"""The splits of a corpus: the raw-text train, valid and test sets every corpus becomes.

A corpus without an official split (Tatoeba, user data without valid/test) is split by
distinct source sentence (`split_by_source`), so that no source sentence is in two splits and
a held-out source keeps all its references (multi-reference evaluation). `assemble` makes
`CorpusSplits` of a corpus read whole; `streamed` a `CorpusStream` of one whose training pairs
are read lazily, for preparation in bounded memory. `CorpusFiles` are the files each split is
read from, as `corpora.locate_corpus` found them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.config import DataConfig
from attnmt.data.pair_filters import HELD_OUT, NOT_IN_SUBSET, PairRules, filter_training_pairs, short_pairs
from attnmt.utils import UserError


@dataclass(frozen=True)
class Example:
    """One source sentence with all its reference translations."""

    src: str
    refs: tuple[str, ...]


@dataclass(frozen=True)
class CorpusFiles:
    """Every file a configured corpus is read from, by split, found once for a run
    (`corpora.locate_corpus`): a split of line-aligned files holds (source file, target file),
    one of tab-separated pairs its one file.

    unsplit:     the file of a whole corpus whose valid and test are split off by source (Tatoeba)
    train:       the training pairs' own files (data.train's where it replaces a built-in corpus's)
    valid, test: their own files; none where they are split off by source
    A synthetic task is generated and reads no file at all.
    """

    unsplit: tuple[Path, ...] = ()
    train: tuple[Path, ...] = ()
    valid: tuple[Path, ...] = ()
    test: tuple[Path, ...] = ()

    @property
    def in_order(self) -> list[Path]:
        """Every file, in the fixed order a prepared dataset's key and manifest record them."""
        return [*self.unsplit, *self.train, *self.valid, *self.test]


@dataclass
class CorpusSplits:
    """Raw-text splits of one corpus in the configured direction.

    train:       one (src, tgt) pair per reference, after the `short` subset and the training
                 length filters.
    valid, test: one Example per held-out source sentence (all its references), or one per
                 line where the corpus ships its own valid/test files.
    raw_pairs:   pairs in the training data as read (lines of fra.txt, of Multi30k's train
                 files, of the user's train file(s); generated synthetic training examples),
                 before any filter and before valid/test sources are split off it. Separate
                 valid/test files are not counted. Tatoeba: 167,130; Multi30k: 29,000.
    attribution: the credit line a user of the corpus must show, or None for user data.
    dropped:     training pairs the length filters removed, by the setting that removed them
                 (`max_src_tokens`, `max_tgt_tokens`, `max_length_ratio`).
    """

    train: list[tuple[str, str]]
    valid: list[Example]
    test: list[Example]
    name: str
    attribution: str | None
    raw_pairs: int
    dropped: dict[str, int] = field(default_factory=dict)

    def dropped_summary(self) -> str | None:
        """One line on the pairs the length filters dropped, or None when there were none."""
        if not self.dropped:
            return None
        reasons = ", ".join(f"{count:,} by data.{setting}" for setting, count in self.dropped.items())
        return f"{sum(self.dropped.values()):,} training pairs dropped by the length filters ({reasons})"


def split_by_source(
    pairs: list[tuple[str, str]], *, valid_size: int, test_size: int, seed: int
) -> tuple[list[tuple[str, str]], list[Example], list[Example]]:
    """Hold out `test_size` then `valid_size` distinct source sentences with all their references.

    Sources are sorted, then shuffled by `random.Random(seed)`, so the split depends on the
    seed and the data only (not on PYTHONHASHSEED or file order). The test set is drawn
    first, so changing valid_size leaves it alone. Train pairs and held-out examples keep
    file order.
    """
    if valid_size == 0 and test_size == 0:
        return list(pairs), [], []
    refs_by_source: dict[str, list[str]] = {}
    for src, tgt in pairs:
        refs_by_source.setdefault(src, []).append(tgt)
    if valid_size + test_size >= len(refs_by_source):
        raise UserError(
            f"data.valid_size ({valid_size}) + data.test_size ({test_size}) must be below the number "
            f"of distinct source sentences ({len(refs_by_source)})"
        )
    sources = sorted(refs_by_source)
    random.Random(seed).shuffle(sources)
    test_sources = set(sources[:test_size])
    valid_sources = set(sources[test_size : test_size + valid_size])

    def examples(chosen: set[str]) -> list[Example]:
        return [Example(src, tuple(dict.fromkeys(refs))) for src, refs in refs_by_source.items() if src in chosen]

    held_out = test_sources | valid_sources
    train = [(src, tgt) for src, tgt in pairs if src not in held_out]
    return train, examples(valid_sources), examples(test_sources)


def assemble(
    cfg: DataConfig,
    train: list[tuple[str, str]],
    valid: list[tuple[str, str]] | None,
    test: list[tuple[str, str]] | None,
    attribution: str | None,
    *,
    replaced_by: list[tuple[str, str]] | None = None,
) -> CorpusSplits:
    """Subset, split off missing valid/test by source, filter training pairs. `replaced_by`:
    training pairs that take the place of the corpus's own (`data.train` given with a built-in
    corpus, such as a distilled one); the corpus still gives valid and test, split off as
    usual, and a replacing pair whose source is held out there is dropped."""
    raw_pairs = len(train if replaced_by is None else replaced_by)
    if raw_pairs == 0:
        raise UserError(f"data.train: the training data of {cfg.corpus} is empty")
    if cfg.subset == "short":
        train = short_pairs(train, cfg)
        valid, test = (short_pairs(pairs, cfg) if pairs is not None else None for pairs in (valid, test))
    train, valid_examples, test_examples = split_by_source(
        train,
        valid_size=cfg.valid_size if valid is None else 0,
        test_size=cfg.test_size if test is None else 0,
        seed=cfg.split_seed,
    )
    if replaced_by is not None:
        held_out = {example.src for example in (valid_examples or []) + (test_examples or [])}
        if valid is not None:
            held_out |= {src for src, _ in valid}
        if test is not None:
            held_out |= {src for src, _ in test}
        replaced_by = short_pairs(replaced_by, cfg) if cfg.subset == "short" else replaced_by
        train = [(src, tgt) for src, tgt in replaced_by if src not in held_out]
    if valid is not None:
        valid_examples = [Example(src, (tgt,)) for src, tgt in valid]
    if test is not None:
        test_examples = [Example(src, (tgt,)) for src, tgt in test]
    train, dropped = filter_training_pairs(train, cfg)
    if not train:
        raise UserError(f"data: no training pairs of {cfg.corpus} are left after the subset and length filters")
    return CorpusSplits(train, valid_examples, test_examples, cfg.corpus, attribution, raw_pairs, dropped)


@dataclass
class CorpusStream:
    """A corpus whose training pairs are read lazily, in file order (`stream_corpus`), so that
    one of any size can be prepared in bounded memory: the held-out splits in memory, the
    training pairs from `read()`, each kept or dropped by `rules` (None: `read()` gives the
    kept pairs, counted in `raw_pairs` and `dropped` already)."""

    name: str
    attribution: str | None
    valid: list[Example]
    test: list[Example]
    files: CorpusFiles  # every file read
    read: Callable[[], Iterator[tuple[str, str]]]
    rules: PairRules | None
    raw_pairs: int | None = None
    dropped: dict[str, int] = field(default_factory=dict)

    def check_counts(self, raw_pairs: int, kept: int) -> None:
        """The errors of a training split that came out empty, read or filtered."""
        if raw_pairs == 0:
            raise UserError(f"data.train: the training data of {self.name} is empty")
        if kept == 0:
            raise UserError(f"data: no training pairs of {self.name} are left after the subset and length filters")

    def materialize(self) -> CorpusSplits:
        """Every training pair read and judged: the `CorpusSplits` `load_corpus` returns."""
        if self.rules is None:
            train, raw_pairs, dropped = list(self.read()), self.raw_pairs or 0, dict(self.dropped)
        else:
            train, raw_pairs, dropped = [], 0, {}
            for src, tgt in self.read():
                raw_pairs += 1
                verdict = self.rules.verdict(src, tgt)
                if verdict is None:
                    train.append((src, tgt))
                elif verdict not in (NOT_IN_SUBSET, HELD_OUT):
                    dropped[verdict] = dropped.get(verdict, 0) + 1
        self.check_counts(raw_pairs, len(train))
        return CorpusSplits(train, self.valid, self.test, self.name, self.attribution, raw_pairs, dropped)


def streamed(
    cfg: DataConfig,
    attribution: str | None,
    valid: list[tuple[str, str]],
    test: list[tuple[str, str]],
    files: CorpusFiles,
    read: Callable[[], Iterator[tuple[str, str]]],
    *,
    replacing: bool,
) -> CorpusStream:
    """A corpus with its own valid and test pairs, its training pairs streamed by `read`.
    `replacing`: they replace a built-in corpus's own (`data.train`), so a pair whose source
    is held out for valid or test is dropped."""
    rules = PairRules(cfg)
    valid, test = ([pair for pair in pairs if rules.in_subset(*pair)] for pairs in (valid, test))
    if replacing:
        rules.held_out = frozenset(src for src, _ in valid + test)

    def examples(pairs: list[tuple[str, str]]) -> list[Example]:
        return [Example(src, (tgt,)) for src, tgt in pairs]

    return CorpusStream(cfg.corpus, attribution, examples(valid), examples(test), files, read, rules)
