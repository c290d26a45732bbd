"""Subword regularization: training sentences segmented anew, at random, each time they are batched.

A subword model segments each word one way, so a model trained on it sees "orangefarbenen"
always as the same pieces. Sampling other segmentations of the same text while training
(Kudo 2018 for unigram models; BPE-dropout, Provilkov et al. 2020, for BPE: each merge dropped
with probability alpha) shows the model how pieces compose, which helps most on small corpora.
Validation, test and translation keep the one deterministic segmentation.

Batches are cut from the usual segmentation's lengths (`TokenBatchSampler`), so a batch of
resampled sentences, a little longer, may exceed `data.batch_tokens` by the pieces the dropout
adds. The draws are SentencePiece's, seeded from (seed, epoch, batch position): a batch is
segmented the same way whenever it is made, so resuming a run stays exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from attnmt.codec import TextCodec
from attnmt.tokenize import SentencePieceTokenizer
from attnmt.vocab import UNK


class Resegmenter:
    """(indices, src_ids, tgt_ids, epoch, position) -> the sentences at `indices` as ids of a random
    segmentation: {index: ids} for each side, to index like the ids themselves."""

    def __init__(self, codec: TextCodec, alpha: float, seed: int):
        if not (
            isinstance(codec.src_tokenizer, SentencePieceTokenizer)
            and isinstance(codec.tgt_tokenizer, SentencePieceTokenizer)
        ):
            raise ValueError("subword sampling needs SentencePiece tokenizers on both sides")
        self.codec, self.alpha, self.seed = codec, alpha, seed

    def __call__(
        self,
        indices: Sequence[int],
        src_ids: Sequence[Sequence[int]],
        tgt_ids: Sequence[Sequence[int]],
        epoch: int,
        position: int,
    ) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        import sentencepiece

        # one seed a batch, below 2**32 as SentencePiece takes it
        sentencepiece.set_random_generator_seed((self.seed * 1_000_003 + epoch * 100_003 + position) % 2**32)
        codec = self.codec
        src_tokenizer, tgt_tokenizer = codec.src_tokenizer, codec.tgt_tokenizer  # SentencePiece's: __init__ checked
        assert isinstance(src_tokenizer, SentencePieceTokenizer) and isinstance(tgt_tokenizer, SentencePieceTokenizer)
        sides = (
            (src_ids, codec.src_vocab, src_tokenizer),
            (tgt_ids, codec.tgt_vocab, tgt_tokenizer),
        )
        src, tgt = ({i: self._resample(ids[i], vocab, tokenizer) for i in indices} for ids, vocab, tokenizer in sides)
        return src, tgt

    def _resample(self, ids: Sequence[int], vocab, tokenizer: SentencePieceTokenizer) -> list[int]:
        ids = [int(i) for i in ids]
        if UNK in ids:  # its text is not known: the pieces stay as they are
            return ids
        return vocab.encode(tokenizer.resample(vocab.decode(ids), self.alpha))
