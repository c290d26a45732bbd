"""Encoder: packed, so padding is invisible; final states sit at each sentence's true ends."""

import pytest
import torch

from attnmt.models.encoder import Encoder

VOCAB, HIDDEN = 12, 5
VARIANTS = [
    pytest.param(rnn, bidirectional, layers, id=f"{rnn}-{'bi' if bidirectional else 'uni'}-{layers}")
    for rnn in ("gru", "lstm")
    for bidirectional in (True, False)
    for layers in (1, 2)
]


def make(rnn, bidirectional, layers):
    torch.manual_seed(0)
    return Encoder(
        vocab_size=VOCAB, embedding_size=4, hidden_size=HIDDEN, num_layers=layers, bidirectional=bidirectional, rnn=rnn
    ).eval()


def padded(lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(1, VOCAB, (len(lengths), max(lengths)), generator=generator)
    return src, torch.tensor(lengths)


@pytest.mark.parametrize(("rnn", "bidirectional", "layers"), VARIANTS)
def test_shapes_and_zero_memory_at_padding(rnn, bidirectional, layers):
    encoder = make(rnn, bidirectional, layers)
    src, lengths = padded([4, 1, 3])
    memory, final = encoder(src, lengths)
    assert memory.shape == (3, 4, encoder.output_size)
    assert encoder.output_size == HIDDEN * (2 if bidirectional else 1)
    assert final.shape == (layers, 3, encoder.output_size)
    padding = torch.arange(4).unsqueeze(0) >= lengths.unsqueeze(1)
    assert memory[padding].eq(0).all()


@pytest.mark.parametrize(("rnn", "bidirectional", "layers"), VARIANTS)
def test_padded_batch_equals_sentences_one_by_one_and_ignores_padding_ids(rnn, bidirectional, layers):
    encoder = make(rnn, bidirectional, layers)
    src, lengths = padded([5, 2, 4])
    with torch.no_grad():
        memory, final = encoder(src, lengths)
        padding = torch.arange(5).unsqueeze(0) >= lengths.unsqueeze(1)
        other_memory, other_final = encoder(src.masked_fill(padding, 7), lengths)
        assert torch.equal(memory, other_memory) and torch.equal(final, other_final)
        for row, length in enumerate(lengths.tolist()):
            alone_memory, alone_final = encoder(src[row : row + 1, :length], lengths[row : row + 1])
            torch.testing.assert_close(memory[row : row + 1, :length], alone_memory, atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(final[:, row : row + 1], alone_final, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("rnn", "bidirectional", "layers"), VARIANTS)
def test_final_state_is_forward_last_and_backward_first(rnn, bidirectional, layers):
    encoder = make(rnn, bidirectional, layers)
    src, lengths = padded([3, 5, 1], seed=2)
    with torch.no_grad():
        memory, final = encoder(src, lengths)
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(final[-1, row, :HIDDEN], memory[row, length - 1, :HIDDEN])
        if bidirectional:
            torch.testing.assert_close(final[-1, row, HIDDEN:], memory[row, 0, HIDDEN:])


def test_dropout_applies_in_training_only():
    encoder = Encoder(vocab_size=VOCAB, embedding_size=4, hidden_size=HIDDEN, num_layers=2, dropout=0.5)
    assert encoder.rnn.dropout == 0.5
    src, lengths = padded([4, 3])
    encoder.train()
    assert not torch.equal(encoder(src, lengths)[0], encoder(src, lengths)[0])
    encoder.eval()
    assert torch.equal(encoder(src, lengths)[0], encoder(src, lengths)[0])
