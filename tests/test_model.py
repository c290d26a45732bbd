"""Seq2Seq as a whole: padding invariance, the search API, the builder, initialization, summary."""

import itertools

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.models.decoder import DecoderState
from attnmt.models.seq2seq import EncoderOutput, build_model, initialize, summary
from attnmt.vocab import BOS, PAD

SRC_VOCAB, TGT_VOCAB = 13, 11
COMBINATIONS = [
    pytest.param(attention, rnn, decoder, feeding, id=f"{attention}-{rnn}-{decoder}{'-feed' if feeding else ''}")
    for attention, rnn, (decoder, feeding) in itertools.product(
        ("additive", "dot", "scaled_dot", "general", "none"),
        ("gru", "lstm"),
        (("bahdanau", False), ("luong", True), ("luong", False)),
    )
]


def make_model(**settings):
    torch.manual_seed(0)
    config = ModelConfig(
        **{
            "embedding_size": 6,
            "encoder_hidden": 5,
            "decoder_hidden": 7,
            "attention_size": 4,
            "dropout": 0.0,
            "init_scale": 0.5,
            "init": "uniform",
            **settings,
        }
    )
    return build_model(config, SRC_VOCAB, TGT_VOCAB).eval()


def padded_batch(src_lengths=(5, 2, 4), tgt_lengths=(3, 6, 2), seed=0):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, SRC_VOCAB, (len(src_lengths), max(src_lengths)), generator=generator)
    tgt_in = torch.randint(4, TGT_VOCAB, (len(tgt_lengths), max(tgt_lengths)), generator=generator)
    tgt_in[:, 0] = BOS
    src_lengths = torch.tensor(src_lengths)
    src_padding = torch.arange(src.shape[1]).unsqueeze(0) >= src_lengths.unsqueeze(1)
    tgt_real = torch.arange(tgt_in.shape[1]).unsqueeze(0) < torch.tensor(tgt_lengths).unsqueeze(1)
    return src.masked_fill(src_padding, PAD), src_lengths, tgt_in.masked_fill(~tgt_real, PAD), tgt_real


@pytest.mark.parametrize(("attention", "rnn", "decoder", "input_feeding"), COMBINATIONS)
def test_padding_invariance_and_one_by_one(attention, rnn, decoder, input_feeding):
    model = make_model(attention=attention, rnn=rnn, decoder=decoder, input_feeding=input_feeding)
    src, src_lengths, tgt_in, tgt_real = padded_batch()
    with torch.no_grad():
        logits, weights = model(src, src_lengths, tgt_in)
        src_padding = torch.arange(src.shape[1]).unsqueeze(0) >= src_lengths.unsqueeze(1)
        noisy_logits, noisy_weights = model(src.masked_fill(src_padding, 9), src_lengths, tgt_in)
        assert torch.equal(logits, noisy_logits) and torch.equal(weights, noisy_weights)
        for row in range(len(src)):
            src_len, tgt_len = int(src_lengths[row]), int(tgt_real[row].sum())
            alone_logits, alone_weights = model(
                src[row : row + 1, :src_len], src_lengths[row : row + 1], tgt_in[row : row + 1, :tgt_len]
            )
            torch.testing.assert_close(logits[row, :tgt_len], alone_logits[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(weights[row, :tgt_len, :src_len], alone_weights[0], atol=1e-5, rtol=1e-5)
    real_sums = weights.sum(-1)[tgt_real]
    torch.testing.assert_close(real_sums, torch.full_like(real_sums, 0.0 if attention == "none" else 1.0))
    assert weights.masked_select(src_padding.unsqueeze(1)).eq(0).all()


@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
@pytest.mark.parametrize("attention", ["additive", "general", "dot"])
def test_keys_are_projected_once_per_batch(attention, decoder):
    model = make_model(attention=attention, decoder=decoder)  # H_enc 10 != H_dec 7: dot projects too
    calls = []
    model.decoder.attention.key_projection.register_forward_hook(lambda *args: calls.append(1))
    src, src_lengths, tgt_in, _ = padded_batch()
    model(src, src_lengths, tgt_in)
    assert len(calls) == 1
    encoder_output = model.encode(src, src_lengths)
    state = model.init_state(encoder_output)
    for t in range(tgt_in.shape[1]):
        _, state, _ = model.next_log_probs(tgt_in[:, t], state, encoder_output)
    assert len(calls) == 2


@pytest.mark.parametrize(("rnn", "decoder"), [("gru", "bahdanau"), ("lstm", "luong")])
def test_index_select_repeats_and_reorders_rows_for_beams(rnn, decoder):
    model = make_model(rnn=rnn, decoder=decoder, decoder_layers=2)
    src, src_lengths, tgt_in, _ = padded_batch()
    with torch.no_grad():
        encoder_output = model.encode(src, src_lengths)
        assert isinstance(encoder_output, EncoderOutput)
        assert encoder_output.mask.dtype == torch.bool and encoder_output.mask.shape == src.shape
        state = model.init_state(encoder_output)
        assert isinstance(state, DecoderState)
        _, state, _ = model.next_log_probs(tgt_in[:, 0], state, encoder_output)
        rows = torch.tensor([2, 2, 0, 1, 0])  # repeat and reorder, as beam search does
        beams_output, beams_state = encoder_output.index_select(rows), state.index_select(rows)
        assert model.init_state(beams_output).hidden.shape[1] == 5
        next_log_probs, _, next_weights = model.next_log_probs(tgt_in[:, 1], state, encoder_output)
        beam_log_probs, _, beam_weights = model.next_log_probs(tgt_in[rows, 1], beams_state, beams_output)
    torch.testing.assert_close(beam_log_probs, next_log_probs[rows])
    torch.testing.assert_close(beam_weights, next_weights[rows])


@pytest.mark.parametrize(
    ("decoder", "embedding_size", "projection"), [("bahdanau", 6, False), ("luong", 6, True), ("luong", 7, False)]
)
def test_tied_embeddings_share_one_matrix(decoder, embedding_size, projection):
    model = make_model(decoder=decoder, embedding_size=embedding_size, tie_embeddings=True)
    assert model.decoder.output.weight is model.decoder.embedding.weight
    assert (getattr(model.decoder, "to_embedding", None) is not None) == projection
    untied = make_model(decoder=decoder, embedding_size=embedding_size)
    assert untied.decoder.output.weight is not untied.decoder.embedding.weight
    src, src_lengths, tgt_in, _ = padded_batch()
    assert model(src, src_lengths, tgt_in)[0].shape == (3, tgt_in.shape[1], TGT_VOCAB)


def test_uniform_init_is_bounded_and_pad_rows_are_zero():
    model = make_model(init="uniform", init_scale=0.08)
    for name, parameter in model.named_parameters():
        assert parameter.abs().max() <= 0.08, name
    assert model.encoder.embedding.weight[PAD].eq(0).all() and model.decoder.embedding.weight[PAD].eq(0).all()


def test_xavier_init_orthogonal_recurrence_and_forget_bias():
    model = make_model(init="xavier", rnn="lstm", decoder_layers=2)
    hidden = model.decoder.rnn.hidden_size
    for name, parameter in model.named_parameters():
        if "weight_hh" in name:
            for block in parameter.split(parameter.shape[1]):
                torch.testing.assert_close(block @ block.T, torch.eye(block.shape[0]), atol=1e-5, rtol=0)
        elif name.endswith("bias_ih_l0"):
            size = parameter.numel() // 4
            assert parameter[size : 2 * size].eq(1).all() and parameter[:size].eq(0).all(), name
        elif parameter.dim() == 1 and "bias_ih" not in name:
            assert parameter.eq(0).all(), name
    assert model.decoder.rnn.weight_hh_l1.shape == (4 * hidden, hidden)
    assert model.decoder.embedding.weight[PAD].eq(0).all()
    with pytest.raises(ValueError, match="unknown init"):
        initialize(model, scheme="normal")


@pytest.mark.parametrize("attention", ["additive", "dot", "scaled_dot", "general"])
@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
def test_default_init_keeps_the_output_layer_range_whatever_the_vocabulary(decoder, attention):
    """The cause of an attention collapse, held at its root. Glorot's range for the (V, H) output
    matrix, sqrt(6 / (V + H)), shrinks with the vocabulary: 0.031 for Multi30k's 5,790 BPE tokens
    and H = 512. From there the Luong decoder with the general score put almost all of its
    attention on source position 0 after a few hundred updates on Multi30k, while the same model
    with only the output matrix drawn from U(-0.1, 0.1) learned to align (docs/design.md,
    "Initialization"). The default must start the output layer at the same range for a
    100-token and a 6,000-token vocabulary."""
    config = ModelConfig(decoder=decoder, attention=attention)  # every size and the init at their defaults
    ranges = []
    for vocabulary in (100, 6000):
        torch.manual_seed(0)
        output = build_model(config, 50, vocabulary).decoder.output.weight
        ranges.append(output.detach().abs().max().item())
    small, large = ranges
    assert large >= 0.9 * small, f"output range {large:.3f} at V=6000 against {small:.3f} at V=100"
    assert large >= 0.09, f"output range {large:.3f}: the layer starts too flat for its logits to matter"


def test_summary_counts_every_parameter_once():
    model = make_model(tie_embeddings=True, decoder="luong")
    text = summary(model)
    total = sum(p.numel() for p in model.parameters())  # parameters() yields a tied matrix once
    assert text.splitlines()[-1].split()[-1] == f"{total:,}"
    for part in ("encoder.embedding", "encoder.rnn", "decoder.bridge", "decoder.attention", "decoder.rnn"):
        assert part in text
    # parts without parameters (dropout, the attentional vector's tanh) neither show nor widen the table
    assert "attentional_activation" not in text and "dropout" not in text
    assert len(text.splitlines()[0]) == len("decoder.to_embedding") + 2 + 12


def test_dropout_is_active_only_in_training():
    model = make_model(dropout=0.3, encoder_layers=2, decoder_layers=2)
    assert model.decoder.dropout.p == 0.3 and model.decoder.rnn.dropout == 0.3
    src, src_lengths, tgt_in, _ = padded_batch()
    model.train()
    assert not torch.equal(model(src, src_lengths, tgt_in)[0], model(src, src_lengths, tgt_in)[0])
    model.eval()
    assert torch.equal(model(src, src_lengths, tgt_in)[0], model(src, src_lengths, tgt_in)[0])


def test_bridge_zeros_and_layer_mapping():
    zeros = make_model(bridge="zeros", rnn="lstm")
    src, src_lengths, _, _ = padded_batch()
    state = zeros.init_state(zeros.encode(src, src_lengths))
    assert state.hidden.eq(0).all() and state.cell.eq(0).all()
    layerwise = make_model(encoder_layers=2, decoder_layers=2)
    output = layerwise.encode(src, src_lengths)
    expected = torch.tanh(layerwise.decoder.bridge.projection(output.final_hidden))  # layer i from layer i
    torch.testing.assert_close(layerwise.init_state(output).hidden, expected)
    from_top = make_model(encoder_layers=1, decoder_layers=3)
    hidden = from_top.init_state(from_top.encode(src, src_lengths)).hidden
    assert hidden.shape[0] == 3 and torch.equal(hidden[0], hidden[2])  # every layer from the top one
