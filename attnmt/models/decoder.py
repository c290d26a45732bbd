"""Bahdanau- and Luong-style decoders, the bridge that starts them, and their state.

Both decoders have the same calls, so the model and the search treat them alike:

- `init_state(encoder_hidden (L_enc, B, H_enc)) -> DecoderState`
- `step(prev_tokens (B,), state, source) -> (logits (B, V), state, weights (B, S))`: the one
  step used by sampled training (teacher forcing below 1), greedy and beam search.
- `forward(tgt_in (B, T), state, source, *, teacher_forcing_ratio, generator)
  -> (logits (B, T, V), weights (B, T, S))`.

`source` is the `EncoderOutput` of the batch: the encoder's annotations, their mask and what
the attention's `project_keys` made of them once per batch.

Speed by construction. Where no step depends on attention through recurrence (Luong without
input feeding; no attention at all) the whole target runs in one RNN call and one batched
attention; otherwise the teacher-forced loop projects all target embeddings through the RNN's
input weights at once and steps through the gate equations of `attnmt.models.rnn`, and the output
layers run once over (B, T) after the loop: a step does only what depends on the previous state.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as Int8Linear  # what quantize.quantize_model makes of nn.Linear

from attnmt.models.dropout import LockedDropout, WordDropout
from attnmt.models.rnn import full_sequence, make_rnn, rnn_step, split_input_weight
from attnmt.vocab import PAD


class EncoderOutput(NamedTuple):
    """The encoded source batch, computed once and read at every decoding step.

    memory:         (B, S, H_enc) the annotations, zero at padding.
    mask:           (B, S) bool, True at real source positions.
    projected_keys: the attention's key-side projection of `memory` (e.g. (B, S, A) for
                    additive), made once per batch so no step recomputes it.
    final_hidden:   (L_enc, B, H_enc) the encoder's final states, [forward; backward] per layer.
    """

    memory: torch.Tensor
    mask: torch.Tensor
    projected_keys: torch.Tensor
    final_hidden: torch.Tensor

    def index_select(self, rows: torch.Tensor) -> EncoderOutput:
        """Keep, repeat or reorder rows: `rows` (B',) long -> an output of B' rows (beams: B*K)."""
        return EncoderOutput(
            self.memory.index_select(0, rows),
            self.mask.index_select(0, rows),
            self.projected_keys.index_select(0, rows),
            self.final_hidden.index_select(1, rows),
        )


class DecoderState(NamedTuple):
    """What a decoder carries from one step to the next; rows are sentences (or hypotheses).

    hidden: (L, B, H) every layer's state; the attention query is the top layer, hidden[-1].
    cell:   (L, B, H) an LSTM's cell state; None for a GRU.
    feed:   (B, H) Luong's previous attentional vector h~_{t-1} with input feeding; else None.
    """

    hidden: torch.Tensor
    cell: torch.Tensor | None
    feed: torch.Tensor | None

    def index_select(self, rows: torch.Tensor) -> DecoderState:
        """Keep (and repeat or reorder) rows: `rows` (B',) long -> a state of B' rows, e.g. for beams."""
        return DecoderState(
            self.hidden.index_select(1, rows),
            None if self.cell is None else self.cell.index_select(1, rows),
            None if self.feed is None else self.feed.index_select(0, rows),
        )


def _sampled_forward(decoder, tgt_in, state, source, teacher_forcing_ratio, generator):
    """Training with teacher forcing below 1, step by step through `decoder.step`.

    At each step t > 0 each sentence draws its own coin, as in scheduled sampling (Bengio et al.
    2015): with probability `teacher_forcing_ratio` it is fed the gold token tgt_in[:, t],
    otherwise the model's own argmax from step t - 1 (what greedy decoding would feed). Per
    sentence rather than one coin per batch: every step then mixes both regimes, a lower-variance
    signal than all-or-nothing steps. Step 0 is always fed tgt_in[:, 0] (BOS). The
    coins come from `generator` (on tgt_in's device) or torch's global RNG, so seeded runs repeat;
    they stay on the device, with no host sync in the loop. Returns (B, T, V) and (B, T, S).
    """
    batch_size, steps = tgt_in.shape
    gold = None
    if teacher_forcing_ratio > 0.0:
        coins = torch.rand(batch_size, steps, generator=generator, device=tgt_in.device)
        gold = coins < teacher_forcing_ratio  # (B, T)
    tokens = tgt_in[:, 0]
    all_logits: list[torch.Tensor] = []
    all_weights: list[torch.Tensor] = []
    for t in range(steps):
        if t > 0:
            predicted = all_logits[-1].argmax(dim=-1)  # (B,)
            tokens = predicted if gold is None else torch.where(gold[:, t], tgt_in[:, t], predicted)
        logits, state, weights = decoder.step(tokens, state, source)
        all_logits.append(logits)
        all_weights.append(weights)
    return torch.stack(all_logits, dim=1), torch.stack(all_weights, dim=1)  # (B, T, V), (B, T, S)


def output_logits(layer: nn.Linear | Int8Linear, inputs: torch.Tensor, vocabulary: torch.Tensor | None) -> torch.Tensor:
    """The output layer `layer` on inputs (..., E): logits (..., V), or with `vocabulary` (V',)
    target ids those rows of it only, (..., V'): a shortlist computes V' rows instead of V.
    A dynamically quantized layer (int8) gives its rows as float32, dequantized once and kept.
    Under no_grad the gathered rows are kept for the next call with the same `vocabulary`
    tensor (a search gives one per batch), so each batch gathers them once, not every step."""
    if vocabulary is None:
        return layer(inputs)
    tracing = torch.compiler.is_compiling() or torch.jit.is_tracing()  # an export: no state on the module
    cached = None if tracing else getattr(layer, "_shortlist_rows", None)
    if cached is not None and cached[0] is vocabulary:  # the batch's rows, gathered at its first step
        return F.linear(inputs, cached[1], cached[2])
    if callable(layer.weight):  # torch.ao's dynamic quantized Linear: weight() and bias() are methods
        if (float_rows := getattr(layer, "_float_rows", None)) is None:
            float_rows = layer._float_rows = (layer.weight().dequantize(), layer.bias())  # type: ignore[assignment]  # torch's stub: Module.__setattr__ takes tensors and modules only
        weight, bias = float_rows
    else:
        weight, bias = layer.weight, layer.bias
    rows = (weight.index_select(0, vocabulary), bias.index_select(0, vocabulary))
    if not tracing and not torch.is_grad_enabled():  # decoding: the same rows serve every step of the batch
        layer._shortlist_rows = (vocabulary, *rows)  # type: ignore[assignment]  # torch's stub: Module.__setattr__ takes tensors and modules only
    return F.linear(inputs, *rows)


class Bridge(nn.Module):
    """The decoder's initial hidden state from the encoder's final one (L_enc, B, H_enc) -> (L, B, H).

    tanh: s_0 = tanh(W_b h_final + b_b), the final state being [h_forward_S; h_backward_1] for
    a bidirectional encoder. Bahdanau et al. (2015) use h_backward_1 alone; theirs is the case
    where W_b ignores the forward half, which this can learn. With L_enc == L, decoder layer i
    starts from encoder layer i; otherwise every decoder layer starts from the encoder's top
    layer. One W_b serves all layers. copy: s_0 = h_final itself, layer by layer in the same way,
    no parameters (OpenNMT-py's default start; needs H == H_enc). zeros: s_0 = 0. An LSTM's
    initial cell is always zero: the encoder's information enters through s_0 and the gates, and
    a cell state, unbounded, is not something a tanh layer should produce.
    """

    def __init__(self, *, encoder_size: int, decoder_size: int, decoder_layers: int, kind: str = "tanh"):
        super().__init__()
        if kind not in ("tanh", "copy", "zeros"):
            raise ValueError(f"unknown bridge {kind!r}; expected tanh, copy or zeros")
        if kind == "copy" and encoder_size != decoder_size:
            raise ValueError(
                f"a copy bridge needs the decoder size {decoder_size} to equal the encoder's {encoder_size}"
            )
        self.kind, self.decoder_size, self.decoder_layers = kind, decoder_size, decoder_layers
        self.projection = nn.Linear(encoder_size, decoder_size) if kind == "tanh" else None

    def forward(self, encoder_hidden: torch.Tensor) -> torch.Tensor:
        """encoder_hidden (L_enc, B, H_enc) -> initial decoder hidden (L, B, H)."""
        encoder_layers, batch_size, _ = encoder_hidden.shape
        if self.kind == "zeros":
            return encoder_hidden.new_zeros(self.decoder_layers, batch_size, self.decoder_size)
        if encoder_layers != self.decoder_layers:
            encoder_hidden = encoder_hidden[-1:].expand(self.decoder_layers, -1, -1)  # (L, B, H_enc)
        if self.kind == "copy":
            return encoder_hidden.contiguous()  # (L, B, H), H == H_enc
        assert self.projection is not None  # kind "tanh", the one with a projection
        return torch.tanh(self.projection(encoder_hidden))  # (L, B, H)


class BahdanauDecoder(nn.Module):
    """Bahdanau et al. (2015): attend with the previous state, then update it.

        c_t = attention(s_{t-1}, h)                       s_{t-1}: top layer's previous state
        s_t = RNN(s_{t-1}, [E y_{t-1}; c_t])
        t~_t = W_o [s_t; c_t; E y_{t-1}] + b_o            (B, 2E)
        t_t = maxout(t~_t) = max over adjacent pairs      (B, E)
        logits_t = W_out dropout(t_t) + b_out             (B, V)

    The deep output with maxout follows the paper; its size is the embedding size E, so the
    output matrix W_out (V, E) can be tied to the target embedding. Dropout on embeddings,
    between RNN layers and before W_out.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        num_layers: int,
        rnn: str,
        attention: nn.Module,
        bridge: Bridge,
        memory_size: int,
        dropout: float = 0.0,
        word_dropout: float = 0.0,
        locked_dropout: bool = False,
        tie_embeddings: bool = False,
        padding_idx: int = PAD,
    ):
        super().__init__()
        self.embedding_size, self.hidden_size = embedding_size, hidden_size
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=padding_idx)
        # one mask a sentence over the teacher-forced (B, T, .) tensors with locked_dropout
        self.dropout = LockedDropout(dropout) if locked_dropout else nn.Dropout(dropout)
        self.word_dropout = WordDropout(word_dropout)
        self.bridge = bridge
        self.attention = attention
        self.rnn = make_rnn(rnn, embedding_size + memory_size, hidden_size, num_layers, dropout)
        self.pre_output = nn.Linear(hidden_size + memory_size + embedding_size, 2 * embedding_size)
        self.output = nn.Linear(embedding_size, vocab_size)
        if tie_embeddings:
            self.output.weight = self.embedding.weight

    def init_state(self, encoder_hidden: torch.Tensor) -> DecoderState:
        hidden = self.bridge(encoder_hidden)  # (L, B, H)
        return DecoderState(hidden, torch.zeros_like(hidden) if isinstance(self.rnn, nn.LSTM) else None, None)

    def _recur(self, input_gates, context_weight, state, source: EncoderOutput):
        """input_gates (B, G) = W_ih[E] E y_{t-1} + b_ih -> (s_t state, c_t (B, H_k), weights (B, S))."""
        query = state.hidden[-1]  # (B, H)
        context, weights = self.attention(query, source.memory, source.projected_keys, source.mask)  # (B, H_k), (B, S)
        gates = input_gates + F.linear(context, context_weight)  # (B, G)
        hidden, cell = rnn_step(self.rnn, gates, state.hidden, state.cell)
        return DecoderState(hidden, cell, None), context, weights

    def _readout(
        self, top: torch.Tensor, context: torch.Tensor, embedded: torch.Tensor, vocabulary: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[s_t; c_t; E y_{t-1}] (B, [T,] H + H_k + E) -> logits (B, [T,] V), or (B, [T,] V') of
        the target ids `vocabulary` (V',) only."""
        pre_output = self.pre_output(torch.cat([top, context, embedded], dim=-1))  # (B, [T,] 2E)
        maxout = pre_output.unflatten(-1, (self.embedding_size, 2)).amax(dim=-1)  # (B, [T,] E)
        return output_logits(self.output, self.dropout(maxout), vocabulary)

    def step(self, prev_tokens, state, source: EncoderOutput, vocabulary: torch.Tensor | None = None):
        """prev_tokens (B,) long -> (logits (B, V), new state, attention weights (B, S)); with
        `vocabulary` (V',) target ids, the logits (B, V') of those only."""
        assert prev_tokens.dim() == 1 and state.hidden.shape[1] == prev_tokens.shape[0], "prev_tokens (B,)"
        embedded = self.dropout(self.word_dropout(self.embedding(prev_tokens)))  # (B, E)
        embedding_weight, context_weight, input_bias = split_input_weight(self.rnn, self.embedding_size)
        input_gates = F.linear(embedded, embedding_weight, input_bias)  # (B, G)
        state, context, weights = self._recur(input_gates, context_weight, state, source)
        return self._readout(state.hidden[-1], context, embedded, vocabulary), state, weights

    def forward(self, tgt_in, state, source: EncoderOutput, *, teacher_forcing_ratio=1.0, generator=None):
        """tgt_in (B, T) long -> (logits (B, T, V), attention weights (B, T, S))."""
        if teacher_forcing_ratio < 1.0:
            return _sampled_forward(self, tgt_in, state, source, teacher_forcing_ratio, generator)
        embedded = self.dropout(self.word_dropout(self.embedding(tgt_in)))  # (B, T, E)
        steps = tgt_in.shape[1]
        if not self.attention.attends:  # a fixed context: no recurrence through attention
            contexts, weights = self.attention.every_step(source.projected_keys, source.mask, steps)  # type: ignore[operator]  # NoAttention's method; the layering keeps attention.py's classes out of here. (B, T, H_k)
            tops = full_sequence(
                self.rnn, torch.cat([embedded, contexts], dim=-1), state.hidden, state.cell
            )  # (B, T, H)
            return self._readout(tops, contexts, embedded), weights
        embedding_weight, context_weight, input_bias = split_input_weight(self.rnn, self.embedding_size)
        input_gates = F.linear(embedded, embedding_weight, input_bias)  # (B, T, G), all steps at once
        all_tops, all_contexts, all_weights = [], [], []
        for step_gates in input_gates.unbind(dim=1):  # unbind: slicing [:, t] would give T full-size zero grads
            state, context, weights = self._recur(step_gates, context_weight, state, source)
            all_tops.append(state.hidden[-1])
            all_contexts.append(context)
            all_weights.append(weights)
        logits = self._readout(torch.stack(all_tops, dim=1), torch.stack(all_contexts, dim=1), embedded)  # (B, T, V)
        return logits, torch.stack(all_weights, dim=1)  # (B, T, V), (B, T, S)


class LuongDecoder(nn.Module):
    """Luong et al. (2015): update the state, then attend with it.

        h_t = RNN(h_{t-1}, [E y_{t-1}; h~_{t-1}])   with input feeding (h~_0 = 0)
        h_t = RNN(h_{t-1}, E y_{t-1})                without
        c_t = attention(h_t, h)                      h_t: top layer's new state
        h~_t = tanh(W_c [c_t; h_t])                  (B, H), the attentional vector (no tanh: `attentional_tanh`)
        logits_t = W_out P dropout(h~_t) + b_out     (B, V)

    P (E x H) exists only when the output matrix is tied to the target embedding and H != E;
    otherwise W_out reads h~_t directly. The fed vector h~_{t-1} is taken before dropout, or with
    `feed_dropout` after it (the same dropped vector the output layer reads, as in OpenNMT-py).
    Without input feeding no step depends on attention, so teacher-forced training runs the RNN
    over the whole target in one call and attends for all steps at once.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        num_layers: int,
        rnn: str,
        attention: nn.Module,
        bridge: Bridge,
        memory_size: int,
        input_feeding: bool = True,
        feed_dropout: bool = False,
        attentional_tanh: bool = True,
        dropout: float = 0.0,
        word_dropout: float = 0.0,
        locked_dropout: bool = False,
        tie_embeddings: bool = False,
        padding_idx: int = PAD,
    ):
        super().__init__()
        if feed_dropout and not input_feeding:
            raise ValueError("feed_dropout needs input_feeding: nothing is fed without it")
        self.embedding_size, self.hidden_size, self.input_feeding = embedding_size, hidden_size, input_feeding
        self.feed_dropout = feed_dropout
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=padding_idx)
        # one mask a sentence over the teacher-forced (B, T, .) tensors with locked_dropout
        self.dropout = LockedDropout(dropout) if locked_dropout else nn.Dropout(dropout)
        self.word_dropout = WordDropout(word_dropout)
        self.bridge = bridge
        self.attention = attention
        rnn_input = embedding_size + (hidden_size if input_feeding else 0)
        self.rnn = make_rnn(rnn, rnn_input, hidden_size, num_layers, dropout)
        self.combine = nn.Linear(memory_size + hidden_size, hidden_size, bias=False)  # W_c
        self.attentional_activation = nn.Tanh() if attentional_tanh else nn.Identity()  # OpenNMT-py's mlp: none
        needs_projection = tie_embeddings and hidden_size != embedding_size
        self.to_embedding = nn.Linear(hidden_size, embedding_size, bias=False) if needs_projection else None  # P
        self.output = nn.Linear(embedding_size if tie_embeddings else hidden_size, vocab_size)
        if tie_embeddings:
            self.output.weight = self.embedding.weight

    def init_state(self, encoder_hidden: torch.Tensor) -> DecoderState:
        hidden = self.bridge(encoder_hidden)  # (L, B, H)
        cell = torch.zeros_like(hidden) if isinstance(self.rnn, nn.LSTM) else None
        feed = hidden.new_zeros(hidden.shape[1:]) if self.input_feeding else None  # h~_0 = 0, (B, H)
        return DecoderState(hidden, cell, feed)

    def _attend(self, top, source: EncoderOutput):
        """h_t (B, [T,] H) -> (h~_t (B, [T,] H), weights (B, [T,] S))."""
        context, weights = self.attention(top, source.memory, source.projected_keys, source.mask)  # (B, [T,] H_k)
        return self.attentional_activation(self.combine(torch.cat([context, top], dim=-1))), weights

    def _recur(self, input_gates, feed_weight, state, source: EncoderOutput):
        """input_gates (B, G) = W_ih[E] E y_{t-1} + b_ih -> (new state, h~_t (B, H), weights (B, S))."""
        if self.input_feeding:
            input_gates = input_gates + F.linear(state.feed, feed_weight)
        hidden, cell = rnn_step(self.rnn, input_gates, state.hidden, state.cell)
        attentional, weights = self._attend(hidden[-1], source)
        if self.feed_dropout:  # the one dropped vector feeds both the output layer and the next step
            attentional = self.dropout(attentional)
        return DecoderState(hidden, cell, attentional if self.input_feeding else None), attentional, weights

    def _readout(self, attentional: torch.Tensor, vocabulary: torch.Tensor | None = None) -> torch.Tensor:
        """h~ (B, [T,] H) -> logits (B, [T,] V), or (B, [T,] V') of the target ids `vocabulary` (V',) only."""
        if not self.feed_dropout:  # with it, `_recur` dropped the vector already
            attentional = self.dropout(attentional)
        if self.to_embedding is not None:
            attentional = self.to_embedding(attentional)  # (B, [T,] E)
        return output_logits(self.output, attentional, vocabulary)

    def step(self, prev_tokens, state, source: EncoderOutput, vocabulary: torch.Tensor | None = None):
        """prev_tokens (B,) long -> (logits (B, V), new state, attention weights (B, S)); with
        `vocabulary` (V',) target ids, the logits (B, V') of those only."""
        assert prev_tokens.dim() == 1 and state.hidden.shape[1] == prev_tokens.shape[0], "prev_tokens (B,)"
        embedded = self.dropout(self.word_dropout(self.embedding(prev_tokens)))  # (B, E)
        embedding_weight, feed_weight, input_bias = split_input_weight(self.rnn, self.embedding_size)
        input_gates = F.linear(embedded, embedding_weight, input_bias)  # (B, G)
        state, attentional, weights = self._recur(input_gates, feed_weight, state, source)
        return self._readout(attentional, vocabulary), state, weights

    def forward(self, tgt_in, state, source: EncoderOutput, *, teacher_forcing_ratio=1.0, generator=None):
        """tgt_in (B, T) long -> (logits (B, T, V), attention weights (B, T, S))."""
        if teacher_forcing_ratio < 1.0:
            return _sampled_forward(self, tgt_in, state, source, teacher_forcing_ratio, generator)
        embedded = self.dropout(self.word_dropout(self.embedding(tgt_in)))  # (B, T, E)
        if not self.input_feeding:
            tops = full_sequence(self.rnn, embedded, state.hidden, state.cell)  # (B, T, H), one call
            attentional, weights = self._attend(tops, source)  # (B, T, H), (B, T, S)
            return self._readout(attentional), weights
        embedding_weight, feed_weight, input_bias = split_input_weight(self.rnn, self.embedding_size)
        input_gates = F.linear(embedded, embedding_weight, input_bias)  # (B, T, G), all steps at once
        all_attentional, all_weights = [], []
        for step_gates in input_gates.unbind(dim=1):  # unbind: slicing [:, t] would give T full-size zero grads
            state, attentional, weights = self._recur(step_gates, feed_weight, state, source)
            all_attentional.append(attentional)
            all_weights.append(weights)
        logits = self._readout(torch.stack(all_attentional, dim=1))  # (B, T, V)
        return logits, torch.stack(all_weights, dim=1)  # (B, T, V), (B, T, S)
