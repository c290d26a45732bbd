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

Both can be told how outputs must begin (`Forcing`: a prefix's tokens, then the spelling of an
unfinished word); `decode_all` sends a batch with required phrases to
`constrained.constrained_beam_search`; `teacher_forced` gives what the model computes for given
outputs. The options, hypotheses and beam bookkeeping they share are in `beams`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from attnmt.beams import (
    GREEDY,
    Beams,
    Hypothesis,
    SearchOptions,
    StepModel,
    collect_finished,
    empty_finished,
    gather_beams,
    hypothesis_of,
    length_penalty,
    max_lengths,
    merge_finished,
    never_generated,
)
from attnmt.constrained import Requirements, constrained_beam_search
from attnmt.graphed import fixed_beam_search, fixed_greedy
from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS, PAD

__all__ = [  # what callers import from here, the shared pieces included
    "GREEDY",
    "BeamStep",
    "Forcing",
    "Hypothesis",
    "SearchOptions",
    "StepModel",
    "TargetPrefix",
    "TeacherForced",
    "beam_search",
    "decode_all",
    "greedy",
    "length_batches",
    "length_penalty",
    "max_lengths",
    "teacher_forced",
]


class TargetPrefix(Protocol):
    """How an output must begin (`prefix.Prefix`), in the ids of a target vocabulary of
    `vocab_size`: `forced` ids, then `moves`, per spelling state j of an unfinished word, the
    (token id, next state) pairs it may take, the next state being len(moves) once it is spelled."""

    forced: tuple[int, ...]
    moves: tuple[tuple[tuple[int, int], ...], ...]
    vocab_size: int

    def ids(self) -> set[int]: ...


@dataclass(frozen=True)
class Forcing:
    """How a batch's outputs must begin, in the index space the search runs in (`Forcing.of`
    builds one from `prefix.Prefix`es): each sentence's prefix tokens, forced one per step, and after them
    the spelling of an unfinished last word, as a small automaton over the vocabulary.

    tokens (B, P) long: the prefix tokens, PAD after each sentence's `lengths` (B,); P >= 1.
    start (B,) long: the spelling state a sentence is in once its prefix is out (0: none).
    allowed (N, V) bool: the tokens a hypothesis in spelling state n may take; state 0 is
        free (every token).
    after (N, V) long: the state after taking a token; back to 0 once the word is spelled.
    longest: the most prefix tokens of any sentence, on the host: no step at or past it forces
        a token, which the search learns without reading `lengths` from the device.

    At a sentence's length limit the spelling gives way, so that EOS can end it.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    start: torch.Tensor
    allowed: torch.Tensor
    after: torch.Tensor
    longest: int

    def restrict(
        self, log_probs: torch.Tensor, step: int, sentences: torch.Tensor, spelling: torch.Tensor, last: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log_probs (R, V) of rows of the batch's `sentences` (R,) in spelling states (R,) at
        `step`, `last` (R,) their last allowed step -> (log_probs with what they may not take at
        -inf, whether each row is still in its prefix (R,))."""
        in_prefix = step < self.lengths[sentences]  # (R,)
        if step >= self.longest and not bool(spelling.any()):
            return log_probs, in_prefix  # every row free: the common case after the prefixes
        forced = self.tokens[sentences, min(step, self.tokens.size(1) - 1)]  # (R,)
        allowed = self.allowed[spelling] | last[:, None]  # (R, V)
        only_forced = torch.zeros_like(allowed).scatter_(1, forced[:, None], True)  # (R, V)
        allowed = torch.where(in_prefix[:, None], only_forced, allowed)
        return log_probs.masked_fill(~allowed, float("-inf")), in_prefix

    def advance(self, spelling: torch.Tensor, tokens: torch.Tensor, in_prefix: torch.Tensor) -> torch.Tensor:
        """The spelling states (R,) after taking `tokens` (R,); rows in their prefix stay where they are."""
        return torch.where(in_prefix, spelling, self.after[spelling, tokens])

    @classmethod
    def of(cls, prefixes: Sequence[TargetPrefix | None], vocabulary: torch.Tensor | None, device) -> Forcing:
        """The Forcing of a batch with these prefixes (None: free; at least one is not).
        `vocabulary` (V',) sorted target ids is the restricted index space of a shortlist, which
        must hold every prefix's `ids()`; None: the whole target vocabulary."""
        vocab_size = next(prefix.vocab_size for prefix in prefixes if prefix is not None)
        if vocabulary is None:
            position = torch.arange(vocab_size)
        else:  # a target id -> its index in the restricted space (-1: not there)
            vocabulary = vocabulary.cpu()
            position = torch.full((vocab_size,), -1, dtype=torch.long)
            position[vocabulary] = torch.arange(vocabulary.numel())
        size = vocab_size if vocabulary is None else vocabulary.numel()

        def indices(ids: Sequence[int]) -> torch.Tensor:
            found = position[torch.tensor(ids, dtype=torch.long)]
            assert bool((found >= 0).all()), "a prefix's target ids must be in the shortlist"
            return found

        batch = len(prefixes)
        width = max([1, *(len(prefix.forced) for prefix in prefixes if prefix is not None)])
        tokens = torch.full((batch, width), PAD, dtype=torch.long)
        lengths = torch.zeros(batch, dtype=torch.long)
        start = torch.zeros(batch, dtype=torch.long)
        states = 1 + sum(len(prefix.moves) for prefix in prefixes if prefix is not None)
        allowed = torch.zeros(states, size, dtype=torch.bool)
        allowed[0] = True  # state 0: free
        after = torch.zeros(states, size, dtype=torch.long)
        base = 1
        for row, prefix in enumerate(prefixes):
            if prefix is None:
                continue
            if prefix.forced:
                lengths[row] = len(prefix.forced)
                tokens[row, : len(prefix.forced)] = indices(prefix.forced)
            if not prefix.moves:
                continue
            start[row] = base
            spelled = len(prefix.moves)
            for j, moves in enumerate(prefix.moves):
                columns = indices([token for token, _ in moves])
                following = torch.tensor([state for _, state in moves], dtype=torch.long)
                allowed[base + j, columns] = True
                after[base + j, columns] = torch.where(following == spelled, 0, base + following)
            base += spelled
        return cls(*(tensor.to(device) for tensor in (tokens, lengths, start, allowed, after)), int(lengths.max()))


@torch.no_grad()
def greedy(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions = GREEDY,
    forcing: Forcing | None = None,
) -> list[Hypothesis]:
    """Greedy decoding of a batch: src (B, S) long, src_lengths (B,) -> one Hypothesis per sentence.
    Of the options only the length limit applies; `forcing` says how outputs must begin.

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
    spelling = None if forcing is None else forcing.start.clone()  # (B_a,)
    for step in range(max_limit):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)  # (B_a, V), (B_a, S)
        step_log_probs = never_generated(step_log_probs)
        last = step + 1 >= limits  # (B_a,)
        if forcing is not None:
            step_log_probs, in_prefix = forcing.restrict(step_log_probs, step, active, spelling, last)
        best_log_probs, best = step_log_probs.max(dim=-1)  # (B_a,)
        # A sentence's last allowed token is EOS, as in beam search. Forcing it after the argmax
        # equals masking every other token first, without building a (B_a, V) mask each step.
        best = best.masked_fill(last, EOS)
        best_log_probs = torch.where(last, step_log_probs[:, EOS], best_log_probs)
        token_matrix[active, step] = best
        attention_tensor[active, step] = attention.float()
        log_probs[active] += best_log_probs
        if forcing is not None:
            spelling = forcing.advance(spelling, best, in_prefix)
        finished = best == EOS  # (B_a,) forced at the limit, so every sentence finishes
        if bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)  # (B_a',)
            if keep.numel() == 0:
                break
            active, limits, best = active[keep], limits[keep], best[keep]
            state, encoder_output = state.index_select(keep), encoder_output.index_select(keep)
            spelling = None if spelling is None else spelling[keep]
        prev = best
    token_matrix, attention_tensor, log_probs = token_matrix.cpu(), attention_tensor.cpu(), log_probs.cpu()
    return [
        hypothesis_of(
            token_matrix[i], attention_tensor[i], float(log_probs[i]), float(log_probs[i]), int(src_lengths[i])
        )
        for i in range(batch_size)
    ]


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
    forcing: Forcing | None = None,
) -> list[list[Hypothesis]]:
    """Beam search of a batch: src (B, S), src_lengths (B,) -> per sentence its n_best hypotheses, best first.

    A sentence leaves the batch once it is done; the model steps the K beams of the B_a
    sentences still searched. `observer`, when given, sees every step (`BeamStep`): how the
    search can be replayed; it changes nothing in the result. `forcing` says how outputs must
    begin: while a sentence's prefix is forced it has one live hypothesis.
    """
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    batch_size, src_len, device, beam = src.size(0), src.size(1), src.device, options.beam_size
    widen = torch.arange(batch_size, device=device).repeat_interleave(beam)  # (B*K,) each sentence K times
    encoder_output = model.encode(src, src_lengths).index_select(widen)
    state = model.init_state(encoder_output)  # (B_a*K) rows
    limits = options.length_limits(src_lengths).to(device)  # (B_a,)
    max_limit = int(limits.max())
    start = torch.full((batch_size, beam), float("-inf"), device=device)
    start[:, 0] = 0.0  # all K beams start identical: keep one alive so the first step does not repeat it K times
    beams = Beams(start, src.new_empty(batch_size, beam, 0), torch.zeros(batch_size, beam, 0, src_len, device=device))
    finished = empty_finished(batch_size, beam, max_limit, src_len, device)  # (B_a, ...) of the active sentences
    results = empty_finished(batch_size, beam, max_limit, src_len, device)  # (B, ...) of the done ones
    active = torch.arange(batch_size, device=device)  # (B_a,) batch rows still searched
    prev = torch.full((batch_size * beam,), BOS, dtype=torch.long, device=device)
    spelling = None if forcing is None else forcing.start[widen]  # (B_a*K,) each live hypothesis's
    first_k = torch.arange(2 * beam, device=device)[None, :] < beam  # (1, 2K)
    beam_offsets = torch.arange(beam, device=device)  # (K,)
    best_finished = options.stopping == "best_finished"
    # which candidates may live on: the unfinished of all 2K, or with best_finished those of the top K
    not_kept = ~first_k if best_finished else torch.zeros_like(first_k)
    for step in range(max_limit):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)  # (B_a*K, V), (B_a*K, S)
        rows, vocab_size = active.numel(), step_log_probs.size(-1)
        step_log_probs = never_generated(step_log_probs)
        last = step + 1 >= limits  # (B_a,) this is the sentence's last allowed token: it must be EOS
        if forcing is not None:
            sentences = active.repeat_interleave(beam)  # (B_a*K,)
            step_log_probs, in_prefix = forcing.restrict(
                step_log_probs, step, sentences, spelling, last.repeat_interleave(beam)
            )
        step_log_probs = step_log_probs.view(rows, beam, vocab_size)
        not_eos = torch.arange(vocab_size, device=device) != EOS
        step_log_probs = step_log_probs.masked_fill(last[:, None, None] & not_eos, float("-inf"))
        totals = beams.log_probs[:, :, None] + step_log_probs  # (B_a, K, V)
        candidate_log_probs, flat = totals.view(rows, -1).topk(2 * beam, dim=1)  # (B_a, 2K)
        origin, token = flat // vocab_size, flat % vocab_size  # (B_a, 2K) source beam and new token
        if forcing is not None:  # each candidate's spelling state: its beam's, advanced by its token
            prefix_rows = in_prefix.view(rows, beam)[:, :1].expand_as(token)  # (B_a, 2K), one value a sentence
            spelling = forcing.advance(spelling.view(rows, beam).gather(1, origin), token, prefix_rows)
        candidate_tokens = torch.cat([gather_beams(beams.tokens, origin), token[:, :, None]], dim=2)
        step_attention = gather_beams(attention.float().view(rows, beam, src_len), origin)  # (B_a, 2K, S)
        candidate_attention = torch.cat([gather_beams(beams.attention, origin), step_attention[:, :, None]], dim=2)
        is_eos = token == EOS
        finishing = is_eos & first_k & (candidate_log_probs > float("-inf"))
        penalty = length_penalty(torch.tensor(step + 1), options.length_penalty)
        finished = merge_finished(
            finished,
            torch.where(finishing, candidate_log_probs / penalty, float("-inf")),
            torch.where(finishing, candidate_log_probs, float("-inf")),
            candidate_tokens,
            candidate_attention,
        )
        done = (finished.count >= beam) | last  # (B_a,)
        if best_finished:  # the step's best candidate has ended: so has the sentence
            done = done | (is_eos[:, 0] & (candidate_log_probs[:, 0] > float("-inf")))
        if observer is not None:
            slot = _next_slots(candidate_log_probs, is_eos | not_kept, done)
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
            spelling = None if spelling is None else spelling[keep]
            encoder_output = encoder_output.index_select((keep[:, None] * beam + beam_offsets).view(-1))
        else:
            keep = torch.arange(rows, device=device)
        live = candidate_log_probs.masked_fill(is_eos | not_kept, float("-inf"))  # (B_a, 2K)
        live_log_probs, pick = live.topk(beam, dim=1)  # (B_a, K)
        beams = Beams(live_log_probs, gather_beams(candidate_tokens, pick), gather_beams(candidate_attention, pick))
        spelling = None if spelling is None else spelling.gather(1, pick).view(-1)  # (B_a'*K,)
        state = state.index_select(
            (keep[:, None] * beam + origin.gather(1, pick)).view(-1)
        )  # old rows of the new beams
        prev = beams.tokens[:, :, -1].reshape(-1)
    return collect_finished(results, src_lengths, options.n_best)


def _next_slots(log_probs: torch.Tensor, dropped: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """log_probs, dropped (B_a, 2K); done (B_a,) -> each candidate's slot among the next step's
    beams, -1 for none. They are the top K not dropped (ending in EOS, or outside the top K with
    best_finished stopping), the same `topk` the search takes next; a done sentence keeps none."""
    beam = log_probs.size(1) // 2
    live_log_probs, pick = log_probs.masked_fill(dropped, float("-inf")).topk(beam, dim=1)  # (B_a, K)
    ranks = torch.arange(beam, device=pick.device).expand_as(pick).masked_fill(live_log_probs == float("-inf"), -1)
    return torch.full_like(pick, -1).repeat(1, 2).scatter(1, pick, ranks).masked_fill(done[:, None], -1)


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


def _vocabulary(shortlist: Shortlisting, src: torch.Tensor, prefixes, required) -> torch.Tensor:
    """The batch's shortlist vocabulary (V',) on src's device, with every id its prefixes may put
    out and its required phrases hold."""
    vocabulary = shortlist.vocabulary(src)
    needed = {token for prefix in prefixes or () if prefix is not None for token in prefix.ids()}
    needed |= {token for phrases in required or () for phrase in phrases for token in phrase}
    if needed:
        added = torch.tensor(sorted(needed), dtype=vocabulary.dtype, device=vocabulary.device)
        vocabulary = torch.cat([vocabulary, added]).unique()  # sorted
    return vocabulary.to(src.device)


def decode_all(
    model: StepModel,
    src_ids: Sequence[Sequence[int]],
    options: SearchOptions = GREEDY,
    *,
    batch_size: int = 64,
    batch_tokens: int | None = None,
    device: torch.device | str = "cpu",
    shortlist: Shortlisting | None = None,
    prefixes: Sequence[TargetPrefix | None] | None = None,
    required: Sequence[Sequence[Sequence[int]]] | None = None,
    fixed_shapes: bool = False,
) -> list[list[Hypothesis]]:
    """Decode many id sequences in length-sorted batches; results come back in input order.

    Sorting by length keeps padding low; since results do not depend on the batch, the order
    changes nothing but speed. A batch holds at most `batch_size` sentences and, with
    `batch_tokens`, at most that many padded source tokens per hypothesis searched (a beam of K
    counts each source K times), so short sentences go in larger batches than long ones.
    Empty sources get one empty hypothesis without running the model. Greedy search is used
    when the options ask for one hypothesis of a beam of one. With a `shortlist`, each batch
    chooses among its vocabulary only (the union of its sources' candidates, and every token
    a prefix may put out): a sentence's result may then depend on the batch it is in.
    `prefixes`, one per source (None: free), say how each output must begin (`Forcing`); the
    caller checks that each fits its sentence's length limit. `required`, one list of phrases
    (target id lists) per source, are phrases its outputs must contain: a batch with any is
    searched by `constrained.constrained_beam_search` (with a beam of one for greedy options).
    Prefixes and required phrases cannot be given together. `fixed_shapes` searches the
    batches without either in fixed shapes (`graphed`), each step a replayed CUDA graph on a
    CUDA device: the same outputs, fewer launches and no host read per step.
    """
    some_prefix = prefixes is not None and any(prefix is not None for prefix in prefixes)
    assert not (some_prefix and required is not None and any(required)), "prefixes or required phrases, not both"
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
        chunk_prefixes = None if prefixes is None else [prefixes[i] for i in chunk]
        chunk_required = None if required is None else [required[i] for i in chunk]
        searched = model
        if shortlist is not None:
            searched = _Restricted(model, _vocabulary(shortlist, src, chunk_prefixes, chunk_required))
        restricted = searched.vocabulary if isinstance(searched, _Restricted) else None
        forcing = None
        if chunk_prefixes is not None and any(prefix is not None for prefix in chunk_prefixes):
            forcing = Forcing.of(chunk_prefixes, restricted, device)
        if chunk_required is not None and any(chunk_required):
            if options.stopping != "k_finished" and not options.is_greedy:
                raise UserError(
                    f"stopping {options.stopping} is not available with required phrases: their search "
                    "keeps each sentence's beam until it has finished hypotheses with every phrase",
                    field="decode.stopping",
                )
            requirements = Requirements.of(chunk_required, restricted, device)
            batch_results = constrained_beam_search(searched, src, lengths, options, requirements)
        elif fixed_shapes and forcing is None and options.is_greedy:
            batch_results = [[h] for h in fixed_greedy(searched, src, lengths, options)]
        elif fixed_shapes and forcing is None and options.stopping == "k_finished":
            batch_results = fixed_beam_search(searched, src, lengths, options)
        elif options.is_greedy:
            batch_results = [[h] for h in greedy(searched, src, lengths, options, forcing)]
        else:
            batch_results = beam_search(searched, src, lengths, options, forcing=forcing)
        if isinstance(searched, _Restricted):
            batch_results = [[searched.ids(h) for h in hypotheses] for hypotheses in batch_results]
        for i, hypotheses in zip(chunk, batch_results, strict=True):
            results[i] = hypotheses
    return results
