"""Decoding many sentences: length-sorted batches, each searched by the right loop under its rules.

`decode_all` is what every caller uses (translation, validation, evaluation, serving,
distillation): it sorts sentences by length into batches, restricts a batch to its shortlist
vocabulary when there is one, builds the batch's steering rules (a prefix to continue,
`forcing.Forcing`; phrases to contain, `phrases.RequiredPhrases`) and chooses only how to search:
eager or fixed-shape (`graphed`, for batches without rules), greedy or beam.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from attnmt.search.beam import beam_search
from attnmt.search.forcing import Forcing
from attnmt.search.graphed import fixed_beam_search, fixed_greedy
from attnmt.search.greedy import greedy
from attnmt.search.hypotheses import Hypothesis
from attnmt.search.min_length import MinLength
from attnmt.search.options import GREEDY, SearchOptions, ShortlistStepModel, StepModel
from attnmt.search.phrases import RequiredPhraseIds, RequiredPhrases
from attnmt.search.prefix import Prefix
from attnmt.search.rules import Rule, Steering
from attnmt.utils import UserError
from attnmt.vocab import PAD


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

    def __init__(self, model: ShortlistStepModel, vocabulary: torch.Tensor):
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


def _vocabulary(
    shortlist: Shortlisting,
    src: torch.Tensor,
    prefixes: Sequence[Prefix | None] | None,
    required_phrases: Sequence[Sequence[Sequence[int]]] | None,
) -> torch.Tensor:
    """The batch's shortlist vocabulary (V',) on src's device, with every id its prefixes may put
    out and its required phrases hold."""
    vocabulary = shortlist.vocabulary(src)
    needed = {token for prefix in prefixes or () if prefix is not None for token in prefix.ids()}
    needed |= {token for phrases in required_phrases or () for phrase in phrases for token in phrase}
    if needed:
        added = torch.tensor(sorted(needed), dtype=vocabulary.dtype, device=vocabulary.device)
        vocabulary = torch.cat([vocabulary, added]).unique()  # sorted
    return vocabulary.to(src.device)


def steering_of(
    prefixes: Sequence[Prefix | None] | None,
    required_phrases: Sequence[Sequence[Sequence[int]]] | None,
    options: SearchOptions,
    vocabulary: torch.Tensor | None = None,
    device: torch.device | str = "cpu",
) -> Steering:
    """A batch's rules: its prefixes (one per sentence, None: free) forced, then its required
    phrases (one list of target id lists per sentence) met, in the index space `vocabulary`
    (V',) of a shortlist (None: the whole vocabulary), and the options' minimum length. A prefix
    comes first: where it forces a token the phrases give way. None of these: no rules."""
    rules: list[Rule] = []
    if prefixes is not None and any(prefix is not None for prefix in prefixes):
        rules.append(Forcing.of(prefixes, vocabulary, device))
    if required_phrases is not None and any(required_phrases):
        if options.stopping != "k_finished" and not options.is_greedy:
            raise UserError(
                f"stopping {options.stopping} is not available with required phrases: their search "
                "keeps each sentence's beam until it has finished hypotheses with every phrase",
                field="decode.stopping",
            )
        rules.append(RequiredPhrases(RequiredPhraseIds.of(required_phrases, vocabulary, device)))
    if options.min_length > 0:
        rules.append(MinLength(options.min_length))
    return Steering(rules)


def search_batch(
    model: StepModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    options: SearchOptions,
    steering: Steering,
    fixed_shapes: bool = False,
) -> list[list[Hypothesis]]:
    """One batch, src (B, S), src_lengths (B,), searched under `steering` -> per sentence its
    hypotheses, best first. Greedy options take the greedy loop, or a beam of one for rules that
    need a beam (scored by log-probability, as greedy search scores); `fixed_shapes` searches a
    batch without rules in fixed shapes (`graphed`)."""
    if fixed_shapes and not steering and (options.is_greedy or options.stopping == "k_finished"):
        if options.is_greedy:
            return [[hypothesis] for hypothesis in fixed_greedy(model, src, src_lengths, options)]
        return fixed_beam_search(model, src, src_lengths, options)
    if options.is_greedy and not steering.needs_beam:
        return [[hypothesis] for hypothesis in greedy(model, src, src_lengths, options, steering)]
    if options.is_greedy:  # greedy ranks nothing: its score is the log-probability
        options = dataclasses.replace(options, length_penalty=0.0)
    return beam_search(model, src, src_lengths, options, steering=steering)


def decode_all(
    model: ShortlistStepModel,
    src_ids: Sequence[Sequence[int]],
    options: SearchOptions = GREEDY,
    *,
    batch_size: int = 64,
    batch_tokens: int | None = None,
    device: torch.device | str = "cpu",
    shortlist: Shortlisting | None = None,
    prefixes: Sequence[Prefix | None] | None = None,
    required_phrases: Sequence[Sequence[Sequence[int]]] | None = None,
    fixed_shapes: bool = False,
) -> list[list[Hypothesis]]:
    """Decode many id sequences in length-sorted batches; results come back in input order.

    Sorting by length keeps padding low; since results do not depend on the batch, the order
    changes nothing but speed. A batch holds at most `batch_size` sentences and, with
    `batch_tokens`, at most that many padded source tokens per hypothesis searched (a beam of K
    counts each source K times), so short sentences go in larger batches than long ones.
    Empty sources get one empty hypothesis without running the model. With a `shortlist`, each
    batch chooses among its vocabulary only (the union of its sources' candidates, and every
    token a prefix may put out or a phrase holds): a sentence's result may then depend on the
    batch it is in. `prefixes`, one per source (None: free), say how each output must begin;
    the caller checks that each fits its sentence's length limit. `required_phrases`, one list
    of phrases (target id lists) per source, are phrases its outputs must contain. Both may be
    given, for the same sentence too (`steering_of`). `fixed_shapes` searches the batches
    without either in fixed shapes (`graphed`), each step a replayed CUDA graph on a CUDA
    device: the same outputs, fewer launches and no host read per step.
    """
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0, torch.zeros(0, 0))] for _ in src_ids]
    order = sorted((i for i, ids in enumerate(src_ids) if len(ids) > 0), key=lambda i: len(src_ids[i]))
    rows = 1 if options.is_greedy else options.beam_size
    for positions in length_batches([len(src_ids[i]) for i in order], batch_size, batch_tokens, rows):
        chunk = [order[position] for position in positions]
        lengths = torch.tensor([len(src_ids[i]) for i in chunk], dtype=torch.long)
        src = torch.full((len(chunk), int(lengths.max())), PAD, dtype=torch.long)
        for row, i in enumerate(chunk):
            src[row, : len(src_ids[i])] = torch.as_tensor(src_ids[i], dtype=torch.long)
        src, lengths = src.to(device), lengths.to(device)
        chunk_prefixes = None if prefixes is None else [prefixes[i] for i in chunk]
        chunk_required_phrases = None if required_phrases is None else [required_phrases[i] for i in chunk]
        searched: StepModel = model
        if shortlist is not None:
            searched = _Restricted(model, _vocabulary(shortlist, src, chunk_prefixes, chunk_required_phrases))
        restricted = searched.vocabulary if isinstance(searched, _Restricted) else None
        steering = steering_of(chunk_prefixes, chunk_required_phrases, options, restricted, device)
        batch_results = search_batch(searched, src, lengths, options, steering, fixed_shapes)
        if isinstance(searched, _Restricted):
            batch_results = [[searched.ids(h) for h in hypotheses] for hypotheses in batch_results]
        for i, hypotheses in zip(chunk, batch_results, strict=True):
            results[i] = hypotheses
    return results
