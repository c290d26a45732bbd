"""Vocabulary shortlists: the target tokens a batch's sources can plausibly translate to, so that
decoding computes the output layer for those rows only.

Built from a run's training data alone (`build`): for each source token, the `per_source`
target tokens most associated with it by the Dice coefficient over sentence co-occurrence,

    dice(s, t) = 2 c(s, t) / (c(s) + c(t)),

c counting the training pairs in which a token (or both) occurs; plus the `frequent` most
frequent target tokens, which every batch gets (function words co-occur with everything, so
Dice ranks them low for any one source token although they are everywhere in the output).
A batch's vocabulary (`Shortlist.vocabulary`) is the union over its source tokens with the
frequent ones and the four specials, sorted, so the specials keep their ids 0-3 in the
restricted index space the search runs in (`search.decode_all`).

Stored beside the run's vocabularies as `shortlist.safetensors`, with digests of the two
vocabularies it was built for: a shortlist meets only the vocabularies it was made from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attnmt.utils import UserError, atomic_path
from attnmt.vocab import SPECIALS, Vocab

if TYPE_CHECKING:
    import torch

# numpy, torch and safetensors are imported where they are used: the command line reads the
# defaults below without loading them.

FILENAME = "shortlist.safetensors"
PER_SOURCE, FREQUENT = 50, 100  # the defaults: `attnmt shortlist --per-source --frequent`


def vocab_digest(vocab: Vocab) -> str:
    return hashlib.sha256("\n".join(vocab.tokens).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Shortlist:
    """candidates (V_src, per_source) target ids per source id, -1 where a source token had
    fewer co-occurring targets; frequent (n,) the most frequent target ids."""

    candidates: torch.Tensor
    frequent: torch.Tensor
    src_digest: str
    tgt_digest: str

    def vocabulary(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) token ids (padding included: PAD's row is empty) -> the sorted target ids
        (V',) this batch may produce: the specials, the frequent tokens, and every candidate of
        every source token."""
        import torch

        rows = self.candidates[torch.unique(src.cpu())].flatten()
        specials = torch.arange(len(SPECIALS))
        chosen = torch.cat([specials, self.frequent, rows[rows >= 0]])
        return torch.unique(chosen)  # sorted: the specials stay first, at their own ids

    def check(self, src_vocab: Vocab, tgt_vocab: Vocab, where: str) -> None:
        """A UserError unless the shortlist was built for these vocabularies."""
        for side, vocab, digest in (("source", src_vocab, self.src_digest), ("target", tgt_vocab, self.tgt_digest)):
            if vocab_digest(vocab) != digest:
                raise UserError(
                    f"{where}: built for another {side} vocabulary than the model's; build it again with "
                    "`attnmt shortlist RUN_DIR`"
                )


def build(
    src_ids: Sequence[Sequence[int]],
    tgt_ids: Sequence[Sequence[int]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    per_source: int = PER_SOURCE,
    frequent: int = FREQUENT,
) -> Shortlist:
    """The shortlist of training pairs given as id sequences (no BOS/EOS)."""
    import numpy as np
    import torch

    if per_source < 1 or frequent < 0:
        raise UserError(f"need per_source >= 1 and frequent >= 0, got {per_source} and {frequent}")
    n_src, n_tgt = len(src_vocab), len(tgt_vocab)
    first = len(SPECIALS)
    src_sets = [np.unique(np.asarray(ids, dtype=np.int64)) for ids in src_ids]
    tgt_sets = [np.unique(np.asarray(ids, dtype=np.int64)) for ids in tgt_ids]
    src_sets = [ids[ids >= first] for ids in src_sets]
    tgt_sets = [ids[ids >= first] for ids in tgt_sets]
    src_count = np.bincount(np.concatenate([*src_sets, np.zeros(0, np.int64)]), minlength=n_src)
    tgt_count = np.bincount(np.concatenate([*tgt_sets, np.zeros(0, np.int64)]), minlength=n_tgt)
    # every (s, t) pair of every sentence, as one key s * V_tgt + t, counted once per sentence
    keys = [(s[:, None] * n_tgt + t[None, :]).ravel() for s, t in zip(src_sets, tgt_sets, strict=True)]
    pair_keys, pair_counts = np.unique(np.concatenate([*keys, np.zeros(0, np.int64)]), return_counts=True)
    pair_src, pair_tgt = pair_keys // n_tgt, pair_keys % n_tgt
    dice = 2.0 * pair_counts / (src_count[pair_src] + tgt_count[pair_tgt])
    # per source token, its pairs by falling Dice (ties: the more frequent target, then the lower id)
    order = np.lexsort((pair_tgt, -tgt_count[pair_tgt], -dice, pair_src))
    pair_src, pair_tgt = pair_src[order], pair_tgt[order]
    starts = np.searchsorted(pair_src, np.arange(n_src))
    rank = np.arange(len(pair_src)) - starts[pair_src]
    kept = rank < per_source
    candidates = np.full((n_src, per_source), -1, dtype=np.int64)
    candidates[pair_src[kept], rank[kept]] = pair_tgt[kept]
    by_frequency = np.lexsort((np.arange(n_tgt), -tgt_count))
    most_frequent = by_frequency[tgt_count[by_frequency] > 0][:frequent]
    most_frequent = most_frequent[most_frequent >= first]
    return Shortlist(
        torch.from_numpy(candidates),
        torch.from_numpy(np.sort(most_frequent)),
        vocab_digest(src_vocab),
        vocab_digest(tgt_vocab),
    )


def save(shortlist: Shortlist, folder: str | os.PathLike) -> Path:
    from safetensors.torch import save as serialize

    path = Path(folder) / FILENAME
    metadata = {"src_digest": shortlist.src_digest, "tgt_digest": shortlist.tgt_digest}
    tensors = {"candidates": shortlist.candidates.contiguous(), "frequent": shortlist.frequent.contiguous()}
    with atomic_path(path) as temporary:
        temporary.write_bytes(serialize(tensors, metadata={"attnmt": json.dumps(metadata)}))
    return path


def load(folder: str | os.PathLike) -> Shortlist | None:
    """The shortlist stored in `folder` (a run or an export), or None when it has none."""
    from safetensors import SafetensorError, safe_open

    path = Path(folder) / FILENAME
    if not path.exists():
        return None
    try:
        with safe_open(path, framework="pt") as opened:
            metadata = json.loads((opened.metadata() or {})["attnmt"])
            candidates, frequent = opened.get_tensor("candidates"), opened.get_tensor("frequent")
        return Shortlist(candidates, frequent, metadata["src_digest"], metadata["tgt_digest"])
    except (OSError, SafetensorError, KeyError, ValueError) as error:
        raise UserError(f"{path}: not a shortlist attnmt can read ({error}); build it again") from None
