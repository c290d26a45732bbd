"""What a translation is: the sentence given (`Source`), what comes back (`Translation`), a
search replayed step by step (`Explanation`), and how they are written (n-best lines, a scored
translation's record). `translate.Translator` makes them; the job, the stream, the server and the
heatmaps read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch


class Source(NamedTuple):
    """A sentence to translate with how its translation must go: the start it continues
    (`prefix`, "" for none) and the phrases it must contain (`required_phrases`)."""

    text: str
    prefix: str = ""
    required_phrases: tuple[str, ...] = ()


@dataclass
class Translation:
    """One translated sentence (its best hypothesis) and the rest of its n-best list.

    attention: (len(tokens) + 1, len(source_tokens)); row t is the attention while emitting
    output token t, the last row the one for </s>. The source carries no EOS, so there is no
    extra column.
    """

    source: str
    text: str
    tokens: list[str]
    source_tokens: list[str]
    score: float  # log-probability / length penalty: what the search ranked by
    log_prob: float  # summed log-probability of the tokens and </s>
    attention: torch.Tensor
    alternatives: list[Translation] = field(default_factory=list)
    token_log_probs: list[float] = field(default_factory=list)  # each token's, then </s>'s: when scored
    # The required phrases it lacks: its length limit left no room for them
    missing_required_phrases: list[str] = field(default_factory=list)
    # When scored: at each step (each token, then </s>) the model's own most probable token, and its log-probability
    choices: list[str] = field(default_factory=list)
    choice_log_probs: list[float] = field(default_factory=list)


@dataclass
class SearchCandidate:
    """One of the continuations beam search ranked at one step (see `search.beam.BeamStep`)."""

    tokens: list[str]  # the hypothesis so far, the new token last
    parent: int  # slot of the beam it extends, among the previous step's kept candidates
    log_prob: float  # summed over its tokens
    status: str  # "finished" (ended in EOS among the first K), "kept" (a beam of the next step) or "dropped"
    slot: int  # its slot among the next step's beams; -1 unless kept
    score: float | None  # log_prob / length penalty, the ranking score, when finished
    attention: list[float]  # (S,) the attention of the step that chose its last token


@dataclass
class Explanation:
    """A sentence's search step by step (candidates best first) and the translation it gave."""

    source_tokens: list[str]
    steps: list[list[SearchCandidate]]
    translation: Translation


def scored_record(translation: Translation, with_attention: bool) -> dict:
    """A scored translation (`Translator.score`) as `attnmt score` writes it and /v1/score sends it."""
    fields = {
        "source": translation.source,
        "target": translation.text,
        "source_tokens": translation.source_tokens,
        "tokens": translation.tokens,
        "token_log_probs": translation.token_log_probs,
        "log_prob": translation.log_prob,
        "score": translation.score,
        "choices": translation.choices,
        "choice_log_probs": translation.choice_log_probs,
    }
    if with_attention:
        fields["attention"] = translation.attention.tolist()
    return fields


def nbest_lines(
    translations: Sequence[Translation], first_index: int = 0, aligned: Callable[[Translation], str] | None = None
) -> list[str]:
    """Moses-style n-best lines `i ||| text ||| score`, i counted from `first_index`; with
    `aligned`, a fourth field: each hypothesis's word alignment as it writes it."""
    lines = []
    for offset, translation in enumerate(translations):
        for candidate in [translation, *translation.alternatives]:
            line = f"{first_index + offset} ||| {candidate.text} ||| {candidate.score:.4f}"
            lines.append(line if aligned is None else f"{line} ||| {aligned(candidate)}")
    return lines
