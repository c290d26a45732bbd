"""Batched beam search over the model's one decoder `step`, steered by rules (`rules.Steering`).

It works on whole batches with tensor operations only: no Python loop over sentences or
hypotheses inside the step loop. A sentence's result does not depend on the batch it is
decoded in: every operation is row-wise (per sentence), and each sentence has its own length
limit `a * source_length + b`.

The rule follows fairseq/GNMT: at each step the 2K best continuations of the K live
hypotheses are ranked (with any a steering rule adds); those among the top K that end in EOS
are finished (scored with the GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha, |Y|
counting EOS), the best K that do not end in EOS live on. A sentence is done once it has K
finished hypotheses (or, with `best_finished` stopping, once its best candidate ends in EOS);
done sentences leave the batch; the loop exits when every sentence is done. With K = 1 this is
exactly greedy search. EOS is forced at each sentence's length limit, and PAD and BOS are never
generated. `graphed` holds the same rule in fixed shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from attnmt.search.hypotheses import (
    Beams,
    Finished,
    Hypothesis,
    collect_finished,
    empty_finished,
    gather_beams,
    merge_finished,
)
from attnmt.search.options import SearchOptions, StepModel, length_penalty, never_generated
from attnmt.search.rules import PLAIN, Steering
from attnmt.vocab import BOS, EOS


@dataclass
class BeamStep:
    """What beam search did at one step, for the B_a sentences still searched (an observer's view:
    `beam_search(..., observer=...)`). Candidates are the N ranked continuations, best first: the
    2K best, and those a steering rule added (-inf: not a candidate).

    A candidate extends the live beam in slot `origin` of the step before (slot j holds the j-th
    hypothesis kept; at step 0 only slot 0 exists). `slot` is where it lives on in the next
    step (-1: it finished or was dropped).
    """

    step: int
    sentences: torch.Tensor  # (B_a,) batch rows
    origin: torch.Tensor  # (B_a, N) slot of the beam each candidate extends
    tokens: torch.Tensor  # (B_a, N) the token it adds
    log_probs: torch.Tensor  # (B_a, N) summed log-probability, the new token included
    finished: torch.Tensor  # (B_a, N) bool: ends in EOS where it may finish, so it joins the finished set
    slot: torch.Tensor  # (B_a, N) long
    attention: torch.Tensor  # (B_a, N, S) the attention of the step that chose the token
    length_penalty: float  # what a candidate finishing here is divided by


@torch.no_grad()
def beam_search(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions,
    observer: Callable[[BeamStep], None] | None = None,
    steering: Steering = PLAIN,
) -> list[list[Hypothesis]]:
    """Beam search of a batch: src (B, S), src_lengths (B,) -> per sentence its n_best hypotheses, best first.

    A sentence leaves the batch once it is done; the model steps the K beams of the B_a
    sentences still searched. `observer`, when given, sees every step (`BeamStep`): how the
    search can be replayed; it changes nothing in the result. `steering`: the batch's rules
    (a prefix to continue, phrases to contain, a minimum length), made for this batch.
    """
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    batch_size, src_len, device, beam = src.size(0), src.size(1), src.device, options.beam_size
    widen = torch.arange(batch_size, device=device).repeat_interleave(beam)  # (B*K,) each sentence K times
    encoder_output = model.encode(src, src_lengths).index_select(widen)
    state = model.init_state(encoder_output)  # (B_a*K) rows
    limits = options.length_limits(src_lengths).to(device)  # (B_a,)
    max_limit = int(limits.max())
    beams = Beams.start(batch_size, beam, src_len, device)
    finished = empty_finished(batch_size, beam, max_limit, src_len, device)  # (B_a, ...) of the active sentences
    results = empty_finished(batch_size, beam, max_limit, src_len, device)  # (B, ...) of the done ones
    active = torch.arange(batch_size, device=device)  # (B_a,) batch rows still searched
    prev = torch.full((batch_size * beam,), BOS, dtype=torch.long, device=device)
    first_k = torch.arange(2 * beam, device=device)[None, :] < beam  # (1, 2K)
    beam_offsets = torch.arange(beam, device=device)  # (K,)
    for step in range(max_limit):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)  # (B_a*K, V), (B_a*K, S)
        rows = active.numel()
        last = step + 1 >= limits  # (B_a,) this is the sentence's last allowed token: it must be EOS
        step_log_probs = _allowed(step_log_probs.view(rows, beam, -1), step, last, active, limits, steering)
        totals = (beams.log_probs[:, :, None] + step_log_probs).view(rows, -1)  # (B_a, K*V)
        ranked = _rank(totals, step_log_probs, steering, first_k)
        origin, token, candidate_log_probs, top_k = ranked.origin, ranked.token, ranked.log_probs, ranked.top_k
        if steering:
            steering.advance(origin, token)
        step_attention = gather_beams(attention.float().view(rows, beam, src_len), origin)  # (B_a, N, S)
        candidate_tokens, candidate_attention = beams.extended(origin, token, step_attention)  # (B_a, N, t+1, ...)
        is_eos, alive = token == EOS, candidate_log_probs > float("-inf")
        penalty = length_penalty(torch.tensor(step + 1), options.length_penalty)
        finishing = is_eos & alive & _may_finish(top_k, steering)
        finished = _finish(finished, finishing, ranked, penalty, candidate_tokens, candidate_attention, steering)
        done, live = _stopping(  # (B_a,), (B_a, N)
            options.stopping, finished.count >= beam, last, is_eos, alive, top_k, candidate_log_probs
        )
        pick = steering.select(live, beam) if steering else live.topk(beam, dim=1).indices  # (B_a, K)
        if observer is not None:
            slot = _slots(live, pick, done)
            observed = (origin, token, candidate_log_probs, finishing, slot, step_attention, float(penalty))
            observer(BeamStep(step, active.clone(), *_best_first(candidate_log_probs, observed, ranked.pooled)))
        kept = pick  # (B_a', K): the picks of the sentences still searched
        if bool(done.any()):
            results.put(active[done], finished.rows(done))
            keep = (~done).nonzero().squeeze(1)  # (B_a',)
            if keep.numel() == 0:
                break
            active, limits, finished = active[keep], limits[keep], finished.rows(keep)
            live, kept, origin = live[keep], pick[keep], origin[keep]
            candidate_tokens, candidate_attention = candidate_tokens[keep], candidate_attention[keep]
            encoder_output = encoder_output.index_select((keep[:, None] * beam + beam_offsets).view(-1))
        else:
            keep = torch.arange(rows, device=device)
        beams = Beams(
            live.gather(1, kept), gather_beams(candidate_tokens, kept), gather_beams(candidate_attention, kept)
        )
        if steering:
            steering.reorder(pick, keep)
        state = state.index_select((keep[:, None] * beam + origin.gather(1, kept)).view(-1))  # the new beams' old rows
        prev = beams.tokens[:, :, -1].reshape(-1)
    return collect_finished(results, src_lengths, options.n_best)


def _allowed(
    step_log_probs: torch.Tensor,
    step: int,
    last: torch.Tensor,
    active: torch.Tensor,
    limits: torch.Tensor,
    steering: Steering,
) -> torch.Tensor:
    """step_log_probs (B_a, K, V) with what may not come next set to -inf: PAD and BOS never, what
    a rule forbids at `step` (`Rule.restrict`), and all but EOS at a sentence's last allowed token
    (`last` (B_a,); `active` (B_a,) batch rows, `limits` (B_a,) their length limits)."""
    step_log_probs = never_generated(step_log_probs)
    if steering:
        step_log_probs = steering.restrict(step_log_probs, step, active, limits)
    not_eos = torch.arange(step_log_probs.size(-1), device=step_log_probs.device) != EOS  # (V,)
    return step_log_probs.masked_fill(last[:, None, None] & not_eos, float("-inf"))


@dataclass
class _Ranked:
    """A step's N candidates (B_a, N): the hypothesis each extends and the token it adds, its summed
    log-probability (-inf: not a candidate), whether it ranks among the K best; `pooled`: rules
    added candidates after the 2K best, so they are not in rank order."""

    origin: torch.Tensor
    token: torch.Tensor
    log_probs: torch.Tensor
    top_k: torch.Tensor
    pooled: bool


def _rank(totals: torch.Tensor, step_log_probs: torch.Tensor, steering: Steering, first_k: torch.Tensor) -> _Ranked:
    """totals (B_a, K*V) summed log-probabilities, step_log_probs (B_a, K, V) -> the 2K best
    continuations (first_k (1, 2K) marks the K best), pooled with the ones steering adds: repeats
    and -1s become -inf, and the K best are ranked anew."""
    beam, vocab_size = step_log_probs.size(1), step_log_probs.size(2)
    log_probs, flat = totals.topk(2 * beam, dim=1)  # (B_a, 2K), best first
    extra = steering.candidates(step_log_probs) if steering else None
    if extra is None:
        return _Ranked(flat // vocab_size, flat % vocab_size, log_probs, first_k, False)
    flat = torch.cat([flat, extra], dim=1)  # (B_a, N)
    log_probs = totals.gather(1, flat.clamp(min=0)).masked_fill((flat < 0) | _repeats(flat), -torch.inf)
    flat = flat.clamp(min=0)
    return _Ranked(flat // vocab_size, flat % vocab_size, log_probs, _ranks(log_probs) < beam, True)


def _stopping(
    rule: str,
    k_finished: torch.Tensor,
    last: torch.Tensor,
    is_eos: torch.Tensor,
    alive: torch.Tensor,
    top_k: torch.Tensor,
    log_probs: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The stopping rule (`config.STOPPING`): which sentences are done (B_a,), and the candidates'
    log-probabilities (B_a, N) where they may live on, -inf elsewhere. A sentence is done at its
    length limit (`last`) or once K hypotheses have finished (`k_finished`), and its unfinished
    candidates may live on; with best_finished (OpenNMT-py's) also once the step's best candidate
    ends, and only the unfinished among the top K live on."""
    if rule == "best_finished":
        best_ended = is_eos[:, 0] & alive[:, 0]
        return k_finished | last | best_ended, log_probs.masked_fill(is_eos | ~top_k, float("-inf"))
    return k_finished | last, log_probs.masked_fill(is_eos, float("-inf"))


def _may_finish(top_k: torch.Tensor, steering: Steering) -> torch.Tensor:
    """Where a candidate ending in EOS finishes (B_a, N): among the K best, or where a rule says anywhere."""
    anywhere = steering.may_finish() if steering else None
    return top_k if anywhere is None else top_k | anywhere


def _finish(finished, finishing, ranked: _Ranked, penalty, tokens, attention, steering: Steering) -> Finished:
    """The finished set with the `finishing` candidates (B_a, N) merged in: scored log_prob /
    penalty, ranked by that less a rule's cost; tokens (B_a, N, t), attention (B_a, N, t, S)."""
    scores = torch.where(finishing, ranked.log_probs / penalty, float("-inf"))
    cost = steering.finish_cost() if steering else None
    ranks = None if cost is None else scores - cost
    log_probs = torch.where(finishing, ranked.log_probs, float("-inf"))
    return merge_finished(finished, scores, log_probs, tokens, attention, ranks)


def _repeats(flat: torch.Tensor) -> torch.Tensor:
    """flat (B_a, N) candidate indices (-1: none) -> which repeat an earlier one (B_a, N)."""
    key = torch.where(flat >= 0, flat, -1 - torch.arange(flat.size(1), device=flat.device))  # -1s all differ
    ordered, order = key.sort(dim=1, stable=True)
    repeat = torch.zeros_like(ordered, dtype=torch.bool)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return torch.zeros_like(repeat).scatter(1, order, repeat)


def _ranks(log_probs: torch.Tensor) -> torch.Tensor:
    """log_probs (B_a, N) -> each candidate's rank (B_a, N), 0 for the best; ties by position."""
    order = log_probs.argsort(dim=1, descending=True, stable=True)
    places = torch.arange(order.size(1), device=order.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, places)


def _slots(live: torch.Tensor, pick: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """live (B_a, N) log-probabilities of the candidates that may live on, pick (B_a, K) those
    kept, done (B_a,) -> each candidate's slot among the next step's beams, -1 for none (a done
    sentence keeps none; a kept -inf is no hypothesis)."""
    beam = pick.size(1)
    ranks = torch.arange(beam, device=pick.device).expand_as(pick).masked_fill(live.gather(1, pick) == -torch.inf, -1)
    return torch.full_like(live, -1, dtype=torch.long).scatter(1, pick, ranks).masked_fill(done[:, None], -1)


def _best_first(log_probs: torch.Tensor, observed: tuple, reorder: bool) -> tuple:
    """An observer's candidate fields (B_a, N, ...) sorted best first, when rules added candidates
    out of order; the trailing penalty as it is."""
    if not reorder:
        return observed
    order = log_probs.argsort(dim=1, descending=True, stable=True)
    *fields, penalty = observed
    return (*(gather_beams(field, order) for field in fields), penalty)
