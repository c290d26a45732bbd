"""Parallel text -> token ids -> length-bucketed token batches.

The path data takes: the corpus (`corpora`: its files located once, then read) -> tokenizers
(word or SentencePiece, trained on the train split only) -> vocabularies (train split only) ->
ids, either prepared once on disk and memory-mapped (`prepared_data`, what training reads) or
built in memory (`build_data`, for several runs on one corpus in one process) ->
`TokenBatchSampler` (arrays of example indices, from the sentence lengths alone) -> `collate`
-> `Batch`. Both give the same ids and batches.

Batch order is a pure function of (seed, epoch), so a resumed run continues from
(epoch, batch position) and sees exactly the batches an uninterrupted run would have.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from attnmt.codec import TextCodec, build_tokenizers, build_vocabs
from attnmt.config import DataConfig
from attnmt.data.corpora import load_corpus
from attnmt.data.prepare import GivenCodec, Progress, ensure_prepared
from attnmt.data.splits import CorpusSplits, Example
from attnmt.tokenize import Tokenizer
from attnmt.vocab import BOS, EOS, PAD, Vocab


@dataclass
class Batch:
    """A padded batch. Sources carry no BOS/EOS; targets are shifted for teacher forcing.

    src:         (B, S) long, PAD after each sentence's end
    src_lengths: (B,) long, true source lengths (>= 1)
    tgt_in:      (B, T) long, BOS y_1 ... y_n, PAD
    tgt_out:     (B, T) long, y_1 ... y_n EOS, PAD
    indices:     positions of these sentences in the dataset they came from
    """

    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    indices: list[int]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return Batch(
            src=self.src.to(device, non_blocking=non_blocking),
            src_lengths=self.src_lengths.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
            indices=self.indices,
        )

    def pin_memory(self) -> Batch:
        """The batch in page-locked host memory, from which `to(cuda, non_blocking=True)` copies
        without holding the host."""
        return Batch(
            src=self.src.pin_memory(),
            src_lengths=self.src_lengths.pin_memory(),
            tgt_in=self.tgt_in.pin_memory(),
            tgt_out=self.tgt_out.pin_memory(),
            indices=self.indices,
        )

    @property
    def num_tgt_tokens(self) -> int:
        """Non-pad target tokens (EOS included): the unit of the loss and of throughput."""
        return int((self.tgt_out != PAD).sum())


def pad_sequences(sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists with PAD -> ((N, L) long, lengths (N,) long)."""
    lengths = torch.tensor([len(ids) for ids in sequences], dtype=torch.long)
    padded = torch.full((len(sequences), int(lengths.max()) if len(sequences) else 0), PAD, dtype=torch.long)
    for row, ids in enumerate(sequences):
        padded[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
    return padded, lengths


# Sentences' token ids by index, as `collate` reads them: a split's ids, or the {index: ids} of
# a batch whose sentences were segmented anew (`subwords.Resegmenter`).
IdsByIndex = Sequence[Sequence[int]] | Mapping[int, Sequence[int]]


def collate(indices: Sequence[int], src_ids: IdsByIndex, tgt_ids: IdsByIndex) -> Batch:
    src, src_lengths = pad_sequences([src_ids[i] for i in indices])
    # One padded copy of the targets, shifted both ways: no per-token list is built (the ids of
    # a prepared corpus are numpy arrays, which a list would convert one element at a time).
    targets, tgt_lengths = pad_sequences([tgt_ids[i] for i in indices])  # (B, L), (B,)
    rows = targets.size(0)
    tgt_in = torch.cat([torch.full((rows, 1), BOS, dtype=torch.long), targets], dim=1)
    tgt_out = torch.cat([targets, torch.full((rows, 1), PAD, dtype=torch.long)], dim=1)
    tgt_out[torch.arange(rows), tgt_lengths] = EOS
    return Batch(src=src, src_lengths=src_lengths, tgt_in=tgt_in, tgt_out=tgt_out, indices=list(indices))


def padded_length(src_length: int, tgt_length: int) -> int:
    """Slots one pair takes in a batch: its longer side (the target with its BOS/EOS)."""
    return max(src_length, tgt_length + 1)


def _cut_by_budget(ordered: np.ndarray, padded: np.ndarray, batch_tokens: int, max_sentences: int) -> list[np.ndarray]:
    """Greedily cut an ordered index array into batches whose padded size fits the budget.

    A batch's cost is sentences x longest side (source, or target + 1 for BOS/EOS: `padded`,
    per example), i.e. the padded tensor it becomes. Every sentence must fit the budget alone
    (the sampler leaves out those that do not).
    """
    cuts = []
    size, longest = 0, 0
    for position, length in enumerate(padded[ordered].tolist()):
        grown = max(longest, length)
        if size and (grown * (size + 1) > batch_tokens or size >= max_sentences):
            cuts.append(position)
            size, grown = 0, length
        size += 1
        longest = grown
    return np.split(ordered, cuts) if len(ordered) else []


class TokenBatchSampler:
    """Length-bucketed batches under a token budget, in an order fixed by (seed, epoch).

    Training order: shuffle all examples, cut them into pools of about `pool_batches`
    batches (None: one pool), sort each pool by length (so batches hold similar lengths and little padding),
    cut pools into batches, then shuffle the batches. With `fixed`, the examples are not shuffled
    first: the pools follow the corpus order, so every epoch has the same batches and only their
    order changes (OpenNMT-py batches so). Evaluation order (shuffle=False): sort everything by
    length; callers restore the input order through `Batch.indices`.

    No batch exceeds `batch_tokens`, so a step's memory stays bounded: a pair longer than the
    budget on its own is left out of every batch and listed in `over_budget`.

    Only the lengths are held (two integer arrays), never the sentences: a memory-mapped
    corpus of millions of pairs is batched without being read. The shuffles are Python's
    `random.Random` over lists and the sorts are stable (by source, then target length), so
    an epoch's batches are the same whichever container the lengths came in.
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        *,
        batch_tokens: int,
        max_sentences: int | None = None,
        pool_batches: int | None = 100,
        shuffle: bool = True,
        fixed: bool = False,
        seed: int = 0,
    ) -> None:
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError("src_lengths and tgt_lengths differ in length")
        self.src_lengths = np.asarray(src_lengths, dtype=np.int64)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int64)
        self.padded = np.maximum(self.src_lengths, self.tgt_lengths + 1)  # padded_length of each pair
        self.batch_tokens = batch_tokens
        self.max_sentences = max_sentences or len(self.src_lengths) or 1
        self.pool_batches = pool_batches
        self.shuffle = shuffle
        self.fixed = fixed
        self.seed = seed
        self.over_budget: list[int] = np.flatnonzero(self.padded > batch_tokens).tolist()

    def _sorted(self, indices: np.ndarray) -> np.ndarray:
        """`indices` sorted by (source length, target length), ties kept in order."""
        return indices[np.lexsort((self.tgt_lengths[indices], self.src_lengths[indices]))]

    def _cut(self, ordered: np.ndarray) -> list[np.ndarray]:
        return _cut_by_budget(ordered, self.padded, self.batch_tokens, self.max_sentences)

    def _pool_size(self, kept: np.ndarray) -> int:
        """Examples per pool: `pool_batches` batches of the size a batch of mean-length pairs has,
        `batch_tokens / mean length` sentences or `max_sentences` where that cap binds first (a
        pool measured by tokens alone would cover the whole corpus when batches are cut by
        sentence count under a huge token budget)."""
        if self.pool_batches is None:
            return max(1, len(kept))
        mean_length = max(1.0, int(self.src_lengths[kept].sum()) / max(1, len(kept)))
        if self.max_sentences < self.batch_tokens / mean_length:
            return self.pool_batches * self.max_sentences
        return max(1, int(self.pool_batches * self.batch_tokens / mean_length))

    def epoch_batches(self, epoch: int = 0) -> list[np.ndarray]:
        """All batches of one epoch, as int64 arrays of example indices."""
        kept = np.flatnonzero(self.padded <= self.batch_tokens)
        if not self.shuffle:
            return self._cut(self._sorted(kept))
        rng = random.Random(self.seed * 1_000_003 + epoch)
        if self.fixed:
            pooled = kept  # the corpus order, the same every epoch
        else:
            order = kept.tolist()
            rng.shuffle(order)
            pooled = np.asarray(order, dtype=np.int64)
            del order
        pool_size = self._pool_size(kept)
        batches: list[np.ndarray] = []
        for start in range(0, len(pooled), pool_size):
            batches += self._cut(self._sorted(pooled[start : start + pool_size]))
        rng.shuffle(batches)
        return batches

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """All batches of one epoch, as lists of example indices."""
        return [batch.tolist() for batch in self.epoch_batches(epoch)]

    def iterate(self, start_epoch: int = 0, start_batch: int = 0) -> Iterator[tuple[int, int, list[int]]]:
        """Endless (epoch, position, indices) from a saved position; resuming continues exactly."""
        epoch, first = start_epoch, start_batch
        while True:
            epoch_batches = self.epoch_batches(epoch)
            for position in range(first, len(epoch_batches)):
                yield epoch, position, epoch_batches[position].tolist()
            epoch, first = epoch + 1, 0


@dataclass
class EncodedSplit:
    """Token ids of one split. Each (source, reference) pair is one row for the loss;
    `examples` keeps the multi-reference view for BLEU (empty for a prepared training split,
    whose ids are memory-mapped `TokenArrays` and whose text is not kept)."""

    src_ids: Sequence[Sequence[int]]
    tgt_ids: Sequence[Sequence[int]]
    examples: list[Example]

    def __len__(self) -> int:
        return len(self.src_ids)

    @property
    def src_lengths(self) -> np.ndarray:
        """(N,) int64 source lengths in tokens."""
        return sequence_lengths(self.src_ids)

    @property
    def tgt_lengths(self) -> np.ndarray:
        """(N,) int64 target lengths in tokens (without BOS or EOS)."""
        return sequence_lengths(self.tgt_ids)


def sequence_lengths(ids: Sequence[Sequence[int]]) -> np.ndarray:
    """(N,) int64 lengths of id lists; read from `ids.lengths` where the container keeps them
    (memory-mapped `TokenArrays`, `mixing.ConcatenatedIds`) instead of touching every sentence."""
    if isinstance(lengths := getattr(ids, "lengths", None), np.ndarray):
        return lengths
    return np.fromiter((len(sentence) for sentence in ids), dtype=np.int64, count=len(ids))


@dataclass
class DataBundle:
    splits: CorpusSplits
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    src_vocab: Vocab
    tgt_vocab: Vocab
    train: EncodedSplit
    valid: EncodedSplit
    test: EncodedSplit

    @property
    def codec(self) -> TextCodec:
        return TextCodec(self.src_tokenizer, self.tgt_tokenizer, self.src_vocab, self.tgt_vocab)

    def sampler(self, cfg: DataConfig, *, shuffle: bool, seed: int, split: str = "train") -> TokenBatchSampler:
        return batch_sampler(getattr(self, split), cfg, shuffle=shuffle, seed=seed)


def batch_sampler(encoded: EncodedSplit, cfg: DataConfig, *, shuffle: bool, seed: int) -> TokenBatchSampler:
    """The batches of `encoded` under `cfg`'s budgets (batch_tokens, max_batch_sentences, pools)."""
    return TokenBatchSampler(
        encoded.src_lengths,
        encoded.tgt_lengths,
        batch_tokens=cfg.batch_tokens,
        max_sentences=cfg.max_batch_sentences,
        pool_batches=cfg.bucket_pool_batches,
        shuffle=shuffle,
        fixed=cfg.fixed_batches,
        seed=seed,
    )


def _tokenize_all(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[str]]:
    return [tokenizer.tokenize(text) for text in texts]


def _counts(token_lists: list[list[str]]) -> Counter[str]:
    return Counter(token for tokens in token_lists for token in tokens)


def _encode_examples(
    examples: Sequence[Example], src_tok: Tokenizer, tgt_tok: Tokenizer, src_vocab: Vocab, tgt_vocab: Vocab
) -> EncodedSplit:
    src_ids, tgt_ids = [], []
    for example in examples:
        encoded_src = src_vocab.encode(src_tok.tokenize(example.src))
        for reference in example.refs:
            src_ids.append(encoded_src)
            tgt_ids.append(tgt_vocab.encode(tgt_tok.tokenize(reference)))
    return EncodedSplit(src_ids=src_ids, tgt_ids=tgt_ids, examples=list(examples))


def build_data(cfg: DataConfig) -> DataBundle:
    """Corpus -> tokenizers -> vocabularies -> encoded train/valid/test splits, in memory.
    `prepared_data` gives the same ids and batches from data encoded once on disk."""
    splits = load_corpus(cfg)
    src_tokenizer, tgt_tokenizer = build_tokenizers(cfg, splits.train)
    src_tokens = _tokenize_all(src_tokenizer, [src for src, _ in splits.train])
    tgt_tokens = _tokenize_all(tgt_tokenizer, [tgt for _, tgt in splits.train])
    src_vocab, tgt_vocab = build_vocabs(cfg, _counts(src_tokens), _counts(tgt_tokens), (src_tokenizer, tgt_tokenizer))
    train = EncodedSplit(
        src_ids=[src_vocab.encode(tokens) for tokens in src_tokens],
        tgt_ids=[tgt_vocab.encode(tokens) for tokens in tgt_tokens],
        examples=[Example(src=src, refs=(tgt,)) for src, tgt in splits.train],
    )
    encode = (src_tokenizer, tgt_tokenizer, src_vocab, tgt_vocab)
    return DataBundle(
        splits=splits,
        src_tokenizer=src_tokenizer,
        tgt_tokenizer=tgt_tokenizer,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        train=train,
        valid=_encode_examples(splits.valid, *encode),
        test=_encode_examples(splits.test, *encode),
    )


def prepared_data(
    cfg: DataConfig,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
    given: GivenCodec | None = None,
) -> DataBundle:
    """The data of `cfg` from its prepared dataset (prepared first if there is none): the same
    vocabularies, ids and batches as `build_data`, the training split memory-mapped. `given`:
    the tokenizers and vocabularies to encode with (a continued run's) instead of its own."""
    prepared = ensure_prepared(cfg, workers=workers, progress=progress, say=say, given=given)
    codec = prepared.codec
    encode = (codec.src_tokenizer, codec.tgt_tokenizer, codec.src_vocab, codec.tgt_vocab)
    manifest = prepared.manifest
    # The training ids are memory-mapped TokenArrays: sequences of id rows, though not declared as such
    train_src = cast("Sequence[Sequence[int]]", prepared.train_src)
    train_tgt = cast("Sequence[Sequence[int]]", prepared.train_tgt)
    splits = CorpusSplits(
        [],
        prepared.valid,
        prepared.test,
        manifest["corpus"],
        manifest["attribution"],
        prepared.raw_pairs,
        prepared.dropped,
    )
    return DataBundle(
        splits=splits,
        src_tokenizer=codec.src_tokenizer,
        tgt_tokenizer=codec.tgt_tokenizer,
        src_vocab=codec.src_vocab,
        tgt_vocab=codec.tgt_vocab,
        train=EncodedSplit(train_src, train_tgt, examples=[]),
        valid=_encode_examples(prepared.valid, *encode),
        test=_encode_examples(prepared.test, *encode),
    )
