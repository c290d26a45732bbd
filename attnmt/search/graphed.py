"""Greedy and beam search in fixed shapes, so that a CUDA device replays each step as a graph.

`greedy.greedy` and `beam.beam_search` drop a sentence from the batch once it is done: the
host reads the device at every step (has any finished?) and the batch changes shape. On a GPU
one step of these models is dozens of small kernels, so the host's launches and that read set
the pace, not the arithmetic. Here every step has the same shapes: all B rows (B*K for a beam)
step until every sentence is done, a finished sentence is masked instead of removed, and the
step number lives on the device. A step is then a function of fixed buffers: on a CUDA device
it is captured once per batch as a CUDA graph and replayed (one launch a step), and the host
reads the device once every `check_every` steps, to stop when all are done. Elsewhere the same
step runs eagerly, which is how the tests compare it with the eager loops.

The outputs are theirs: every operation is row-wise and nothing a masked row computes is
kept. On a GPU the matrix products of a batch that keeps its finished rows may round
differently from those of a shrinking one (the library picks kernels by shape), which can flip
a near-tie. The cost: finished rows keep stepping, and a beam carries its hypotheses' whole
token and attention history at full length. Steering rules and observers are the eager
loops' alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import torch

from attnmt.search.hypotheses import (
    Hypothesis,
    collect_finished,
    empty_finished,
    gather_beams,
    hypothesis_of,
    merge_finished,
)
from attnmt.search.options import SearchOptions, StepModel, length_penalty, never_generated
from attnmt.vocab import BOS, EOS, PAD

CHECK_EVERY = 8  # steps between the host's reads of "is every sentence done?"


def _copy_into(statics: Any, values: Any) -> None:
    """Copy every tensor of a state (a tensor, or tuples of them, None skipped: a decoder's
    state, an ensemble's states) into the same-shaped buffers of `statics`."""
    if isinstance(statics, torch.Tensor):
        statics.copy_(values)
    elif statics is not None:
        for static, value in zip(statics, values, strict=True):
            _copy_into(static, value)


def _cloned(values: Any) -> Any:
    """A state's buffers: its tensors cloned, its tuples rebuilt as the same type."""
    if isinstance(values, torch.Tensor):
        return values.clone()
    if values is None:
        return None
    parts = [_cloned(value) for value in values]
    return type(values)(*parts) if hasattr(values, "_fields") else type(values)(parts)  # a NamedTuple, or a tuple


class _Replayed:
    """`step`, a function of fixed buffers, as a CUDA graph on a CUDA device (`use_graph`), else run eagerly.

    Capture needs the step run once first on a side stream (cuBLAS and the caching allocator
    set themselves up there); that run changes the buffers, so the caller resets them after."""

    def __init__(self, step: Callable[[], None], device: torch.device, use_graph: bool):
        self.step, self.graph = step, None
        if use_graph:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                step()
            torch.cuda.current_stream(device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                step()

    def __call__(self) -> None:
        if self.graph is None:
            self.step()
        else:
            self.graph.replay()


def _search_to_the_end(search, device: torch.device, graphs: bool | None, check_every: int) -> None:
    """Run a fixed-shape search (`reset`, `step`, `max_limit`, `done`) until every sentence is
    done, its step a replayed CUDA graph when `graphs` (default: on a CUDA device), reading
    `done` on the host once every `check_every` steps."""
    step = _Replayed(search.step, device, device.type == "cuda" if graphs is None else graphs)
    search.reset()
    for number in range(1, search.max_limit + 1):
        step()
        if number % check_every == 0 and bool(search.done.all()):
            return


class _FixedGreedy:
    """Greedy search's buffers and step for one batch: src (B, S), src_lengths (B,)."""

    def __init__(self, model: StepModel, src: torch.Tensor, src_lengths: torch.Tensor, options: SearchOptions):
        batch_size, device = src.size(0), src.device
        self.model = model
        self.encoder_output = model.encode(src, src_lengths)
        self.initial = model.init_state(self.encoder_output)
        self.state = _cloned(self.initial)
        self.limits = options.length_limits(src_lengths).to(device)  # (B,)
        self.max_limit = int(self.limits.max())
        self.prev = torch.full((batch_size,), BOS, dtype=torch.long, device=device)  # (B,)
        self.step_number = torch.zeros((), dtype=torch.long, device=device)
        self.tokens = torch.full((batch_size, self.max_limit), PAD, dtype=torch.long, device=device)  # (B, L)
        self.attention = torch.zeros(batch_size, self.max_limit, src.size(1), device=device)  # (B, L, S)
        self.log_probs = torch.zeros(batch_size, device=device)  # (B,)
        self.done = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (B,)

    def reset(self) -> None:
        _copy_into(self.state, self.initial)
        self.prev.fill_(BOS)
        self.step_number.zero_()
        self.tokens.fill_(PAD)
        self.attention.zero_()
        self.log_probs.zero_()
        self.done.zero_()

    def step(self) -> None:
        step_log_probs, state, attention = self.model.next_log_probs(self.prev, self.state, self.encoder_output)
        step_log_probs = never_generated(step_log_probs)  # (B, V)
        last = self.step_number + 1 >= self.limits  # (B,) the last allowed token must be EOS
        best_log_probs, best = step_log_probs.max(dim=-1)  # (B,)
        best = best.masked_fill(last, EOS)
        best_log_probs = torch.where(last, step_log_probs[:, EOS], best_log_probs)
        live = ~self.done  # (B,)
        column = self.step_number.expand(best.size(0))[:, None]  # (B, 1)
        self.tokens.scatter_(1, column, best.masked_fill(self.done, PAD)[:, None])
        step_attention = torch.where(live[:, None], attention.float(), 0.0)  # (B, S)
        self.attention.index_copy_(1, self.step_number.view(1), step_attention[:, None])
        self.log_probs.add_(torch.where(live, best_log_probs, 0.0))
        self.done.logical_or_(best == EOS)
        self.prev.copy_(best)
        _copy_into(self.state, state)
        self.step_number.add_(1)

    def hypotheses(self, src_lengths: torch.Tensor) -> list[Hypothesis]:
        tokens, attention, log_probs = self.tokens.cpu(), self.attention.cpu(), self.log_probs.cpu()
        return [
            hypothesis_of(tokens[i], attention[i], float(log_probs[i]), float(log_probs[i]), int(src_lengths[i]))
            for i in range(tokens.size(0))
        ]


@torch.no_grad()
def fixed_greedy(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions,
    *,
    graphs: bool | None = None,
    check_every: int = CHECK_EVERY,
) -> list[Hypothesis]:
    """`greedy.greedy` in fixed shapes: src (B, S) long, src_lengths (B,) -> one Hypothesis per
    sentence. `graphs`: replay the step as a CUDA graph (default: on a CUDA device)."""
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    search = _FixedGreedy(model, src, src_lengths, options)
    _search_to_the_end(search, src.device, graphs, check_every)
    return search.hypotheses(src_lengths)


class _FixedBeam:
    """Beam search's buffers and step for one batch: src (B, S), src_lengths (B,), K beams.

    As `beam.beam_search`: the 2K best continuations of the K live hypotheses are ranked,
    those among the top K ending in EOS join the sentence's finished set (length-penalized),
    the best K not ending in EOS live on. A sentence is done once K have finished or at its
    length limit; from then on it adds nothing to its finished set."""

    def __init__(self, model: StepModel, src: torch.Tensor, src_lengths: torch.Tensor, options: SearchOptions):
        batch_size, src_len, device, beam = src.size(0), src.size(1), src.device, options.beam_size
        self.model, self.beam, self.alpha = model, beam, options.length_penalty
        widen = torch.arange(batch_size, device=device).repeat_interleave(beam)  # (B*K,)
        self.encoder_output = model.encode(src, src_lengths).index_select(widen)
        self.initial = model.init_state(self.encoder_output)
        self.state = _cloned(self.initial)
        self.limits = options.length_limits(src_lengths).to(device)  # (B,)
        self.max_limit = int(self.limits.max())
        self.start = torch.full((batch_size, beam), float("-inf"), device=device)
        self.start[:, 0] = 0.0  # one live beam at the first step: the K start identical
        self.live_log_probs = self.start.clone()  # (B, K)
        self.live_tokens = torch.full((batch_size, beam, self.max_limit), PAD, dtype=torch.long, device=device)
        self.live_attention = torch.zeros(batch_size, beam, self.max_limit, src_len, device=device)  # (B, K, L, S)
        self.finished = empty_finished(batch_size, beam, self.max_limit, src_len, device)
        self.done = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (B,)
        self.prev = torch.full((batch_size * beam,), BOS, dtype=torch.long, device=device)  # (B*K,)
        self.step_number = torch.zeros((), dtype=torch.long, device=device)
        self.first_k = torch.arange(2 * beam, device=device)[None, :] < beam  # (1, 2K)
        self.row_offsets = torch.arange(batch_size, device=device)[:, None] * beam  # (B, 1)

    def reset(self) -> None:
        _copy_into(self.state, self.initial)
        self.live_log_probs.copy_(self.start)
        self.live_tokens.fill_(PAD)
        self.live_attention.zero_()
        batch_size, beam, max_length = self.finished.tokens.shape
        empty = empty_finished(batch_size, beam, max_length, self.finished.attention.size(3), self.done.device)
        for f in fields(empty):
            getattr(self.finished, f.name).copy_(getattr(empty, f.name))
        self.done.zero_()
        self.prev.fill_(BOS)
        self.step_number.zero_()

    def step(self) -> None:
        beam, batch_size = self.beam, self.done.size(0)
        step_log_probs, state, attention = self.model.next_log_probs(self.prev, self.state, self.encoder_output)
        vocab_size, src_len = step_log_probs.size(-1), attention.size(-1)
        step_log_probs = never_generated(step_log_probs).view(batch_size, beam, vocab_size)
        last = self.step_number + 1 >= self.limits  # (B,) the last allowed token must be EOS
        not_eos = torch.arange(vocab_size, device=last.device) != EOS
        step_log_probs = step_log_probs.masked_fill(last[:, None, None] & not_eos, float("-inf"))
        totals = self.live_log_probs[:, :, None] + step_log_probs  # (B, K, V)
        candidate_log_probs, flat = totals.view(batch_size, -1).topk(2 * beam, dim=1)  # (B, 2K)
        origin, token = flat // vocab_size, flat % vocab_size  # (B, 2K)
        column = self.step_number.expand(batch_size, 2 * beam, 1)  # (B, 2K, 1)
        candidate_tokens = gather_beams(self.live_tokens, origin).scatter_(2, column, token[:, :, None])  # (B, 2K, L)
        step_attention = gather_beams(attention.float().view(batch_size, beam, src_len), origin)  # (B, 2K, S)
        candidate_attention = gather_beams(self.live_attention, origin)  # (B, 2K, L, S)
        candidate_attention.index_copy_(2, self.step_number.view(1), step_attention[:, :, None])
        is_eos = token == EOS
        finishing = is_eos & self.first_k & (candidate_log_probs > float("-inf"))
        penalty = length_penalty(self.step_number + 1, self.alpha)
        merged = merge_finished(
            self.finished,
            torch.where(finishing, candidate_log_probs / penalty, float("-inf")),
            torch.where(finishing, candidate_log_probs, float("-inf")),
            candidate_tokens,
            candidate_attention,
        )
        for f in fields(self.finished):  # a done sentence's set stays as it was, order of ties included
            kept = getattr(self.finished, f.name)
            new = getattr(merged, f.name)
            done = self.done.view(-1, *([1] * (kept.dim() - 1)))
            kept.copy_(torch.where(done, kept, new))
        self.done.logical_or_((self.finished.count >= beam) | last)
        live_log_probs, pick = candidate_log_probs.masked_fill(is_eos, float("-inf")).topk(beam, dim=1)  # (B, K)
        self.live_log_probs.copy_(live_log_probs)
        self.live_tokens.copy_(gather_beams(candidate_tokens, pick))
        self.live_attention.copy_(gather_beams(candidate_attention, pick))
        _copy_into(self.state, state.index_select((self.row_offsets + origin.gather(1, pick)).view(-1)))
        self.prev.copy_(token.gather(1, pick).view(-1))
        self.step_number.add_(1)


@torch.no_grad()
def fixed_beam_search(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions,
    *,
    graphs: bool | None = None,
    check_every: int = CHECK_EVERY,
) -> list[list[Hypothesis]]:
    """`beam.beam_search` in fixed shapes: src (B, S), src_lengths (B,) -> per sentence its
    n_best hypotheses, best first. `graphs`: replay the step as a CUDA graph (default: on a CUDA device)."""
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    search = _FixedBeam(model, src, src_lengths, options)
    _search_to_the_end(search, src.device, graphs, check_every)
    return collect_finished(search.finished, src_lengths, options.n_best)
