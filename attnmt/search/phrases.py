"""Required phrases as a steering rule: outputs that contain given target phrases (terminology),
by dynamic beam allocation (Post and Vilar, 2018).

Each sentence has up to P required phrases of token ids. A hypothesis carries which phrases it
has written whole (`met`), and the phrase it is in the middle of with how many of its tokens
are out (`phrase`, `position`); its count is the phrase tokens it has written. A token that
does not continue the phrase in progress abandons it (its tokens no longer count), unless it
starts another. At each step the candidates are the 2K best continuations, each hypothesis's
best token, and each hypothesis's tokens that advance a phrase (the next token of its phrase
in progress, the first token of each phrase it still lacks); the K kept are shared among banks
by count (0 .. all the sentence's phrase tokens), K / (banks) each, the remainder to the
highest, slots a bank cannot fill going to the best of the rest. So hypotheses that have met
more phrases are not crowded out by better-scoring ones that have met fewer, which is what
makes the search find them. A sentence without required phrases is searched exactly as plain
beam search searches it (one bank; EOS finishes among the K best).

A hypothesis may end (EOS) only once it has every phrase, and may take no token that would
leave it more phrase tokens to write than tokens left before its sentence's limit
(`a * S + b`, EOS last): near the limit it must advance its phrases. Since every hypothesis
starts within that bound (when the limit allows the phrases at all) and no step breaks it,
every hypothesis alive at the limit has them all: whenever a sentence's limit allows its
phrases, its translations contain them all, whatever the beam. At the limit every hypothesis ends; a
sentence whose phrases could not all be written (a limit too short for them) gets its best
translation ranked first by how few phrase tokens it lacks, and the caller reports the
phrases missing from it (`missing_required_phrases`).

The rule adds candidates and chooses among them, so greedy options search a beam of one (the
allocation then keeps the most advanced candidate). `parse_required_phrases` turns a batch's
phrases into target ids; `missing_required_phrases` says which phrases an output lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from attnmt.search.rules import Rule
from attnmt.utils import UserError
from attnmt.vocab import EOS, PAD, UNK

# Ranking finished hypotheses that lack phrase tokens (only at the length limit): far below
# every complete one, fewer missing tokens first.
_MISSING_TOKEN_COST = 1.0e4  # float32 keeps 1e-3 of a score at this size


@dataclass(frozen=True)
class RequiredPhraseIds:
    """A batch's required phrases in the search's index space: phrases (B, P, L) long, PAD after
    each phrase's tokens; lengths (B, P) long, 0 for no phrase."""

    phrases: torch.Tensor
    lengths: torch.Tensor

    @classmethod
    def of(
        cls, required_phrases: Sequence[Sequence[Sequence[int]]], vocabulary: torch.Tensor | None, device
    ) -> RequiredPhraseIds:
        """Per sentence its required phrases of target ids (none: an empty list). `vocabulary` (V',)
        sorted ids is a shortlist's restricted index space, which must hold every phrase's ids."""
        count = max([1, *(len(phrases) for phrases in required_phrases)])
        width = max([1, *(len(phrase) for phrases in required_phrases for phrase in phrases)])
        phrases = torch.full((len(required_phrases), count, width), PAD, dtype=torch.long)
        lengths = torch.zeros(len(required_phrases), count, dtype=torch.long)
        for row, sentence_phrases in enumerate(required_phrases):
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
        """Phrase tokens written (B_a, N), given the sentences' phrase lengths (B_a, P)."""
        return (self.met * lengths[:, None, :]).sum(-1) + self.position

    def continuing(self, phrases: torch.Tensor) -> torch.Tensor:
        """The token (B_a, N) that continues each phrase in progress (-1 where none is)."""
        width = phrases.size(2)
        in_progress = self.phrase >= 0
        rows = torch.arange(phrases.size(0), device=phrases.device)[:, None]
        token = phrases[rows, self.phrase.clamp(min=0), self.position.clamp(max=width - 1)]
        return torch.where(in_progress, token, -1)

    def advancing(self, phrases: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Tokens (B_a, N, 1 + P) that advance a phrase: the one continuing the phrase in
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
    shared among banks by phrase-token count (B_a, N) of totals (B_a,) as the module says."""
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


class RequiredPhrases(Rule):
    """The rule that outputs contain a batch's `RequiredPhraseIds` (the module says how). Its state:
    each hypothesis's progress through its sentence's phrases, then each candidate's."""

    needs_beam = True  # it adds candidates and allocates the beam among banks
    selects = True

    def __init__(self, required_phrases: RequiredPhraseIds):
        self.required_phrases = required_phrases
        self.progress: _Progress | None = None  # (B_a, K) hypotheses, then (B_a, N) candidates
        self.active: torch.Tensor | None = None  # (B_a,) the batch rows of this step

    def _phrases(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The active sentences' phrases (B_a, P, L) and phrase lengths (B_a, P)."""
        return self.required_phrases.phrases[self.active], self.required_phrases.lengths[self.active]

    def restrict(self, log_probs: torch.Tensor, step: int, active: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        rows, beam, _ = log_probs.shape
        if self.progress is None:  # the first step: nothing written
            count, device = self.required_phrases.lengths.size(1), log_probs.device
            self.progress = _Progress(
                torch.zeros(rows, beam, count, dtype=torch.bool, device=device),
                torch.full((rows, beam), -1, dtype=torch.long, device=device),
                torch.zeros(rows, beam, dtype=torch.long, device=device),
            )
        self.active = active
        phrases, lengths = self._phrases()
        last = step + 1 >= limits  # (B_a,)
        lacking = lengths.sum(1)[:, None] - self.progress.count(lengths)  # (B_a, K) phrase tokens still to write
        eos_log_probs = log_probs[:, :, EOS].masked_fill(lacking > 0, float("-inf"))  # EOS only with every phrase
        log_probs = log_probs.clone()
        log_probs[:, :, EOS] = torch.where(last[:, None], log_probs[:, :, EOS], eos_log_probs)
        self.advancing = self.progress.advancing(phrases, lengths)  # (B_a, K, 1 + P)
        # No token may leave a hypothesis more phrase tokens to write than tokens left before
        # its limit's EOS: any token while its slack allows for losing the phrase in progress,
        # the first token of another phrase while it allows for that, the next one always.
        room = (limits - 1 - step)[:, None]  # (B_a, 1)
        at_risk = lacking + self.progress.position  # (B_a, K) what it lacks if its phrase in progress is lost
        hopeless = lacking > room  # its limit cannot hold its phrases whatever it does: left free
        free = (at_risk < room) | last[:, None] | hopeless
        if bool(free.all()):
            return log_probs
        column = torch.arange(self.advancing.size(2), device=log_probs.device)
        usable = (self.advancing >= 0) & (((at_risk <= room)[:, :, None] & (column > 0)) | (column == 0))
        votes = torch.zeros_like(log_probs, dtype=torch.long)  # summed: a token may be listed twice
        allowed = votes.scatter_add_(2, self.advancing.clamp(min=0), usable.long()) > 0
        restricted = log_probs.masked_fill(~free[:, :, None] & ~allowed, float("-inf"))
        # Where a rule before this one (a prefix being forced) leaves nothing this one allows, it
        # gives way: the phrases then get the room that is left after it
        stuck = (restricted == float("-inf")).all(-1) & (log_probs > float("-inf")).any(-1)  # (B_a, K)
        return torch.where(stuck[:, :, None], log_probs, restricted)

    def candidates(self, log_probs: torch.Tensor) -> torch.Tensor:
        """Each hypothesis's best token and the tokens that advance its phrases (B_a, K * (2 + P))."""
        rows, beam, vocab_size = log_probs.shape
        slots = torch.arange(beam, device=log_probs.device)[None, :, None] * vocab_size  # (1, K, 1)
        best = (log_probs.argmax(-1, keepdim=True) + slots).view(rows, beam)
        advance = torch.where(self.advancing >= 0, self.advancing + slots, -1).view(rows, -1)
        return torch.cat([best, advance], dim=1)

    def advance(self, origin: torch.Tensor, token: torch.Tensor) -> None:
        assert self.progress is not None  # `restrict` sets it, and runs first at every step
        phrases, lengths = self._phrases()
        # What a finishing candidate lacks is its hypothesis's: EOS writes nothing of a phrase
        self.lacking = (lengths.sum(1)[:, None] - self.progress.count(lengths).gather(1, origin)).clamp(min=0)
        self.progress = self.progress.gather(origin).after(token, phrases, lengths)

    def may_finish(self) -> torch.Tensor:
        """With phrases, any EOS finishes (it is open only to hypotheses that have them all),
        however it ranks among the rest."""
        return (self.required_phrases.lengths[self.active].sum(1) > 0)[:, None]

    def finish_cost(self) -> torch.Tensor:
        return _MISSING_TOKEN_COST * self.lacking  # only at the length limit can a finished one lack some

    def select(self, log_probs: torch.Tensor, beam: int) -> torch.Tensor:
        assert self.progress is not None  # set by `restrict`, as in `advance`
        lengths = self.required_phrases.lengths[self.active]
        return _allocate(log_probs, self.progress.count(lengths), lengths.sum(1), beam)

    def reorder(self, pick: torch.Tensor, keep: torch.Tensor) -> None:
        assert self.progress is not None  # set by `restrict`, as in `advance`
        self.progress = self.progress.gather(pick).rows(keep)


def parse_required_phrases(
    required_phrases: Sequence[Sequence[str]], count: int, encode: Callable[[str], list[int]], first: int = 1
) -> list[list[list[int]]]:
    """Each of `count` sentences' required phrases (one list per sentence) as target ids, by
    `encode` (the target tokenizer and vocabulary); an empty phrase, or one of unknown tokens
    only, is a UserError naming the sentence (numbered from `first`)."""
    if len(required_phrases) != count:
        raise UserError(
            f"{len(required_phrases)} lists of required phrases for {count} sentences", field="required_phrases"
        )
    parsed = []
    for index, phrases in enumerate(required_phrases):
        ids = []
        for phrase in phrases:
            tokens = encode(phrase)
            if not tokens:
                raise UserError(f"sentence {first + index}: a required phrase is empty", field="required_phrases")
            if all(token == UNK for token in tokens):
                raise UserError(
                    f"sentence {first + index}: required phrase {phrase!r}: every token is unknown to the model's "
                    "target vocabulary",
                    field="required_phrases",
                )
            ids.append(tokens)
        parsed.append(ids)
    return parsed


def missing_required_phrases(tokens: Sequence[int], phrases: Sequence[Sequence[int]]) -> list[int]:
    """Which phrases (their indices) do not occur in `tokens` as a contiguous run."""
    text = list(tokens)
    return [
        index
        for index, phrase in enumerate(phrases)
        if not any(text[start : start + len(phrase)] == list(phrase) for start in range(len(text) - len(phrase) + 1))
    ]
