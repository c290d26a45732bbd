"""How to search and what a search needs: the options (`SearchOptions`), the step interface a
model offers every search (`StepModel`), the GNMT length penalty, each sentence's length limit,
and the rule that PAD and BOS are never generated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from attnmt.config import STOPPING
from attnmt.utils import UserError
from attnmt.vocab import BOS, PAD


@dataclass(frozen=True)
class SearchOverrides:
    """The search settings a command or a request may give, each None to keep the run's own: the
    one value that carries them from an edge (the CLI's flags, an API request) through tuning,
    choosing and translating to `SearchOptions.from_config`. A new setting is a field here, a
    flag in `cli.common.add_search_arguments` and a field of the API's request."""

    beam_size: int | None = None
    n_best: int | None = None
    length_penalty: float | None = None
    stopping: str | None = None
    max_length: int | None = None
    min_length: int | None = None

    def given(self) -> dict[str, Any]:
        """The settings given (not None), by name."""
        return {name: value for name, value in vars(self).items() if value is not None}

    def replace(self, **settings) -> SearchOverrides:
        """These overrides with `settings` given too (None leaves one as it is)."""
        return dataclasses.replace(self, **{name: value for name, value in settings.items() if value is not None})


@dataclass(frozen=True)
class SearchOptions:
    """How to search, under the names of the config's `decode` section.

    beam_size 1 with n_best 1 is greedy search. length_penalty is GNMT's alpha (0 ranks by raw
    log-probability). stopping says when a beam search ends a sentence (`config.STOPPING`). Each
    sentence may produce at most max_length_a * source length + max_length_b tokens, EOS
    included, and never more than max_length when that is set; and at least min_length tokens
    before EOS where that limit leaves room (`min_length.MinLength`).
    Impossible settings are a UserError naming the setting (`decode.beam_size`, ...) and saying why.
    """

    beam_size: int = 1
    n_best: int = 1
    length_penalty: float = 1.0
    max_length_a: float = 1.5
    max_length_b: int = 10
    max_length: int | None = None
    stopping: str = "k_finished"
    min_length: int = 0

    def __post_init__(self) -> None:
        if self.stopping not in STOPPING:
            raise UserError(
                f"stopping must be one of {', '.join(STOPPING)}, got {self.stopping!r}", field="decode.stopping"
            )
        if self.min_length < 0:
            raise UserError(f"min length must be >= 0 tokens, got {self.min_length}", field="decode.min_length")
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
    def from_config(cls, decode, overrides: SearchOverrides | None = None) -> SearchOptions:
        """A config's `decode` section (beam size, length penalty, length limit; one hypothesis
        per sentence), with the settings `overrides` gives."""
        settings = {
            "beam_size": decode.beam_size,
            "length_penalty": decode.length_penalty,
            "max_length_a": decode.max_length_a,
            "max_length_b": decode.max_length_b,
            "stopping": decode.stopping,
            "min_length": decode.min_length,
        }
        return cls(**(settings | (overrides or SearchOverrides()).given()))

    def length_limits(self, src_lengths: torch.Tensor) -> torch.Tensor:
        """src_lengths (B,) -> each sentence's output limit (B,) in tokens, EOS included."""
        return max_lengths(src_lengths, self.max_length_a, self.max_length_b, self.max_length)

    @property
    def is_greedy(self) -> bool:
        return self.beam_size == 1 and self.n_best == 1


GREEDY = SearchOptions()


class StepModel(Protocol):
    """What search needs from a model: the step interface. `Seq2Seq` and `Transformer` provide it in torch,
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


class ShortlistStepModel(StepModel, Protocol):
    """A StepModel whose step can also cover the target ids `vocabulary` (V',) only, giving
    log-probabilities (B, V'): what a vocabulary shortlist needs (`decode.decode_all`).
    `Seq2Seq`, `engine.OnnxModel` and `ensemble.Ensemble` provide it."""

    def next_log_probs(
        self, prev_tokens: torch.Tensor, state: Any, encoder_output: Any, vocabulary: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Any, torch.Tensor]: ...


def length_penalty(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT length penalty ((5 + |Y|) / 6) ** alpha (Wu et al. 2016); 1 when alpha = 0."""
    return ((5.0 + lengths.to(torch.float32)) / 6.0) ** alpha


def max_lengths(src_lengths: torch.Tensor, a: float, b: int, cap: int | None = None) -> torch.Tensor:
    """Per-sentence output limit in tokens (EOS included): floor(a * S_i) + b, at most `cap`."""
    limits = (src_lengths.to(torch.float32) * a).floor().long() + b
    return limits if cap is None else limits.clamp(max=cap)


def never_generated(log_probs: torch.Tensor) -> torch.Tensor:
    """PAD and BOS are never outputs: (..., V) log-probabilities with those two set to -inf."""
    log_probs[..., PAD] = -torch.inf
    log_probs[..., BOS] = -torch.inf
    return log_probs
