"""Which training pairs a corpus keeps: its subset, its held-out sources, its length filters.

The `short` subset, sources held out for valid and test, and max_src_tokens, max_tgt_tokens and
max_length_ratio, applied one pair at a time (`PairRules`).

Word tokens are counted as the word tokenizer splits them, punctuation included; cheap bounds
spare the tokenizer wherever they decide.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from attnmt.config import DataConfig
from attnmt.tokenize import WordTokenizer

# The `short` subset (the tutorials' setting): at most this many word tokens, punctuation
# counted. Other languages get 8 as source and 12 as target.
SHORT_MAX_TOKENS = {"en": 8, "fr": 12}
SHORT_MAX_SRC_TOKENS, SHORT_MAX_TGT_TOKENS = 8, 12


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


def short_pairs(pairs: list[tuple[str, str]], cfg: DataConfig) -> list[tuple[str, str]]:
    rules = PairRules(cfg)
    return [(src, tgt) for src, tgt in pairs if rules.in_subset(src, tgt)]


def filter_training_pairs(
    pairs: list[tuple[str, str]], cfg: DataConfig
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Apply max_src_tokens, max_tgt_tokens and max_length_ratio; the kept pairs and, per
    setting, how many pairs it dropped (each pair counted under the first limit it breaks)."""
    rules = PairRules(cfg)
    kept = []
    dropped: dict[str, int] = {}
    for src, tgt in pairs:
        broken = rules.broken_limit(src, tgt)
        if broken is None:
            kept.append((src, tgt))
        else:
            dropped[broken] = dropped.get(broken, 0) + 1
    return kept, dropped
