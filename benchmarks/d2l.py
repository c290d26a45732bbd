"""A reference written the way d2l.ai's PyTorch code is (chapter "The Bahdanau Attention Mechanism").

The structure follows d2l as written, each point a choice that book makes:

- `Seq2SeqEncoder`: embedding, then `nn.GRU` over the time-major padded batch, no packing
  (the padding is read; a bidirectional encoder's backward direction starts on it);
- `AdditiveAttention` with separate `W_q`, `W_k`, `w_v`, called inside the decoder's step
  loop, so `W_k` is applied to all keys again at every step; a `masked_softmax` that sets
  padded scores to -1e6; dropout on the attention weights;
- `Seq2SeqAttentionDecoder`: a Python loop over target positions calling `nn.GRU` on one
  step with input `[context; embedding]`; the output layer runs once, after the loop, over
  all steps;
- the loss: unreduced cross-entropy times a padding mask, summed, divided by the mask's sum;
- greedy prediction: batched, a fixed number of steps, no early exit. d2l has no beam search
  code, so this reference has none.

Where attnmt's configs need more than d2l's chapter has, it computes attnmt's function so the
two can be given the same weights (`load_attnmt_weights`): a bidirectional encoder (its final
states concatenated per layer), the tanh bridge from the encoder's final state to a decoder
of another size, and the paper's maxout deep output `W_o [s_t; c_t; E y_{t-1}]` as the layer
after the loop (d2l uses one dense layer on s_t). Additive attention with a Bahdanau decoder
and GRUs only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnmt.config import ModelConfig
from attnmt.vocab import BOS, EOS, PAD

GREEDY_STEPS = 50
MASKED_SCORE = -1e6  # d2l's masked_softmax value


def supports(cfg: ModelConfig) -> bool:
    return cfg.rnn == "gru" and cfg.attention == "additive" and cfg.decoder == "bahdanau" and not cfg.tie_embeddings


def masked_softmax(scores: torch.Tensor, valid_lens: torch.Tensor) -> torch.Tensor:
    """scores (B, Q, S), valid_lens (B,): softmax over S with positions >= valid_len set to -1e6 first."""
    positions = torch.arange(scores.shape[-1], device=scores.device)
    padded = positions[None, None, :] >= valid_lens[:, None, None]  # (B, 1, S)
    return F.softmax(scores.masked_fill(padded, MASKED_SCORE), dim=-1)


class AdditiveAttention(nn.Module):
    """e = w_v^T tanh(W_q q + W_k k); both projections on every call, as d2l calls it in its loop."""

    def __init__(self, *, query_size: int, key_size: int, num_hiddens: int, dropout: float):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        """queries (B, Q, H), keys = values (B, S, H_k), valid_lens (B,) -> (B, Q, H_k)."""
        queries, keys = self.W_q(queries), self.W_k(keys)  # (B, Q, A), (B, S, A)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))  # (B, Q, S, A)
        scores = self.w_v(features).squeeze(-1)  # (B, Q, S)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class Seq2SeqEncoder(nn.Module):
    """X (B, S) -> outputs (S, B, H_k), final state (L, B, H_k) ([forward; backward] per layer)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_size)
        self.rnn = nn.GRU(
            cfg.embedding_size,
            cfg.encoder_hidden,
            cfg.encoder_layers,
            dropout=cfg.dropout if cfg.encoder_layers > 1 else 0.0,
            bidirectional=cfg.bidirectional,
        )
        self.layers, self.directions = cfg.encoder_layers, 2 if cfg.bidirectional else 1

    def forward(self, X: torch.Tensor):
        embs = self.embedding(X.t())  # (S, B, E)
        outputs, state = self.rnn(embs)  # (S, B, H_k), (L * D, B, H)
        state = state.view(self.layers, self.directions, X.shape[0], -1)
        return outputs, torch.cat(state.unbind(1), dim=-1)


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int, key_size: int):
        super().__init__()
        hidden, embedding = cfg.decoder_hidden, cfg.embedding_size
        self.attention = AdditiveAttention(
            query_size=hidden, key_size=key_size, num_hiddens=cfg.attention_size or hidden, dropout=cfg.dropout
        )
        self.embedding = nn.Embedding(vocab_size, embedding)
        self.rnn = nn.GRU(
            key_size + embedding, hidden, cfg.decoder_layers, dropout=cfg.dropout if cfg.decoder_layers > 1 else 0.0
        )
        self.bridge = nn.Linear(key_size, hidden) if cfg.bridge == "tanh" else None
        self.pre_output = nn.Linear(hidden + key_size + embedding, 2 * embedding)
        self.dense = nn.Linear(embedding, vocab_size)
        self.layers, self.hidden_size, self.embedding_size = cfg.decoder_layers, hidden, embedding

    def init_state(self, enc_outputs, enc_valid_lens):
        """-> [keys (B, S, H_k), hidden (L, B, H), valid_lens (B,)]."""
        outputs, hidden_state = enc_outputs
        if self.bridge is None:
            hidden_state = outputs.new_zeros(self.layers, outputs.shape[1], self.hidden_size)
        else:
            if hidden_state.shape[0] != self.layers:
                hidden_state = hidden_state[-1:].expand(self.layers, -1, -1)
            hidden_state = torch.tanh(self.bridge(hidden_state))
        return [outputs.permute(1, 0, 2), hidden_state, enc_valid_lens]

    def forward(self, X: torch.Tensor, state):
        """X (B, T) -> logits (B, T, V), the state after the last step."""
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)  # (T, B, E)
        outputs, contexts = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)  # (B, 1, H)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)  # (B, 1, H_k)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)  # (1, B, H)
            outputs.append(out)
            contexts.append(context.permute(1, 0, 2))
        # The output layer after the loop, once for all steps.
        pre_output = self.pre_output(torch.cat([torch.cat(outputs), torch.cat(contexts), X], dim=-1))  # (T, B, 2E)
        maxout = pre_output.unflatten(-1, (self.embedding_size, 2)).amax(dim=-1)  # (T, B, E)
        return self.dense(maxout).permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int):
        super().__init__()
        if not supports(cfg):
            raise ValueError("the d2l reference has additive attention, a Bahdanau decoder and GRUs only")
        self.encoder = Seq2SeqEncoder(cfg, src_vocab_size)
        self.decoder = Seq2SeqAttentionDecoder(
            cfg, tgt_vocab_size, cfg.encoder_hidden * (2 if cfg.bidirectional else 1)
        )

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: src (B, S), src_lengths (B,), tgt_in (B, T) -> logits (B, T, V)."""
        state = self.decoder.init_state(self.encoder(src), src_lengths)
        return self.decoder(tgt_in, state)[0]


def loss(model: Seq2Seq, src, src_lengths, tgt_in, tgt_out) -> torch.Tensor:
    """d2l's masked cross-entropy: per-token losses times the non-pad mask, over the mask's sum."""
    logits = model(src, src_lengths, tgt_in)
    per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), reduction="none")
    mask = (tgt_out.reshape(-1) != PAD).type(torch.float32)
    return (per_token * mask).sum() / mask.sum()


def load_attnmt_weights(reference: Seq2Seq, model: nn.Module) -> Seq2Seq:
    """Copy an attnmt Seq2Seq's parameters into `reference` (built from the same config); returns it."""
    renames = {
        "decoder.bridge.projection.": "decoder.bridge.",
        "decoder.attention.query_projection.": "decoder.attention.W_q.",
        "decoder.attention.key_projection.": "decoder.attention.W_k.",
        "decoder.attention.score_vector.": "decoder.attention.w_v.",
        "decoder.output.": "decoder.dense.",
    }
    state = {}
    for name, value in model.state_dict().items():
        for old, new in renames.items():
            name = name.replace(old, new)
        state[name] = value
    # attnmt's decoder RNN reads [embedding; context], d2l's [context; embedding].
    weight = state["decoder.rnn.weight_ih_l0"]
    embedding = reference.decoder.embedding_size
    state["decoder.rnn.weight_ih_l0"] = torch.cat([weight[:, embedding:], weight[:, :embedding]], dim=1)
    reference.load_state_dict(state, strict=True)
    return reference


def _first_eos(tokens: list[int]) -> list[int]:
    return tokens[: tokens.index(EOS)] if EOS in tokens else tokens


@torch.no_grad()
def greedy(model: Seq2Seq, src: torch.Tensor, src_lengths: torch.Tensor, steps: int = GREEDY_STEPS):
    """d2l's predict_step: the decoder fed its own argmax `steps` times, no early exit -> token lists cut at EOS."""
    state = model.decoder.init_state(model.encoder(src), src_lengths)
    outputs = [torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)]
    for _ in range(steps):
        Y, state = model.decoder(outputs[-1], state)
        outputs.append(Y.argmax(2))
    return [_first_eos(row) for row in torch.cat(outputs[1:], dim=1).tolist()]


beam_search = None  # d2l's chapters describe beam search but its code has none
