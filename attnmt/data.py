"""Parallel text -> token ids -> length-bucketed token batches.

The one path data takes: `corpora.load_corpus` (text splits) -> tokenizers (word or
SentencePiece, trained on the train split only) -> vocabularies (train split only) ->
`TokenBatchSampler` (lists of example indices) -> `collate` -> `Batch`.

Batch order is a pure function of (seed, epoch), so a resumed run continues from
(epoch, batch position) and sees exactly the batches an uninterrupted run would have.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from attnmt.config import DataConfig
from attnmt.corpora import CorpusSplits, Example, load_corpus
from attnmt.download import cache_root
from attnmt.tokenize import SentencePieceTokenizer, Tokenizer, WordTokenizer, train_sentencepiece
from attnmt.utils import UserError, atomic_path
from attnmt.vocab import BOS, EOS, PAD, SPECIALS, Vocab


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


def collate(indices: Sequence[int], src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]]) -> Batch:
    src, src_lengths = pad_sequences([src_ids[i] for i in indices])
    tgt_in, _ = pad_sequences([[BOS, *tgt_ids[i]] for i in indices])
    tgt_out, _ = pad_sequences([[*tgt_ids[i], EOS] for i in indices])
    return Batch(src=src, src_lengths=src_lengths, tgt_in=tgt_in, tgt_out=tgt_out, indices=list(indices))


def padded_length(src_length: int, tgt_length: int) -> int:
    """Slots one pair takes in a batch: its longer side (the target with its BOS/EOS)."""
    return max(src_length, tgt_length + 1)


def _cut_by_budget(
    ordered: Sequence[int],
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int],
    batch_tokens: int,
    max_sentences: int,
) -> list[list[int]]:
    """Greedily cut an ordered index list into batches whose padded size fits the budget.

    A batch's cost is sentences x longest side (source, or target + 1 for BOS/EOS), i.e. the
    padded tensor it becomes. Every sentence must fit the budget alone (the sampler leaves out
    those that do not).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in ordered:
        length = padded_length(src_lengths[index], tgt_lengths[index])
        grown = max(longest, length)
        if current and (grown * (len(current) + 1) > batch_tokens or len(current) >= max_sentences):
            batches.append(current)
            current, grown = [], length
        current.append(index)
        longest = grown
    if current:
        batches.append(current)
    return batches


class TokenBatchSampler:
    """Length-bucketed batches under a token budget, in an order fixed by (seed, epoch).

    Training order: shuffle all examples, cut them into pools of about `pool_batches`
    batches, sort each pool by length (so batches hold similar lengths and little padding),
    cut pools into batches, then shuffle the batches. Evaluation order (shuffle=False): sort
    everything by length; callers restore the input order through `Batch.indices`.

    No batch exceeds `batch_tokens`, so a step's memory stays bounded: a pair longer than the
    budget on its own is left out of every batch and listed in `over_budget`.
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        *,
        batch_tokens: int,
        max_sentences: int | None = None,
        pool_batches: int = 100,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError("src_lengths and tgt_lengths differ in length")
        self.src_lengths = list(src_lengths)
        self.tgt_lengths = list(tgt_lengths)
        self.batch_tokens = batch_tokens
        self.max_sentences = max_sentences or len(self.src_lengths) or 1
        self.pool_batches = pool_batches
        self.shuffle = shuffle
        self.seed = seed
        self.over_budget = [
            index
            for index, (src, tgt) in enumerate(zip(self.src_lengths, self.tgt_lengths, strict=True))
            if padded_length(src, tgt) > batch_tokens
        ]

    def _key(self, index: int) -> tuple[int, int]:
        return (self.src_lengths[index], self.tgt_lengths[index])

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """All batches of one epoch, as lists of example indices."""
        left_out = set(self.over_budget)
        indices = [index for index in range(len(self.src_lengths)) if index not in left_out]
        if not self.shuffle:
            indices.sort(key=self._key)
            return _cut_by_budget(indices, self.src_lengths, self.tgt_lengths, self.batch_tokens, self.max_sentences)
        rng = random.Random(self.seed * 1_000_003 + epoch)
        rng.shuffle(indices)
        mean_length = max(1.0, sum(self.src_lengths[index] for index in indices) / max(1, len(indices)))
        pool_size = max(1, int(self.pool_batches * self.batch_tokens / mean_length))
        batches: list[list[int]] = []
        for start in range(0, len(indices), pool_size):
            pool = sorted(indices[start : start + pool_size], key=self._key)
            batches += _cut_by_budget(pool, self.src_lengths, self.tgt_lengths, self.batch_tokens, self.max_sentences)
        rng.shuffle(batches)
        return batches

    def iterate(self, start_epoch: int = 0, start_batch: int = 0) -> Iterator[tuple[int, int, list[int]]]:
        """Endless (epoch, position, indices) from a saved position; resuming continues exactly."""
        epoch, first = start_epoch, start_batch
        while True:
            epoch_batches = self.batches(epoch)
            for position in range(first, len(epoch_batches)):
                yield epoch, position, epoch_batches[position]
            epoch, first = epoch + 1, 0


@dataclass
class EncodedSplit:
    """Token ids of one split. Each (source, reference) pair is one row for the loss;
    `examples` keeps the multi-reference view for BLEU."""

    src_ids: list[list[int]]
    tgt_ids: list[list[int]]
    examples: list[Example]

    def __len__(self) -> int:
        return len(self.src_ids)


@dataclass
class TextCodec:
    """Text <-> ids for one translation direction: the tokenizers and vocabularies a model was
    trained with. Saved into, and loaded from, the run directory."""

    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    src_vocab: Vocab
    tgt_vocab: Vocab

    def source_tokens(self, text: str) -> list[str]:
        return self.src_tokenizer.tokenize(text)

    def encode_source(self, text: str) -> list[int]:
        return self.src_vocab.encode(self.src_tokenizer.tokenize(text))

    def encode_target(self, text: str) -> list[int]:
        return self.tgt_vocab.encode(self.tgt_tokenizer.tokenize(text))

    def target_tokens(self, ids: Sequence[int]) -> list[str]:
        return self.tgt_vocab.decode(ids)

    def decode_target(self, ids: Sequence[int]) -> str:
        """Target ids -> natural text (detokenized), the form BLEU and users see."""
        return self.tgt_tokenizer.detokenize(self.tgt_vocab.decode(ids))

    def save(self, run_dir: str | Path) -> None:
        run_dir = Path(run_dir)
        self.src_vocab.save(run_dir / "src.vocab.json")
        self.tgt_vocab.save(run_dir / "tgt.vocab.json")
        for side, tokenizer in (("src", self.src_tokenizer), ("tgt", self.tgt_tokenizer)):
            if isinstance(tokenizer, SentencePieceTokenizer):
                with atomic_path(run_dir / f"{side}.spm.model") as tmp:
                    shutil.copyfile(tokenizer.model_path, tmp)

    @classmethod
    def load(cls, run_dir: str | Path, cfg: DataConfig) -> TextCodec:
        run_dir = Path(run_dir)
        if cfg.tokenizer == "word":
            src_tok: Tokenizer = WordTokenizer(cfg.src_lang, lowercase=cfg.lowercase)
            tgt_tok: Tokenizer = WordTokenizer(cfg.tgt_lang, lowercase=cfg.lowercase)
        else:
            src_tok = SentencePieceTokenizer(run_dir / "src.spm.model", lowercase=cfg.lowercase)
            tgt_tok = SentencePieceTokenizer(run_dir / "tgt.spm.model", lowercase=cfg.lowercase)
        return cls(src_tok, tgt_tok, Vocab.load(run_dir / "src.vocab.json"), Vocab.load(run_dir / "tgt.vocab.json"))


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
        encoded: EncodedSplit = getattr(self, split)
        return TokenBatchSampler(
            [len(ids) for ids in encoded.src_ids],
            [len(ids) for ids in encoded.tgt_ids],
            batch_tokens=cfg.batch_tokens,
            max_sentences=cfg.max_batch_sentences,
            pool_batches=cfg.bucket_pool_batches,
            shuffle=shuffle,
            seed=seed,
        )


def build_tokenizers(cfg: DataConfig, train_pairs: Sequence[tuple[str, str]]) -> tuple[Tokenizer, Tokenizer]:
    """Word tokenizers from config, or SentencePiece models trained on the train split only."""
    if cfg.tokenizer == "word":
        return (
            WordTokenizer(cfg.src_lang, lowercase=cfg.lowercase),
            WordTokenizer(cfg.tgt_lang, lowercase=cfg.lowercase),
        )
    spm_dir = cache_root() / "sentencepiece"

    def prepare(text: str) -> str:
        return text.lower() if cfg.lowercase else text

    def train(sentences: list[str]) -> SentencePieceTokenizer:
        model_path = train_sentencepiece(
            sentences, vocab_size=cfg.spm_vocab_size, model_type=cfg.spm_model_type, cache_dir=spm_dir
        )
        return SentencePieceTokenizer(model_path, lowercase=cfg.lowercase)

    sources = [prepare(src) for src, _ in train_pairs]
    targets = [prepare(tgt) for _, tgt in train_pairs]
    if cfg.shared_vocab:
        joint = train(sources + targets)
        return joint, joint
    return train(sources), train(targets)


def _tokenize_all(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[str]]:
    return [tokenizer.tokenize(text) for text in texts]


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


def build_vocabs(cfg: DataConfig, src_tokens: list[list[str]], tgt_tokens: list[list[str]]) -> tuple[Vocab, Vocab]:
    """Vocabularies from training tokens only; one shared vocabulary if configured. A vocabulary
    left without a real token (a min_freq above every count) would train a useless model in
    silence: it is a UserError naming the setting."""
    sides = {"shared": src_tokens + tgt_tokens} if cfg.shared_vocab else {"source": src_tokens, "target": tgt_tokens}
    vocabs = {}
    for side, tokens in sides.items():
        vocabs[side] = Vocab.build(tokens, min_freq=cfg.min_freq, max_size=cfg.max_vocab_size)
        if len(vocabs[side]) == len(SPECIALS):
            counts = Counter(token for sentence in tokens for token in sentence)
            most = max(counts.values(), default=0)
            raise UserError(
                f"data.min_freq: {cfg.min_freq} leaves the {side} vocabulary without a single token "
                f"(the most frequent training token occurs {most:,} times); lower data.min_freq"
            )
    return (vocabs["shared"], vocabs["shared"]) if cfg.shared_vocab else (vocabs["source"], vocabs["target"])


def build_data(cfg: DataConfig, data_dir: str | Path | None = None) -> DataBundle:
    """Corpus -> tokenizers -> vocabularies -> encoded train/valid/test splits."""
    splits = load_corpus(cfg, data_dir=str(data_dir) if data_dir is not None else None)
    src_tokenizer, tgt_tokenizer = build_tokenizers(cfg, splits.train)
    src_tokens = _tokenize_all(src_tokenizer, [src for src, _ in splits.train])
    tgt_tokens = _tokenize_all(tgt_tokenizer, [tgt for _, tgt in splits.train])
    src_vocab, tgt_vocab = build_vocabs(cfg, src_tokens, tgt_tokens)
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
