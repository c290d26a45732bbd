"""attnmt.data.mixing: a continued run's batches with a share drawn from the starting run's data.

Held to what the share promises, epoch by epoch: the old-data batches are that share of all
(rounded), spread evenly, and the new data's batches are the ones an unmixed run trains on, in
the same order; everything is a function of (seed, epoch), so resuming repeats it exactly."""

from __future__ import annotations

import numpy as np
import pytest

from attnmt.data.batching import TokenBatchSampler
from attnmt.data.mixing import ConcatenatedIds, MixedSampler


def same(batches: list[np.ndarray], others: list[np.ndarray]) -> bool:
    return len(batches) == len(others) and all(np.array_equal(a, b) for a, b in zip(batches, others, strict=True))


def sampler(count: int, seed: int, longest: int = 9) -> TokenBatchSampler:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, longest, size=count)
    return TokenBatchSampler(lengths, lengths, batch_tokens=40, shuffle=True, seed=seed)


@pytest.mark.parametrize(("share", "old_count"), [(0.25, 300), (0.5, 300), (0.1, 300), (0.5, 30)])
def test_a_share_of_each_epoch_comes_from_the_old_data_evenly_and_the_new_batches_stay_as_they_were(share, old_count):
    new, old = sampler(200, seed=1), sampler(old_count, seed=2)
    mixed = MixedSampler(new, old, share)
    for epoch in (0, 3):
        batches = mixed.epoch_batches(epoch)
        from_old = [bool((batch >= 200).all()) for batch in batches]
        assert all(bool((batch < 200).all()) or is_old for batch, is_old in zip(batches, from_old, strict=True))
        unmixed = new.epoch_batches(epoch)
        kept = [batch for batch, is_old in zip(batches, from_old, strict=True) if not is_old]
        assert same(kept, unmixed)
        assert sum(from_old) == round(len(unmixed) * share / (1 - share))
        # evenly: in every window of the epoch, the old share is the share to within one batch
        for width in (4, 10):
            for start in range(0, len(batches) - width, width):
                assert abs(sum(from_old[start : start + width]) - width * sum(from_old) / len(batches)) <= 1.5
        drawn = old.epoch_batches(epoch)  # the old data's own shuffle for this epoch, cycled if short
        olds = [batch - 200 for batch, is_old in zip(batches, from_old, strict=True) if is_old]
        assert all(np.array_equal(a, drawn[k % len(drawn)]) for k, a in enumerate(olds))
    assert same(mixed.epoch_batches(1), mixed.epoch_batches(1)) and not same(
        mixed.epoch_batches(1), mixed.epoch_batches(2)
    )


def test_lengths_and_resuming_cover_both_datasets():
    new, old = sampler(50, seed=1), sampler(80, seed=2)
    mixed = MixedSampler(new, old, 0.3)
    assert np.array_equal(mixed.tgt_lengths, np.concatenate([new.tgt_lengths, old.tgt_lengths]))
    whole = [indices for _, (_, _, indices) in zip(range(40), mixed.iterate(), strict=False)]
    epoch, position, _ = next(item for n, item in enumerate(mixed.iterate()) if n == 17)
    resumed = [indices for _, (_, _, indices) in zip(range(23), mixed.iterate(epoch, position), strict=False)]
    assert resumed == whole[17:]
    assert same(MixedSampler(new, old, 0.0).epoch_batches(0), new.epoch_batches(0)), "share 0: the new data alone"
    with pytest.raises(ValueError, match=r"share 1\.0"):
        MixedSampler(new, old, 1.0)


def test_concatenated_ids_read_the_second_after_the_first():
    ids = ConcatenatedIds([[1, 2], [3]], [[4, 5, 6]])
    assert len(ids) == 3 and ids[0] == [1, 2] and ids[2] == [4, 5, 6] and ids[-1] == [4, 5, 6]
    assert ids.lengths.tolist() == [2, 1, 3]
    with pytest.raises(IndexError):
        ids[3]
