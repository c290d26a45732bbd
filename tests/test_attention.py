"""Attention scorers: the equations, masking, one-step vs many-step queries, gradients."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.models.attention import AdditiveAttention, DotAttention, GeneralAttention, NoAttention, masked_softmax

QUERY, KEY = 5, 6  # unequal on purpose: decoder and bidirectional encoder sizes differ
KINDS = ("additive", "dot", "scaled_dot", "general", "none")


def make(kind: str, query_size: int = QUERY, key_size: int = KEY):
    sizes = {"query_size": query_size, "key_size": key_size}
    if kind == "additive":
        return AdditiveAttention(**sizes, attention_size=4)
    if kind in ("dot", "scaled_dot"):
        return DotAttention(**sizes, scaled=kind == "scaled_dot")
    if kind == "general":
        return GeneralAttention(**sizes)
    return NoAttention(**sizes)


def batch(lengths, query_steps=None, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    batch_size, src_len = len(lengths), max(lengths)
    shape = (batch_size, QUERY) if query_steps is None else (batch_size, query_steps, QUERY)
    query = torch.randn(*shape, generator=generator, dtype=dtype)
    keys = torch.randn(batch_size, src_len, KEY, generator=generator, dtype=dtype)
    mask = torch.arange(src_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, S)
    return query, keys, mask


def run(attention, query, keys, mask):
    return attention(query, keys, attention.project_keys(keys, mask), mask)


def reference_scores(attention, kind, query, keys):
    """e_j for one query vector (H_q,) and one sentence's keys (n, H_k), written from the papers."""
    scores = []
    for key in keys:
        if kind == "additive":
            inner = attention.query_projection.weight @ query + attention.key_projection.weight @ key
            scores.append(attention.score_vector.weight[0] @ torch.tanh(inner))  # v_a^T tanh(W_q s + W_k h)
        elif kind in ("dot", "scaled_dot"):
            projected = key if attention.key_projection is None else attention.key_projection.weight @ key
            scores.append(query @ projected / (math.sqrt(query.numel()) if kind == "scaled_dot" else 1.0))
        else:  # general: s^T W_a h
            scores.append(query @ (attention.key_projection.weight @ key))
    return torch.stack(scores)


@pytest.mark.parametrize("kind", KINDS)
def test_matches_the_equation_sentence_by_sentence(kind):
    torch.manual_seed(0)
    attention = make(kind)
    lengths = [4, 1, 3]
    query, keys, mask = batch(lengths)
    context, weights = run(attention, query, keys, mask)
    for row, length in enumerate(lengths):
        real_keys = keys[row, :length]
        if kind == "none":
            expected_weights, expected_context = torch.zeros(length), real_keys.mean(dim=0)
        else:
            expected_weights = torch.softmax(reference_scores(attention, kind, query[row], real_keys), dim=0)
            expected_context = expected_weights @ real_keys
        torch.testing.assert_close(weights[row, :length], expected_weights, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(context[row], expected_context, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_rows_sum_to_one_and_padding_is_exactly_zero(kind):
    attention = make(kind)
    lengths = [5, 2, 1, 4]
    for steps in (None, 3):
        query, keys, mask = batch(lengths, query_steps=steps)
        _, weights = run(attention, query, keys, mask)
        weights = weights if steps is not None else weights.unsqueeze(1)  # (B, T, S)
        assert weights.masked_select(~mask.unsqueeze(1)).eq(0).all()  # exactly 0, not merely small
        expected_sum = 0.0 if kind == "none" else 1.0
        torch.testing.assert_close(weights.sum(-1), torch.full(weights.shape[:2], expected_sum))


@pytest.mark.parametrize("kind", KINDS)
def test_padded_keys_change_nothing(kind):
    attention = make(kind)
    query, keys, mask = batch([3, 5, 2], query_steps=2)
    context, weights = run(attention, query, keys, mask)
    noisy = keys.masked_fill(~mask.unsqueeze(-1), 1e4)
    noisy_context, noisy_weights = run(attention, query, noisy, mask)
    assert torch.equal(weights, noisy_weights)
    torch.testing.assert_close(context, noisy_context, atol=0, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_many_steps_at_once_equal_one_step_at_a_time(kind):
    attention = make(kind)
    query, keys, mask = batch([3, 5, 2], query_steps=4)
    projected = attention.project_keys(keys, mask)
    context, weights = attention(query, keys, projected, mask)  # (B, T, H_k), (B, T, S)
    for t in range(query.shape[1]):
        step_context, step_weights = attention(query[:, t], keys, projected, mask)  # (B, H_k), (B, S)
        torch.testing.assert_close(context[:, t], step_context, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(weights[:, t], step_weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_fully_masked_row_gives_zeros_not_nan(kind):
    attention = make(kind)
    query, keys, mask = batch([3, 3], query_steps=2)
    mask[1] = False
    query.requires_grad_(True)
    keys.requires_grad_(True)
    context, weights = run(attention, query, keys, mask)
    assert torch.isfinite(context).all() and torch.isfinite(weights).all()
    assert weights[1].eq(0).all() and context[1].eq(0).all()
    (context.sum() + weights.sum()).backward()
    for grad in (query.grad, keys.grad):  # `none` never reads the query: no gradient at all
        assert grad is None or torch.isfinite(grad).all()


@pytest.mark.parametrize("steps", [None, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck_float64(kind, steps):
    attention = make(kind).double()
    query, keys, mask = batch([4, 2, 3], query_steps=steps, dtype=torch.float64)
    query.requires_grad_(True)
    keys.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda q, k: run(attention, q, k, mask), (query, keys))


def test_dot_projects_keys_only_when_sizes_differ():
    assert DotAttention(query_size=6, key_size=6).key_projection is None
    assert len(list(DotAttention(query_size=6, key_size=6).parameters())) == 0
    unequal = DotAttention(query_size=5, key_size=6)
    assert unequal.key_projection.weight.shape == (5, 6)


def test_scaled_dot_is_dot_over_sqrt_d():
    torch.manual_seed(0)
    dot, scaled = (
        DotAttention(query_size=QUERY, key_size=KEY),
        DotAttention(query_size=QUERY, key_size=KEY, scaled=True),
    )
    scaled.load_state_dict(dot.state_dict())
    query, keys, mask = batch([3, 4])
    _, dot_weights = run(dot, query / math.sqrt(QUERY), keys, mask)
    _, scaled_weights = run(scaled, query, keys, mask)
    torch.testing.assert_close(dot_weights, scaled_weights)


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(0, 7), min_size=1, max_size=5), scale=st.floats(0.01, 100.0))
def test_masked_softmax_property(lengths, scale):
    src_len = max(max(lengths), 1)
    scores = torch.randn(len(lengths), 2, src_len) * scale
    mask = torch.arange(src_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    weights = masked_softmax(scores, mask)
    assert torch.isfinite(weights).all()
    assert weights.masked_select(~mask.unsqueeze(1)).eq(0).all()
    sums = weights.sum(-1)
    for row, length in enumerate(lengths):
        torch.testing.assert_close(sums[row], torch.full((2,), 1.0 if length else 0.0))
