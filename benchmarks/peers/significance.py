"""Paired bootstrap resampling (Koehn 2004) of corpus BLEU between two systems' outputs of the
same test sentences, from per-sentence statistics small enough to keep in a results file.

A race spans sessions, and a run's output files do not outlive its session: each test decode
keeps, per sentence, what corpus BLEU sums (sacrebleu's counts, tokenized as the harness scores:
`tokenize none`, lowercased), as one string "h r m1 m2 m3 m4": hypothesis length, reference
length and the clipped n-gram matches for n = 1..4. A hypothesis of h tokens has max(0, h - n + 1)
n-grams, so the totals need not be kept.

    BLEU = BP * exp(sum_n log(p_n) / 4),  p_n = sum m_n / sum max(0, h - n + 1),
    BP = min(1, exp(1 - sum r / sum h))

with sacrebleu's default smoothing of a zero count, the `exp` method, as its corpus_score uses.
The bootstrap draws `samples` sets of the N sentences with replacement, the same draw for both
systems, and reports the difference of corpus BLEU on the full set, its 95% interval over the
draws, and the share of draws in which the first system scores higher.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

ORDER = 4
SAMPLES = 1000
SEED = 12345  # every comparison draws the same sentence sets, so a results file is reproducible


def _metric() -> BLEU:
    # effective_order only quiets sacrebleu's advice for sentence scores: the counts are the same
    return BLEU(tokenize="none", lowercase=True, force=True, effective_order=True)


def sentence_stats(hypotheses: Sequence[str], references: Sequence[str]) -> list[str]:
    """One "h r m1 m2 m3 m4" string per sentence (module docstring)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    metric = _metric()
    rows = []
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        scored = metric.sentence_score(hypothesis, [reference])
        rows.append(" ".join(str(int(value)) for value in (scored.sys_len, scored.ref_len, *scored.counts)))
    return rows


def _parse(stats: Sequence[str]) -> np.ndarray:
    table = np.array([[int(value) for value in row.split()] for row in stats], dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 2 + ORDER:
        raise ValueError(f"expected {2 + ORDER} numbers a sentence, got rows of shape {table.shape}")
    return table  # (N, 6)


def corpus_bleu(table: np.ndarray) -> np.ndarray:
    """Corpus BLEU of per-sentence statistics (..., N, 6) -> (...): one score per set of sentences."""
    sums = table.sum(axis=-2).astype(np.float64)  # (..., 6)
    hypothesis_length, reference_length, matches = sums[..., 0], sums[..., 1], sums[..., 2:]
    lengths = table[..., 0:1]  # (..., N, 1)
    orders = np.arange(1, ORDER + 1)  # n = 1..4
    totals = np.clip(lengths - orders + 1, 0, None).sum(axis=-2).astype(np.float64)  # (..., 4)
    # sacrebleu's `exp` smoothing: the k-th order with no match counts 1 / 2^k matches
    zero = matches == 0
    smoothing = 1.0 / np.power(2.0, np.cumsum(zero, axis=-1))
    matches = np.where(zero, smoothing, matches)
    with np.errstate(divide="ignore"):
        log_precision = np.where(totals > 0, np.log(matches / np.maximum(totals, 1)), -np.inf).mean(axis=-1)
        brevity = np.where(
            hypothesis_length < reference_length,
            np.exp(1 - reference_length / np.maximum(hypothesis_length, 1)),
            1.0,
        )
    score = 100.0 * brevity * np.exp(log_precision)
    return np.where(hypothesis_length > 0, score, 0.0)


def paired_bootstrap(first: Sequence[str], second: Sequence[str], samples: int = SAMPLES, seed: int = SEED) -> dict:
    """The first system against the second on the same sentences (module docstring)."""
    a, b = _parse(first), _parse(second)
    if a.shape != b.shape:
        raise ValueError(f"the systems scored {len(a)} and {len(b)} sentences")
    draws = np.random.default_rng(seed).integers(0, len(a), size=(samples, len(a)))  # (samples, N)
    deltas = corpus_bleu(a[draws]) - corpus_bleu(b[draws])  # (samples,)
    low, high = np.percentile(deltas, [2.5, 97.5])
    full_a, full_b = float(corpus_bleu(a)), float(corpus_bleu(b))
    return {
        "bleu": [full_a, full_b],
        "delta": full_a - full_b,
        "interval95": [float(low), float(high)],
        "first_better_share": float((deltas > 0).mean()),
        "samples": samples,
    }
