"""Batched greedy search over the model's one decoder `step`, steered by rules that need no beam.

At each step every sentence takes its most probable token; a sentence leaves the batch at its
EOS, which is forced at its length limit (PAD and BOS are never generated). It is beam search
with K = 1 (`beam.beam_search`) without the beam's bookkeeping: a rule that adds candidates or
chooses among them (`Rule.needs_beam`) is searched there, as a beam of one.
"""

from __future__ import annotations

import torch

from attnmt.search.hypotheses import Hypothesis, hypothesis_of
from attnmt.search.options import GREEDY, SearchOptions, StepModel, never_generated
from attnmt.search.rules import PLAIN, Steering
from attnmt.vocab import BOS, EOS, PAD


@torch.no_grad()
def greedy(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions = GREEDY,
    steering: Steering = PLAIN,
) -> list[Hypothesis]:
    """Greedy decoding of a batch: src (B, S) long, src_lengths (B,) -> one Hypothesis per sentence,
    scored by its log-probability. Of the options only the length limit applies; `steering`:
    the batch's rules (none of them `needs_beam`), made for this batch.

    A sentence leaves the batch at its EOS: the model then steps only the unfinished rows
    (in sorted batches about a third of the rows would otherwise be finished ones).
    """
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    assert not steering.needs_beam, "rules that add or choose candidates are searched as a beam of one"
    batch_size, device = src.size(0), src.device
    encoder_output = model.encode(src, src_lengths)
    state = model.init_state(encoder_output)
    limits = options.length_limits(src_lengths).to(device)  # (B,)
    max_limit = int(limits.max())
    active = torch.arange(batch_size, device=device)  # (B_a,) batch rows still decoding
    prev = torch.full((batch_size,), BOS, dtype=torch.long, device=device)  # (B_a,)
    token_matrix = torch.full((batch_size, max_limit), PAD, dtype=torch.long, device=device)
    attention_tensor = torch.zeros(batch_size, max_limit, src.size(1), device=device)
    log_probs = torch.zeros(batch_size, device=device)
    for step in range(max_limit):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)  # (B_a, V), (B_a, S)
        step_log_probs = never_generated(step_log_probs)
        last = step + 1 >= limits  # (B_a,)
        if steering:  # one hypothesis a sentence: a beam of one to the rules
            step_log_probs = steering.restrict(step_log_probs[:, None], step, active, limits)[:, 0]
        best_log_probs, best = step_log_probs.max(dim=-1)  # (B_a,)
        # A sentence's last allowed token is EOS, as in beam search. Forcing it after the argmax
        # equals masking every other token first, without building a (B_a, V) mask each step.
        best = best.masked_fill(last, EOS)
        best_log_probs = torch.where(last, step_log_probs[:, EOS], best_log_probs)
        token_matrix[active, step] = best
        attention_tensor[active, step] = attention.float()
        log_probs[active] += best_log_probs
        if steering:
            steering.advance(torch.zeros_like(best)[:, None], best[:, None])
        finished = best == EOS  # (B_a,) forced at the limit, so every sentence finishes
        keep = None
        if bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)  # (B_a',)
            if keep.numel() == 0:
                break
            active, limits, best = active[keep], limits[keep], best[keep]
            state, encoder_output = state.index_select(keep), encoder_output.index_select(keep)
        if steering:
            rows = finished.numel()
            steering.reorder(
                finished.new_zeros(rows, 1, dtype=torch.long),
                torch.arange(rows, device=device) if keep is None else keep,
            )
        prev = best
    token_matrix, attention_tensor, log_probs = token_matrix.cpu(), attention_tensor.cpu(), log_probs.cpu()
    return [
        hypothesis_of(
            token_matrix[i], attention_tensor[i], float(log_probs[i]), float(log_probs[i]), int(src_lengths[i])
        )
        for i in range(batch_size)
    ]
