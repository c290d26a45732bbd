"""The models and data the speed benchmarks share: three model configs (d2l.ai's, JoeyNMT's RNN
and a Luong decoder without input feeding), each built as an attnmt model and as every
reference (`benchmarks.references`) that can express it, all with the very same initial
weights; and the Multi30k data they train on.
"""

from __future__ import annotations

import torch

from attnmt.config import DataConfig, ModelConfig
from attnmt.models.seq2seq import build_model
from benchmarks.references import references_for

# Glorot, as the committed results were made: untrained decoding's output lengths depend on it.
SIZES = {
    "embedding_size": 256,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "rnn": "gru",
    "bridge": "tanh",
    "init": "xavier",
}
CONFIGS: dict[str, dict] = {
    # d2l.ai's Seq2SeqAttentionDecoder: 2-layer unidirectional GRU encoder and decoder, 256 wide.
    "d2l": {
        **SIZES,
        "encoder_hidden": 256,
        "encoder_layers": 2,
        "bidirectional": False,
        "decoder_hidden": 256,
        "decoder_layers": 2,
        "attention": "additive",
        "decoder": "bahdanau",
    },
    # JoeyNMT 2.3's RNN: bidirectional GRU 256 per direction, GRU decoder 512, Bahdanau attention.
    "joey": {
        **SIZES,
        "encoder_hidden": 256,
        "bidirectional": True,
        "decoder_hidden": 512,
        "attention": "additive",
        "decoder": "bahdanau",
    },
    # Luong general attention without input feeding: the decoder RNN runs over the whole target at once.
    "luong-fast": {
        **SIZES,
        "encoder_hidden": 256,
        "bidirectional": True,
        "decoder_hidden": 512,
        "attention": "general",
        "decoder": "luong",
        "input_feeding": False,
    },
}
DATA = DataConfig(corpus="multi30k", src_lang="en", tgt_lang="de", tokenizer="word", lowercase=True, min_freq=2)
CORPUS = "Multi30k en-de train, word tokens, lowercased, min_freq 2"


def model_config(name: str, dropout: float) -> ModelConfig:
    return ModelConfig(**CONFIGS[name], dropout=dropout)


def build_models(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, device, seed: int) -> dict:
    """An attnmt model and every reference that can express `cfg`, with the very same initial weights."""
    torch.manual_seed(seed)
    model = build_model(cfg, src_vocab_size, tgt_vocab_size)
    references = references_for(cfg, model, src_vocab_size, tgt_vocab_size)
    return {name: module.to(device) for name, module in {"attnmt": model, **references}.items()}
