"""The Transformer family against references written from its equations: multi-head attention
head by head, sinusoidal positions element by element; decoding with the key/value cache equals
decoding without it; a padded batch equals its sentences one by one; the config names every
setting that does not apply to the chosen family."""

import math

import pytest
import torch

from attnmt.config import ModelConfig, validate
from attnmt.config_files import ConfigError
from attnmt.models.multihead import MultiHeadAttention, sinusoidal_positions
from attnmt.models.seq2seq import build_model
from attnmt.vocab import BOS

SRC_VOCAB, TGT_VOCAB = 15, 17


def reference_multihead(attention: MultiHeadAttention, query, keys, mask):
    """MultiHead(Q, K, V) = [head_1; ...; head_h] W_o, head_i = softmax(Q W_q^i (K W_k^i)^T / sqrt(d_k)
    + M) V W_v^i, one head and one sentence at a time, from the module's weights. query (B, T, D),
    keys (B, S, D), mask (B, T, S) bool -> output (B, T, D), weights (B, h, T, S)."""
    d_k = attention.head_size
    outputs, all_weights = [], []
    for b in range(query.shape[0]):
        heads, sentence_weights = [], []
        for i in range(attention.heads):
            rows = slice(i * d_k, (i + 1) * d_k)  # head i's rows of W_q, W_k, W_v
            q = query[b] @ attention.query.weight[rows].T + attention.query.bias[rows]  # (T, d_k)
            k = keys[b] @ attention.key.weight[rows].T  # (S, d_k): W_k has no bias (the softmax cancels one)
            v = keys[b] @ attention.value.weight[rows].T + attention.value.bias[rows]  # (S, d_k)
            scores = (q @ k.T) / math.sqrt(d_k)
            scores = torch.where(mask[b], scores, torch.tensor(-torch.inf))
            weights = torch.softmax(scores, dim=-1)  # (T, S)
            heads.append(weights @ v)
            sentence_weights.append(weights)
        outputs.append(torch.cat(heads, dim=-1) @ attention.output.weight.T + attention.output.bias)
        all_weights.append(torch.stack(sentence_weights))
    return torch.stack(outputs), torch.stack(all_weights)


@pytest.mark.parametrize("need_weights", [True, False], ids=["explicit", "fused"])
def test_multihead_attention_equals_its_equations_head_by_head(need_weights):
    torch.manual_seed(0)
    attention = MultiHeadAttention(model_size=12, heads=3).eval()
    query, keys = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    lengths = torch.tensor([6, 3])
    mask = (torch.arange(6) < lengths[:, None]).unsqueeze(1).expand(2, 4, 6)  # (B, T, S)
    with torch.no_grad():
        output, weights = attention(query, *attention.keys_values(keys), mask, need_weights=need_weights)
        want_output, want_weights = reference_multihead(attention, query, keys, mask)
    torch.testing.assert_close(output, want_output, atol=1e-5, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(weights, want_weights, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4))
        assert (weights[1, :, :, 3:] == 0).all()  # exactly zero on padding
    else:
        assert weights is None


def test_heads_must_divide_the_model_size():
    with pytest.raises(ValueError, match="heads"):
        MultiHeadAttention(model_size=10, heads=3)


def test_sinusoidal_positions_follow_the_papers_formula():
    encodings = sinusoidal_positions(torch.arange(7), 6)
    for pos in range(7):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert encodings[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert encodings[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def tiny_transformer(**settings):
    torch.manual_seed(0)
    sizes = {"d_model": 16, "heads": 4, "feed_forward": 32, "encoder_layers": 2, "decoder_layers": 3}
    config = ModelConfig(family="transformer", **(sizes | settings), dropout=0.0, attention_dropout=0.0)
    return build_model(config, SRC_VOCAB, TGT_VOCAB).eval()


def batch():
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(4, SRC_VOCAB, (3, 7), generator=generator)
    src_lengths = torch.tensor([7, 4, 1])
    src[1, 4:] = 0
    src[2, 1:] = 0
    tgt_in = torch.randint(4, TGT_VOCAB, (3, 6), generator=generator)
    tgt_in[:, 0] = BOS
    return src, src_lengths, tgt_in


def stepped(model, src, src_lengths, tgt_in):
    """Decoding through the cache, one position a step: log-probabilities (B, T, V), attention (B, T, S)."""
    source = model.encode(src, src_lengths)
    state = model.init_state(source)
    all_log_probs, all_attention = [], []
    for t in range(tgt_in.shape[1]):
        log_probs, state, attention = model.next_log_probs(tgt_in[:, t], state, source)
        all_log_probs.append(log_probs)
        all_attention.append(attention)
    assert state.length == tgt_in.shape[1]  # the cache holds every position decoded
    return torch.stack(all_log_probs, dim=1), torch.stack(all_attention, dim=1)


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("alignment_layer", [0, -1])
def test_cached_decoding_gives_the_scores_and_attention_of_uncached_decoding(norm, alignment_layer):
    model = tiny_transformer(norm=norm, alignment_layer=alignment_layer)
    src, src_lengths, tgt_in = batch()
    with torch.no_grad():
        logits, attention = model(src, src_lengths, tgt_in)  # every position at once, causal mask, no cache
        cached_log_probs, cached_attention = stepped(model, src, src_lengths, tgt_in)
    torch.testing.assert_close(cached_log_probs, torch.log_softmax(logits, dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cached_attention, attention, atol=1e-6, rtol=1e-5)
    assert (attention[1, :, 4:] == 0).all() and (attention[2, :, 1:] == 0).all()


def test_a_position_does_not_see_the_positions_after_it():
    model = tiny_transformer()
    src, src_lengths, tgt_in = batch()
    changed = tgt_in.clone()
    changed[:, 4:] = 5  # the last two inputs differ
    with torch.no_grad():
        before, after = model(src, src_lengths, tgt_in)[0], model(src, src_lengths, changed)[0]
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_a_padded_batch_equals_its_sentences_one_by_one():
    model = tiny_transformer()
    src, src_lengths, tgt_in = batch()
    with torch.no_grad():
        together, together_attention = stepped(model, src, src_lengths, tgt_in)
        for b in range(3):
            length = int(src_lengths[b])
            alone, alone_attention = stepped(model, src[b : b + 1, :length], src_lengths[b : b + 1], tgt_in[b : b + 1])
            torch.testing.assert_close(together[b : b + 1], alone, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(together_attention[b : b + 1, :, :length], alone_attention, atol=1e-6, rtol=1e-5)


def test_attention_maps_hold_every_layer_and_head_and_the_step_attention_is_the_alignment_layers_mean():
    model = tiny_transformer(alignment_layer=1)
    src, src_lengths, tgt_in = batch()
    maps = model.attention_maps(src, src_lengths, tgt_in)
    assert maps.encoder.shape == (3, 2, 4, 7, 7)
    assert maps.decoder.shape == (3, 3, 4, 6, 6)
    assert maps.cross.shape == (3, 3, 4, 6, 7)
    for weights in maps:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert (maps.decoder.triu(diagonal=1) == 0).all()  # no position looks ahead
    assert (maps.encoder[1, ..., 4:] == 0).all() and (maps.cross[2, ..., 1:] == 0).all()  # nor at padding
    with torch.no_grad():
        _, attention = model(src, src_lengths, tgt_in)
    torch.testing.assert_close(attention, maps.cross[:, 1].mean(dim=1))


@pytest.mark.parametrize(("layers", "middle"), [(1, 0), (2, 1), (3, 1), (6, 3)])
def test_the_alignment_layer_is_the_middle_decoder_layer_unless_the_config_names_one(layers, middle):
    assert tiny_transformer(decoder_layers=layers).alignment_layer == middle
    assert tiny_transformer(decoder_layers=layers, alignment_layer=-1).alignment_layer == layers - 1


def test_tied_embeddings_share_one_matrix():
    model = tiny_transformer(tie_embeddings=True)
    assert model.decoder.output.weight is model.decoder.embedding.weight
    with pytest.raises(ValueError, match="one vocabulary"):
        torch.manual_seed(0)
        build_model(ModelConfig(family="transformer", tie_source_embeddings=True, d_model=8, heads=2), 5, 6)


def test_the_config_names_every_setting_that_does_not_apply_to_its_family(tmp_path):
    with pytest.raises(ConfigError) as error:
        validate({"model": {"family": "transformer", "rnn": "lstm", "bridge": "copy", "heads": 2}}, "cfg.yaml")
    assert "bridge, rnn do not apply to family transformer" in str(error.value)
    with pytest.raises(ConfigError) as error:
        validate({"model": {"heads": 8, "norm": "post"}}, "cfg.yaml")
    assert "heads, norm do not apply to family rnn" in str(error.value)
    with pytest.raises(ConfigError, match=r"heads \(3\) must divide d_model \(16\)"):
        validate({"model": {"family": "transformer", "d_model": 16, "heads": 3}}, "cfg.yaml")
    with pytest.raises(ConfigError, match="scheduled sampling"):
        validate({"model": {"family": "transformer"}, "train": {"teacher_forcing": 0.5}}, "cfg.yaml")


def test_a_resolved_config_holds_its_familys_settings_only_and_validates_again():
    import yaml

    transformer = validate({"model": {"family": "transformer", "d_model": 64, "heads": 8}}, "cfg.yaml")
    written = yaml.safe_load(transformer.to_yaml())["model"]
    assert written["d_model"] == 64 and "rnn" not in written and "bridge" not in written
    assert written["encoder_layers"] == 6  # the family's own default where the config gives none
    assert validate(yaml.safe_load(transformer.to_yaml()), "again") == transformer
    recurrent = validate({}, "cfg.yaml")
    assert "heads" not in yaml.safe_load(recurrent.to_yaml())["model"]
    assert validate(yaml.safe_load(recurrent.to_yaml()), "again") == recurrent
