"""Every attention x RNN x decoder combination learns to reverse letter sequences.

5 scorers x 2 RNNs x 3 decoder styles (Bahdanau; Luong with and without input feeding) = 30
distinct models, each trained for a few seconds on one CPU thread until its greedy output is
right, then checked on fresh sentences: >= 95% of the target tokens (EOS included) correct.
Sentences are 3-6 letters over a 10-letter alphabet: at length 8 the no-attention baseline
also gets there, but needs three times the training, more than a test should take.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

from attnmt.config import ModelConfig
from attnmt.models.seq2seq import build_model
from attnmt.vocab import BOS, EOS, PAD

LETTERS, MIN_LENGTH, MAX_LENGTH = 10, 3, 6
VOCAB = 4 + LETTERS  # the specials, then the letters
BATCH, MAX_STEPS, LEARNING_RATE = 256, 600, 1e-2
COMBINATIONS = [
    pytest.param(attention, rnn, decoder, feeding, id=f"{attention}-{rnn}-{decoder}{'-feed' if feeding else ''}")
    for attention, rnn, (decoder, feeding) in itertools.product(
        ("additive", "dot", "scaled_dot", "general", "none"),
        ("gru", "lstm"),
        (("bahdanau", False), ("luong", True), ("luong", False)),
    )
]


def reverse_batch(size: int, generator: torch.Generator):
    """src (B, S), src_lengths (B,), tgt_in = BOS reversed (B, T), tgt_out = reversed EOS (B, T)."""
    lengths = torch.randint(MIN_LENGTH, MAX_LENGTH + 1, (size,), generator=generator)
    src_len = int(lengths.max())
    positions = torch.arange(src_len).unsqueeze(0)  # (1, S)
    src = torch.randint(4, VOCAB, (size, src_len), generator=generator).masked_fill(positions >= lengths[:, None], PAD)
    reversed_positions = (lengths[:, None] - 1 - positions).clamp(min=0)  # (B, S): source index of output j
    reversed_src = src.gather(1, reversed_positions).masked_fill(positions >= lengths[:, None], PAD)
    tgt_in = torch.cat([torch.full((size, 1), BOS), reversed_src], dim=1)  # (B, S + 1)
    tgt_out = torch.cat([reversed_src, torch.full((size, 1), PAD)], dim=1)
    tgt_out[torch.arange(size), lengths] = EOS
    return src, lengths, tgt_in, tgt_out


def greedy_accuracy(model, batch) -> float:
    """Token accuracy of the model's own greedy output: ratio 0 feeds back its argmax at every step."""
    src, src_lengths, tgt_in, tgt_out = batch
    model.eval()
    with torch.no_grad():
        predicted = model(src, src_lengths, tgt_in, teacher_forcing_ratio=0.0)[0].argmax(-1)  # (B, T)
    model.train()
    real = tgt_out != PAD
    return (predicted == tgt_out)[real].float().mean().item()


def train(model) -> int:
    """Adam on fresh batches until greedy decoding is right on a validation set; returns the steps taken."""
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    data, validation = torch.Generator().manual_seed(1), reverse_batch(256, torch.Generator().manual_seed(2))
    for step in range(1, MAX_STEPS + 1):
        src, src_lengths, tgt_in, tgt_out = reverse_batch(BATCH, data)
        logits, _ = model(src, src_lengths, tgt_in)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        # the batch was unseen before this step, so its teacher-forced accuracy is a cheap held-out
        # signal; the (slower) greedy check runs only once that looks good
        real = tgt_out != PAD
        teacher_forced = (logits.argmax(-1) == tgt_out)[real].float().mean().item()
        if step % 5 == 0 and teacher_forced >= 0.99 and greedy_accuracy(model, validation) >= 0.98:
            return step
    return MAX_STEPS


def test_reverse_batch_is_the_reversal():
    src, src_lengths, tgt_in, tgt_out = reverse_batch(8, torch.Generator().manual_seed(0))
    for row, length in enumerate(src_lengths.tolist()):
        letters = src[row, :length].tolist()
        assert tgt_in[row, : length + 1].tolist() == [BOS, *letters[::-1]]
        assert tgt_out[row, : length + 1].tolist() == [*letters[::-1], EOS]
        assert set(src[row, length:].tolist()) <= {PAD} and set(tgt_out[row, length + 1 :].tolist()) <= {PAD}


@pytest.mark.parametrize(("attention", "rnn", "decoder", "input_feeding"), COMBINATIONS)
def test_learns_to_reverse(attention, rnn, decoder, input_feeding):
    torch.manual_seed(0)
    config = ModelConfig(
        rnn=rnn,
        embedding_size=32,
        encoder_hidden=32,  # per direction: 64 for the bidirectional encoder
        decoder_hidden=64,
        attention=attention,
        attention_size=32,
        decoder=decoder,
        input_feeding=input_feeding,
        dropout=0.0,
    )
    model = build_model(config, VOCAB, VOCAB)
    steps = train(model)
    accuracy = greedy_accuracy(model, reverse_batch(512, torch.Generator().manual_seed(3)))
    assert accuracy >= 0.95, f"{accuracy:.3f} token accuracy after {steps} steps"
