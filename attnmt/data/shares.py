"""A training process's batches: the sampler's global batches in order, this process's share of
each, its sentences segmented anew under subword sampling, collated on the host, and on a GPU
pinned and made ahead of the step (`feeding`).

Under torchrun every process reads the same global batches (one sampler, one seed) and takes
every world_size-th pair of each. A share left empty (a batch of fewer pairs than processes) is
the batch's first pair with weight 0, so that every process runs every step and the gradients'
all-reduce never waits on one with nothing to do. Every process must read the same ids for
this to hold: `fingerprint` is what they compare.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from attnmt.data.batching import Batch, DataBundle, EncodedSplit, IdsByIndex, TokenBatchSampler, collate
from attnmt.feeding import feed
from attnmt.vocab import PAD

# (indices, src_ids, tgt_ids, epoch, position) -> the sentences at `indices` as {index: ids} of a
# random segmentation, one mapping a side, the draws fixed by (epoch, position): `subwords.Resegmenter`.
Resegment = Callable[
    [Sequence[int], Sequence[Sequence[int]], Sequence[Sequence[int]], int, int], tuple[IdsByIndex, IdsByIndex]
]


def share_of(batch_indices: list[int], rank: int, world_size: int) -> tuple[list[int], float]:
    """This process's share of a global batch, and its weight (0 for a padding-only share)."""
    share = batch_indices[rank::world_size]
    return (share, 1.0) if share else (batch_indices[:1], 0.0)


class LocalBatches:
    """(global batch indices, epoch, position) -> this process's share as a Batch on the host;
    `stream` makes them in the sampler's order."""

    def __init__(
        self,
        sampler: TokenBatchSampler,
        train: EncodedSplit,
        *,
        rank: int,
        world_size: int,
        resegment: Resegment | None,
        on_gpu: bool,
    ) -> None:
        self.sampler, self.train, self.rank, self.world_size = sampler, train, rank, world_size
        self.resegment, self.pin = resegment, on_gpu

    def stream(self, epoch: int, position: int):
        """((epoch, position, global batch indices), this process's Batch) from batch `position`
        of `epoch` on. On a GPU the next batches are collated while the step's kernels run; on a
        CPU the step uses every core, so each is made in line. Close it when done."""
        ahead = 2 if self.pin else 0
        return feed(self.sampler.iterate(epoch, position), lambda item: self(item[2], item[0], item[1]), ahead)

    def __call__(self, indices: list[int], epoch: int = 0, position: int = 0) -> Batch:
        """Collated from the corpus's ids, or with subword sampling from the share's sentences
        segmented at random (the draws fixed by epoch and position, so a resumed run makes the
        same batch); pinned for a GPU, so that the copy to it runs without holding the host."""
        share = self.share(indices)
        src_ids: IdsByIndex = self.train.src_ids
        tgt_ids: IdsByIndex = self.train.tgt_ids
        if self.resegment is not None:
            src_ids, tgt_ids = self.resegment(share, self.train.src_ids, self.train.tgt_ids, epoch, position)
        batch = collate(share, src_ids, tgt_ids)
        return batch.pin_memory() if self.pin else batch

    def share(self, indices: list[int]) -> list[int]:
        return share_of(indices, self.rank, self.world_size)[0]

    def weight(self, indices: list[int]) -> float:
        """1, or 0 where this process's share only pads a batch of fewer pairs than processes."""
        return share_of(indices, self.rank, self.world_size)[1]

    def target_lengths(self, indices: list[int], batch: Batch) -> np.ndarray:
        """The global batch's target lengths (B,), EOS not counted: the corpus's, or with subword
        sampling those of the sampled segmentation, a little longer (one process only: the share
        is the whole batch)."""
        if self.resegment is None:
            return self.sampler.tgt_lengths[indices]
        return ((batch.tgt_out != PAD).sum(dim=1) - 1).numpy()


def fingerprint(bundle: DataBundle) -> str:
    """A digest of what training reads: both vocabularies and the training pairs' count and
    lengths. Processes that each prepared their own copy of a corpus compare it before training."""
    train, digest = bundle.train, hashlib.sha256()
    for vocab in (bundle.src_vocab, bundle.tgt_vocab):
        digest.update("\n".join(vocab.tokens).encode())
    digest.update(f"{len(train)} {int(train.src_lengths.sum())} {int(train.tgt_lengths.sum())}".encode())
    return digest.hexdigest()
