"""`TextCodec`: text <-> token ids for one translation direction, and how one is built from the
training pairs (tokenizers, then vocabularies from token counts).

The tokenizers and vocabularies travel together: saved into (and loaded from) a run
directory or a prepared dataset, under the same file names. No torch.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.config import DataConfig
from attnmt.tokenize import SentencePieceTokenizer, Tokenizer, WordTokenizer, train_sentencepiece
from attnmt.utils import UserError, atomic_path, cache_root
from attnmt.vocab import SPECIALS, Vocab


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

    def digest(self) -> str:
        """A hash of what turns text into ids: the vocabularies and any SentencePiece models."""
        parts = [json.dumps([self.src_vocab.tokens, self.tgt_vocab.tokens])]
        for tokenizer in (self.src_tokenizer, self.tgt_tokenizer):
            if isinstance(tokenizer, SentencePieceTokenizer):
                parts.append(hashlib.sha256(Path(tokenizer.model_path).read_bytes()).hexdigest())
            parts.append(f"{type(tokenizer).__name__}:{getattr(tokenizer, 'lowercase', None)}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

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


def sample_pairs(pairs: Iterable[tuple[str, str]], limit: int, seed: int) -> list[tuple[str, str]]:
    """At most `limit` of `pairs`, read once: all of them, in order, when there are no more than
    `limit`; else a uniform random sample (reservoir sampling seeded by `seed`), so a tokenizer
    of a corpus of any size trains on a bounded sample without the corpus held in memory."""
    sample: list[tuple[str, str]] = []
    rng = random.Random(seed)
    for seen, pair in enumerate(pairs):
        if seen < limit:
            sample.append(pair)
        elif (slot := rng.randrange(seen + 1)) < limit:
            sample[slot] = pair
    return sample


def build_tokenizers(cfg: DataConfig, train_pairs: Iterable[tuple[str, str]]) -> tuple[Tokenizer, Tokenizer]:
    """Word tokenizers from config, or SentencePiece models trained on the train split only (on
    at most data.tokenizer_sample of its pairs, drawn at random when it has more)."""
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

    sample = sample_pairs(train_pairs, cfg.tokenizer_sample, cfg.split_seed)
    sources = [prepare(src) for src, _ in sample]
    targets = [prepare(tgt) for _, tgt in sample]
    if cfg.shared_vocab:
        joint = train(sources + targets)
        return joint, joint
    return train(sources), train(targets)


def build_vocabs(
    cfg: DataConfig,
    src_counts: Counter[str],
    tgt_counts: Counter[str],
    tokenizers: tuple[Tokenizer, Tokenizer] | None = None,
) -> tuple[Vocab, Vocab]:
    """Vocabularies from the token counts of the training pairs only; one shared vocabulary if
    configured. A vocabulary left without a real token (a min_freq above every count) would
    train a useless model in silence: it is a UserError naming the setting. With subword
    sampling, every piece of each side's SentencePiece model (`tokenizers`) follows the counted
    ones: a random segmentation may use pieces the usual one never does, which would otherwise
    be unknown."""
    sides = {"shared": src_counts + tgt_counts} if cfg.shared_vocab else {"source": src_counts, "target": tgt_counts}
    vocabs = {}
    for side, counts in sides.items():
        vocabs[side] = Vocab.from_counts(counts, min_freq=cfg.min_freq, max_size=cfg.max_vocab_size)
        if len(vocabs[side]) == len(SPECIALS):
            most = max(counts.values(), default=0)
            raise UserError(
                f"data.min_freq: {cfg.min_freq} leaves the {side} vocabulary without a single token "
                f"(the most frequent training token occurs {most:,} times); lower data.min_freq"
            )
    if cfg.subword_sampling > 0 and tokenizers is not None:
        sides_of = ("shared",) if cfg.shared_vocab else ("source", "target")
        models = dict(zip(sides_of, tokenizers[: len(sides_of)], strict=True))
        for side, tokenizer in models.items():
            if isinstance(tokenizer, SentencePieceTokenizer):
                known = set(vocabs[side].tokens)
                unseen = [piece for piece in tokenizer.pieces() if piece not in known and piece not in SPECIALS]
                vocabs[side] = Vocab(vocabs[side].tokens + tuple(unseen))
    return (vocabs["shared"], vocabs["shared"]) if cfg.shared_vocab else (vocabs["source"], vocabs["target"])


def extend_vocabs(
    cfg: DataConfig, codec: TextCodec, src_counts: Counter[str], tgt_counts: Counter[str]
) -> tuple[Vocab, Vocab]:
    """`codec`'s vocabularies (word tokens) with the tokens of a new corpus they lack, counted at
    least `data.min_freq` times, appended most frequent first: every trained id keeps its token."""

    def grown(vocab: Vocab, counts: Counter[str]) -> Vocab:
        new = Vocab.from_counts(counts, min_freq=cfg.min_freq).tokens[len(SPECIALS) :]
        return Vocab(vocab.tokens + tuple(token for token in new if token not in vocab))

    if cfg.shared_vocab:
        shared = grown(codec.src_vocab, src_counts + tgt_counts)
        return shared, shared
    return grown(codec.src_vocab, src_counts), grown(codec.tgt_vocab, tgt_counts)
