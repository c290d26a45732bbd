"""The RNNs: an nn.GRU / nn.LSTM made one way for the encoder and the decoders, run over a whole
sequence in one call or one step at a time through its gate equations, written out.

Speed by construction. The RNN parameters live in an nn.GRU / nn.LSTM, so where no step
depends on attention through recurrence (Luong without input feeding; no attention at all)
the whole target runs in one RNN call (`full_sequence`). A single step (`rnn_step`) runs the same
weights through the gate equations below, within 10% of nn.GRUCell / nn.LSTMCell and faster than
nn.GRU / nn.LSTM on a length-1 sequence (`python -m benchmarks.kernels` measures all three).
Owning the gate equations also lets a teacher-forced loop project all target embeddings through
the first layer's input weights at once (`split_input_weight`): a step does only what depends on
the previous state.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn


def gru_cell(input_gates: torch.Tensor, hidden: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor):
    """GRU, with torch's gate order (r, z, n); input_gates = W_i x + b_i (B, 3H), hidden (B, H).

    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
    """
    input_r, input_z, input_n = input_gates.chunk(3, dim=-1)
    hidden_r, hidden_z, hidden_n = F.linear(hidden, weight_hh, bias_hh).chunk(3, dim=-1)
    reset = torch.sigmoid(input_r + hidden_r)
    update = torch.sigmoid(input_z + hidden_z)
    candidate = torch.tanh(input_n + reset * hidden_n)
    return candidate + update * (hidden - candidate)  # (B, H)


def lstm_cell(input_gates, hidden, cell, weight_hh, bias_hh):
    """LSTM, with torch's gate order (i, f, g, o); input_gates = W_i x + b_i (B, 4H).

    c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c').
    """
    gates = input_gates + F.linear(hidden, weight_hh, bias_hh)
    in_gate, forget_gate, candidate, out_gate = gates.chunk(4, dim=-1)
    cell = torch.sigmoid(forget_gate) * cell + torch.sigmoid(in_gate) * torch.tanh(candidate)
    return torch.sigmoid(out_gate) * torch.tanh(cell), cell  # (B, H), (B, H)


def rnn_step(rnn: nn.RNNBase, input_gates: torch.Tensor, hidden: torch.Tensor, cell: torch.Tensor | None):
    """One time step through every layer of `rnn` with its own weights.

    input_gates: (B, G) the first layer's input projection W_ih x + b_ih, made by the caller so
    that parts known in advance can be computed for all steps at once. hidden, cell: (L, B, H).
    Between layers, dropout as nn.GRU / nn.LSTM apply it. Returns the new (hidden, cell).
    """
    new_hidden: list[torch.Tensor] = []
    new_cell: list[torch.Tensor] = []
    hidden_layers = hidden.unbind(0)
    cell_layers = cell.unbind(0) if cell is not None else ()  # read only for an LSTM
    for layer in range(rnn.num_layers):
        if layer > 0:
            below = F.dropout(new_hidden[-1], rnn.dropout, rnn.training)
            input_gates = F.linear(below, getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"bias_ih_l{layer}"))
        weight_hh, bias_hh = getattr(rnn, f"weight_hh_l{layer}"), getattr(rnn, f"bias_hh_l{layer}")
        if cell is None:
            new_hidden.append(gru_cell(input_gates, hidden_layers[layer], weight_hh, bias_hh))
        else:
            layer_hidden, layer_cell = lstm_cell(
                input_gates, hidden_layers[layer], cell_layers[layer], weight_hh, bias_hh
            )
            new_hidden.append(layer_hidden)
            new_cell.append(layer_cell)
    return torch.stack(new_hidden), (torch.stack(new_cell) if cell is not None else None)  # (L, B, H)


def make_rnn(
    kind: str, input_size: int, hidden_size: int, num_layers: int, dropout: float, *, bidirectional: bool = False
) -> nn.RNNBase:
    """The encoder's and the decoders' nn.GRU or nn.LSTM, batch first, `dropout` between layers."""
    if kind not in ("gru", "lstm"):
        raise ValueError(f"unknown rnn {kind!r}; expected gru or lstm")
    rnn_class = nn.GRU if kind == "gru" else nn.LSTM
    # torch warns about inter-layer dropout with one layer, where it would do nothing
    between_layers = dropout if num_layers > 1 else 0.0
    return rnn_class(
        input_size, hidden_size, num_layers, batch_first=True, dropout=between_layers, bidirectional=bidirectional
    )


def split_input_weight(rnn: nn.RNNBase, embedding_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The first layer's W_ih split by columns (the part reading the embedding, the part reading the rest), and b_ih."""
    weight, bias = cast(torch.Tensor, rnn.weight_ih_l0), cast(torch.Tensor, rnn.bias_ih_l0)  # registered at run time
    return weight[:, :embedding_size], weight[:, embedding_size:], bias


def full_sequence(
    rnn: nn.RNNBase, inputs: torch.Tensor, hidden: torch.Tensor, cell: torch.Tensor | None
) -> torch.Tensor:
    """Run `rnn` over inputs (B, T, I) from hidden, cell (L, B, H) (cell None for a GRU) in one
    call; the top layer's outputs (B, T, H)."""
    initial = hidden if cell is None else (hidden, cell)
    return rnn(inputs, initial)[0]
