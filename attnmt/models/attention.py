"""Stateless attention scorers: (query, keys, projected_keys, mask) -> (context, weights).

Every scorer has the same two calls:

- `project_keys(keys (B, S, H_k), mask (B, S)) -> projected_keys`: the key-side work, done
  once per source batch by the caller and handed back at every decoding step as data. Nothing
  is stored on the module between calls, so call order never matters.
- `forward(query, keys, projected_keys, mask) -> (context, weights)` with a query of one step
  (B, H_q) -> context (B, H_k), weights (B, S), or of many steps (B, T, H_q) -> context
  (B, T, H_k), weights (B, T, S).

Weights are exactly 0 at padded positions (mask False) and sum to 1 over the real ones; a row
with no real position gets all-zero weights and a zero context, never NaN.

The scorers (s = query, h_j = key j):

- additive (Bahdanau et al. 2015): e_j = v_a^T tanh(W_q s + W_k h_j), own size A.
- dot (Luong et al. 2015): e_j = s^T h_j. When H_q != H_k the keys are first mapped into the
  query space by a learned W_k (H_q x H_k), computed once per batch; that is Luong's `general`
  score by another name, and we say so rather than pad or truncate a vector.
- scaled_dot: the dot score divided by sqrt(H_q) (Vaswani et al. 2017), same projection rule.
- general (Luong et al. 2015): e_j = s^T W_a h_j, computed as s . (W_a h_j) with W_a h_j
  precomputed per batch.
- none: no attention, the vanilla encoder-decoder baseline (Cho et al. 2014 feed one fixed
  summary to every step). The fixed context is the mean of the keys over real positions,
  computed once per batch; the weights returned are all zeros, because nothing attends.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of `scores` (B, T, S) counting only positions where `mask` (B, S) is True.

    Padded positions get the most negative finite score, so they contribute exp(-huge) = 0
    and a fully padded row stays finite (uniform) instead of NaN; zeroing them afterwards makes
    padding exactly 0 and a fully padded row all 0.
    """
    mask = mask.unsqueeze(1)  # (B, 1, S)
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)  # (B, T, S)


def _check(query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor, query_size: int, key_size: int) -> None:
    assert query.dim() in (2, 3) and query.shape[-1] == query_size, f"query {tuple(query.shape)}, H_q={query_size}"
    assert keys.dim() == 3 and keys.shape[-1] == key_size, f"keys {tuple(keys.shape)}, H_k={key_size}"
    assert mask.shape == keys.shape[:2] and mask.dtype == torch.bool, f"mask {tuple(mask.shape)} {mask.dtype}"
    assert query.shape[0] == keys.shape[0], f"batch of query {query.shape[0]} != keys {keys.shape[0]}"


def _steps(query: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A one-step query (B, H_q) as (B, 1, H_q), and whether to squeeze the results back."""
    return (query.unsqueeze(1), True) if query.dim() == 2 else (query, False)


def _dot_scores(query: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
    """query (B, T, H_q) . projected_keys (B, S, H_q) -> scores (B, T, S).

    One step multiplies and sums: on the CPU its backward is faster than that of a bmm of
    (B, 1, H) by (B, H, S), which runs B small outer products (`python -m benchmarks.kernels`
    measures both). Many steps are one bmm.
    """
    if query.shape[1] == 1:
        return (projected_keys * query).sum(dim=-1).unsqueeze(1)  # (B, S, H_q) -> (B, 1, S)
    return torch.bmm(query, projected_keys.transpose(1, 2))  # (B, T, S)


def _weigh(
    scores: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor, squeeze: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores (B, T, S) -> (context (B, T, H_k), weights (B, T, S)), squeezed to one step if asked."""
    weights = masked_softmax(scores, mask)  # (B, T, S)
    context = torch.bmm(weights, keys)  # (B, T, H_k)
    if squeeze:
        return context.squeeze(1), weights.squeeze(1)  # (B, H_k), (B, S)
    return context, weights


class AdditiveAttention(nn.Module):
    """Bahdanau's score e_j = v_a^T tanh(W_q s + W_k h_j); s: (B, [T,] H_q), h_j: H_k, inner size A.
    With `bias`, e_j = v_a^T tanh(W_q s + b + W_k h_j), the score of OpenNMT-py's mlp attention.

    `project_keys` returns W_k h for all positions (B, S, A); per step only W_q s is computed.
    A many-step query builds a (B, T, S, A) tensor: fine for training lengths, the price of
    batching all steps at once.
    """

    attends = True  # a context that depends on the query (NoAttention's does not)

    def __init__(self, *, query_size: int, key_size: int, attention_size: int, bias: bool = False):
        super().__init__()
        self.query_size, self.key_size = query_size, key_size
        self.query_projection = nn.Linear(query_size, attention_size, bias=bias)  # W_q (and b: OpenNMT-py's score)
        self.key_projection = nn.Linear(key_size, attention_size, bias=False)  # W_k
        self.score_vector = nn.Linear(attention_size, 1, bias=False)  # v_a

    def project_keys(self, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """keys (B, S, H_k) -> W_k keys (B, S, A)."""
        return self.key_projection(keys)

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, projected_keys: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check(query, keys, mask, self.query_size, self.key_size)
        query, squeeze = _steps(query)  # (B, T, H_q)
        projected_query = self.query_projection(query)  # (B, T, A)
        hidden = torch.tanh(projected_query.unsqueeze(2) + projected_keys.unsqueeze(1))  # (B, T, S, A)
        scores = self.score_vector(hidden).squeeze(-1)  # (B, T, S)
        return _weigh(scores, keys, mask, squeeze)


class DotAttention(nn.Module):
    """Luong's dot score e_j = s^T h_j, or with `scaled` e_j = s^T h_j / sqrt(H_q).

    Equal sizes use the keys as they are (no parameters). Unequal sizes map the keys into the
    query space once per batch, W_k h_j with W_k: (H_q x H_k), which makes this the general
    score s^T W_k h_j; the module docstring says why.
    """

    attends = True  # a context that depends on the query (NoAttention's does not)

    def __init__(self, *, query_size: int, key_size: int, scaled: bool = False):
        super().__init__()
        self.query_size, self.key_size = query_size, key_size
        self.key_projection = nn.Linear(key_size, query_size, bias=False) if key_size != query_size else None
        self.scale = 1.0 / math.sqrt(query_size) if scaled else 1.0

    def project_keys(self, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """keys (B, S, H_k) -> keys in the query space (B, S, H_q)."""
        return keys if self.key_projection is None else self.key_projection(keys)

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, projected_keys: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check(query, keys, mask, self.query_size, self.key_size)
        query, squeeze = _steps(query)  # (B, T, H_q)
        scores = _dot_scores(query, projected_keys)  # (B, T, S)
        if self.scale != 1.0:
            scores = scores * self.scale
        return _weigh(scores, keys, mask, squeeze)


class GeneralAttention(nn.Module):
    """Luong's general (bilinear) score e_j = s^T W_a h_j, with W_a: (H_q x H_k).

    `project_keys` returns W_a h for all positions (B, S, H_q), so a step is one batched dot.
    """

    attends = True  # a context that depends on the query (NoAttention's does not)

    def __init__(self, *, query_size: int, key_size: int):
        super().__init__()
        self.query_size, self.key_size = query_size, key_size
        self.key_projection = nn.Linear(key_size, query_size, bias=False)  # W_a

    def project_keys(self, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """keys (B, S, H_k) -> W_a keys (B, S, H_q)."""
        return self.key_projection(keys)

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, projected_keys: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check(query, keys, mask, self.query_size, self.key_size)
        query, squeeze = _steps(query)  # (B, T, H_q)
        scores = _dot_scores(query, projected_keys)  # (B, T, S)
        return _weigh(scores, keys, mask, squeeze)


class NoAttention(nn.Module):
    """The vanilla baseline: every step gets the same context, the mean of the keys over real positions.

    `project_keys` computes that mean once per batch, (B, 1, H_k); `forward` repeats it for each
    step and returns all-zero weights (B, [T,] S), since nothing is attended to.
    """

    attends = False  # the decoder may compute every step's context at once

    def __init__(self, *, query_size: int, key_size: int):
        super().__init__()
        self.query_size, self.key_size = query_size, key_size

    def project_keys(self, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """keys (B, S, H_k) -> mean over real positions (B, 1, H_k); zeros for a row with none."""
        real = mask.unsqueeze(-1).to(keys.dtype)  # (B, S, 1)
        total = (keys * real).sum(dim=1, keepdim=True)  # (B, 1, H_k)
        return total / real.sum(dim=1, keepdim=True).clamp(min=1.0)

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, projected_keys: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check(query, keys, mask, self.query_size, self.key_size)
        if query.dim() == 2:
            return projected_keys[:, 0], keys.new_zeros(mask.shape)  # (B, H_k), (B, S)
        return self.every_step(projected_keys, mask, query.shape[1])

    def every_step(
        self, projected_keys: torch.Tensor, mask: torch.Tensor, steps: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The contexts (B, T, H_k) and all-zero weights (B, T, S) of `steps` steps at once: no
        query is needed, since none is looked at."""
        context = projected_keys.expand(-1, steps, -1)  # (B, T, H_k)
        return context, projected_keys.new_zeros(mask.shape[0], steps, mask.shape[1])
