"""Multi-head attention and sinusoidal positions: the two parts of the Transformer family
(Vaswani et al. 2017) that the recurrent family has no counterpart of.

    head_i = softmax(Q W_q^i (K W_k^i)^T / sqrt(d_k) + M) V W_v^i        d_k = D / h
    MultiHead(Q, K, V) = [head_1; ...; head_h] W_o

M is 0 where a query may look and -inf elsewhere (padding, and the future in a decoder's
self-attention). Scaled dot-product attention (`attention.DotAttention` with `scaled=True`) is
one head without the projections. The keys and values are projected by `keys_values`, apart
from the query, so that what does not change between decoding steps (the source's projections,
the target positions already decoded) is projected once and passed back in as data: the module
keeps nothing between calls.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    """h heads over a model size D, each of size d_k = D / h; W_q, W_k, W_v, W_o are (D, D), all
    but W_k with biases. Dropout `dropout` falls on the attention weights in training."""

    def __init__(self, *, model_size: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if model_size % heads:
            raise ValueError(f"heads ({heads}) must divide the model size ({model_size})")
        self.heads, self.head_size, self.dropout = heads, model_size // heads, dropout
        self.query = nn.Linear(model_size, model_size)  # W_q, the h heads' side by side
        # W_k without a bias: a bias b_k adds q . b_k to every score of a query, which the softmax
        # cancels, so its gradient is zero and Adam would move it by rounding noise alone
        self.key = nn.Linear(model_size, model_size, bias=False)  # W_k
        self.value = nn.Linear(model_size, model_size)  # W_v
        self.output = nn.Linear(model_size, model_size)  # W_o

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, h, T, d_k)."""
        return x.unflatten(-1, (self.heads, self.head_size)).transpose(1, 2)

    def keys_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, S, D) -> keys K W_k and values V W_v, each (B, h, S, d_k)."""
        return self._split(self.key(x)), self._split(self.value(x))

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None,
        *,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, T, D), keys and values (B, h, S, d_k) from `keys_values`, mask (B or 1, T or 1,
        S) bool, True where a query may look (None: everywhere) -> (output (B, T, D), weights
        (B, h, T, S) or None).

        The weights are computed only with `need_weights` (alignments, heatmaps, the explorer),
        from the equation itself; otherwise torch's fused `scaled_dot_product_attention` computes
        the same output without materializing them.
        """
        assert query.dim() == 3 and keys.dim() == 4 and keys.shape == values.shape, (
            "query (B, T, D), keys (B, h, S, d_k)"
        )
        queries = self._split(self.query(query))  # (B, h, T, d_k)
        head_mask = None if mask is None else mask.unsqueeze(1)  # (B, 1, T, S): the same for every head
        weights = None
        if need_weights:
            scores = queries @ keys.transpose(-2, -1) / math.sqrt(self.head_size)  # (B, h, T, S)
            if head_mask is not None:
                scores = scores.masked_fill(~head_mask, -torch.inf)
            weights = torch.softmax(scores.float(), dim=-1).to(values.dtype)  # (B, h, T, S)
            context = F.dropout(weights, self.dropout, self.training) @ values  # (B, h, T, d_k)
        else:
            context = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=head_mask, dropout_p=self.dropout if self.training else 0.0
            )  # (B, h, T, d_k)
        return self.output(context.transpose(1, 2).flatten(2)), weights  # (B, T, D)


def sinusoidal_positions(positions: torch.Tensor, size: int) -> torch.Tensor:
    """positions (T,) long -> (T, D) float32 encodings (Vaswani et al. 2017, section 3.5):

        PE(pos, 2i) = sin(pos / 10000^(2i/D))      PE(pos, 2i+1) = cos(pos / 10000^(2i/D))

    Computed for the positions asked, so a sentence of any length has them and nothing is stored.
    """
    assert positions.dim() == 1 and size % 2 == 0, "positions (T,), an even size"
    rates = torch.exp(torch.arange(0, size, 2, device=positions.device) * (-math.log(10000.0) / size))  # (D/2,)
    angles = positions.float().unsqueeze(1) * rates  # (T, D/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # (T, D): sin, cos interleaved
