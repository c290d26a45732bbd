"""What every search shares: how to search (`SearchOptions`), what a model must offer a search
(`StepModel`), the hypotheses it returns, the GNMT length penalty and length limits, and the
bookkeeping of beam searches: the live beams, the finished set and its merging.

`search` (greedy, beam search, decoding whole files) and `constrained` (beam search with
required phrases) are built on these.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

import torch

from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS, PAD

# When a beam search ends a sentence: once K hypotheses have finished (attnmt's rule), or as soon as
# the best-scored candidate of a step is a finished one (OpenNMT-py's, whose beam then also keeps
# only the unfinished among the step's top K).
STOPPING = ("k_finished", "best_finished")


@dataclass(frozen=True)
class SearchOptions:
    """How to search, under the names of the config's `decode` section.

    beam_size 1 with n_best 1 is greedy search. length_penalty is GNMT's alpha (0 ranks by raw
    log-probability). stopping says when a beam search ends a sentence (`STOPPING`). Each
    sentence may produce at most max_length_a * source length + max_length_b tokens, EOS
    included, and never more than max_length when that is set.
    Impossible settings are a UserError naming the setting (`decode.beam_size`, ...) and saying why.
    """

    beam_size: int = 1
    n_best: int = 1
    length_penalty: float = 1.0
    max_length_a: float = 1.5
    max_length_b: int = 10
    max_length: int | None = None
    stopping: str = "k_finished"

    def __post_init__(self) -> None:
        if self.stopping not in STOPPING:
            raise UserError(
                f"stopping must be one of {', '.join(STOPPING)}, got {self.stopping!r}", field="decode.stopping"
            )
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
            "stopping": decode.stopping,
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
    # log-probability / length penalty (the ranking score); greedy, which ranks nothing: the log-probability
    score: float
    log_prob: float  # summed log-probability of the generated tokens (EOS included)
    attention: torch.Tensor


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


def hypothesis_of(tokens: torch.Tensor, attention: torch.Tensor, log_prob: float, score: float, src_length: int):
    """Trim a stored row: tokens (L,) possibly padded, attention (L, S)."""
    token_list = tokens.tolist()
    length = token_list.index(PAD) if PAD in token_list else len(token_list)
    words = token_list[: length - 1] if length and token_list[length - 1] == EOS else token_list[:length]
    return Hypothesis(words, score, log_prob, attention[:length, :src_length].clone())


@dataclass
class Beams:
    """Live hypotheses, K per sentence, flattened to (B*K) rows for the model."""

    log_probs: torch.Tensor  # (B, K) summed log-probabilities
    tokens: torch.Tensor  # (B, K, t) generated so far
    attention: torch.Tensor  # (B, K, t, S)


@dataclass
class Finished:
    """The best K finished hypotheses per sentence (-inf scores mark empty slots)."""

    scores: torch.Tensor  # (B, K) length-penalized
    log_probs: torch.Tensor  # (B, K)
    tokens: torch.Tensor  # (B, K, L_max) PAD after EOS
    attention: torch.Tensor  # (B, K, L_max, S)
    count: torch.Tensor  # (B,) how many have finished so far (may exceed K)

    def rows(self, index: torch.Tensor) -> Finished:
        """The sentences `index` selects (a boolean mask or row numbers)."""
        return Finished(*(getattr(self, f.name)[index] for f in fields(self)))

    def put(self, index: torch.Tensor, other: Finished) -> None:
        """Write `other`'s sentences into rows `index` (B',) in place."""
        for f in fields(self):
            getattr(self, f.name)[index] = getattr(other, f.name)


def merge_finished(
    finished: Finished, candidate_scores, candidate_log_probs, candidate_tokens, candidate_attention
) -> Finished:
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

    return Finished(
        scores=top_scores,
        log_probs=torch.cat([finished.log_probs, candidate_log_probs], dim=1).gather(1, top),
        tokens=pick(finished.tokens, candidate_tokens),
        attention=pick(finished.attention, candidate_attention),
        count=finished.count + (candidate_scores > float("-inf")).sum(dim=1),
    )


def collect_finished(finished: Finished, src_lengths: torch.Tensor, n_best: int) -> list[list[Hypothesis]]:
    """Per sentence its `n_best` finished hypotheses, best first, on the host (empty slots left out)."""
    scores, log_probs = finished.scores.cpu(), finished.log_probs.cpu()
    tokens, attention = finished.tokens.cpu(), finished.attention.cpu()
    results = []
    for i in range(scores.size(0)):
        results.append(
            [
                hypothesis_of(
                    tokens[i, k], attention[i, k], float(log_probs[i, k]), float(scores[i, k]), int(src_lengths[i])
                )
                for k in range(n_best)
                if scores[i, k] > float("-inf")
            ]
        )
    return results


def gather_beams(values: torch.Tensor, origin: torch.Tensor) -> torch.Tensor:
    """values (B, K, ...) indexed by origin (B, C) along the beam axis -> (B, C, ...)."""
    index = origin.view(*origin.shape, *([1] * (values.dim() - 2))).expand(-1, -1, *values.shape[2:])
    return values.gather(1, index)


def empty_finished(batch_size: int, beam: int, max_length: int, src_len: int, device) -> Finished:
    return Finished(
        scores=torch.full((batch_size, beam), float("-inf"), device=device),
        log_probs=torch.full((batch_size, beam), float("-inf"), device=device),
        tokens=torch.full((batch_size, beam, max_length), PAD, dtype=torch.long, device=device),
        attention=torch.zeros(batch_size, beam, max_length, src_len, device=device),
        count=torch.zeros(batch_size, dtype=torch.long, device=device),
    )
