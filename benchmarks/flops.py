"""Analytic FLOP counts of an attnmt model config, and the machine's float32 matmul ceiling.

Only the useful arithmetic is counted: the matrix products the model needs at real (non-pad)
tokens, each done once. One multiply-add is 2 FLOPs; element-wise work (gates, tanh,
softmax, maxout) is left out, as torch's FlopCounterMode leaves it out. Notation as in
STYLE.md: E embedding, H_e encoder hidden per direction, D directions, H_k = D * H_e the
keys (annotations), H decoder hidden, A additive attention size, V target vocabulary, G
gates (3 for a GRU, 4 for an LSTM), L_e / L_d layers. Per sentence of S source and T target
tokens (T counts EOS, the length of tgt_out):

    forward = S * encoder + S * keys + bridge + T * decoder + S * T * pair

    encoder = sum over layers l of D * 2 G H_e (in_l + H_e)     in_0 = E, in_l = H_k
    keys    = 2 A H_k (additive), 2 H H_k (general; dot when H_k != H), else 0
    bridge  = 2 H_k H L_d (tanh bridge), 0 (zeros)
    pair    = 2 A + 2 H_k (additive: v_a . tanh(..), then the weighted sum of keys)
              2 H + 2 H_k (dot, scaled_dot, general: s . k_j, then the weighted sum)
    decoder, Bahdanau: 2 A H (W_q s, additive only)
                       + 2 G H (E + H_k + H) + (L_d - 1) 2 G H (2 H)     the RNN
                       + 2 (H + H_k + E) 2E + 2 E V                     maxout readout, output
    decoder, Luong:    2 G H (E + [H with input feeding] + H) + (L_d - 1) 2 G H (2 H)
                       + 2 A H (additive only) + 2 (H_k + H) H            W_c
                       + [2 H E when tied with H != E] + 2 E' V          output, E' = E tied else H

A training step costs 3 x forward: the backward pass of a matrix product is two products of
the same size (the gradient of the input and of the weight). `tests/test_benchmarks.py`
checks `forward_flops` against torch's FlopCounterMode on unpadded batches, where real and
padded counts agree.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnmt.config import ModelConfig

BACKWARD_FACTOR = 3  # forward + backward (input and weight gradients)


@dataclass(frozen=True)
class FlopRates:
    """Forward FLOPs per real source token, per sentence, per real target token, and per
    (target token, source token) pair: a batch's count is a weighted sum of these."""

    per_source_token: int
    per_sentence: int
    per_target_token: int
    per_pair: int

    def forward(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> int:
        """Forward FLOPs of sentences with these real lengths (targets counting EOS)."""
        total = 0
        for source, target in zip(src_lengths, tgt_lengths, strict=True):
            total += self.per_source_token * source + self.per_sentence + self.per_target_token * target
            total += self.per_pair * source * target
        return total

    def training(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> int:
        return BACKWARD_FACTOR * self.forward(src_lengths, tgt_lengths)


def flop_rates(cfg: ModelConfig, tgt_vocab_size: int) -> FlopRates:
    """The forward FLOP rates of the model `attnmt.models.seq2seq.build_model(cfg, ...)` builds."""
    gates = 3 if cfg.rnn == "gru" else 4
    directions = 2 if cfg.bidirectional else 1
    embedding, encoder_hidden, hidden = cfg.embedding_size, cfg.encoder_hidden, cfg.decoder_hidden
    key_size = encoder_hidden * directions
    attention_size = cfg.attention_size or hidden
    encoder = 0
    for layer in range(cfg.encoder_layers):
        layer_input = embedding if layer == 0 else key_size
        encoder += directions * 2 * gates * encoder_hidden * (layer_input + encoder_hidden)
    if cfg.attention == "additive":
        keys, pair, query = (
            2 * attention_size * key_size,
            2 * attention_size + 2 * key_size,
            2 * attention_size * hidden,
        )
    elif cfg.attention == "none":
        keys, pair, query = 0, 0, 0
    else:
        projects = cfg.attention == "general" or key_size != hidden
        keys, pair, query = (2 * hidden * key_size if projects else 0), 2 * hidden + 2 * key_size, 0
    bridge = 2 * key_size * hidden * cfg.decoder_layers if cfg.bridge == "tanh" else 0
    upper_layers = (cfg.decoder_layers - 1) * 2 * gates * hidden * 2 * hidden
    if cfg.decoder == "bahdanau":
        rnn = 2 * gates * hidden * (embedding + key_size + hidden) + upper_layers
        readout = 2 * (hidden + key_size + embedding) * 2 * embedding + 2 * embedding * tgt_vocab_size
    else:
        feed = hidden if cfg.input_feeding else 0
        rnn = 2 * gates * hidden * (embedding + feed + hidden) + upper_layers
        tied_projection = 2 * hidden * embedding if cfg.tie_embeddings and hidden != embedding else 0
        output_input = embedding if cfg.tie_embeddings else hidden
        readout = 2 * (key_size + hidden) * hidden + tied_projection + 2 * output_input * tgt_vocab_size
    return FlopRates(
        per_source_token=encoder + keys,
        per_sentence=bridge,
        per_target_token=query + rnn + readout,
        per_pair=pair,
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_ceiling(device: torch.device, size: int | None = None, repeats: int = 5) -> float:
    """The best float32 GFLOP/s of a square matmul of `size` at the current thread count.

    Best of `repeats` after one warm-up: a ceiling, not a typical rate. The default size is
    large enough that the product is compute-bound: 2,048 on a CPU, 8,192 on a GPU.
    """
    size = size or (8192 if device.type == "cuda" else 2048)
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(size, size, generator=generator).to(device)
    right = torch.randn(size, size, generator=generator).to(device)
    out = torch.empty(size, size, device=device)
    torch.mm(left, right, out=out)
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(left, right, out=out)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9
