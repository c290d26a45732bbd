"""What a config's data looks like: pair counts, lengths, vocabulary coverage, padding.

`attnmt data stats CONFIG` prints this; the numbers answer "is my data what I think it is?"
before any training (how many pairs survived the filters, how long the sentences are, how
much of the held-out text the vocabulary covers, how much of each batch is padding).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnmt.config import DataConfig
from attnmt.data.batching import DataBundle, EncodedSplit, batch_sampler
from attnmt.vocab import UNK


@dataclass
class LengthSummary:
    mean: float
    p50: int
    p90: int
    p99: int
    max: int


def summarize_lengths(lengths: Sequence[int] | np.ndarray) -> LengthSummary:
    ordered = np.sort(np.asarray(lengths, dtype=np.int64))
    if not len(ordered):
        return LengthSummary(0.0, 0, 0, 0, 0)

    def percentile(fraction: float) -> int:
        return int(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])

    mean = int(ordered.sum()) / len(ordered)
    return LengthSummary(mean, percentile(0.5), percentile(0.9), percentile(0.99), int(ordered[-1]))


def unknown_rate(id_lists: Sequence[Sequence[int]]) -> float:
    """Fraction of tokens mapped to UNK (the OOV rate against the training vocabulary)."""
    total = sum(len(ids) for ids in id_lists)
    unknown = sum(sum(1 for token in ids if token == UNK) for ids in id_lists)
    return unknown / total if total else 0.0


def padding_ratio(
    batches: Sequence[Sequence[int]], src_lengths: Sequence[int] | np.ndarray, tgt_lengths: Sequence[int] | np.ndarray
) -> float:
    """Fraction of padded slots in the source and target tensors the batches become."""
    real = padded = 0
    for batch in batches:
        src = [src_lengths[i] for i in batch]
        tgt = [tgt_lengths[i] + 1 for i in batch]  # +1: BOS on the input side, EOS on the output side
        real += sum(src) + sum(tgt)
        padded += len(batch) * (max(src) + max(tgt))
    return 1.0 - real / padded if padded else 0.0


def batching_summary(cfg: DataConfig, split: EncodedSplit, seed: int) -> dict[str, float]:
    """Bucketed batches versus random batches of the same sizes (what the tutorials do)."""
    src_lengths, tgt_lengths = split.src_lengths, split.tgt_lengths
    sampler = batch_sampler(split, cfg, shuffle=True, seed=seed)
    bucketed = sampler.batches(epoch=0)
    order = list(range(len(src_lengths)))
    random.Random(seed).shuffle(order)
    random_batches, start = [], 0
    for batch in bucketed:
        random_batches.append(order[start : start + len(batch)])
        start += len(batch)
    return {
        "batches": len(bucketed),
        "over_budget": len(sampler.over_budget),
        "mean_sentences": len(src_lengths) / max(1, len(bucketed)),
        "padding_bucketed": padding_ratio(bucketed, src_lengths, tgt_lengths),
        "padding_random": padding_ratio(random_batches, src_lengths, tgt_lengths),
    }


def describe(bundle: DataBundle, cfg: DataConfig, seed: int = 0) -> dict:
    """Every figure `attnmt data stats` prints, as plain data (also written as JSON)."""
    splits = bundle.splits
    return {
        "corpus": splits.name,
        "direction": f"{cfg.src_lang}-{cfg.tgt_lang}",
        "attribution": splits.attribution,
        "raw_pairs": splits.raw_pairs,
        "dropped_by_length": dict(splits.dropped),
        "pairs": {
            "train": len(bundle.train),
            "valid": len(bundle.valid),
            "test": len(bundle.test),
        },
        "sources": {"valid": len(bundle.valid.examples), "test": len(bundle.test.examples)},
        "lengths": {
            "train_src": vars(summarize_lengths(bundle.train.src_lengths)),
            "train_tgt": vars(summarize_lengths(bundle.train.tgt_lengths)),
        },
        "vocab": {"src": len(bundle.src_vocab), "tgt": len(bundle.tgt_vocab)},
        "oov_rate": {
            "valid_src": unknown_rate(bundle.valid.src_ids),
            "valid_tgt": unknown_rate(bundle.valid.tgt_ids),
            "test_src": unknown_rate(bundle.test.src_ids),
            "test_tgt": unknown_rate(bundle.test.tgt_ids),
        },
        "batching": batching_summary(cfg, bundle.train, seed),
    }
