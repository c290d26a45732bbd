"""The training loss: summed cross-entropy over a batch's target tokens, with label smoothing, and
what the sum is divided by (`train.loss_normalization`).

Leaf module: imports nothing from attnmt but `vocab`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnmt.vocab import EOS, PAD


def token_loss(
    logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0, smooth_eos: bool = True
) -> torch.Tensor:
    """Summed cross-entropy over non-pad targets: logits (B, T, V), targets (B, T) -> scalar.

    With label smoothing ε each target's distribution is (1 - ε) one-hot + ε uniform over the
    V classes (F.cross_entropy's; log-softmax and NLL fused in one pass, stable in float32).
    `smooth_eos` false leaves </s> out of it: a </s> target stays one-hot, and the uniform part
    of every other target spreads over the V - 1 classes besides </s>, so smoothing teaches the
    model neither to doubt an ending nor to expect one anywhere.
    """
    logits, targets = logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1)  # (N, V), (N,)
    if smooth_eos or label_smoothing == 0.0:
        return F.cross_entropy(logits, targets, ignore_index=PAD, reduction="sum", label_smoothing=label_smoothing)
    log_probs = torch.log_softmax(logits, dim=-1)  # (N, V)
    real = targets != PAD
    nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)  # (N,); PAD rows dropped below
    uniform = -(log_probs.sum(dim=-1) - log_probs[:, EOS]) / (logits.size(-1) - 1)  # (N,) mean over non-</s>
    smoothed = torch.where(targets == EOS, nll, (1.0 - label_smoothing) * nll + label_smoothing * uniform)
    return smoothed[real].sum()


def loss_denominator(tgt_lengths, normalization: str) -> int:
    """What a batch's summed loss is divided by: `tgt_lengths` (B,) target lengths without </s>
    -> tokens with </s>, tokens without it, or sentences (`train.loss_normalization`)."""
    if normalization == "sentences":
        return len(tgt_lengths)
    without_eos = int(tgt_lengths.sum())
    return without_eos if normalization == "tokens_without_eos" else without_eos + len(tgt_lengths)
