"""The starting run's training data mixed into a continued run's batches (`data.mix_previous`).

A model continued on new data forgets what its old data taught it; training on a share of the
old data as well keeps part of it, the usual remedy when adapting a model to a domain. attnmt
mixes whole batches: of each epoch's batches, the share `data.mix_previous` comes from the old
data and the rest are the new data's own, spread evenly between them. Each batch holds one
corpus, so each keeps its length bucketing (a batch of mixed corpora would pad short sentences
of one to the long ones of the other), and the new data's epochs stay what they were: every new
pair once an epoch, in the same order as without mixing.

The old data's batches for epoch e are the first ones of its own shuffle for epoch e (seeded
apart from the new data's), repeated if it has fewer than the epoch needs: a pure function of
(seed, epoch), so a resumed run continues exactly. Both datasets are encoded with the continued
run's vocabularies and collated from one index space, the old data's indices following the new
data's (`ConcatenatedIds`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from attnmt.config import DataConfig
from attnmt.data.batching import DataBundle, EncodedSplit, TokenBatchSampler, batch_sampler, sequence_lengths


class ConcatenatedIds(Sequence):
    """Two id sequences read as one: indices past the first's end fall into the second."""

    def __init__(self, first: Sequence[Sequence[int]], second: Sequence[Sequence[int]]) -> None:
        self.first, self.second = first, second

    def __len__(self) -> int:
        return len(self.first) + len(self.second)

    def __getitem__(self, index: int) -> Sequence[int]:  # type: ignore[override]  # by position only: nothing slices it
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of {len(self)}")
        return self.first[index] if index < len(self.first) else self.second[index - len(self.first)]

    @property
    def lengths(self) -> np.ndarray:
        """(N,) int64 lengths of both, in order."""
        return np.concatenate([sequence_lengths(self.first), sequence_lengths(self.second)])


class MixedSampler(TokenBatchSampler):
    """The new data's batches with `share` of each epoch's batches drawn from the old data's.

    Indices of the old data are offset by the new data's size. `tgt_lengths` covers both (the
    trainer counts a batch's target tokens from it); `over_budget` lists the pairs of both that
    no batch can hold. Only `epoch_batches` differs from `TokenBatchSampler`, whose `batches` and
    `iterate` (and so exact resuming) it keeps.
    """

    def __init__(self, new: TokenBatchSampler, old: TokenBatchSampler, share: float) -> None:
        if not 0.0 <= share < 1.0:
            raise ValueError(f"share {share}: expected 0 <= share < 1")
        self.new, self.old, self.share = new, old, share
        self.offset = len(new.src_lengths)
        self.src_lengths = np.concatenate([new.src_lengths, old.src_lengths])
        self.tgt_lengths = np.concatenate([new.tgt_lengths, old.tgt_lengths])
        self.over_budget = new.over_budget + [self.offset + index for index in old.over_budget]

    def old_batches_per_epoch(self, new_batches: int) -> int:
        """How many old-data batches go with `new_batches` new ones: share of the total."""
        return round(new_batches * self.share / (1.0 - self.share))

    def epoch_batches(self, epoch: int = 0) -> list[np.ndarray]:
        new = self.new.epoch_batches(epoch)
        drawn = self.old.epoch_batches(epoch)
        wanted = self.old_batches_per_epoch(len(new)) if drawn else 0
        old = [drawn[k % len(drawn)] + self.offset for k in range(wanted)]
        total, placed, mixed = len(new) + len(old), 0, []
        for position in range(total):
            # the old batches among the first position + 1 should number (position + 1) * share
            if (position + 1) * len(old) // total > placed:
                mixed.append(old[placed])
                placed += 1
            else:
                mixed.append(new[position - placed])
        return mixed


def mixed_training(
    bundle: DataBundle, sampler: TokenBatchSampler, old: EncodedSplit, cfg: DataConfig, seed: int
) -> tuple[DataBundle, MixedSampler]:
    """`bundle` whose training split also holds `old` (after its own pairs), and the sampler that
    mixes `cfg.mix_previous` of old-data batches into `sampler`'s; the old data is batched under
    this config's budgets, shuffled by its own seed."""
    old_sampler = batch_sampler(old, cfg, shuffle=True, seed=seed + 1)
    new = bundle.train
    train = EncodedSplit(
        src_ids=ConcatenatedIds(new.src_ids, old.src_ids),
        tgt_ids=ConcatenatedIds(new.tgt_ids, old.tgt_ids),
        examples=new.examples,
    )
    return dataclasses.replace(bundle, train=train), MixedSampler(sampler, old_sampler, cfg.mix_previous)
