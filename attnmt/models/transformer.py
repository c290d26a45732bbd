"""The Transformer family (Vaswani et al. 2017): self-attention encoder and decoder layers, and
`Transformer`, the model with the same calls as the recurrent `Seq2Seq`.

    encoder layer:  x <- x + SelfAttention(x)            decoder layer:  y <- y + CausalSelfAttention(y)
                    x <- x + FeedForward(x)                              y <- y + CrossAttention(y, memory)
                                                                         y <- y + FeedForward(y)
    FeedForward(x) = W_2 max(0, W_1 x + b_1) + b_2

Each "+ f(x)" is a residual sublayer with dropout on f's output and a layer norm: before f
(`pre_norm`, x + f(LN(x)), with one more norm after the last layer) or after the sum (post-norm,
LN(x + f(x)), as in the paper). Inputs are embeddings scaled by sqrt(D) plus sinusoidal positions.

Decoding one token at a time keeps each decoder layer's self-attention keys and values of the
positions already decoded (`TransformerState`, the cache), and the cross-attention's keys and
values of the source are projected once per batch (`TransformerSource`), so a step costs one
position's work. Teacher-forced training runs every position at once with a causal mask.

The step's attention over the source is the cross-attention of one decoder layer,
`alignment_layer` (by default the middle one, `middle_layer`), averaged over its heads: what
alignments, markup placement and heatmaps read. `attention_maps` gives every layer and head, for
the explorer.
"""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import torch
from torch import nn

from attnmt.models.decoder import output_logits
from attnmt.models.dropout import WordDropout
from attnmt.models.multihead import MultiHeadAttention, sinusoidal_positions
from attnmt.vocab import PAD


class TransformerSource(NamedTuple):
    """The encoded source batch, computed once and read at every decoding step.

    memory: (B, S, D) the encoder's outputs, zero at padding.
    mask:   (B, S) bool, True at real source positions.
    keys, values: per decoder layer, its cross-attention's projections of `memory` (B, h, S, d_k).
    """

    memory: torch.Tensor
    mask: torch.Tensor
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    def index_select(self, rows: torch.Tensor) -> TransformerSource:
        """Keep, repeat or reorder rows: `rows` (B',) long -> a source of B' rows (beams: B*K)."""
        return TransformerSource(
            self.memory.index_select(0, rows),
            self.mask.index_select(0, rows),
            tuple(k.index_select(0, rows) for k in self.keys),
            tuple(v.index_select(0, rows) for v in self.values),
        )


class TransformerState(NamedTuple):
    """The decoder's cache: per layer, its self-attention's keys and values of the t positions
    decoded so far (B, h, t, d_k). The next position is t."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        return self.keys[0].shape[2]

    def index_select(self, rows: torch.Tensor) -> TransformerState:
        """Keep (and repeat or reorder) rows: `rows` (B',) long -> a state of B' rows, e.g. for beams."""
        return TransformerState(
            tuple(k.index_select(0, rows) for k in self.keys), tuple(v.index_select(0, rows) for v in self.values)
        )


class AttentionMaps(NamedTuple):
    """Every head of every layer for a source and a target it is fed: encoder self-attention
    (B, L_enc, h, S, S), decoder self-attention (B, L_dec, h, T, T), cross-attention (B, L_dec,
    h, T, S); each row sums to 1 and is 0 on padding and, in the decoder, on the future."""

    encoder: torch.Tensor
    decoder: torch.Tensor
    cross: torch.Tensor


class _Residual(nn.Module):
    """One sublayer's residual connection: x + dropout(f(LN(x))) with `pre_norm`, else LN(x + dropout(f(x)))."""

    def __init__(self, model_size: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(model_size)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer reads: LN(x) with pre_norm, else x itself."""
        return self.norm(x) if self.pre_norm else x

    def forward(self, x: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        summed = x + self.dropout(sublayer_output)
        return summed if self.pre_norm else self.norm(summed)


class _FeedForward(nn.Sequential):
    """(B, T, D) -> (B, T, D): W_2 max(0, W_1 x + b_1) + b_2, the inner size F."""

    def __init__(self, model_size: int, inner_size: int):
        super().__init__(nn.Linear(model_size, inner_size), nn.ReLU(), nn.Linear(inner_size, model_size))


class LayerShape(NamedTuple):
    """What every layer of a model shares: the model size D, the heads h, the feed-forward size F,
    the residual and attention dropout, and where the norm goes; it builds their sublayers."""

    model_size: int
    heads: int
    feed_forward: int
    dropout: float
    attention_dropout: float
    pre_norm: bool

    def attention(self) -> MultiHeadAttention:
        return MultiHeadAttention(model_size=self.model_size, heads=self.heads, dropout=self.attention_dropout)

    def residual(self) -> _Residual:
        return _Residual(self.model_size, self.dropout, self.pre_norm)

    def feed_forward_sublayer(self) -> _FeedForward:
        return _FeedForward(self.model_size, self.feed_forward)


class EncoderLayer(nn.Module):
    def __init__(self, shape: LayerShape):
        super().__init__()
        self.self_attention, self.attention_residual = shape.attention(), shape.residual()
        self.feed_forward, self.feed_forward_residual = shape.feed_forward_sublayer(), shape.residual()

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """x (B, S, D), mask (B, 1, S) -> (B, S, D) and the self-attention weights (B, h, S, S) or None."""
        h = self.attention_residual.input(x)
        attended, weights = self.self_attention(h, *self.self_attention.keys_values(h), mask, need_weights=need_weights)
        x = self.attention_residual(x, attended)
        return self.feed_forward_residual(x, self.feed_forward(self.feed_forward_residual.input(x))), weights


class DecoderLayer(nn.Module):
    def __init__(self, shape: LayerShape):
        super().__init__()
        self.self_attention, self.self_residual = shape.attention(), shape.residual()
        self.cross_attention, self.cross_residual = shape.attention(), shape.residual()
        self.feed_forward, self.feed_forward_residual = shape.feed_forward_sublayer(), shape.residual()

    def forward(
        self,
        y,
        cache: tuple[torch.Tensor, torch.Tensor],
        causal,
        source_keys,
        source_values,
        source_mask,
        need_weights=(False, False),
    ):
        """y (B, T, D): the T positions after the cache's t; cache: this layer's self-attention keys
        and values of those t positions (B, h, t, d_k); causal (1, T, t + T) bool or None (T = 1:
        every earlier position); the source's keys and values (B, h, S, d_k) and mask (B, 1, S).
        -> (y (B, T, D), the cache of t + T positions, self weights (B, h, T, t + T) or None,
        cross weights (B, h, T, S) or None), the weights when `need_weights` (self, cross) says."""
        h = self.self_residual.input(y)
        new_keys, new_values = self.self_attention.keys_values(h)  # (B, h, T, d_k)
        keys = torch.cat([cache[0], new_keys], dim=2)  # (B, h, t + T, d_k)
        values = torch.cat([cache[1], new_values], dim=2)
        attended, self_weights = self.self_attention(h, keys, values, causal, need_weights=need_weights[0])
        y = self.self_residual(y, attended)
        attended, cross_weights = self.cross_attention(
            self.cross_residual.input(y), source_keys, source_values, source_mask, need_weights=need_weights[1]
        )
        y = self.cross_residual(y, attended)
        y = self.feed_forward_residual(y, self.feed_forward(self.feed_forward_residual.input(y)))
        return y, (keys, values), self_weights, cross_weights


class TransformerEncoder(nn.Module):
    """The source side: its embedding, its layers and, with pre-norm, the norm after the last
    layer (pre-norm leaves the last residual sum un-normalized; post-norm ends on a norm already)."""

    def __init__(self, embedding: nn.Embedding, layers: list[EncoderLayer], pre_norm: bool):
        super().__init__()
        self.embedding = embedding
        self.layers = cast(list[EncoderLayer], nn.ModuleList(layers))  # a ModuleList, iterated as its layers
        self.norm = nn.LayerNorm(embedding.embedding_dim) if pre_norm else nn.Identity()


class TransformerDecoder(nn.Module):
    """The target side: the encoder's parts and the output layer W_out (V, D)."""

    def __init__(self, embedding: nn.Embedding, layers: list[DecoderLayer], pre_norm: bool):
        super().__init__()
        self.embedding = embedding
        self.layers = cast(list[DecoderLayer], nn.ModuleList(layers))
        self.norm = nn.LayerNorm(embedding.embedding_dim) if pre_norm else nn.Identity()
        self.output = nn.Linear(embedding.embedding_dim, embedding.num_embeddings)


class Transformer(nn.Module):
    """An encoder of `encoder_layers` and a decoder of `decoder_layers` layers over a model size D.

    The calls are `Seq2Seq`'s (see `attnmt.models`): `forward` for training and validation;
    `encode`, `init_state` and `next_log_probs` for the searches. `tie_embeddings` makes the
    output layer read the target embedding matrix; `tie_source_embeddings` the encoder too.
    """

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        model_size: int,
        heads: int,
        feed_forward: int,
        encoder_layers: int,
        decoder_layers: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        word_dropout: float = 0.0,
        pre_norm: bool = True,
        alignment_layer: int | None = None,
        tie_embeddings: bool = False,
        tie_source_embeddings: bool = False,
        padding_idx: int = PAD,
    ):
        super().__init__()
        shape = LayerShape(model_size, heads, feed_forward, dropout, attention_dropout, pre_norm)
        self.model_size, self.heads = model_size, heads
        if alignment_layer is None:
            alignment_layer = middle_layer(decoder_layers)
        self.alignment_layer = range(decoder_layers)[alignment_layer]  # 0-based, a negative index resolved
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = WordDropout(word_dropout)
        self.encoder = TransformerEncoder(
            nn.Embedding(src_vocab_size, model_size, padding_idx=padding_idx),
            [EncoderLayer(shape) for _ in range(encoder_layers)],
            pre_norm,
        )
        self.decoder = TransformerDecoder(
            nn.Embedding(tgt_vocab_size, model_size, padding_idx=padding_idx),
            [DecoderLayer(shape) for _ in range(decoder_layers)],
            pre_norm,
        )
        initialize_transformer(self)
        if tie_source_embeddings:
            if src_vocab_size != tgt_vocab_size:
                raise ValueError(
                    f"tie_source_embeddings needs one vocabulary for both sides, got {src_vocab_size} source and "
                    f"{tgt_vocab_size} target types"
                )
            self.encoder.embedding.weight = self.decoder.embedding.weight
        if tie_embeddings:
            self.decoder.output.weight = self.decoder.embedding.weight

    def _embed(self, embedding: nn.Embedding, tokens: torch.Tensor, first_position: int = 0) -> torch.Tensor:
        """tokens (B, T) -> dropout(sqrt(D) E x + PE) (B, T, D), positions from `first_position`."""
        positions = torch.arange(first_position, first_position + tokens.shape[1], device=tokens.device)
        embedded = self.word_dropout(embedding(tokens)) * math.sqrt(self.model_size)  # (B, T, D)
        return self.dropout(embedded + sinusoidal_positions(positions, self.model_size).to(embedded.dtype))

    def _encode(self, src: torch.Tensor, src_lengths: torch.Tensor, need_weights: bool = False):
        """-> memory (B, S, D) zero at padding, mask (B, S), self-attention weights per layer (or Nones)."""
        assert src.dim() == 2 and src_lengths.shape == src.shape[:1], "src (B, S), src_lengths (B,)"
        positions = torch.arange(src.shape[1], device=src.device)
        mask = positions.unsqueeze(0) < src_lengths.to(src.device).unsqueeze(1)  # (B, S)
        x, all_weights = self._embed(self.encoder.embedding, src), []
        for layer in self.encoder.layers:
            x, weights = layer(x, mask.unsqueeze(1), need_weights)
            all_weights.append(weights)
        memory = self.encoder.norm(x).masked_fill(~mask.unsqueeze(-1), 0.0)  # (B, S, D)
        return memory, mask, all_weights

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> TransformerSource:
        """src (B, S) long, src_lengths (B,) long (each >= 1) -> TransformerSource."""
        memory, mask, _ = self._encode(src, src_lengths)
        projections = [layer.cross_attention.keys_values(memory) for layer in self.decoder.layers]
        return TransformerSource(memory, mask, tuple(k for k, _ in projections), tuple(v for _, v in projections))

    def init_state(self, source: TransformerSource) -> TransformerState:
        """The empty cache: no position decoded yet."""
        empty = source.memory.new_zeros(source.memory.shape[0], self.heads, 0, self.model_size // self.heads)
        return TransformerState((empty,) * len(self.decoder.layers), (empty,) * len(self.decoder.layers))

    def _decode(self, tgt_in, state: TransformerState, source: TransformerSource, need_weights=()):
        """tgt_in (B, T): the T positions after the state's -> (the top layer's normed output (B, T, D),
        the new state, per layer (self weights, cross weights) where `need_weights[layer]` asks)."""
        first, steps = state.length, tgt_in.shape[1]
        causal = None  # one new position may look at every earlier one
        if steps > 1:
            future = torch.arange(first + steps, device=tgt_in.device).unsqueeze(0)  # (1, t + T)
            causal = future <= torch.arange(first, first + steps, device=tgt_in.device).unsqueeze(1)  # (T, t + T)
            causal = causal.unsqueeze(0)  # (1, T, t + T): the same for every sentence
        y, keys, values, weights = self._embed(self.decoder.embedding, tgt_in, first), [], [], []
        source_mask = source.mask.unsqueeze(1)  # (B, 1, S)
        for index, layer in enumerate(self.decoder.layers):
            wanted = need_weights[index] if index < len(need_weights) else (False, False)
            cache = (state.keys[index], state.values[index])
            y, (k, v), self_weights, cross_weights = layer(
                y, cache, causal, source.keys[index], source.values[index], source_mask, wanted
            )
            keys.append(k)
            values.append(v)
            weights.append((self_weights, cross_weights))
        return self.decoder.norm(y), TransformerState(tuple(keys), tuple(values)), weights

    def _alignment_weights(self) -> tuple[tuple[bool, bool], ...]:
        """What `_decode` computes weights of for alignments: the alignment layer's cross-attention."""
        return tuple((False, index == self.alignment_layer) for index in range(len(self.decoder.layers)))

    def next_log_probs(
        self,
        prev_tokens: torch.Tensor,
        state: TransformerState,
        source: TransformerSource,
        vocabulary: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, TransformerState, torch.Tensor]:
        """prev_tokens (B,) long -> (log-probabilities (B, V) float32, new state, attention (B, S));
        with `vocabulary` (V',) target ids, the distribution (B, V') over those only."""
        assert prev_tokens.dim() == 1 and prev_tokens.shape[0] == source.memory.shape[0], "prev_tokens (B,)"
        top, state, weights = self._decode(prev_tokens.unsqueeze(1), state, source, self._alignment_weights())
        logits = output_logits(self.decoder.output, top.squeeze(1), vocabulary)  # (B, V)
        alignment = weights[self.alignment_layer][1]  # (B, h, 1, S)
        return torch.log_softmax(logits.float(), dim=-1), state, alignment.mean(dim=1).squeeze(1)

    def forward(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        teacher_forcing_ratio: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_lengths (B,), tgt_in (B, T) = BOS y_1 ... y_n PAD... -> logits (B, T, V)
        and the alignment layer's cross-attention averaged over heads (B, T, S).

        Every position at once, each seeing only those before it. A transformer is always fed
        the reference (`teacher_forcing_ratio` 1; the config refuses scheduled sampling)."""
        assert tgt_in.dim() == 2 and tgt_in.shape[0] == src.shape[0], f"tgt_in {tuple(tgt_in.shape)}"
        assert teacher_forcing_ratio == 1.0, "a transformer is trained with teacher forcing only"
        source = self.encode(src, src_lengths)
        top, _, weights = self._decode(tgt_in, self.init_state(source), source, self._alignment_weights())
        return self.decoder.output(top), weights[self.alignment_layer][1].mean(dim=1)  # (B, T, V), (B, T, S)

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> AttentionMaps:
        """Every layer's and head's attention while the model reads `src` and is fed `tgt_in` (B, T)."""
        memory, mask, encoder_weights = self._encode(src, src_lengths, need_weights=True)
        projections = [layer.cross_attention.keys_values(memory) for layer in self.decoder.layers]
        source = TransformerSource(memory, mask, tuple(k for k, _ in projections), tuple(v for _, v in projections))
        every = ((True, True),) * len(self.decoder.layers)
        _, _, weights = self._decode(tgt_in, self.init_state(source), source, every)
        return AttentionMaps(
            torch.stack(encoder_weights, dim=1),  # (B, L_enc, h, S, S)
            torch.stack([self_weights for self_weights, _ in weights], dim=1),  # (B, L_dec, h, T, T)
            torch.stack([cross for _, cross in weights], dim=1),  # (B, L_dec, h, T, S)
        )


def middle_layer(layers: int) -> int:
    """The default alignment layer of a decoder of `layers` layers: the middle one, L // 2 from 0.
    Against eflomal's links on Multi30k English->German, the middle layer's heads averaged aligned
    best of every layer's, and the last layer's among the worst (`python -m
    benchmarks.alignment_heads`; docs/design.md, "The Transformer family")."""
    return layers // 2


def initialize_transformer(model: nn.Module) -> None:
    """Glorot-uniform matrices, zero biases, layer norms at identity, embeddings from N(0, 1/D)
    (so that sqrt(D)-scaled they start at unit variance), the PAD rows zero."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=module.embedding_dim**-0.5)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx] = 0.0
