"""Known corpora: reading their files, subsets, filters and splits.

`load_corpus(cfg)` turns a `DataConfig` into `CorpusSplits` of raw text (untokenized, original
casing). The files of the built-in corpora are found (or downloaded, verified) by
`download.locate`: `data_dir` (config or `--data-dir`), then `$ATTNMT_DATA`, then the cache.

Corpora without an official split (Tatoeba, user data without valid/test) are split by
distinct source sentence, so that no source sentence is in two splits and a held-out source
keeps all its references (multi-reference evaluation).
"""

from __future__ import annotations

import functools
import itertools
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from attnmt import synthetic
from attnmt.config import DataConfig
from attnmt.distilled import check_student
from attnmt.download import locate
from attnmt.textfiles import read_input, stream_corpus_lines
from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError

TATOEBA_ATTRIBUTION = (
    "Sentence pairs from the Tatoeba Project (https://tatoeba.org), contributors of tatoeba.org, "
    "CC BY 2.0 FR; prepared by manythings.org/anki."
)
MULTI30K_ATTRIBUTION = (
    "Multi30K (https://github.com/multi30k/dataset), derived from Flickr30K, for non-commercial research "
    "and education; cite Elliott et al. 2016 (doi:10.18653/v1/W16-3210), for French and test_2017 "
    "Elliott et al. WMT 2017 (W17-4718), for Czech Barrault et al. WMT 2018."
)
TATOEBA_LANGUAGES = ("en", "fr")
# Languages of each Multi30k task 1 split (Czech was only translated for the first three).
MULTI30K_SPLITS = {
    "train": ("en", "de", "fr", "cs"),
    "val": ("en", "de", "fr", "cs"),
    "test_2016_flickr": ("en", "de", "fr", "cs"),
    "test_2017_flickr": ("en", "de", "fr"),
}
KNOWN_CORPORA = ("tatoeba-eng-fra", "multi30k", "files", "tsv", *synthetic.TASKS)

# The `short` subset (the tutorials' setting): at most this many word tokens, punctuation
# counted. Other languages get 8 as source and 12 as target.
SHORT_MAX_TOKENS = {"en": 8, "fr": 12}
SHORT_MAX_SRC_TOKENS, SHORT_MAX_TGT_TOKENS = 8, 12


@dataclass(frozen=True)
class Example:
    """One source sentence with all its reference translations."""

    src: str
    refs: tuple[str, ...]


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


# --- reading text files ------------------------------------------------------------------


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


# --- splitting and filtering -------------------------------------------------------------


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


def _token_counter(lang: str) -> Callable[[str], int]:
    """Word-token count of a sentence, memoized for recent sentences (Tatoeba repeats sources
    across pairs; a bounded cache keeps a streamed corpus's memory flat)."""
    tokenizer = WordTokenizer(lang)
    return functools.lru_cache(maxsize=1 << 16)(lambda text: len(tokenizer.tokenize(text)))


def short_limits(src_lang: str, tgt_lang: str) -> tuple[int, int]:
    """(max source tokens, max target tokens) of the `short` subset: English 8, French 12,
    any other language 8 as source and 12 as target."""
    return SHORT_MAX_TOKENS.get(src_lang, SHORT_MAX_SRC_TOKENS), SHORT_MAX_TOKENS.get(tgt_lang, SHORT_MAX_TGT_TOKENS)


class _Length:
    """A sentence's word-token count, tokenized only when cheap bounds cannot decide.

    Tokenizing every pair here and again when the data is built would make loading a large
    corpus several times slower. A token has at least one character and every space-separated
    chunk holds at least one token, so `low` <= count <= `high` (up to characters that Unicode
    normalization expands, which no real corpus fills a sentence with). A pair is only ever
    dropped on exact counts, so the bounds can let a pair through, never wrongly drop one.
    """

    def __init__(self, text: str, count: Callable[[str], int]) -> None:
        self.text, self.count = text, count
        self.low, self.high = len(text.split()), len(text)

    def exact(self) -> int:
        if self.low != self.high:
            self.low = self.high = self.count(self.text)
        return self.low

    def over(self, limit: int | None) -> bool:
        return limit is not None and self.high > limit and self.exact() > limit


def _ratio_over(a: _Length, b: _Length, limit: float | None) -> bool:
    """Longer side / shorter side over `limit` (an empty side counts as one token)."""
    if limit is None or max(a.high, b.high) / max(1, min(a.low, b.low)) <= limit:
        return False
    n_a, n_b = a.exact(), b.exact()
    return max(n_a, n_b) / max(1, min(n_a, n_b)) > limit


# The verdicts of `PairRules.verdict` that drop a pair without counting it as dropped by a
# length filter: the `short` subset selects a corpus, and held-out sources belong to valid/test.
NOT_IN_SUBSET, HELD_OUT = "subset", "held_out"


class PairRules:
    """What a training pair must pass, one pair at a time, in this order: the `short` subset,
    a source not held out for valid/test (when `data.train` replaces a corpus's training
    pairs), then the length filters (max_src_tokens, max_tgt_tokens, max_length_ratio).

    Picklable, so that preparation workers apply it to the chunks of a streamed corpus; the
    token counters are made again on first use after unpickling."""

    def __init__(self, cfg: DataConfig, held_out: frozenset[str] = frozenset()) -> None:
        self.languages = (cfg.src_lang, cfg.tgt_lang)
        self.short = short_limits(cfg.src_lang, cfg.tgt_lang) if cfg.subset == "short" else None
        self.limits = (cfg.max_src_tokens, cfg.max_tgt_tokens, cfg.max_length_ratio)
        self.held_out = held_out
        self._counters: tuple[Callable[[str], int], Callable[[str], int]] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_counters": None}

    def _count(self) -> tuple[Callable[[str], int], Callable[[str], int]]:
        if self._counters is None:
            self._counters = (_token_counter(self.languages[0]), _token_counter(self.languages[1]))
        return self._counters

    def in_subset(self, src: str, tgt: str) -> bool:
        """Whether the pair belongs to the configured subset (every pair of `full`)."""
        if self.short is None:
            return True
        (max_src, max_tgt), (src_len, tgt_len) = self.short, self._count()
        # Every space-separated chunk is at least one token: a cheap first test spares the tokenizer.
        return all(
            len(text.split()) <= limit and count(text) <= limit
            for text, count, limit in ((src, src_len, max_src), (tgt, tgt_len, max_tgt))
        )

    def broken_limit(self, src: str, tgt: str) -> str | None:
        """The length filter's setting the pair breaks first, or None."""
        max_src, max_tgt, max_ratio = self.limits
        if max_src is None and max_tgt is None and max_ratio is None:
            return None
        src_len, tgt_len = self._count()
        n_src, n_tgt = _Length(src, src_len), _Length(tgt, tgt_len)
        if n_src.over(max_src):
            return "max_src_tokens"
        if n_tgt.over(max_tgt):
            return "max_tgt_tokens"
        if _ratio_over(n_src, n_tgt, max_ratio):
            return "max_length_ratio"
        return None

    def verdict(self, src: str, tgt: str) -> str | None:
        """None to keep the pair; else NOT_IN_SUBSET, HELD_OUT or the broken filter's setting."""
        if not self.in_subset(src, tgt):
            return NOT_IN_SUBSET
        if src in self.held_out:
            return HELD_OUT
        return self.broken_limit(src, tgt)


def _short_pairs(pairs: list[tuple[str, str]], cfg: DataConfig) -> list[tuple[str, str]]:
    rules = PairRules(cfg)
    return [(src, tgt) for src, tgt in pairs if rules.in_subset(src, tgt)]


def _filter_training_pairs(
    pairs: list[tuple[str, str]], cfg: DataConfig
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Apply max_src_tokens, max_tgt_tokens and max_length_ratio; the kept pairs and, per
    setting, how many pairs it dropped (each pair counted under the first limit it breaks)."""
    rules = PairRules(cfg)
    kept, dropped = [], {}
    for src, tgt in pairs:
        broken = rules.broken_limit(src, tgt)
        if broken is None:
            kept.append((src, tgt))
        else:
            dropped[broken] = dropped.get(broken, 0) + 1
    return kept, dropped


def _assemble(
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
        train, valid, test = (_short_pairs(pairs, cfg) if pairs is not None else None for pairs in (train, valid, test))
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
        replaced_by = _short_pairs(replaced_by, cfg) if cfg.subset == "short" else replaced_by
        train = [(src, tgt) for src, tgt in replaced_by if src not in held_out]
    if valid is not None:
        valid_examples = [Example(src, (tgt,)) for src, tgt in valid]
    if test is not None:
        test_examples = [Example(src, (tgt,)) for src, tgt in test]
    train, dropped = _filter_training_pairs(train, cfg)
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
    files: list[Path]  # every file read, in a fixed order
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


def _streamed(
    cfg: DataConfig,
    attribution: str | None,
    valid: list[tuple[str, str]],
    test: list[tuple[str, str]],
    files: list[Path],
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


# --- the corpora -------------------------------------------------------------------------


def _check_direction(corpus: str, cfg: DataConfig, languages: tuple[str, ...]) -> None:
    if cfg.src_lang in languages and cfg.tgt_lang in languages and cfg.src_lang != cfg.tgt_lang:
        return
    known = ", ".join(f"{src}-{tgt}" for src in languages for tgt in languages if src != tgt)
    raise UserError(f"data.src_lang/tgt_lang: {corpus} has no {cfg.src_lang}-{cfg.tgt_lang} pair; known pairs: {known}")


def _replacing_train(cfg: DataConfig) -> list[tuple[str, str]] | None:
    """The pairs `data.train` gives a built-in corpus in place of its own training pairs (a
    distilled corpus, say: `attnmt distill`), or None when it gives none."""
    if cfg.train is None:
        return None
    check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)
    return read_parallel(*_prefix_paths(cfg.train, "train", cfg))


def _load_tatoeba(cfg: DataConfig, data_dir: str | None) -> CorpusSplits:
    _check_direction("tatoeba-eng-fra", cfg, TATOEBA_LANGUAGES)
    pairs = read_tsv(locate("tatoeba-eng-fra/fra.txt.gz", data_dir))
    if cfg.src_lang == "fr":
        pairs = [(fr, en) for en, fr in pairs]
    return _assemble(cfg, pairs, None, None, TATOEBA_ATTRIBUTION, replaced_by=_replacing_train(cfg))


def _check_multi30k_split(split: str, key: str, cfg: DataConfig) -> None:
    if split not in MULTI30K_SPLITS:
        raise UserError(f"data.{key}: unknown multi30k split {split!r}; known: {', '.join(MULTI30K_SPLITS)}")
    for lang in (cfg.src_lang, cfg.tgt_lang):
        if lang not in MULTI30K_SPLITS[split]:
            having = ", ".join(name for name, langs in MULTI30K_SPLITS.items() if lang in langs)
            raise UserError(f"data.{key}: multi30k split {split} has no {lang!r} text; splits with it: {having}")


def _multi30k_paths(cfg: DataConfig, data_dir: str | None) -> list[tuple[Path, Path]]:
    """(source, target) files of the training (or the replacing data.train), valid and test splits."""
    _check_direction("multi30k", cfg, MULTI30K_SPLITS["train"])
    _check_multi30k_split(cfg.valid_split, "valid_split", cfg)
    _check_multi30k_split(cfg.test_split, "test_split", cfg)

    def paths(split: str) -> tuple[Path, Path]:
        return (
            locate(f"multi30k/{split}.{cfg.src_lang}.gz", data_dir),
            locate(f"multi30k/{split}.{cfg.tgt_lang}.gz", data_dir),
        )

    if cfg.train is not None:  # a replacing training corpus: a distilled one, say
        check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)
        train = _prefix_paths(cfg.train, "train", cfg)
    else:
        train = paths("train")
    return [train, paths(cfg.valid_split), paths(cfg.test_split)]


def _stream_multi30k(cfg: DataConfig, data_dir: str | None) -> CorpusStream:
    train, valid, test = _multi30k_paths(cfg, data_dir)
    return _streamed(
        cfg,
        MULTI30K_ATTRIBUTION,
        read_parallel(*valid),
        read_parallel(*test),
        [*train, *valid, *test],
        lambda: stream_parallel(*train),
        replacing=cfg.train is not None,
    )


def _prefix_paths(prefix: str, key: str, cfg: DataConfig) -> tuple[Path, Path]:
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


def _user_files(cfg: DataConfig, path: str, key: str) -> tuple[Path, ...]:
    """The files a user-data setting names: a prefix's two files (files), or one file (tsv)."""
    return _prefix_paths(path, key, cfg) if cfg.corpus == "files" else (Path(path),)


def _read_user_pairs(cfg: DataConfig, files: tuple[Path, ...]) -> Iterator[tuple[str, str]]:
    return stream_parallel(*files) if cfg.corpus == "files" else stream_tsv(files[0])


def _check_user_data(cfg: DataConfig) -> None:
    if cfg.train is None:
        expected = "a path prefix (.{lang} is appended)" if cfg.corpus == "files" else "a src<TAB>tgt file"
        raise UserError(f"data.train: corpus {cfg.corpus} needs data.train, {expected}")
    if cfg.corpus == "files":
        check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)


def _load_user_data(cfg: DataConfig) -> CorpusSplits:
    """User data without its own valid and test files: those are split off by source."""
    _check_user_data(cfg)

    def read(path: str | None, key: str) -> list[tuple[str, str]] | None:
        return None if path is None else list(_read_user_pairs(cfg, _user_files(cfg, path, key)))

    return _assemble(cfg, read(cfg.train, "train"), read(cfg.valid, "valid"), read(cfg.test, "test"), None)


def _stream_user_data(cfg: DataConfig) -> CorpusStream:
    """User data with its own valid and test files: the training file(s) are streamed."""
    _check_user_data(cfg)
    train, valid, test = (_user_files(cfg, path, key) for key, path in _split_paths(cfg))
    return _streamed(
        cfg,
        None,
        list(_read_user_pairs(cfg, valid)),
        list(_read_user_pairs(cfg, test)),
        [*train, *valid, *test],
        lambda: _read_user_pairs(cfg, train),
        replacing=False,
    )


def _split_paths(cfg: DataConfig) -> list[tuple[str, str]]:
    return [("train", cfg.train), ("valid", cfg.valid), ("test", cfg.test)]


def _load_synthetic(cfg: DataConfig) -> CorpusSplits:
    """Generated splits; seeds 3*split_seed + {0, 1, 2} keep them distinct for every split_seed."""
    if cfg.train is not None:
        raise UserError(
            f"synthetic task {cfg.corpus} generates its training data; remove data.train", field="data.train"
        )

    def generate(n: int, offset: int) -> list[tuple[str, str]]:
        return synthetic.generate(cfg.corpus, n, max_len=cfg.synthetic_max_len, seed=3 * cfg.split_seed + offset)

    train, valid, test = generate(cfg.synthetic_size, 0), generate(cfg.valid_size, 1), generate(cfg.test_size, 2)
    splits = _assemble(cfg, train, valid, test, None)
    # Short sequences recur by chance; evaluating on ones seen in training would flatter the model.
    held_out = {example.src for example in splits.valid + splits.test}
    splits.train = [(src, tgt) for src, tgt in splits.train if src not in held_out]
    return splits


def _streamable(cfg: DataConfig) -> bool:
    """Whether the corpus's training pairs can be read as a stream: its valid and test splits
    come from files of their own (nothing has to be split off by source first)."""
    return cfg.corpus == "multi30k" or (cfg.corpus in ("files", "tsv") and None not in (cfg.valid, cfg.test))


def corpus_files(cfg: DataConfig, data_dir: str | None = None) -> list[Path]:
    """Every file the configured corpus is read from, in a fixed order (none for a synthetic
    task): what a prepared dataset's key records of its input."""
    data_dir = data_dir or cfg.data_dir
    if cfg.corpus == "multi30k":
        return [path for paths in _multi30k_paths(cfg, data_dir) for path in paths]
    if cfg.corpus == "tatoeba-eng-fra":
        _check_direction("tatoeba-eng-fra", cfg, TATOEBA_LANGUAGES)  # before any download
        replacing = list(_prefix_paths(cfg.train, "train", cfg)) if cfg.train is not None else []
        return [locate("tatoeba-eng-fra/fra.txt.gz", data_dir), *replacing]
    if cfg.corpus in ("files", "tsv"):
        return [file for key, path in _split_paths(cfg) if path is not None for file in _user_files(cfg, path, key)]
    return []


def stream_corpus(cfg: DataConfig, data_dir: str | None = None) -> CorpusStream:
    """The configured corpus as a `CorpusStream`: read lazily where its training pairs come from
    files of their own (multi30k; files and tsv with data.valid and data.test), else loaded
    (`load_corpus`: a corpus whose valid and test splits are split off by source)."""
    data_dir = data_dir or cfg.data_dir
    if cfg.corpus == "multi30k":
        return _stream_multi30k(cfg, data_dir)
    if _streamable(cfg):
        return _stream_user_data(cfg)
    splits = load_corpus(cfg, data_dir)
    return CorpusStream(
        splits.name,
        splits.attribution,
        splits.valid,
        splits.test,
        corpus_files(cfg, data_dir),
        lambda: iter(splits.train),
        None,
        splits.raw_pairs,
        splits.dropped,
    )


def load_corpus(cfg: DataConfig, data_dir: str | None = None) -> CorpusSplits:
    """Read (downloading if need be), subset, split and filter the configured corpus.

    `data_dir` (e.g. from `--data-dir`) overrides `cfg.data_dir`; both only concern the
    built-in corpora: the paths of user data (`files`, `tsv`) are used as given.
    """
    data_dir = data_dir or cfg.data_dir
    if cfg.corpus == "tatoeba-eng-fra":
        return _load_tatoeba(cfg, data_dir)
    if cfg.corpus == "multi30k":
        return _stream_multi30k(cfg, data_dir).materialize()
    if cfg.corpus in ("files", "tsv"):
        return _stream_user_data(cfg).materialize() if _streamable(cfg) else _load_user_data(cfg)
    if cfg.corpus in synthetic.TASKS:
        return _load_synthetic(cfg)
    raise UserError(f"data.corpus: unknown corpus {cfg.corpus!r}; known: {', '.join(KNOWN_CORPORA)}")
