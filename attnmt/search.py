"""Batched greedy and beam search over the model's one decoder `step`.

Both work on whole batches with tensor operations only: no Python loop over sentences or
hypotheses inside the step loop. A sentence's result does not depend on the batch it is
decoded in: every operation is row-wise (per sentence), and each sentence has its own length
limit `a * source_length + b`.

Beam search follows fairseq/GNMT: at each step the 2K best continuations of the K live
hypotheses are ranked; those among the top K that end in EOS are finished (scored with the
GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha, |Y| counting EOS), the best K that do not
end in EOS live on. A sentence is done once it has K finished hypotheses; the loop exits when
every sentence is done. With K = 1 this is exactly greedy search.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

import torch

from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS, PAD


@dataclass(frozen=True)
class SearchOptions:
    """How to search, under the names of the config's `decode` section.

    beam_size 1 with n_best 1 is greedy search. length_penalty is GNMT's alpha (0 ranks by raw
    log-probability). Each sentence may produce at most max_length_a * source length +
    max_length_b tokens, EOS included, and never more than max_length when that is set.
    Impossible settings are a UserError naming the setting (`decode.beam_size`, ...) and saying why.
    """

    beam_size: int = 1
    n_best: int = 1
    length_penalty: float = 1.0
    max_length_a: float = 1.5
    max_length_b: int = 10
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.length_penalty < 0:
            raise UserError(
                f"length penalty must be >= 0 (0 = raw log-probability), got {self.length_penalty}",
                field="decode.length_penalty",
            )
        if self.beam_size < 1:
            raise UserError(f"beam size must be at least 1, got {self.beam_size}", field="decode.beam_size")
        if self.n_best < 1:
            raise UserError(f"n-best must be at least 1, got {self.n_best}", field="decode.n_best")
        if self.n_best > self.beam_size:
            raise UserError(
                f"n-best ({self.n_best}) cannot exceed the beam size ({self.beam_size}); raise the beam size",
                field="decode.n_best",
            )
        if self.max_length_a < 0 or self.max_length_b < 1:
            raise UserError(
                f"need max_length_a >= 0 and max_length_b >= 1, got {self.max_length_a} and {self.max_length_b}",
                field="decode.max_length_a" if self.max_length_a < 0 else "decode.max_length_b",
            )
        if self.max_length is not None and self.max_length < 1:
            raise UserError(
                f"max length must be at least 1 token (EOS counts), got {self.max_length}", field="max_length"
            )

    @classmethod
    def from_config(cls, decode, **overrides) -> SearchOptions:
        """A config's `decode` section (beam size, length penalty, length limit; one hypothesis
        per sentence), with `overrides` of the same names (None keeps a setting)."""
        settings = {
            "beam_size": decode.beam_size,
            "length_penalty": decode.length_penalty,
            "max_length_a": decode.max_length_a,
            "max_length_b": decode.max_length_b,
        }
        return cls(**(settings | {key: value for key, value in overrides.items() if value is not None}))

    def length_limits(self, src_lengths: torch.Tensor) -> torch.Tensor:
        """src_lengths (B,) -> each sentence's output limit (B,) in tokens, EOS included."""
        return max_lengths(src_lengths, self.max_length_a, self.max_length_b, self.max_length)

    @property
    def is_greedy(self) -> bool:
        return self.beam_size == 1 and self.n_best == 1


GREEDY = SearchOptions()


class StepModel(Protocol):
    """What search needs from a model: the step interface. `Seq2Seq` provides it in torch,
    `engine.OnnxModel` through onnxruntime, so one search serves every engine.

    encode(src (B, S), src_lengths (B,)) -> encoder output with `.index_select(rows)`;
    init_state(encoder_output) -> decoder state with `.index_select(rows)`;
    next_log_probs(prev_tokens (B,), state, encoder_output)
        -> (log-probabilities (B, V) float32, state, attention (B, S)).
    """

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> Any: ...

    def init_state(self, encoder_output: Any) -> Any: ...

    def next_log_probs(
        self, prev_tokens: torch.Tensor, state: Any, encoder_output: Any
    ) -> tuple[torch.Tensor, Any, torch.Tensor]: ...


@dataclass
class Hypothesis:
    """One output: tokens without BOS/EOS; attention (len(tokens) + 1, S) has one row per
    generated token, EOS included, over the sentence's real source positions. At the length
    limit EOS is forced, so every hypothesis ends with EOS."""

    tokens: list[int]
    score: float  # log-probability / length penalty (the ranking score)
    log_prob: float  # summed log-probability of the generated tokens (EOS included)
    attention: torch.Tensor


def length_penalty(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT length penalty ((5 + |Y|) / 6) ** alpha (Wu et al. 2016); 1 when alpha = 0."""
    return ((5.0 + lengths.to(torch.float32)) / 6.0) ** alpha


def max_lengths(src_lengths: torch.Tensor, a: float, b: int, cap: int | None = None) -> torch.Tensor:
    """Per-sentence output limit in tokens (EOS included): floor(a * S_i) + b, at most `cap`."""
    limits = (src_lengths.to(torch.float32) * a).floor().long() + b
    return limits if cap is None else limits.clamp(max=cap)


def _never_generated(log_probs: torch.Tensor) -> torch.Tensor:
    """PAD and BOS are never outputs: (..., V) log-probabilities with those two set to -inf."""
    log_probs[..., PAD] = -torch.inf
    log_probs[..., BOS] = -torch.inf
    return log_probs


def _hypothesis(tokens: torch.Tensor, attention: torch.Tensor, log_prob: float, score: float, src_length: int):
    """Trim a stored row: tokens (L,) possibly padded, attention (L, S)."""
    token_list = tokens.tolist()
    length = token_list.index(PAD) if PAD in token_list else len(token_list)
    words = token_list[: length - 1] if length and token_list[length - 1] == EOS else token_list[:length]
    return Hypothesis(words, score, log_prob, attention[:length, :src_length].clone())


@torch.no_grad()
def greedy(
    model: StepModel, src: torch.Tensor, src_lengths: torch.Tensor, options: SearchOptions = GREEDY
) -> list[Hypothesis]:
    """Greedy decoding of a batch: src (B, S) long, src_lengths (B,) -> one Hypothesis per sentence.
    Of the options only the length limit applies.

    A sentence leaves the batch at its EOS: the model then steps only the unfinished rows
    (in sorted batches about a third of the rows would otherwise be finished ones).
    """
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
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
        step_log_probs = _never_generated(step_log_probs)
        best_log_probs, best = step_log_probs.max(dim=-1)  # (B_a,)
        # A sentence's last allowed token is EOS, as in beam search. Forcing it after the argmax
        # equals masking every other token first, without building a (B_a, V) mask each step.
        last = step + 1 >= limits  # (B_a,)
        best = best.masked_fill(last, EOS)
        best_log_probs = torch.where(last, step_log_probs[:, EOS], best_log_probs)
        token_matrix[active, step] = best
        attention_tensor[active, step] = attention.float()
        log_probs[active] += best_log_probs
        finished = best == EOS  # (B_a,) forced at the limit, so every sentence finishes
        if bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)  # (B_a',)
            if keep.numel() == 0:
                break
            active, limits, best = active[keep], limits[keep], best[keep]
            state, encoder_output = state.index_select(keep), encoder_output.index_select(keep)
        prev = best
    token_matrix, attention_tensor, log_probs = token_matrix.cpu(), attention_tensor.cpu(), log_probs.cpu()
    return [
        _hypothesis(token_matrix[i], attention_tensor[i], float(log_probs[i]), float(log_probs[i]), int(src_lengths[i]))
        for i in range(batch_size)
    ]


@dataclass
class _Beams:
    """Live hypotheses, K per sentence, flattened to (B*K) rows for the model."""

    log_probs: torch.Tensor  # (B, K) summed log-probabilities
    tokens: torch.Tensor  # (B, K, t) generated so far
    attention: torch.Tensor  # (B, K, t, S)


@dataclass
class _Finished:
    """The best K finished hypotheses per sentence (-inf scores mark empty slots)."""

    scores: torch.Tensor  # (B, K) length-penalized
    log_probs: torch.Tensor  # (B, K)
    tokens: torch.Tensor  # (B, K, L_max) PAD after EOS
    attention: torch.Tensor  # (B, K, L_max, S)
    count: torch.Tensor  # (B,) how many have finished so far (may exceed K)

    def rows(self, index: torch.Tensor) -> _Finished:
        """The sentences `index` selects (a boolean mask or row numbers)."""
        return _Finished(*(getattr(self, f.name)[index] for f in fields(self)))

    def put(self, index: torch.Tensor, other: _Finished) -> None:
        """Write `other`'s sentences into rows `index` (B',) in place."""
        for f in fields(self):
            getattr(self, f.name)[index] = getattr(other, f.name)


def _merge_finished(
    finished: _Finished, candidate_scores, candidate_log_probs, candidate_tokens, candidate_attention
) -> _Finished:
    """Keep the K best of the finished set and the new candidates (-inf = not a candidate)."""
    beam = finished.scores.size(1)
    length = candidate_tokens.size(2)
    pad = finished.tokens.size(2) - length
    candidate_tokens = torch.nn.functional.pad(candidate_tokens, (0, pad), value=PAD)
    candidate_attention = torch.nn.functional.pad(candidate_attention, (0, 0, 0, pad))
    scores = torch.cat([finished.scores, candidate_scores], dim=1)  # (B, K + C)
    top_scores, top = scores.topk(beam, dim=1)  # (B, K)
    gather = top[:, :, None]

    def pick(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        pool = torch.cat([old, new], dim=1)  # (B, K + C, ...)
        index = gather.view(*gather.shape[:2], *([1] * (pool.dim() - 2))).expand(-1, -1, *pool.shape[2:])
        return pool.gather(1, index)

    return _Finished(
        scores=top_scores,
        log_probs=torch.cat([finished.log_probs, candidate_log_probs], dim=1).gather(1, top),
        tokens=pick(finished.tokens, candidate_tokens),
        attention=pick(finished.attention, candidate_attention),
        count=finished.count + (candidate_scores > float("-inf")).sum(dim=1),
    )


def _gather_beams(values: torch.Tensor, origin: torch.Tensor) -> torch.Tensor:
    """values (B, K, ...) indexed by origin (B, C) along the beam axis -> (B, C, ...)."""
    index = origin.view(*origin.shape, *([1] * (values.dim() - 2))).expand(-1, -1, *values.shape[2:])
    return values.gather(1, index)


def _empty_finished(batch_size: int, beam: int, max_length: int, src_len: int, device) -> _Finished:
    return _Finished(
        scores=torch.full((batch_size, beam), float("-inf"), device=device),
        log_probs=torch.full((batch_size, beam), float("-inf"), device=device),
        tokens=torch.full((batch_size, beam, max_length), PAD, dtype=torch.long, device=device),
        attention=torch.zeros(batch_size, beam, max_length, src_len, device=device),
        count=torch.zeros(batch_size, dtype=torch.long, device=device),
    )


@dataclass
class BeamStep:
    """What beam search did at one step, for the B_a sentences still searched (an observer's view:
    `beam_search(..., observer=...)`). Candidates are the 2K best continuations, best first.

    A candidate extends the live beam in slot `origin` of the step before (slot j holds the j-th
    best live hypothesis; at step 0 only slot 0 exists). `slot` is where it lives on in the next
    step (-1: it finished or was dropped).
    """

    step: int
    sentences: torch.Tensor  # (B_a,) batch rows
    origin: torch.Tensor  # (B_a, 2K) slot of the beam each candidate extends
    tokens: torch.Tensor  # (B_a, 2K) the token it adds
    log_probs: torch.Tensor  # (B_a, 2K) summed log-probability, the new token included
    finished: torch.Tensor  # (B_a, 2K) bool: ends in EOS among the first K, so it joins the finished set
    slot: torch.Tensor  # (B_a, 2K) long
    attention: torch.Tensor  # (B_a, 2K, S) the attention of the step that chose the token
    length_penalty: float  # what a candidate finishing here is divided by


@torch.no_grad()
def beam_search(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions,
    observer: Callable[[BeamStep], None] | None = None,
) -> list[list[Hypothesis]]:
    """Beam search of a batch: src (B, S), src_lengths (B,) -> per sentence its n_best hypotheses, best first.

    A sentence leaves the batch once it is done; the model steps the K beams of the B_a
    sentences still searched. `observer`, when given, sees every step (`BeamStep`): how the
    search can be replayed; it changes nothing in the result.
    """
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    batch_size, src_len, device, beam = src.size(0), src.size(1), src.device, options.beam_size
    encoder_output = model.encode(src, src_lengths)
    encoder_output = encoder_output.index_select(torch.arange(batch_size, device=device).repeat_interleave(beam))
    state = model.init_state(encoder_output)  # (B_a*K) rows
    limits = options.length_limits(src_lengths).to(device)  # (B_a,)
    max_limit = int(limits.max())
    start = torch.full((batch_size, beam), float("-inf"), device=device)
    start[:, 0] = 0.0  # all K beams start identical: keep one alive so the first step does not repeat it K times
    beams = _Beams(start, src.new_empty(batch_size, beam, 0), torch.zeros(batch_size, beam, 0, src_len, device=device))
    finished = _empty_finished(batch_size, beam, max_limit, src_len, device)  # (B_a, ...) of the active sentences
    results = _empty_finished(batch_size, beam, max_limit, src_len, device)  # (B, ...) of the done ones
    active = torch.arange(batch_size, device=device)  # (B_a,) batch rows still searched
    prev = torch.full((batch_size * beam,), BOS, dtype=torch.long, device=device)
    first_k = torch.arange(2 * beam, device=device)[None, :] < beam  # (1, 2K)
    beam_offsets = torch.arange(beam, device=device)  # (K,)
    for step in range(max_limit):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)  # (B_a*K, V), (B_a*K, S)
        rows, vocab_size = active.numel(), step_log_probs.size(-1)
        step_log_probs = _never_generated(step_log_probs).view(rows, beam, vocab_size)
        last = step + 1 >= limits  # (B_a,) this is the sentence's last allowed token: it must be EOS
        not_eos = torch.arange(vocab_size, device=device) != EOS
        step_log_probs = step_log_probs.masked_fill(last[:, None, None] & not_eos, float("-inf"))
        totals = beams.log_probs[:, :, None] + step_log_probs  # (B_a, K, V)
        candidate_log_probs, flat = totals.view(rows, -1).topk(2 * beam, dim=1)  # (B_a, 2K)
        origin, token = flat // vocab_size, flat % vocab_size  # (B_a, 2K) source beam and new token
        candidate_tokens = torch.cat([_gather_beams(beams.tokens, origin), token[:, :, None]], dim=2)
        step_attention = _gather_beams(attention.float().view(rows, beam, src_len), origin)  # (B_a, 2K, S)
        candidate_attention = torch.cat([_gather_beams(beams.attention, origin), step_attention[:, :, None]], dim=2)
        is_eos = token == EOS
        finishing = is_eos & first_k & (candidate_log_probs > float("-inf"))
        penalty = length_penalty(torch.tensor(step + 1), options.length_penalty)
        finished = _merge_finished(
            finished,
            torch.where(finishing, candidate_log_probs / penalty, float("-inf")),
            torch.where(finishing, candidate_log_probs, float("-inf")),
            candidate_tokens,
            candidate_attention,
        )
        done = (finished.count >= beam) | last  # (B_a,)
        if observer is not None:
            slot = _next_slots(candidate_log_probs, is_eos, done)
            observed = (origin, token, candidate_log_probs, finishing, slot, step_attention, float(penalty))
            observer(BeamStep(step, active.clone(), *observed))
        if bool(done.any()):
            results.put(active[done], finished.rows(done))
            keep = (~done).nonzero().squeeze(1)  # (B_a',)
            if keep.numel() == 0:
                break
            active, limits, finished = active[keep], limits[keep], finished.rows(keep)
            candidate_log_probs, is_eos, origin = candidate_log_probs[keep], is_eos[keep], origin[keep]
            candidate_tokens, candidate_attention = candidate_tokens[keep], candidate_attention[keep]
            encoder_output = encoder_output.index_select((keep[:, None] * beam + beam_offsets).view(-1))
        else:
            keep = torch.arange(rows, device=device)
        live_log_probs, pick = candidate_log_probs.masked_fill(is_eos, float("-inf")).topk(beam, dim=1)  # (B_a, K)
        beams = _Beams(live_log_probs, _gather_beams(candidate_tokens, pick), _gather_beams(candidate_attention, pick))
        state = state.index_select(
            (keep[:, None] * beam + origin.gather(1, pick)).view(-1)
        )  # old rows of the new beams
        prev = beams.tokens[:, :, -1].reshape(-1)
    return _collect(results, src_lengths, options.n_best)


def _next_slots(log_probs: torch.Tensor, is_eos: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """log_probs, is_eos (B_a, 2K); done (B_a,) -> each candidate's slot among the next step's
    beams, -1 for none. They are the top K not ending in EOS, the same `topk` the search takes
    next; a done sentence keeps none."""
    beam = log_probs.size(1) // 2
    live_log_probs, pick = log_probs.masked_fill(is_eos, float("-inf")).topk(beam, dim=1)  # (B_a, K)
    ranks = torch.arange(beam, device=pick.device).expand_as(pick).masked_fill(live_log_probs == float("-inf"), -1)
    return torch.full_like(pick, -1).repeat(1, 2).scatter(1, pick, ranks).masked_fill(done[:, None], -1)


def _collect(finished: _Finished, src_lengths: torch.Tensor, n_best: int) -> list[list[Hypothesis]]:
    scores, log_probs = finished.scores.cpu(), finished.log_probs.cpu()
    tokens, attention = finished.tokens.cpu(), finished.attention.cpu()
    results = []
    for i in range(scores.size(0)):
        results.append(
            [
                _hypothesis(
                    tokens[i, k], attention[i, k], float(log_probs[i, k]), float(scores[i, k]), int(src_lengths[i])
                )
                for k in range(n_best)
                if scores[i, k] > float("-inf")
            ]
        )
    return results


def length_batches(
    lengths: Sequence[int], max_sentences: int, max_tokens: int | None = None, rows: int = 1
) -> list[range]:
    """Consecutive positions of `lengths` (sorted ascending) cut into batches of at most
    `max_sentences`, and with `max_tokens` at most that many padded tokens counted `rows` times
    each; a sentence over the token budget alone still gets a batch of its own."""
    assert all(a <= b for a, b in itertools.pairwise(lengths)), "lengths sorted ascending"
    batches, start = [], 0
    for position, length in enumerate(lengths):
        size = position - start + 1  # the batch if this sentence joins it; its longest is this one
        if size > max_sentences or (max_tokens is not None and size > 1 and size * length * rows > max_tokens):
            batches.append(range(start, position))
            start = position
    if start < len(lengths):
        batches.append(range(start, len(lengths)))
    return batches


class Shortlisting(Protocol):
    """A vocabulary shortlist (`shortlist.Shortlist`): the target ids a batch may produce."""

    def vocabulary(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) -> sorted target ids (V',), the specials 0-3 among them."""
        ...


class _Restricted:
    """`model` computing its output layer for the target ids `vocabulary` (V',) only. The search
    runs in that restricted index space, where the specials keep their ids (the shortlist is
    sorted and holds 0-3); the tokens it feeds back are mapped to real ids here."""

    def __init__(self, model: StepModel, vocabulary: torch.Tensor):
        self.model, self.vocabulary = model, vocabulary

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> Any:
        return self.model.encode(src, src_lengths)

    def init_state(self, encoder_output: Any) -> Any:
        return self.model.init_state(encoder_output)

    def next_log_probs(self, prev_tokens: torch.Tensor, state: Any, encoder_output: Any):
        """prev_tokens (B,) restricted indices -> (log-probabilities (B, V'), state, attention (B, S))."""
        return self.model.next_log_probs(self.vocabulary[prev_tokens], state, encoder_output, self.vocabulary)

    def ids(self, hypothesis: Hypothesis) -> Hypothesis:
        """A hypothesis of the restricted search with real token ids."""
        tokens = self.vocabulary[torch.as_tensor(hypothesis.tokens, dtype=torch.long)].tolist()
        return Hypothesis(tokens, hypothesis.score, hypothesis.log_prob, hypothesis.attention)


def decode_all(
    model: StepModel,
    src_ids: Sequence[Sequence[int]],
    options: SearchOptions = GREEDY,
    *,
    batch_size: int = 64,
    batch_tokens: int | None = None,
    device: torch.device | str = "cpu",
    shortlist: Shortlisting | None = None,
) -> list[list[Hypothesis]]:
    """Decode many id sequences in length-sorted batches; results come back in input order.

    Sorting by length keeps padding low; since results do not depend on the batch, the order
    changes nothing but speed. A batch holds at most `batch_size` sentences and, with
    `batch_tokens`, at most that many padded source tokens per hypothesis searched (a beam of K
    counts each source K times), so short sentences go in larger batches than long ones.
    Empty sources get one empty hypothesis without running the model. Greedy search is used
    when the options ask for one hypothesis of a beam of one. With a `shortlist`, each batch
    chooses among its vocabulary only (the union of its sources' candidates): a sentence's
    result may then depend on the batch it is in.
    """
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0, torch.zeros(0, 0))] for _ in src_ids]
    order = sorted((i for i, ids in enumerate(src_ids) if len(ids) > 0), key=lambda i: len(src_ids[i]))
    rows = 1 if options.is_greedy else options.beam_size
    for chunk in length_batches([len(src_ids[i]) for i in order], batch_size, batch_tokens, rows):
        chunk = [order[position] for position in chunk]
        lengths = torch.tensor([len(src_ids[i]) for i in chunk], dtype=torch.long)
        src = torch.full((len(chunk), int(lengths.max())), PAD, dtype=torch.long)
        for row, i in enumerate(chunk):
            src[row, : len(src_ids[i])] = torch.as_tensor(src_ids[i], dtype=torch.long)
        src, lengths = src.to(device), lengths.to(device)
        searched = model if shortlist is None else _Restricted(model, shortlist.vocabulary(src).to(device))
        if options.is_greedy:
            batch_results = [[h] for h in greedy(searched, src, lengths, options)]
        else:
            batch_results = beam_search(searched, src, lengths, options)
        if isinstance(searched, _Restricted):
            batch_results = [[searched.ids(h) for h in hypotheses] for hypotheses in batch_results]
        for i, hypotheses in zip(chunk, batch_results, strict=True):
            results[i] = hypotheses
    return results
