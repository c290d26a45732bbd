"""Batching: every example once per epoch, budgets kept, order reproducible and resumable."""

import itertools
import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.cli import main
from attnmt.data.batching import TokenBatchSampler, collate, pad_sequences
from attnmt.data.stats import padding_ratio
from attnmt.vocab import BOS, EOS, PAD


def make_sampler(pairs, **kwargs):
    src_lengths = [s for s, _ in pairs]
    tgt_lengths = [t for _, t in pairs]
    options = {"batch_tokens": 200, "pool_batches": 4, "seed": 7} | kwargs
    return TokenBatchSampler(src_lengths, tgt_lengths, **options), src_lengths, tgt_lengths


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 250), st.integers(1, 250)), min_size=1, max_size=300),
    st.booleans(),
    st.booleans(),
    st.integers(0, 3),
)
def test_each_example_once_and_no_batch_over_the_budget(pairs, shuffle, fixed, epoch):
    sampler, src_lengths, tgt_lengths = make_sampler(pairs, shuffle=shuffle, fixed=fixed, max_sentences=16)
    batches = sampler.batches(epoch)
    batched = list(itertools.chain.from_iterable(batches))
    assert sorted(batched + sampler.over_budget) == list(range(len(pairs)))
    assert sampler.over_budget == [i for i in range(len(pairs)) if max(src_lengths[i], tgt_lengths[i] + 1) > 200]
    for batch in batches:
        assert 1 <= len(batch) <= 16
        assert max(max(src_lengths[i], tgt_lengths[i] + 1) for i in batch) * len(batch) <= 200


def test_order_is_a_function_of_seed_and_epoch():
    rng = random.Random(0)
    pairs = [(rng.randint(1, 30), rng.randint(1, 30)) for _ in range(2000)]
    sampler, _, _ = make_sampler(pairs)
    again, _, _ = make_sampler(pairs)
    assert sampler.batches(0) == again.batches(0)
    assert sampler.batches(0) != sampler.batches(1)
    other_seed, _, _ = make_sampler(pairs, seed=8)
    assert other_seed.batches(0) != sampler.batches(0)


def compositions(batches):
    return sorted(tuple(sorted(batch)) for batch in batches)


def test_fixed_batches_hold_the_same_pairs_every_epoch_and_only_their_order_changes():
    rng = random.Random(2)
    pairs = [(rng.randint(1, 30), rng.randint(1, 30)) for _ in range(2000)]
    # 10 pairs a batch (the token budget never binds), so a pool of 4 batches is 40 pairs
    fixed, _, _ = make_sampler(pairs, batch_tokens=100_000, max_sentences=10, fixed=True)
    reshuffled, _, _ = make_sampler(pairs, batch_tokens=100_000, max_sentences=10)
    epochs = [fixed.batches(epoch) for epoch in range(3)]
    assert compositions(epochs[0]) == compositions(epochs[1]) == compositions(epochs[2])
    assert epochs[0] != epochs[1]
    assert all(len({index // 40 for index in batch}) == 1 for batch in epochs[0])  # pools in corpus order
    assert compositions(reshuffled.batches(0)) != compositions(reshuffled.batches(1))
    one_pool, _, _ = make_sampler(pairs, pool_batches=None, fixed=True)
    evaluation, _, _ = make_sampler(pairs, pool_batches=None, shuffle=False)
    assert compositions(one_pool.batches(5)) == compositions(evaluation.batches())


def test_resuming_continues_the_same_stream():
    rng = random.Random(1)
    pairs = [(rng.randint(1, 30), rng.randint(1, 30)) for _ in range(500)]
    sampler, _, _ = make_sampler(pairs, batch_tokens=1000)  # about 10 batches per epoch
    stream = list(itertools.islice(sampler.iterate(), 40))
    assert len({epoch for epoch, _, _ in stream}) >= 3  # the stream crosses epoch boundaries
    epoch, position, _ = stream[25]
    assert epoch >= 1
    resumed = list(itertools.islice(sampler.iterate(epoch, position), 15))
    assert resumed == stream[25:40]


def test_bucketing_pads_much_less_than_random_batches():
    rng = random.Random(2)
    sources = [rng.randint(2, 40) for _ in range(3000)]
    pairs = [(n, max(1, n + rng.randint(-3, 3))) for n in sources]  # target lengths follow source lengths
    sampler, src_lengths, tgt_lengths = make_sampler(pairs, batch_tokens=1000, pool_batches=50)
    bucketed = sampler.batches(0)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    sizes = [len(batch) for batch in bucketed]
    random_batches = [order[sum(sizes[:k]) : sum(sizes[: k + 1])] for k in range(len(sizes))]
    assert padding_ratio(bucketed, src_lengths, tgt_lengths) < 0.5 * padding_ratio(
        random_batches, src_lengths, tgt_lengths
    )


def test_collate_shifts_targets_and_pads():
    src_ids = [[5, 6, 7], [8]]
    tgt_ids = [[9, 10], [11, 12, 13]]
    batch = collate([0, 1], src_ids, tgt_ids)
    assert batch.src.tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert batch.src_lengths.tolist() == [3, 1]
    assert batch.tgt_in.tolist() == [[BOS, 9, 10, PAD], [BOS, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[9, 10, EOS, PAD], [11, 12, 13, EOS]]
    assert batch.num_tgt_tokens == 7
    assert batch.indices == [0, 1]


def test_pad_sequences_shapes():
    padded, lengths = pad_sequences([[1], [2, 3, 4]])
    assert padded.shape == (2, 3) and lengths.tolist() == [1, 3]


def test_data_stats_counts_the_pairs_the_length_filters_dropped(tmp_path, corpus_with_a_huge_line, capsys):
    folder = corpus_with_a_huge_line
    config = tmp_path / "config.yaml"
    config.write_text(
        f"data:\n  corpus: tsv\n  train: {folder / 'train.tsv'}\n  valid: {folder / 'valid.tsv'}\n"
        f"  test: {folder / 'valid.tsv'}\n  max_length_ratio: null\n"
    )
    out = tmp_path / "stats.json"
    assert main(["data", "stats", str(config), "--json", str(out)]) == 0
    assert "1 (data.max_src_tokens)" in capsys.readouterr().out
    figures = json.loads(out.read_text())
    assert figures["dropped_by_length"] == {"max_src_tokens": 1} and figures["pairs"]["train"] == 200
