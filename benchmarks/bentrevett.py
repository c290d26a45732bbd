"""A reference written the way bentrevett's pytorch-seq2seq tutorials are (notebook 3, Bahdanau).

It computes the same function as attnmt's model of the same config, with the same parameters
(`load_attnmt_weights` copies them over), so speed is the only difference worth measuring.
What makes it that tutorial's design, each a choice it makes (several slower than d2l.ai's,
which is the other reference, `benchmarks.d2l`):

- the encoder runs `nn.GRU` over the padded batch without packing, so it reads the padding
  too (and a bidirectional encoder's backward direction starts on it, as in the tutorials);
  padding is masked in the attention, so the model is correct, only slow and slightly different
  from attnmt on padded sentences;
- the decoder loops over target positions in Python and calls `nn.GRU` on one time step;
- additive attention scores `v^T tanh(W [s; h_j])` on the concatenation of the query repeated
  S times with the keys, so the key half W_k h_j is recomputed at every step (Luong's general
  score likewise recomputes W_a h_j at every step);
- the output layers run inside the loop, one step at a time, and the loss is one mean
  cross-entropy per batch;
- greedy decoding runs a fixed 50 steps for every batch with no early exit. The tutorial
  has no beam search; `beam_search` here is one in its style: a per-sentence Python loop
  over hypotheses (each step batches the sentence's K hypotheses).

Where the tutorial differs in function from attnmt (a bias in its attention layer, an output
layer straight from [s_t; c_t; E y_{t-1}] without maxout), this follows attnmt, so both can
be given the same weights. Only GRUs and untied embeddings are supported.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnmt.config import ModelConfig
from attnmt.vocab import BOS, EOS, PAD


def supports(cfg: ModelConfig) -> bool:
    return cfg.rnn == "gru" and not cfg.tie_embeddings and cfg.attention != "none"


GREEDY_STEPS = 50
MASKED_SCORE = -1e10  # the tutorials' masked_fill value; exp() of it underflows to exactly 0


def _gru(input_size: int, hidden_size: int, num_layers: int, dropout: float, bidirectional: bool = False) -> nn.GRU:
    inner_dropout = dropout if num_layers > 1 else 0.0
    return nn.GRU(
        input_size, hidden_size, num_layers, batch_first=True, dropout=inner_dropout, bidirectional=bidirectional
    )


class Encoder(nn.Module):
    """Embedding + GRU over the padded batch: src (B, S) -> outputs (B, S, H_k), final (L, B, H_k)."""

    def __init__(
        self,
        *,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=PAD)
        self.rnn = _gru(embedding_size, hidden_size, num_layers, dropout, bidirectional)
        self.dropout = nn.Dropout(dropout)
        self.num_layers, self.directions = num_layers, 2 if bidirectional else 1

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs, final = self.rnn(self.dropout(self.embedding(src)))  # (B, S, H_k), (L * D, B, H_e)
        final = final.view(self.num_layers, self.directions, src.shape[0], -1)
        return outputs, torch.cat(final.unbind(1), dim=-1)  # (L, B, H_k): [forward; backward] per layer


class AdditiveAttention(nn.Module):
    """e_j = v^T tanh(W [s; h_j]) with W = [W_q W_k]: the key half is recomputed at every call."""

    def __init__(self, *, query_size: int, key_size: int, attention_size: int):
        super().__init__()
        self.attn = nn.Linear(query_size + key_size, attention_size, bias=False)
        self.v = nn.Linear(attention_size, 1, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """query (B, H), keys (B, S, H_k), mask (B, S) -> context (B, H_k)."""
        repeated = query.unsqueeze(1).repeat(1, keys.shape[1], 1)  # (B, S, H)
        energy = torch.tanh(self.attn(torch.cat([repeated, keys], dim=2)))  # (B, S, A)
        scores = self.v(energy).squeeze(2).masked_fill(~mask, MASKED_SCORE)  # (B, S)
        weights = torch.softmax(scores, dim=1)
        return torch.bmm(weights.unsqueeze(1), keys).squeeze(1)  # (B, H_k)


class DotAttention(nn.Module):
    """e_j = s^T W_a h_j (general; dot maps keys only when sizes differ), W_a h_j recomputed at every call."""

    def __init__(self, *, query_size: int, key_size: int, projected: bool, scale: float = 1.0):
        super().__init__()
        self.key_projection = nn.Linear(key_size, query_size, bias=False) if projected else None
        self.scale = scale

    def forward(self, query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        projected = keys if self.key_projection is None else self.key_projection(keys)  # (B, S, H)
        scores = torch.bmm(projected, query.unsqueeze(2)).squeeze(2) * self.scale  # (B, S)
        weights = torch.softmax(scores.masked_fill(~mask, MASKED_SCORE), dim=1)
        return torch.bmm(weights.unsqueeze(1), keys).squeeze(1)  # (B, H_k)


class Decoder(nn.Module):
    """Bahdanau (attend with s_{t-1}, then update) or Luong (update, then attend) decoding, one step per call.

    The state is (hidden (L, B, H), feed (B, H) or None): Luong's input feeding carries h~_{t-1}.
    """

    def __init__(self, cfg: ModelConfig, vocab_size: int, key_size: int):
        super().__init__()
        embedding, hidden = cfg.embedding_size, cfg.decoder_hidden
        self.luong, self.input_feeding = cfg.decoder == "luong", cfg.decoder == "luong" and cfg.input_feeding
        self.embedding = nn.Embedding(vocab_size, embedding, padding_idx=PAD)
        self.dropout = nn.Dropout(cfg.dropout)
        self.bridge = nn.Linear(key_size, hidden) if cfg.bridge == "tanh" else None
        self.layers, self.hidden_size = cfg.decoder_layers, hidden
        if cfg.attention == "additive":
            attention_size = cfg.attention_size or hidden
            self.attention = AdditiveAttention(query_size=hidden, key_size=key_size, attention_size=attention_size)
        elif cfg.attention in ("dot", "scaled_dot", "general"):
            projected = cfg.attention == "general" or key_size != hidden
            scale = hidden**-0.5 if cfg.attention == "scaled_dot" else 1.0
            self.attention = DotAttention(query_size=hidden, key_size=key_size, projected=projected, scale=scale)
        else:
            raise ValueError(f"the reference has no {cfg.attention!r} attention")
        if self.luong:
            rnn_input = embedding + (hidden if self.input_feeding else 0)
            self.rnn = _gru(rnn_input, hidden, cfg.decoder_layers, cfg.dropout)
            self.combine = nn.Linear(key_size + hidden, hidden, bias=False)
            self.output = nn.Linear(hidden, vocab_size)
        else:
            self.rnn = _gru(embedding + key_size, hidden, cfg.decoder_layers, cfg.dropout)
            self.pre_output = nn.Linear(hidden + key_size + embedding, 2 * embedding)
            self.output = nn.Linear(embedding, vocab_size)

    def init_state(self, encoder_final: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """encoder_final (L_enc, B, H_k) -> (hidden (L, B, H), feed)."""
        batch_size = encoder_final.shape[1]
        if self.bridge is None:
            hidden = encoder_final.new_zeros(self.layers, batch_size, self.hidden_size)
        else:
            if encoder_final.shape[0] != self.layers:
                encoder_final = encoder_final[-1:].expand(self.layers, -1, -1)
            hidden = torch.tanh(self.bridge(encoder_final))
        feed = hidden.new_zeros(batch_size, self.hidden_size) if self.input_feeding else None
        return hidden, feed

    def step(self, prev_tokens, state, memory, mask):
        """prev_tokens (B,) -> (logits (B, V), new state)."""
        hidden, feed = state
        embedded = self.dropout(self.embedding(prev_tokens))  # (B, E)
        if self.luong:
            rnn_input = embedded if feed is None else torch.cat([embedded, feed], dim=1)
            output, hidden = self.rnn(rnn_input.unsqueeze(1), hidden)  # (B, 1, H)
            top = output.squeeze(1)
            context = self.attention(top, memory, mask)  # (B, H_k)
            attentional = torch.tanh(self.combine(torch.cat([context, top], dim=1)))  # (B, H)
            logits = self.output(self.dropout(attentional))
            return logits, (hidden, attentional if self.input_feeding else None)
        context = self.attention(hidden[-1], memory, mask)  # (B, H_k)
        output, hidden = self.rnn(torch.cat([embedded, context], dim=1).unsqueeze(1), hidden)
        pre_output = self.pre_output(torch.cat([output.squeeze(1), context, embedded], dim=1))  # (B, 2E)
        maxout = pre_output.view(pre_output.shape[0], -1, 2).max(dim=2).values  # (B, E)
        return self.output(self.dropout(maxout)), (hidden, None)


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int):
        super().__init__()
        if cfg.rnn != "gru" or cfg.tie_embeddings:
            raise ValueError("the reference supports GRUs with untied embeddings only")
        self.encoder = Encoder(
            vocab_size=src_vocab_size,
            embedding_size=cfg.embedding_size,
            hidden_size=cfg.encoder_hidden,
            num_layers=cfg.encoder_layers,
            bidirectional=cfg.bidirectional,
            dropout=cfg.dropout,
        )
        key_size = cfg.encoder_hidden * (2 if cfg.bidirectional else 1)
        self.decoder = Decoder(cfg, tgt_vocab_size, key_size)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor):
        memory, final = self.encoder(src)
        mask = torch.arange(src.shape[1], device=src.device)[None, :] < src_lengths[:, None]  # (B, S)
        return memory, mask, self.decoder.init_state(final)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: src (B, S), src_lengths (B,), tgt_in (B, T) -> logits (B, T, V)."""
        memory, mask, state = self.encode(src, src_lengths)
        outputs = []
        for t in range(tgt_in.shape[1]):
            logits, state = self.decoder.step(tgt_in[:, t], state, memory, mask)
            outputs.append(logits)
        return torch.stack(outputs, dim=1)


def loss(model: Seq2Seq, src, src_lengths, tgt_in, tgt_out) -> torch.Tensor:
    """Mean cross-entropy over the batch's non-pad target tokens."""
    logits = model(src, src_lengths, tgt_in)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD)


def load_attnmt_weights(reference: Seq2Seq, model: nn.Module) -> Seq2Seq:
    """Copy an attnmt Seq2Seq's parameters into `reference` (built from the same config); returns `reference`."""
    state = {}
    for name, value in model.state_dict().items():
        name = name.replace("decoder.bridge.projection.", "decoder.bridge.")
        state[name] = value
    prefix = "decoder.attention."
    if prefix + "query_projection.weight" in state:  # additive: W = [W_q W_k], v = v_a
        query_weight = state.pop(prefix + "query_projection.weight")
        state[prefix + "attn.weight"] = torch.cat([query_weight, state.pop(prefix + "key_projection.weight")], dim=1)
        state[prefix + "v.weight"] = state.pop(prefix + "score_vector.weight")
    reference.load_state_dict(state, strict=True)
    return reference


def _first_eos(tokens: list[int]) -> list[int]:
    return tokens[: tokens.index(EOS)] if EOS in tokens else tokens


@torch.no_grad()
def greedy(model: Seq2Seq, src: torch.Tensor, src_lengths: torch.Tensor, steps: int = GREEDY_STEPS):
    """Batched greedy decoding for a fixed number of steps, no early exit -> token lists cut at EOS."""
    memory, mask, state = model.encode(src, src_lengths)
    prev = torch.full((src.shape[0],), BOS, dtype=torch.long, device=src.device)
    outputs = []
    for _ in range(steps):
        logits, state = model.decoder.step(prev, state, memory, mask)
        prev = logits.argmax(dim=1)
        outputs.append(prev)
    return [_first_eos(row) for row in torch.stack(outputs, dim=1).tolist()]


def _select(state, rows: torch.Tensor):
    hidden, feed = state
    return hidden.index_select(1, rows), None if feed is None else feed.index_select(0, rows)


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src_ids: list[int],
    *,
    beam_size: int = 5,
    max_steps: int = GREEDY_STEPS,
    alpha: float = 1.0,
    device: torch.device | str = "cpu",
) -> list[int]:
    """One sentence: keep the K best hypotheses as Python lists; a hypothesis ending in EOS is
    finished, scored by log-probability / ((5 + length) / 6) ** alpha. Stops when K have finished."""
    src = torch.tensor([src_ids], device=device)
    memory, mask, state = model.encode(src, torch.tensor([len(src_ids)], device=device))
    live: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    for _ in range(max_steps):
        rows = len(live)
        prev = torch.tensor([tokens[-1] if tokens else BOS for tokens, _ in live], device=device)
        logits, state = model.decoder.step(prev, state, memory.expand(rows, -1, -1), mask.expand(rows, -1))
        scores = torch.tensor([score for _, score in live], device=device)[:, None] + logits.log_softmax(dim=1)
        top_scores, top_indices = scores.view(-1).topk(beam_size)
        survivors, origins = [], []
        for score, index in zip(top_scores.tolist(), top_indices.tolist(), strict=True):
            origin, token = divmod(index, logits.shape[1])
            tokens = [*live[origin][0], token]
            if token == EOS:
                finished.append((tokens[:-1], score / ((5 + len(tokens)) / 6) ** alpha))
            else:
                survivors.append((tokens, score))
                origins.append(origin)
        if len(finished) >= beam_size or not survivors:
            break
        live = survivors
        state = _select(state, torch.tensor(origins, device=device))
    if not finished:
        finished = [(tokens, score / ((5 + len(tokens)) / 6) ** alpha) for tokens, score in live]
    return max(finished, key=lambda hypothesis: hypothesis[1])[0]
