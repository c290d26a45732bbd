"""Search on hand-built models whose probabilities are known exactly."""

import itertools
import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.search.beam import beam_search
from attnmt.search.decode import decode_all, length_batches
from attnmt.search.greedy import greedy
from attnmt.search.options import SearchOptions, length_penalty
from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS

A, B_TOKEN = 4, 5  # two real tokens; ids 0-3 are the specials
NEVER = -1e4  # logit for PAD/UNK/BOS: effectively impossible, but no inf arithmetic


@dataclass
class Rows:
    """Stands in for the encoder output and the decoder state: anything with index_select."""

    src: torch.Tensor  # (B, S)
    src_lengths: torch.Tensor  # (B,)

    def index_select(self, rows: torch.Tensor) -> "Rows":
        return Rows(self.src[rows], self.src_lengths[rows])


class MarkovModel:
    """Next-token log-probabilities depend on the previous token and the first source token."""

    def __init__(self, table: torch.Tensor, source_bias: torch.Tensor | None = None) -> None:
        self.table = table  # (V, V) logits: row = previous token
        self.source_bias = source_bias  # (V_src, V) or None

    def encode(self, src, src_lengths):
        return Rows(src, src_lengths)

    def init_state(self, encoder_output):
        return encoder_output

    def next_log_probs(self, prev_tokens, state, encoder_output):
        logits = self.table[prev_tokens]
        if self.source_bias is not None:
            logits = logits + self.source_bias[encoder_output.src[:, 0]]
        mask = torch.arange(encoder_output.src.size(1))[None, :] < encoder_output.src_lengths[:, None]
        attention = mask.float() / mask.sum(dim=1, keepdim=True)
        return torch.log_softmax(logits, dim=-1), state, attention


def table_from_probs(rows: dict[int, dict[int, float]]) -> torch.Tensor:
    table = torch.full((6, 6), NEVER)
    for prev, nexts in rows.items():
        for token, prob in nexts.items():
            table[prev, token] = math.log(prob)
    return table


def one_source(length: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((1, length), 4, dtype=torch.long), torch.tensor([length])


def test_beam_finds_the_better_path_greedy_misses():
    # greedy takes 'a' (0.6) and can then reach at most 0.6 * 0.35 = 0.21; 'b EOS' has 0.4.
    table = table_from_probs(
        {BOS: {A: 0.6, B_TOKEN: 0.4}, A: {A: 0.35, B_TOKEN: 0.35, EOS: 0.3}, B_TOKEN: {EOS: 1.0}, EOS: {EOS: 1.0}}
    )
    model = MarkovModel(table)
    src, lengths = one_source()
    greedy_result = greedy(model, src, lengths)[0]
    beam_result = beam_search(model, src, lengths, SearchOptions(beam_size=2, length_penalty=0.0))[0][0]
    assert greedy_result.tokens[0] == A
    assert beam_result.tokens == [B_TOKEN]
    assert beam_result.log_prob == pytest.approx(math.log(0.4))
    assert beam_result.log_prob > greedy_result.log_prob


def random_table(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(6, 6, generator=generator) * 2
    table[:, :3] = NEVER
    return table


def random_batch(seed: int, batch_size: int = 7, max_len: int = 6):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (batch_size,), generator=generator)
    src = torch.randint(4, 6, (batch_size, int(lengths.max())), generator=generator)
    return src, lengths


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_beam_of_one_is_greedy(seed):
    bias = torch.randn(6, 6, generator=torch.Generator().manual_seed(seed))
    model = MarkovModel(random_table(seed), source_bias=bias)
    src, lengths = random_batch(seed)
    greedy_results = greedy(model, src, lengths, SearchOptions(max_length_a=1.0, max_length_b=2))
    beam_results = beam_search(
        model, src, lengths, SearchOptions(beam_size=1, length_penalty=0.0, max_length_a=1.0, max_length_b=2)
    )
    for g, (b,) in zip(greedy_results, beam_results, strict=True):
        assert g.tokens == b.tokens
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-5)
        assert torch.allclose(g.attention, b.attention)


def best_path_by_enumeration(table: torch.Tensor, limit: int, alpha: float) -> float:
    """Best length-penalized score over all outputs of at most `limit` tokens (EOS included)."""
    log_probs = torch.log_softmax(table, dim=-1)
    best = -math.inf
    for length in range(1, limit + 1):
        for words in itertools.product([A, B_TOKEN], repeat=length - 1):
            path = [BOS, *words, EOS]
            total = sum(float(log_probs[prev, nxt]) for prev, nxt in itertools.pairwise(path))
            best = max(best, total / float(length_penalty(torch.tensor(length), alpha)))
    return best


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(5))
def test_wide_beam_is_exact_search(seed, alpha):
    table = random_table(seed)
    src, lengths = one_source(length=2)
    limit = 2 + 2  # a * S + b with a = 1, b = 2
    result = beam_search(
        MarkovModel(table),
        src,
        lengths,
        SearchOptions(beam_size=32, length_penalty=alpha, max_length_a=1.0, max_length_b=2),
    )
    assert result[0][0].score == pytest.approx(best_path_by_enumeration(table, limit, alpha), abs=1e-5)


def test_n_best_is_sorted_and_scores_are_length_penalized():
    model = MarkovModel(random_table(3))
    src, lengths = random_batch(3)
    results = beam_search(model, src, lengths, SearchOptions(beam_size=4, n_best=3, length_penalty=0.6))
    for hypotheses in results:
        assert len(hypotheses) == 3
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True)
        for h in hypotheses:
            expected = h.log_prob / float(length_penalty(torch.tensor(len(h.tokens) + 1), 0.6))
            assert h.score == pytest.approx(expected, abs=1e-5)


def test_length_limit_per_sentence_and_attention_rows():
    table = table_from_probs({BOS: {A: 1.0}, A: {A: 0.9, EOS: 0.1}})  # would run forever
    model = MarkovModel(table)
    src = torch.tensor([[4, 4, 4, 4, 4], [4, 4, 0, 0, 0]])
    lengths = torch.tensor([5, 2])
    for hypotheses in (greedy(model, src, lengths, SearchOptions(max_length_a=1.0, max_length_b=1)),):
        assert [len(h.tokens) for h in hypotheses] == [5, 2]  # limit a*S+b = 6 and 3, EOS included
        assert hypotheses[1].attention.shape == (3, 2)  # one row per generated token, real positions only
        assert torch.allclose(hypotheses[1].attention.sum(dim=1), torch.ones(3))
    beams = beam_search(model, src, lengths, SearchOptions(beam_size=3, max_length_a=1.0, max_length_b=1))
    assert all(len(h.tokens) + 1 <= limit for (h, *_), limit in zip(beams, [6, 3], strict=True))


def test_max_length_caps_every_sentence():
    model = MarkovModel(table_from_probs({BOS: {A: 1.0}, A: {A: 0.9, EOS: 0.1}}))  # would run forever
    src, lengths = torch.tensor([[4, 4, 4, 4, 4], [4, 4, 0, 0, 0]]), torch.tensor([5, 2])
    for options in (SearchOptions(max_length=3), SearchOptions(beam_size=2, max_length=3)):
        assert options.length_limits(lengths).tolist() == [3, 3]  # min(1.5 S + 10, 3)
        results = (
            greedy(model, src, lengths, options) if options.is_greedy else beam_search(model, src, lengths, options)
        )
        hypotheses = results if options.is_greedy else [h for h, *_ in results]
        assert [len(h.tokens) for h in hypotheses] == [2, 2]  # and EOS makes 3
    with pytest.raises(UserError, match="max length must be at least 1"):
        SearchOptions(max_length=0)


def test_an_observer_sees_every_step_and_changes_nothing():
    model = MarkovModel(random_table(3), source_bias=torch.randn(6, 6, generator=torch.Generator().manual_seed(3)))
    src, lengths = random_batch(3, batch_size=6)
    options = SearchOptions(beam_size=3, n_best=3)
    steps = []
    observed = beam_search(model, src, lengths, options, observer=steps.append)
    plain = beam_search(model, src, lengths, options)
    assert [[h.tokens for h in hs] for hs in observed] == [[h.tokens for h in hs] for hs in plain]
    assert [step.step for step in steps] == list(range(len(steps)))
    for step in steps:
        for row in range(step.sentences.numel()):
            slots = step.slot[row][step.slot[row] >= 0].tolist()
            assert sorted(slots) == list(range(len(slots))) and len(slots) <= 3  # the next beams, by rank
            finished = step.finished[row]
            assert bool((step.tokens[row][finished] == EOS).all())  # only EOS finishes
            assert not bool((finished & (step.slot[row] >= 0)).any())  # a finished one does not live on
            assert bool((step.origin[row] < 3).all())
            log_probs = step.log_probs[row]
            assert bool((log_probs[:-1] >= log_probs[1:]).all())  # ranked best first
    first = steps[0]
    possible = first.log_probs > float("-inf")  # a small vocabulary leaves impossible candidates
    assert first.sentences.tolist() == list(range(6)) and bool((first.origin[possible] == 0).all())  # one beam at start


def test_a_sentence_does_not_depend_on_its_batch():
    model = MarkovModel(random_table(7), source_bias=torch.randn(6, 6, generator=torch.Generator().manual_seed(1)))
    src, lengths = random_batch(7, batch_size=16)
    together = beam_search(model, src, lengths, SearchOptions(beam_size=3, n_best=2))
    for i in range(16):
        alone = beam_search(
            model, src[i : i + 1, : lengths[i]], lengths[i : i + 1], SearchOptions(beam_size=3, n_best=2)
        )[0]
        assert [h.tokens for h in alone] == [h.tokens for h in together[i]]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"beam_size": 0}, "beam size must be at least 1, got 0"),
        ({"beam_size": 2, "n_best": 3}, r"n-best \(3\) cannot exceed the beam size \(2\)"),
        ({"n_best": 0}, "n-best must be at least 1"),
        ({"length_penalty": -0.5}, "length penalty must be >= 0"),
    ],
)
def test_impossible_search_options_are_a_user_error(settings, message):
    with pytest.raises(UserError, match=message):
        SearchOptions(**settings)


def test_decode_all_returns_input_order_and_handles_empty_sources():
    model = MarkovModel(random_table(5), source_bias=torch.randn(6, 6, generator=torch.Generator().manual_seed(2)))
    src, lengths = random_batch(5, batch_size=9)
    id_lists = [src[i, : lengths[i]].tolist() for i in range(9)]
    id_lists.insert(4, [])
    for beam_size, batch_tokens in itertools.product((1, 3), (None, 12)):
        options = SearchOptions(beam_size=beam_size)
        together = decode_all(model, id_lists, options, batch_size=4, batch_tokens=batch_tokens)
        assert together[4][0].tokens == [] and len(together) == 10
        for ids, hypotheses in zip(id_lists, together, strict=True):
            if ids:
                alone = decode_all(model, [ids], options, batch_size=1)[0]
                assert [h.tokens for h in alone] == [h.tokens for h in hypotheses]


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), max_size=40).map(sorted),
    max_sentences=st.integers(1, 8),
    max_tokens=st.none() | st.integers(1, 120),
    rows=st.integers(1, 5),
)
def test_length_batches_cover_in_order_within_both_budgets_and_fill_each(lengths, max_sentences, max_tokens, rows):
    batches = length_batches(lengths, max_sentences, max_tokens, rows)
    assert [position for batch in batches for position in batch] == list(range(len(lengths)))

    def fits(batch) -> bool:  # a lone sentence always fits: it cannot be split
        padded = len(batch) * max(lengths[p] for p in batch) * rows
        return len(batch) <= max_sentences and (max_tokens is None or len(batch) == 1 or padded <= max_tokens)

    assert all(len(batch) > 0 and fits(batch) for batch in batches)
    for batch in batches[:-1]:  # a batch is cut only when the next sentence would not fit
        assert not fits(range(batch.start, batch.stop + 1))


def test_pad_and_bos_are_never_generated():
    table = torch.zeros(6, 6)
    table[:, 0] = 100.0  # a model that loves PAD
    table[:, BOS] = 90.0
    model = MarkovModel(table)
    src, lengths = random_batch(1, batch_size=3)
    for hypotheses in (
        greedy(model, src, lengths),
        [h for hs in beam_search(model, src, lengths, SearchOptions(beam_size=2)) for h in hs],
    ):
        for h in hypotheses:
            assert 0 not in h.tokens and BOS not in h.tokens
            assert h.attention.shape[0] == len(h.tokens) + 1
