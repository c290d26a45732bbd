"""What searches return and the bookkeeping of beam searches: a `Hypothesis`, the live beams, the
finished set with its merging, and gathering along the beam axis.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from attnmt.vocab import EOS, PAD


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

    @classmethod
    def start(cls, batch_size: int, beam: int, src_len: int, device) -> Beams:
        """Nothing generated yet. The K beams would start identical: only the first is alive
        (the others -inf), so that the first step does not repeat it K times."""
        log_probs = torch.full((batch_size, beam), float("-inf"), device=device)
        log_probs[:, 0] = 0.0
        tokens = torch.empty(batch_size, beam, 0, dtype=torch.long, device=device)
        return cls(log_probs, tokens, torch.zeros(batch_size, beam, 0, src_len, device=device))

    def extended(
        self, origin: torch.Tensor, token: torch.Tensor, attention: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The hypotheses a step's N candidates make, each the beam in slot `origin` (B, N) followed
        by `token` (B, N) with its `attention` (B, N, S): tokens (B, N, t+1), attention (B, N, t+1, S)."""
        tokens = torch.cat([gather_beams(self.tokens, origin), token[:, :, None]], dim=2)
        return tokens, torch.cat([gather_beams(self.attention, origin), attention[:, :, None]], dim=2)


@dataclass
class Finished:
    """The best K finished hypotheses per sentence (-inf scores mark empty slots), best first by
    `ranks`: their score, less the cost a steering rule puts on an incomplete one (`Rule.finish_cost`)."""

    scores: torch.Tensor  # (B, K) length-penalized
    ranks: torch.Tensor  # (B, K) the score less a rule's cost: what the set is ordered by
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
    finished: Finished,
    candidate_scores: torch.Tensor,
    candidate_log_probs: torch.Tensor,
    candidate_tokens: torch.Tensor,
    candidate_attention: torch.Tensor,
    candidate_ranks: torch.Tensor | None = None,
) -> Finished:
    """Keep the K best (by rank) of the finished set and the new candidates: scores, log_probs,
    ranks (B, C), -inf for not a candidate; tokens (B, C, t), attention (B, C, t, S).
    `candidate_ranks` None: ranked by their scores."""
    candidate_ranks = candidate_scores if candidate_ranks is None else candidate_ranks
    beam = finished.scores.size(1)
    length = candidate_tokens.size(2)
    pad = finished.tokens.size(2) - length
    candidate_tokens = torch.nn.functional.pad(candidate_tokens, (0, pad), value=PAD)
    candidate_attention = torch.nn.functional.pad(candidate_attention, (0, 0, 0, pad))
    ranks = torch.cat([finished.ranks, candidate_ranks], dim=1)  # (B, K + C)
    top_ranks, top = ranks.topk(beam, dim=1)  # (B, K)

    def best(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """old (B, K, ...) and new (B, C, ...) -> the K best of them together (B, K, ...)."""
        return gather_beams(torch.cat([old, new], dim=1), top)

    return Finished(
        scores=best(finished.scores, candidate_scores),
        ranks=top_ranks,
        log_probs=best(finished.log_probs, candidate_log_probs),
        tokens=best(finished.tokens, candidate_tokens),
        attention=best(finished.attention, candidate_attention),
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
        ranks=torch.full((batch_size, beam), float("-inf"), device=device),
        log_probs=torch.full((batch_size, beam), float("-inf"), device=device),
        tokens=torch.full((batch_size, beam, max_length), PAD, dtype=torch.long, device=device),
        attention=torch.zeros(batch_size, beam, max_length, src_len, device=device),
        count=torch.zeros(batch_size, dtype=torch.long, device=device),
    )
