"""The arithmetic each system's model does per target token, from the one FLOP formula.

Every system's architecture is written as the attnmt `ModelConfig` with the same matrix
products (`PeerSystem.arithmetic_shapes`), and `benchmarks.flops.flop_rates` counts them on the
benchmark's training split: forward FLOPs per real target token (EOS included), with the source
side and the attention's (target, source) pairs spread over the target tokens. Dividing a
measured throughput by it says how fast each system computes, apart from how much it computes.
"""

from __future__ import annotations

from collections import Counter

from attnmt.config import ModelConfig
from benchmarks.flops import BACKWARD_FACTOR, flop_rates
from benchmarks.peers.system import PeerSystem, Setup

SPECIAL_TOKENS = 4  # every system's vocabulary: the kept types plus four specials (pad or blank, unk, bos, eos)


def input_feeding_mlp_shapes(setup: Setup, *, bridge: str) -> ModelConfig:
    """The peers' model at the Setup's sizes: a Luong-style step with input feeding whose new state
    queries MLP attention of the decoder's size, the attentional vector [c; h] -> decoder size
    read by the output layer; `bridge` tanh (JoeyNMT) or copy (OpenNMT-py: the decoder starts
    from the encoder's final states)."""
    return ModelConfig(
        rnn="gru",
        embedding_size=setup.embedding_size,
        encoder_hidden=setup.encoder_hidden,
        decoder_hidden=setup.decoder_hidden,
        decoder="luong",
        input_feeding=True,
        attention="additive",
        bridge=bridge,
        dropout=setup.dropout,
    )


def target_vocabulary_size(setup: Setup) -> int:
    """Types seen at least `setup.min_freq` times in the training targets, plus the four specials."""
    counts = Counter(setup.file("train", setup.tgt_lang).read_text(encoding="utf-8").split())
    return sum(1 for count in counts.values() if count >= setup.min_freq) + SPECIAL_TOKENS


def token_lengths(system: PeerSystem, sources: list[str], targets: list[str]) -> tuple[list[int], list[int]]:
    """The lengths `benchmarks.flops` counts for lines of word tokens: each source with the tokens
    the system appends to it, each target with its EOS."""
    return [len(line.split()) + system.source_extra_tokens for line in sources], [
        len(line.split()) + 1 for line in targets
    ]


def arithmetic(system: PeerSystem, setup: Setup) -> dict:
    """Forward and training FLOPs per target token of `system`'s model on the training split."""
    shapes = system.arithmetic_shapes(setup)
    vocabulary = target_vocabulary_size(setup)
    rates = flop_rates(shapes, vocabulary)
    sources = setup.file("train", setup.src_lang).read_text(encoding="utf-8").splitlines()
    targets = setup.file("train", setup.tgt_lang).read_text(encoding="utf-8").splitlines()
    src_lengths, tgt_lengths = token_lengths(system, sources, targets)
    forward = rates.forward(src_lengths, tgt_lengths) / sum(tgt_lengths)
    return {
        "forward_flops_per_target_token": round(forward),
        "training_flops_per_target_token": round(BACKWARD_FACTOR * forward),
        "target_vocabulary": vocabulary,
        "shapes": shapes.model_dump(
            include={"embedding_size", "encoder_hidden", "decoder_hidden", "attention", "attention_size", "decoder"}
            | {"input_feeding", "bridge", "tie_embeddings"}
        ),
    }
