"""The encoder: embedding + (bidirectional, multi-layer) GRU or LSTM over packed sequences.

The RNN runs on a PackedSequence, so padded positions are never computed: their token ids
cannot change anything, and the final states are those at each sentence's true end (the
forward direction's last real token, the backward direction's first token).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.models.dropout import LockedDropout, WordDropout
from attnmt.models.rnn import make_rnn


class Encoder(nn.Module):
    """Embedding (V, E) + GRU/LSTM with `hidden_size` H per direction.

    Output size H_enc = H * directions: each annotation is [h_forward_j; h_backward_j]
    (Bahdanau et al. 2015, eq. 7 in the appendix's notation). Dropout is applied to the
    embeddings and between RNN layers; word dropout (whole tokens) to the embeddings before it.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = True,
        rnn: str = "gru",
        dropout: float = 0.0,
        word_dropout: float = 0.0,
        locked_dropout: bool = False,
        padding_idx: int = 0,
    ):
        super().__init__()
        # Made in this order, as always: the modules' order is the parameters' order, which fixes
        # what a seed draws for each and how a saved optimizer state maps onto them.
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=padding_idx)
        self.dropout = LockedDropout(dropout) if locked_dropout else nn.Dropout(dropout)
        self.word_dropout = WordDropout(word_dropout)
        self.rnn = make_rnn(rnn, embedding_size, hidden_size, num_layers, dropout, bidirectional=bidirectional)
        self.num_layers = num_layers
        self.directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.directions

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode a padded batch.

        src: (B, S) long, padded after each sentence; src_lengths: (B,) long, each >= 1.
        Returns memory (B, S, H_enc), zero at padded positions, and the final hidden state
        per layer (L_enc, B, H_enc) with the directions concatenated [forward; backward].
        An LSTM's final cell state is not returned: the decoder's bridge does not use it.
        """
        assert src.dim() == 2 and src_lengths.shape == src.shape[:1], (
            f"src {tuple(src.shape)}, src_lengths {tuple(src_lengths.shape)}"
        )
        batch_size, src_len = src.shape
        embedded = self.dropout(self.word_dropout(self.embedding(src)))  # (B, S, E)
        # pack needs the lengths on the CPU: one host sync per batch, outside any step loop
        packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_memory, final = self.rnn(packed)
        memory, _ = pad_packed_sequence(packed_memory, batch_first=True, total_length=src_len)  # (B, S, H_enc)
        final_hidden = final[0] if isinstance(final, tuple) else final  # (L * directions, B, H)
        final_hidden = final_hidden.view(self.num_layers, self.directions, batch_size, -1)
        final_hidden = torch.cat(final_hidden.unbind(1), dim=-1)  # (L, B, H_enc)
        return memory, final_hidden
