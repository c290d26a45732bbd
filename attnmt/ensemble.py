"""Ensembles: several models decoding as one, by the mean of their log-probabilities at each step.

An `Ensemble` is itself a step model (`search.StepModel`): it encodes the batch with every
member, keeps every member's decoder state, and at each step returns the mean over members of
log p_m(y_t | y_<t, x). Greedy and beam search therefore run over an ensemble unchanged, and
members may be torch models or ONNX sessions alike. The mean of log-probabilities (a
normalised product of the members' distributions, up to a constant the search ignores) is
what Sutskever et al. (2014) and most toolkits use; it is not renormalised, so the scores of
finished hypotheses compare across lengths exactly as a single model's do.

Members must read and write the same tokens: the same vocabularies and tokenizers, which
`check_compatible` checks before any decoding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import torch

from attnmt.search.options import ShortlistStepModel
from attnmt.tokenize import SentencePieceTokenizer, Tokenizer
from attnmt.utils import UserError


class _PerMember(tuple):
    """One value per member (encoder outputs or decoder states), selected row-wise together."""

    def index_select(self, rows: torch.Tensor) -> _PerMember:
        return _PerMember(part.index_select(rows) for part in self)


class Ensemble:
    """Members' log-probabilities averaged at every step; attention is their mean, or the
    attention of member `attention` (an index) when the user asks to see one model's."""

    def __init__(self, members: Sequence[ShortlistStepModel], *, attention: str | int = "mean"):
        if not members:
            raise ValueError("an ensemble needs at least one member")
        if attention != "mean" and not (isinstance(attention, int) and 0 <= attention < len(members)):
            last = len(members) - 1
            raise UserError(f"ensemble attention {attention!r}: expected 'mean' or a member from 0 to {last}")
        self.members = list(members)
        self.attention = attention

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> _PerMember:
        """src (B, S), src_lengths (B,) -> every member's encoder output."""
        return _PerMember(member.encode(src, src_lengths) for member in self.members)

    def init_state(self, encoder_output: _PerMember) -> _PerMember:
        return _PerMember(
            member.init_state(encoded) for member, encoded in zip(self.members, encoder_output, strict=True)
        )

    def next_log_probs(
        self,
        prev_tokens: torch.Tensor,
        state: _PerMember,
        encoder_output: _PerMember,
        vocabulary: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, _PerMember, torch.Tensor]:
        """prev_tokens (B,) -> (mean log-probabilities (B, V) float32, new states, attention (B, S));
        with `vocabulary` (V',) target ids, every member's distribution over those only, averaged."""
        log_probs, states, weights = [], [], []
        for member, member_state, encoded in zip(self.members, state, encoder_output, strict=True):
            member_log_probs, member_state, member_weights = member.next_log_probs(
                prev_tokens, member_state, encoded, vocabulary
            )
            log_probs.append(member_log_probs.float())
            states.append(member_state)
            weights.append(member_weights.float())
        mean = torch.stack(log_probs).mean(dim=0)  # (B, V)
        # __init__ admits only "mean" or a member's index
        attention = torch.stack(weights).mean(dim=0) if self.attention == "mean" else weights[cast(int, self.attention)]
        return mean, _PerMember(states), attention


def _tokenizer_identity(tokenizer: Tokenizer) -> tuple[Any, ...]:
    """What makes two tokenizers split text the same way."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        digest = hashlib.sha256(Path(tokenizer.model_path).read_bytes()).hexdigest()
        return ("sentencepiece", digest, tokenizer.lowercase)
    return (type(tokenizer).__name__, getattr(tokenizer, "lang", None), getattr(tokenizer, "lowercase", None))


def check_compatible(named_codecs: Sequence[tuple[str, Any]]) -> None:
    """`named_codecs`: (name, TextCodec) per member. A UserError naming the first member whose
    vocabularies or tokenizers differ from the first member's."""
    (first_name, first), *others = named_codecs
    for name, codec in others:
        for side in ("src", "tgt"):
            if getattr(codec, f"{side}_vocab") != getattr(first, f"{side}_vocab"):
                raise UserError(
                    f"{name}: its {side} vocabulary differs from {first_name}'s; an ensemble needs runs "
                    "trained on the same vocabularies (the same data settings)"
                )
            ours, theirs = (_tokenizer_identity(getattr(c, f"{side}_tokenizer")) for c in (codec, first))
            if ours != theirs:
                raise UserError(f"{name}: its {side} tokenizer differs from {first_name}'s; an ensemble needs one")
