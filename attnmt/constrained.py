"""Lexically constrained beam search: outputs that contain required target phrases (terminology),
by dynamic beam allocation (Post and Vilar, 2018).

Each sentence has up to P required phrases of token ids. A hypothesis carries which phrases it
has written whole (`met`), and the phrase it is in the middle of with how many of its tokens
are out (`phrase`, `position`); its count is the constraint tokens it has written. A token that
does not continue the phrase in progress abandons it (its tokens no longer count), unless it
starts another. At each step the candidates are the 2K best continuations, each hypothesis's
best token, and each hypothesis's tokens that advance a constraint (the next token of its
phrase in progress, the first token of each phrase it still lacks); the K kept are shared
among banks by count (0 .. all the sentence's constraint tokens), K / (banks) each, the
remainder to the highest, slots a bank cannot fill going to the best of the rest. So
hypotheses that have met more constraints are not crowded out by better-scoring ones that
have met fewer, which is what makes the search find them. A sentence without constraints is
searched exactly as `search.beam_search` searches it (one bank; EOS finishes among the K best).

A hypothesis may end (EOS) only once it has every phrase, and may take no token that would
leave it more constraint tokens to write than tokens left before its sentence's limit
(`a * S + b`, EOS last): near the limit it must advance its phrases. Since every hypothesis
starts within that bound (when the limit allows the phrases at all) and no step breaks it,
every hypothesis alive at the limit has them all: whenever a sentence's limit allows its
phrases, its translations contain them all, whatever the beam. At the limit every hypothesis ends; a
sentence whose phrases could not all be written (a limit too short for them) gets its best
translation ranked first by how few constraint tokens it lacks, and the caller reports the
phrases missing from it (`missing`).

Batched like `search.beam_search` (tensor operations on all sentences and hypotheses, no loop
over them); a beam of one is allowed (the allocation then keeps the most advanced candidate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnmt.beams import (
    Beams,
    Hypothesis,
    SearchOptions,
    StepModel,
    empty_finished,
    gather_beams,
    hypothesis_of,
    length_penalty,
    merge_finished,
    never_generated,
)
from attnmt.vocab import BOS, EOS, PAD

# Ranking finished hypotheses that lack constraint tokens (only at the length limit): far below
# every complete one, fewer missing tokens first.
_MISSING_TOKEN_COST = 1.0e4  # float32 keeps 1e-3 of a score at this size


@dataclass(frozen=True)
class Requirements:
    """A batch's required phrases in the search's index space: phrases (B, P, L) long, PAD after
    each phrase's tokens; lengths (B, P) long, 0 for no phrase."""

    phrases: torch.Tensor
    lengths: torch.Tensor

    @classmethod
    def of(cls, required: Sequence[Sequence[Sequence[int]]], vocabulary: torch.Tensor | None, device) -> Requirements:
        """Per sentence its phrases of target ids (none: an empty list). `vocabulary` (V',)
        sorted ids is a shortlist's restricted index space, which must hold every phrase's ids."""
        count = max([1, *(len(phrases) for phrases in required)])
        width = max([1, *(len(phrase) for phrases in required for phrase in phrases)])
        phrases = torch.full((len(required), count, width), PAD, dtype=torch.long)
        lengths = torch.zeros(len(required), count, dtype=torch.long)
        for row, sentence_phrases in enumerate(required):
            for index, phrase in enumerate(sentence_phrases):
                ids = torch.tensor(phrase, dtype=torch.long)
                if vocabulary is not None:  # the ids' places in the restricted space
                    restricted = vocabulary.cpu()
                    places = torch.searchsorted(restricted, ids).clamp(max=restricted.numel() - 1)
                    assert bool((restricted[places] == ids).all()), "a required phrase's ids must be in the shortlist"
                    ids = places
                phrases[row, index, : len(phrase)] = ids
                lengths[row, index] = len(phrase)
        return cls(phrases.to(device), lengths.to(device))

    def ids(self) -> set[int]:
        """Every id of every phrase."""
        return set(self.phrases[self.phrases != PAD].tolist())


@dataclass
class _Progress:
    """What each hypothesis has written of its sentence's phrases: met (B_a, N, P) bool;
    phrase (B_a, N) long, the phrase in progress (-1: none); position (B_a, N) long, its tokens out."""

    met: torch.Tensor
    phrase: torch.Tensor
    position: torch.Tensor

    def gather(self, index: torch.Tensor) -> _Progress:
        """The progress of hypotheses `index` (B_a, N') along the hypothesis axis."""
        met = self.met.gather(1, index[:, :, None].expand(-1, -1, self.met.size(2)))
        return _Progress(met, self.phrase.gather(1, index), self.position.gather(1, index))

    def rows(self, keep: torch.Tensor) -> _Progress:
        return _Progress(self.met[keep], self.phrase[keep], self.position[keep])

    def count(self, lengths: torch.Tensor) -> torch.Tensor:
        """Constraint tokens written (B_a, N), given the sentences' phrase lengths (B_a, P)."""
        return (self.met * lengths[:, None, :]).sum(-1) + self.position

    def continuing(self, phrases: torch.Tensor) -> torch.Tensor:
        """The token (B_a, N) that continues each phrase in progress (-1 where none is)."""
        width = phrases.size(2)
        in_progress = self.phrase >= 0
        rows = torch.arange(phrases.size(0), device=phrases.device)[:, None]
        token = phrases[rows, self.phrase.clamp(min=0), self.position.clamp(max=width - 1)]
        return torch.where(in_progress, token, -1)

    def advancing(self, phrases: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Tokens (B_a, N, 1 + P) that advance a constraint: the one continuing the phrase in
        progress, then the first token of each phrase not yet met (-1 for none)."""
        starts = phrases[:, None, :, 0].expand(-1, self.met.size(1), -1)  # (B_a, N, P)
        starts = torch.where(~self.met & (lengths[:, None, :] > 0), starts, -1)
        return torch.cat([self.continuing(phrases)[:, :, None], starts], dim=2)

    def after(self, token: torch.Tensor, phrases: torch.Tensor, lengths: torch.Tensor) -> _Progress:
        """The progress once each hypothesis has written `token` (B_a, N)."""
        continues = (self.phrase >= 0) & (token == self.continuing(phrases))  # (B_a, N)
        phrase_length = lengths.gather(1, self.phrase.clamp(min=0))  # (B_a, N)
        completes = continues & (self.position + 1 == phrase_length)
        starts = (phrases[:, None, :, 0] == token[:, :, None]) & ~self.met & (lengths[:, None, :] > 0)  # (B_a, N, P)
        starting = ~continues & starts.any(-1)
        started = starts.long().argmax(-1)  # (B_a, N) the first phrase it starts
        started_whole = starting & (lengths.gather(1, started) == 1)
        size = self.met.size(2)
        met = self.met.clone()
        met |= torch.nn.functional.one_hot(self.phrase.clamp(min=0), size).bool() & completes[:, :, None]
        met |= torch.nn.functional.one_hot(started, size).bool() & started_whole[:, :, None]
        goes_on = continues & ~completes
        opens = starting & ~started_whole
        phrase = torch.where(goes_on, self.phrase, torch.where(opens, started, -1))
        position = torch.where(goes_on, self.position + 1, torch.where(opens, 1, 0))
        return _Progress(met, phrase, position)


def _allocate(log_probs: torch.Tensor, count: torch.Tensor, total: torch.Tensor, beam: int) -> torch.Tensor:
    """The K candidates kept (B_a, K), indices into log_probs (B_a, N) (-inf: not a candidate),
    shared among banks by constraint count (B_a, N) of totals (B_a,) as the module says."""
    candidates = log_probs.size(1)
    order = log_probs.argsort(dim=1, descending=True, stable=True)  # best first
    ranked, bank = log_probs.gather(1, order), count.gather(1, order)  # (B_a, N)
    alive = ranked > float("-inf")
    same_bank = (bank[:, :, None] == bank[:, None, :]) & alive[:, None, :]  # (B_a, N, N)
    before = torch.ones(candidates, candidates, dtype=torch.bool, device=log_probs.device).tril(-1)
    rank_in_bank = (same_bank & before).sum(-1)  # (B_a, N) better candidates of its bank
    banks = (total + 1)[:, None]  # (B_a, 1)
    quota = beam // banks + (bank >= banks - beam % banks).long()
    kept = alive & (rank_in_bank < quota)
    positions = torch.arange(candidates, device=log_probs.device)
    key = torch.where(kept, positions, candidates + positions)  # the banks' picks, then the best of the rest
    key = torch.where(alive, key, 2 * candidates + positions)
    return order.gather(1, key.topk(beam, dim=1, largest=False).indices)


def _unique(flat: torch.Tensor) -> torch.Tensor:
    """flat (B_a, N) candidate indices (-1: none) -> which are repeats of an earlier one (B_a, N)."""
    key = torch.where(flat >= 0, flat, -1 - torch.arange(flat.size(1), device=flat.device))  # -1s all differ
    ordered, order = key.sort(dim=1, stable=True)
    repeat = torch.zeros_like(ordered, dtype=torch.bool)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return torch.zeros_like(repeat).scatter(1, order, repeat)


@torch.no_grad()
def constrained_beam_search(
    model: StepModel, src: torch.Tensor, src_lengths: torch.Tensor, options: SearchOptions, required: Requirements
) -> list[list[Hypothesis]]:
    """Beam search of a batch whose outputs must contain `required`'s phrases: src (B, S),
    src_lengths (B,) -> per sentence its n_best hypotheses, best first (module docstring)."""
    assert src.dim() == 2 and src_lengths.shape == (src.size(0),), "src (B, S), src_lengths (B,)"
    batch_size, src_len, device, beam = src.size(0), src.size(1), src.device, options.beam_size
    widen = torch.arange(batch_size, device=device).repeat_interleave(beam)  # (B*K,) each sentence K times
    encoder_output = model.encode(src, src_lengths).index_select(widen)
    state = model.init_state(encoder_output)  # (B_a*K) rows, as in beam search
    limits = options.length_limits(src_lengths).to(device)  # (B_a,)
    max_limit = int(limits.max())
    start = torch.full((batch_size, beam), float("-inf"), device=device)
    start[:, 0] = 0.0
    beams = Beams(start, src.new_empty(batch_size, beam, 0), torch.zeros(batch_size, beam, 0, src_len, device=device))
    phrases_count = required.lengths.size(1)
    progress = _Progress(
        torch.zeros(batch_size, beam, phrases_count, dtype=torch.bool, device=device),
        torch.full((batch_size, beam), -1, dtype=torch.long, device=device),
        torch.zeros(batch_size, beam, dtype=torch.long, device=device),
    )
    finished = empty_finished(batch_size, beam, max_limit, src_len, device)
    results = empty_finished(batch_size, beam, max_limit, src_len, device)
    active = torch.arange(batch_size, device=device)
    prev = torch.full((batch_size * beam,), BOS, dtype=torch.long, device=device)
    beam_offsets = torch.arange(beam, device=device)
    for step in range(max_limit):
        step_log_probs, state, attention = model.next_log_probs(prev, state, encoder_output)
        rows, vocab_size = active.numel(), step_log_probs.size(-1)
        phrases, lengths = required.phrases[active], required.lengths[active]  # (B_a, P, L), (B_a, P)
        total = lengths.sum(1)  # (B_a,)
        step_log_probs = never_generated(step_log_probs).view(rows, beam, vocab_size)
        last = step + 1 >= limits  # (B_a,)
        lacking = total[:, None] - progress.count(lengths)  # (B_a, K) constraint tokens still to write
        eos_log_probs = step_log_probs[:, :, EOS].masked_fill(lacking > 0, float("-inf"))
        step_log_probs = step_log_probs.clone()
        step_log_probs[:, :, EOS] = torch.where(last[:, None], step_log_probs[:, :, EOS], eos_log_probs)
        advancing = progress.advancing(phrases, lengths)  # (B_a, K, 1 + P)
        # No token may leave a hypothesis more constraint tokens to write than tokens left before
        # its limit's EOS: any token while its slack allows for losing the phrase in progress,
        # the first token of another phrase while it allows for that, the next one always.
        room = (limits - 1 - step)[:, None]  # (B_a, 1)
        at_risk = lacking + progress.position  # (B_a, K) what it lacks if its phrase in progress is lost
        hopeless = lacking > room  # its limit cannot hold its phrases whatever it does: left free
        free = (at_risk < room) | last[:, None] | hopeless
        if not bool(free.all()):
            starts_ok = (at_risk <= room)[:, :, None] & (torch.arange(advancing.size(2), device=device) > 0)
            usable = (advancing >= 0) & (starts_ok | (torch.arange(advancing.size(2), device=device) == 0))
            votes = torch.zeros_like(step_log_probs, dtype=torch.long)  # summed: a token may be listed twice
            allowed = votes.scatter_add_(2, advancing.clamp(min=0), usable.long()) > 0
            step_log_probs = step_log_probs.masked_fill(~free[:, :, None] & ~allowed, float("-inf"))
        not_eos = torch.arange(vocab_size, device=device) != EOS
        step_log_probs = step_log_probs.masked_fill(last[:, None, None] & not_eos, float("-inf"))
        totals = (beams.log_probs[:, :, None] + step_log_probs).view(rows, beam * vocab_size)  # (B_a, K*V)
        slots = beam_offsets[None, :, None] * vocab_size  # (1, K, 1)
        best = (step_log_probs.argmax(-1, keepdim=True) + slots).view(rows, beam)  # each hypothesis's best
        advance = torch.where(advancing >= 0, advancing + slots, -1).view(rows, -1)
        flat = torch.cat([totals.topk(2 * beam, dim=1).indices, best, advance], dim=1)  # (B_a, N)
        candidate_log_probs = totals.gather(1, flat.clamp(min=0)).masked_fill((flat < 0) | _unique(flat), float("-inf"))
        flat = flat.clamp(min=0)
        origin, token = flat // vocab_size, flat % vocab_size  # (B_a, N)
        origin_count = progress.count(lengths).gather(1, origin)
        progress = progress.gather(origin).after(token, phrases, lengths)  # each candidate's
        candidate_tokens = torch.cat([gather_beams(beams.tokens, origin), token[:, :, None]], dim=2)
        step_attention = gather_beams(attention.float().view(rows, beam, src_len), origin)
        candidate_attention = torch.cat([gather_beams(beams.attention, origin), step_attention[:, :, None]], dim=2)
        is_eos = token == EOS
        # As beam search does, an EOS among the K best candidates finishes; with constraints, any
        # (EOS is open only to hypotheses that have them all), however it ranks among the rest.
        order = candidate_log_probs.argsort(dim=1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(order.size(1), device=device).expand_as(order))
        finishing = is_eos & (candidate_log_probs > float("-inf")) & ((rank < beam) | (total[:, None] > 0))
        penalty = length_penalty(torch.tensor(step + 1), options.length_penalty)
        short = (total[:, None] - origin_count).clamp(min=0)  # constraint tokens lacking: only at the limit
        ranking = candidate_log_probs / penalty - _MISSING_TOKEN_COST * short
        finished = merge_finished(
            finished,
            torch.where(finishing, ranking, float("-inf")),
            torch.where(finishing, candidate_log_probs, float("-inf")),
            candidate_tokens,
            candidate_attention,
        )
        done = (finished.count >= beam) | last
        if bool(done.any()):
            results.put(active[done], finished.rows(done))
            keep = (~done).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            active, limits, finished = active[keep], limits[keep], finished.rows(keep)
            candidate_log_probs, is_eos, origin = candidate_log_probs[keep], is_eos[keep], origin[keep]
            candidate_tokens, candidate_attention = candidate_tokens[keep], candidate_attention[keep]
            progress, lengths = progress.rows(keep), lengths[keep]
            encoder_output = encoder_output.index_select((keep[:, None] * beam + beam_offsets).view(-1))
        else:
            keep = torch.arange(rows, device=device)
        live = candidate_log_probs.masked_fill(is_eos, float("-inf"))
        pick = _allocate(live, progress.count(lengths), lengths.sum(1), beam)  # (B_a, K)
        beams = Beams(
            live.gather(1, pick), gather_beams(candidate_tokens, pick), gather_beams(candidate_attention, pick)
        )
        progress = progress.gather(pick)
        state = state.index_select((keep[:, None] * beam + origin.gather(1, pick)).view(-1))
        prev = beams.tokens[:, :, -1].reshape(-1)
    return _collect(results, src_lengths, options)


def _collect(finished, src_lengths: torch.Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
    """The n_best of each sentence, with their true scores (the ranking's missing-token cost taken off)."""
    log_probs, tokens, attention = finished.log_probs.cpu(), finished.tokens.cpu(), finished.attention.cpu()
    results = []
    for i in range(log_probs.size(0)):
        hypotheses = []
        for k in range(options.n_best):
            if log_probs[i, k] == float("-inf"):
                continue
            steps = int((tokens[i, k] != PAD).sum())
            # greedy options report the log-probability, as greedy search does: a free sentence's
            # score must not depend on whether a batch-mate has phrases
            alpha = 0.0 if options.is_greedy else options.length_penalty
            score = float(log_probs[i, k]) / float(length_penalty(torch.tensor(steps), alpha))
            hypotheses.append(
                hypothesis_of(tokens[i, k], attention[i, k], float(log_probs[i, k]), score, int(src_lengths[i]))
            )
        results.append(hypotheses)
    return results


def missing(tokens: Sequence[int], phrases: Sequence[Sequence[int]]) -> list[int]:
    """Which phrases (their indices) do not occur in `tokens` as a contiguous run."""
    text = list(tokens)
    return [
        index
        for index, phrase in enumerate(phrases)
        if not any(text[start : start + len(phrase)] == list(phrase) for start in range(len(text) - len(phrase) + 1))
    ]
