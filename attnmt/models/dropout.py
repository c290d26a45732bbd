"""`WordDropout`: dropping whole tokens of a sentence in training, not single features; and
`LockedDropout`: one dropout mask a sentence, the same at every time step.

nn.Dropout zeroes features of an embedding independently, so a word's identity always gets
through in the features that were kept. Word dropout zeroes a token's whole embedding, so the
model must predict from the rest of the sentence, as when a word is rare or noisy (Sennrich et
al. 2016 drop source and target words in Edinburgh's WMT systems; Gal and Ghahramani 2016 drop
word types). Kept tokens are scaled by 1/(1-p) so the expected input is the same in training
and inference.

Leaf module: imports nothing from attnmt.
"""

from __future__ import annotations

import torch
from torch import nn


class _Dropout(nn.Module):
    """A dropout module's probability p, checked, and shown in the module's repr."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"{type(self).__name__} needs p in [0, 1), got {p}")
        self.p = p

    def extra_repr(self) -> str:
        return f"p={self.p}"


class WordDropout(_Dropout):
    """embedded (B, [T,] E) -> the same shape, each token's row zeroed with probability p in training."""

    def forward(self, embedded: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:  # no random numbers drawn: runs without it are unchanged
            return embedded
        keep = torch.empty((*embedded.shape[:-1], 1), device=embedded.device, dtype=embedded.dtype)
        return embedded * keep.bernoulli_(1.0 - self.p) / (1.0 - self.p)


class LockedDropout(_Dropout):
    """Variational dropout (Gal and Ghahramani 2016): x (B, T, D) -> the same shape, one mask (B, 1, D)
    drawn per sentence and applied at every time step, kept features scaled by 1/(1-p).

    nn.Dropout draws a new mask at every position, so over a sentence every feature gets through
    somewhere; a locked mask removes a feature from the whole sentence, a stronger regularizer of
    the same strength p. A (B, D) input, one step, gets its own mask per row, as nn.Dropout would.
    """

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        shape = (x.shape[0], *([1] * (x.dim() - 2)), x.shape[-1]) if x.dim() > 2 else x.shape
        keep = torch.empty(shape, device=x.device, dtype=x.dtype).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)
