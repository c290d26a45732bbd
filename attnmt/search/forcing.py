"""Prefix forcing as a steering rule: each output begins with its sentence's prefix (`prefix.Prefix`).

The prefix's complete words are forced one token per step; after them the hypothesis spells the
unfinished last word, a small automaton over the vocabulary whose state is how much of the word
is out. While a sentence's prefix is forced its beam has one live hypothesis (every other
continuation is -inf). At a sentence's length limit the spelling gives way, so that EOS can end it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnmt.search.prefix import Prefix
from attnmt.search.rules import Rule
from attnmt.vocab import PAD


class Forcing(Rule):
    """How a batch's outputs must begin, in the index space the search runs in (`Forcing.of`
    builds it from `Prefix`es):

    tokens (B, P) long: the prefix tokens, PAD after each sentence's `lengths` (B,); P >= 1.
    start (B,) long: the spelling state a sentence is in once its prefix is out (0: none).
    allowed (N, V) bool: the tokens a hypothesis in spelling state n may take; state 0 is
        free (every token).
    after (N, V) long: the state after taking a token; back to 0 once the word is spelled.
    longest: the most prefix tokens of any sentence, on the host: no step at or past it forces
        a token, which the search learns without reading `lengths` from the device.

    Its state: each live hypothesis's spelling state (B_a, K), and whether each sentence is
    still in its prefix at this step (B_a, 1).
    """

    def __init__(self, tokens, lengths, start, allowed, after, longest: int):
        self.tokens, self.lengths, self.start, self.allowed, self.after = tokens, lengths, start, allowed, after
        self.longest = longest
        self.spelling: torch.Tensor | None = None  # (B_a, K) once the search has begun
        self.in_prefix: torch.Tensor | None = None  # (B_a, 1)

    def restrict(self, log_probs: torch.Tensor, step: int, active: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        if self.spelling is None:  # the first step: every hypothesis at its sentence's start
            self.spelling = self.start[active, None].repeat(1, log_probs.size(1))
        self.in_prefix = (step < self.lengths[active])[:, None]
        if step >= self.longest and not bool(self.spelling.any()):
            return log_probs  # every row free: the common case after the prefixes
        forced = self.tokens[active, min(step, self.tokens.size(1) - 1)]  # (B_a,)
        last = (step + 1 >= limits)[:, None, None]  # (B_a, 1, 1)
        allowed = self.allowed[self.spelling] | last  # (B_a, K, V)
        only_forced = torch.zeros_like(allowed[:, :1]).scatter_(2, forced[:, None, None], True)  # (B_a, 1, V)
        allowed = torch.where(self.in_prefix[:, :, None], only_forced, allowed)
        return log_probs.masked_fill(~allowed, float("-inf"))

    def advance(self, origin: torch.Tensor, token: torch.Tensor) -> None:
        assert self.spelling is not None and self.in_prefix is not None  # `restrict` sets both, first at every step
        spelling = self.spelling.gather(1, origin)  # each candidate's: its hypothesis's, advanced by its token
        self.spelling = torch.where(self.in_prefix, spelling, self.after[spelling, token])

    def reorder(self, pick: torch.Tensor, keep: torch.Tensor) -> None:
        assert self.spelling is not None  # set by `restrict`, as in `advance`
        self.spelling = self.spelling.gather(1, pick)[keep]

    @classmethod
    def of(cls, prefixes: Sequence[Prefix | None], vocabulary: torch.Tensor | None, device) -> Forcing:
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
        longest = int(lengths.max())  # read on the host, before the move
        tokens, lengths, start, allowed, after = (
            tensor.to(device) for tensor in (tokens, lengths, start, allowed, after)
        )
        return cls(tokens, lengths, start, allowed, after, longest)
