"""Teacher forcing through the search's step interface: what the model computes for given outputs.

Used to score a translation (its log-probability and attention) and to compare the model's own
choice at each step with what it was fed. Fed through the same `StepModel` the searches use, a
search's own output scores exactly as the search scored it, on every engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnmt.search.options import StepModel, never_generated
from attnmt.vocab import BOS, PAD


@dataclass
class TeacherForced:
    """What the model computes while it is fed given targets (B, T), each ending in EOS: the
    log-probability of each target token (B, T), 0 after EOS; the attention of each step
    (B, T, S); and at each step the model's own choice, its most probable token (PAD and BOS
    aside) (B, T) with its log-probability (B, T)."""

    log_probs: torch.Tensor
    attention: torch.Tensor
    choices: torch.Tensor
    choice_log_probs: torch.Tensor


@torch.no_grad()
def teacher_forced(
    model: StepModel, src: torch.Tensor, src_lengths: torch.Tensor, targets: torch.Tensor
) -> TeacherForced:
    """What the model computes while it puts out given targets: src (B, S), src_lengths (B,),
    targets (B, T) long, each ending in EOS (PAD after).

    The model is fed the targets through the same step interface the searches use, so a
    search's own output scores exactly as the search scored it, on every engine."""
    assert targets.dim() == 2 and targets.size(0) == src.size(0), "targets (B, T)"
    encoder_output = model.encode(src, src_lengths)
    state = model.init_state(encoder_output)
    prev = torch.full((src.size(0),), BOS, dtype=torch.long, device=src.device)
    log_probs, attentions, choices, choice_log_probs = [], [], [], []
    for step in range(targets.size(1)):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)  # (B, V), (B, S)
        prev = targets[:, step]
        log_probs.append(step_log_probs.gather(1, prev[:, None]).squeeze(1))
        attentions.append(attention.float())
        best_log_probs, best = never_generated(step_log_probs).max(dim=-1)  # (B,), the target's taken above
        choices.append(best)
        choice_log_probs.append(best_log_probs)
    real = targets != PAD  # (B, T)
    return TeacherForced(
        torch.stack(log_probs, dim=1).masked_fill(~real, 0.0),
        torch.stack(attentions, dim=1),
        torch.stack(choices, dim=1),
        torch.stack(choice_log_probs, dim=1),
    )
