"""A minimum output length as a steering rule: no output ends before it has `tokens` tokens.

EOS is closed to a hypothesis until `tokens` tokens are out (EOS not counted), as fairseq's
`--min-len` and OpenNMT-py's `-min_length` close it, except at the sentence's length limit,
where EOS ends every output: a limit shorter than the minimum wins.
"""

from __future__ import annotations

import torch

from attnmt.search.rules import Rule
from attnmt.vocab import EOS


class MinLength(Rule):
    """EOS closed at the first `tokens` steps, unless the step is a sentence's last."""

    def __init__(self, tokens: int):
        self.tokens = tokens

    def restrict(self, log_probs: torch.Tensor, step: int, active: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        if step >= self.tokens:
            return log_probs
        open_at_limit = step + 1 >= limits  # (B_a,)
        log_probs = log_probs.clone()
        log_probs[:, :, EOS] = log_probs[:, :, EOS].masked_fill(~open_at_limit[:, None], float("-inf"))
        return log_probs
