"""Steering rules: what a search is told its outputs must be, as hooks into its one step loop.

A rule is made for one batch and keeps its own state per live hypothesis (a prefix's spelling,
the required phrases written so far). At each step the search (`beam.beam_search`, and
`greedy.greedy` as a beam of one for rules that need no beam) calls, in this order:

    restrict(log_probs (B_a, K, V), step, active (B_a,), limits (B_a,)) -> log_probs
        what each live hypothesis may take next (-inf: not) or a bias; `active` are the batch rows
        still searched, `limits` their length limits (EOS is forced at the limit after this);
    candidates(log_probs (B_a, K, V)) -> (B_a, C) flat indices k * V + token, -1 for none
        continuations to rank besides the 2K best (a rule that needs them makes greedy a beam);
    advance(origin (B_a, N), token (B_a, N))
        the N ranked candidates (the 2K best, then the rules' own): each extends hypothesis
        `origin` with `token`; the rule's state becomes theirs;
    may_finish() -> (B_a, 1) bool: sentences whose candidates ending in EOS finish wherever
        they rank, not only among the K best;
    finish_cost() -> (B_a, N): what a finishing candidate's rank is lowered by (its score stays);
    select(log_probs (B_a, N), beam) -> (B_a, K): which candidates live on (default: the K best);
    reorder(pick (B_a, K), keep (B_a',)): the kept candidates of the sentences still searched
        become the next step's hypotheses.

Each hook's default changes nothing, so a rule writes only what it steers. Rules combine
(`Steering`): masks and biases apply one after the other, candidates are pooled, costs add up,
and at most one rule chooses which candidates live on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class Rule:
    """A steering rule's hooks (the module says when each is called), each a no-op here."""

    needs_beam = False  # whether it adds candidates or selects: then greedy options search a beam of one
    selects = False  # whether it overrides `select`

    def restrict(self, log_probs: torch.Tensor, step: int, active: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        return log_probs

    def candidates(self, log_probs: torch.Tensor) -> torch.Tensor | None:
        return None

    def advance(self, origin: torch.Tensor, token: torch.Tensor) -> None:
        pass

    def may_finish(self) -> torch.Tensor | None:
        return None

    def finish_cost(self) -> torch.Tensor | None:
        return None

    def select(self, log_probs: torch.Tensor, beam: int) -> torch.Tensor:
        raise NotImplementedError

    def reorder(self, pick: torch.Tensor, keep: torch.Tensor) -> None:
        pass


class Steering:
    """The rules a batch is searched under, called as one (the module says how they combine).
    Empty: a plain search, which the loops then run without calling any hook."""

    def __init__(self, rules: Sequence[Rule] = ()):
        self.rules = tuple(rules)
        choosers = [rule for rule in self.rules if rule.selects]
        assert len(choosers) <= 1, "at most one rule chooses the live hypotheses"
        self.chooser = choosers[0] if choosers else None
        self.needs_beam = any(rule.needs_beam for rule in self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def restrict(self, log_probs: torch.Tensor, step: int, active: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        for rule in self.rules:
            log_probs = rule.restrict(log_probs, step, active, limits)
        return log_probs

    def candidates(self, log_probs: torch.Tensor) -> torch.Tensor | None:
        found = [extra for rule in self.rules if (extra := rule.candidates(log_probs)) is not None]
        return torch.cat(found, dim=1) if found else None

    def advance(self, origin: torch.Tensor, token: torch.Tensor) -> None:
        for rule in self.rules:
            rule.advance(origin, token)

    def may_finish(self) -> torch.Tensor | None:
        found = [anywhere for rule in self.rules if (anywhere := rule.may_finish()) is not None]
        return None if not found else found[0] if len(found) == 1 else torch.stack(found).any(0)

    def finish_cost(self) -> torch.Tensor | None:
        found = [cost for rule in self.rules if (cost := rule.finish_cost()) is not None]
        return sum(found[1:], found[0]) if found else None

    def select(self, log_probs: torch.Tensor, beam: int) -> torch.Tensor:
        """(B_a, N) -> the K candidates that live on (B_a, K): the chooser's, else the K best."""
        if self.chooser is not None:
            return self.chooser.select(log_probs, beam)
        return log_probs.topk(beam, dim=1).indices

    def reorder(self, pick: torch.Tensor, keep: torch.Tensor) -> None:
        for rule in self.rules:
            rule.reorder(pick, keep)


PLAIN = Steering()
