"""The decoders against the papers' equations, the fast path against the step path, teacher forcing.

The reference below is deliberately plain: one sentence at a time, one step at a time, one
vector at a time, no batching, no padding, no masks. It reads the model's parameters, so the
two must agree to float32 rounding on every combination of attention x RNN x decoder style.
"""

import itertools

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.models.seq2seq import build_model
from attnmt.vocab import BOS, PAD

ATTENTIONS = ("additive", "dot", "scaled_dot", "general", "none")
RNNS = ("gru", "lstm")
STYLES = (("bahdanau", True), ("luong", True), ("luong", False))  # (decoder, input_feeding)
STYLE_IDS = ("bahdanau", "luong-feed", "luong-nofeed")
COMBINATIONS = [
    pytest.param(attention, rnn, style, id=f"{attention}-{rnn}-{style_id}")
    for attention, rnn, (style, style_id) in itertools.product(ATTENTIONS, RNNS, zip(STYLES, STYLE_IDS, strict=True))
]
SRC_VOCAB, TGT_VOCAB = 13, 11
# A: bidirectional, 2 + 2 layers, all sizes different (dot needs its projection), tanh bridge.
# B: unidirectional, 1 encoder layer under 2 decoder layers, H_enc == H_dec (plain dot), tied
#    embeddings with H != E (Luong's extra projection), zero bridge.
# C: as A with H_dec == H_enc and the copy bridge.
SHAPES = {
    "A": {"embedding_size": 6, "encoder_hidden": 5, "bidirectional": True, "encoder_layers": 2, "decoder_layers": 2},
    "B": {
        "embedding_size": 6,
        "encoder_hidden": 7,
        "bidirectional": False,
        "encoder_layers": 1,
        "decoder_layers": 2,
        "tie_embeddings": True,
        "bridge": "zeros",
    },
    # C: bidirectional, 2 + 2 layers, H_dec == H_enc, the copy bridge (OpenNMT-py's start).
    "C": {
        "embedding_size": 6,
        "encoder_hidden": 4,
        "decoder_hidden": 8,
        "bidirectional": True,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "bridge": "copy",
    },
}


def make_model(attention, rnn, style, shape="A", **overrides):
    """A small model in eval mode and its config; parameters from U(-0.5, 0.5)."""
    decoder, input_feeding = style
    torch.manual_seed(1)
    config = ModelConfig(
        rnn=rnn,
        attention=attention,
        attention_size=4,
        decoder=decoder,
        input_feeding=input_feeding,
        dropout=0.0,
        init="uniform",
        init_scale=0.5,  # large enough that every path visibly matters
        **{"decoder_hidden": 7, **SHAPES[shape], **overrides},
    )
    return build_model(config, SRC_VOCAB, TGT_VOCAB).eval(), config


def padded_batch(seed=0, src_lengths=(5, 2, 4), tgt_lengths=(3, 6, 1)):
    """Sentences of unequal lengths with random (not PAD) ids at padded positions, so masking must work."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, SRC_VOCAB, (len(src_lengths), max(src_lengths)), generator=generator)
    tgt_in = torch.randint(4, TGT_VOCAB, (len(tgt_lengths), max(tgt_lengths)), generator=generator)
    tgt_in[:, 0] = BOS
    return src, torch.tensor(src_lengths), tgt_in, list(tgt_lengths)


# ---- the reference: the papers' equations, one vector at a time --------------------------------


def cell(kind, x, h, c, weights):
    """GRU (Cho et al. 2014, in torch's r/z/n form) or LSTM (i/f/g/o) on vectors."""
    w_ih, w_hh, b_ih, b_hh = weights
    if kind == "gru":
        (w_ir, w_iz, w_in), (w_hr, w_hz, w_hn) = w_ih.chunk(3), w_hh.chunk(3)
        (b_ir, b_iz, b_in), (b_hr, b_hz, b_hn) = b_ih.chunk(3), b_hh.chunk(3)
        r = torch.sigmoid(w_ir @ x + b_ir + w_hr @ h + b_hr)
        z = torch.sigmoid(w_iz @ x + b_iz + w_hz @ h + b_hz)
        n = torch.tanh(w_in @ x + b_in + r * (w_hn @ h + b_hn))
        return (1 - z) * n + z * h, None
    i, f, g, o = (w_ih @ x + b_ih + w_hh @ h + b_hh).chunk(4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def rnn_weights(rnn, layer, suffix=""):
    return [getattr(rnn, f"{name}_l{layer}{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def reference_encoder(model, kind, tokens):
    """h_j = [h_forward_j; h_backward_j] per layer; returns the top layer's annotations and per-layer finals."""
    encoder = model.encoder
    inputs = [encoder.embedding.weight[token] for token in tokens]
    hidden_size, n = encoder.rnn.hidden_size, len(tokens)
    finals = []
    for layer in range(encoder.num_layers):
        directions = [("", range(n))] + ([("_reverse", reversed(range(n)))] if encoder.directions == 2 else [])
        outputs, layer_final = [[None] * n for _ in directions], []
        for d, (suffix, order) in enumerate(directions):
            h, c = torch.zeros(hidden_size), torch.zeros(hidden_size)
            for j in order:
                h, c = cell(kind, inputs[j], h, c, rnn_weights(encoder.rnn, layer, suffix))
                outputs[d][j] = h
            layer_final.append(h)  # forward: at the last word; backward: at the first
        inputs = [torch.cat([outputs[d][j] for d in range(len(directions))]) for j in range(n)]
        finals.append(torch.cat(layer_final))
    return torch.stack(inputs), finals


def reference_attention(model, kind, query, annotations):
    """c = sum_j alpha_j h_j with alpha = softmax(e); `none`: the mean annotation, alpha = 0."""
    attention = model.decoder.attention
    if kind == "none":
        return annotations.mean(dim=0), torch.zeros(len(annotations))
    scores = []
    for h in annotations:
        if kind == "additive":  # e_j = v_a^T tanh(W_q s + W_k h_j), or tanh(W_q s + b + W_k h_j) with its bias
            inner = attention.query_projection.weight @ query + attention.key_projection.weight @ h
            if attention.query_projection.bias is not None:
                inner = inner + attention.query_projection.bias
            scores.append(attention.score_vector.weight[0] @ torch.tanh(inner))
        elif kind == "general":  # e_j = s^T W_a h_j
            scores.append(query @ attention.key_projection.weight @ h)
        else:  # e_j = s^T h_j (keys mapped to the query's size when sizes differ), / sqrt(d) if scaled
            key = h if attention.key_projection is None else attention.key_projection.weight @ h
            scores.append(query @ key / (len(query) ** 0.5 if kind == "scaled_dot" else 1.0))
    alpha = torch.exp(torch.stack(scores))
    alpha = alpha / alpha.sum()
    return sum(a * h for a, h in zip(alpha, annotations, strict=True)), alpha


def reference_stack(model, kind, x, hidden, cells):
    new_hidden, new_cells = [], []
    for layer in range(len(hidden)):
        h, c = cell(kind, x, hidden[layer], cells[layer], rnn_weights(model.decoder.rnn, layer))
        new_hidden.append(h)
        new_cells.append(c)
        x = h
    return new_hidden, new_cells


def reference_translate(model, config, src_tokens, tgt_tokens):
    """Logits (n, V) and attention weights (n, |x|) for one sentence pair, step by step."""
    decoder, kind = model.decoder, config.rnn
    annotations, finals = reference_encoder(model, kind, src_tokens)
    layers = config.decoder_layers
    if config.bridge == "tanh":  # s_0 = tanh(W_b h_final + b): layer-wise, or all from the top layer
        sources = finals if len(finals) == layers else [finals[-1]] * layers
        hidden = [torch.tanh(decoder.bridge.projection.weight @ f + decoder.bridge.projection.bias) for f in sources]
    elif config.bridge == "copy":  # s_0 = h_final itself, mapped to layers the same way
        hidden = list(finals) if len(finals) == layers else [finals[-1]] * layers
    else:
        hidden = [torch.zeros(config.decoder_hidden) for _ in range(layers)]
    cells = [torch.zeros(config.decoder_hidden) for _ in range(layers)]  # an LSTM's c_0 is zero
    feed = torch.zeros(config.decoder_hidden)  # h~_0
    all_logits, all_alpha = [], []
    for y_prev in tgt_tokens:
        e = decoder.embedding.weight[y_prev]
        if config.decoder == "bahdanau":
            context, alpha = reference_attention(model, config.attention, hidden[-1], annotations)  # from s_{t-1}
            hidden, cells = reference_stack(model, kind, torch.cat([e, context]), hidden, cells)
            t_tilde = decoder.pre_output.weight @ torch.cat([hidden[-1], context, e]) + decoder.pre_output.bias
            t = torch.maximum(t_tilde[0::2], t_tilde[1::2])  # maxout over adjacent pairs
            logits = decoder.output.weight @ t + decoder.output.bias
        else:
            x = torch.cat([e, feed]) if config.input_feeding else e
            hidden, cells = reference_stack(model, kind, x, hidden, cells)
            context, alpha = reference_attention(model, config.attention, hidden[-1], annotations)  # from h_t
            feed = decoder.combine.weight @ torch.cat([context, hidden[-1]])  # h~_t = tanh(W_c [c_t; h_t]),
            feed = torch.tanh(feed) if config.attentional_tanh else feed  # or without the tanh (OpenNMT-py's mlp)
            projected = feed if decoder.to_embedding is None else decoder.to_embedding.weight @ feed
            logits = decoder.output.weight @ projected + decoder.output.bias
        all_logits.append(logits)
        all_alpha.append(alpha)
    return torch.stack(all_logits), torch.stack(all_alpha)


# ---- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["A", "B", "C"])
@pytest.mark.parametrize(("attention", "rnn", "style"), COMBINATIONS)
def test_batched_model_matches_the_equations(attention, rnn, style, shape):
    model, config = make_model(attention, rnn, style, shape)
    src, src_lengths, tgt_in, tgt_lengths = padded_batch()
    with torch.no_grad():
        logits, weights = model(src, src_lengths, tgt_in)
        for row, (src_len, tgt_len) in enumerate(zip(src_lengths.tolist(), tgt_lengths, strict=True)):
            src_tokens, tgt_tokens = src[row, :src_len].tolist(), tgt_in[row, :tgt_len].tolist()
            expected_logits, expected_weights = reference_translate(model, config, src_tokens, tgt_tokens)
            torch.testing.assert_close(logits[row, :tgt_len], expected_logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(weights[row, :tgt_len, :src_len], expected_weights, atol=1e-5, rtol=1e-5)
            assert weights[row, :, src_len:].eq(0).all()


@pytest.mark.parametrize("rnn", RNNS)
@pytest.mark.parametrize(("attentional_tanh", "attention_bias"), [(False, False), (True, True), (False, True)])
def test_opennmt_pys_mlp_attention_matches_the_equations(attentional_tanh, attention_bias, rnn):
    """The Luong step as OpenNMT-py's `global_attention mlp` computes it: the attentional vector
    without the tanh, a bias in the additive score; both options reach the model's outputs."""
    options = {"attentional_tanh": attentional_tanh, "attention_bias": attention_bias}
    model, config = make_model("additive", rnn, ("luong", True), "C", **options)
    luong, _ = make_model("additive", rnn, ("luong", True), "C")
    src, src_lengths, tgt_in, tgt_lengths = padded_batch(seed=5)
    with torch.no_grad():
        logits, weights = model(src, src_lengths, tgt_in)
        assert not torch.allclose(logits, luong(src, src_lengths, tgt_in)[0], atol=1e-3)
        for row, (src_len, tgt_len) in enumerate(zip(src_lengths.tolist(), tgt_lengths, strict=True)):
            src_tokens, tgt_tokens = src[row, :src_len].tolist(), tgt_in[row, :tgt_len].tolist()
            expected_logits, expected_weights = reference_translate(model, config, src_tokens, tgt_tokens)
            torch.testing.assert_close(logits[row, :tgt_len], expected_logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(weights[row, :tgt_len, :src_len], expected_weights, atol=1e-5, rtol=1e-5)


def step_by_step(model, src, src_lengths, tgt_in):
    """Teacher forcing through the step interface greedy and beam search use (`search.StepModel`):
    log-probabilities (B, T, V) and attention (B, T, S)."""
    encoder_output = model.encode(src, src_lengths)
    state = model.init_state(encoder_output)
    all_log_probs, all_weights = [], []
    for t in range(tgt_in.shape[1]):
        log_probs, state, weights = model.next_log_probs(tgt_in[:, t], state, encoder_output)
        all_log_probs.append(log_probs)
        all_weights.append(weights)
    return torch.stack(all_log_probs, dim=1), torch.stack(all_weights, dim=1)


def teacher_forced(model, src, src_lengths, tgt_in):
    """The training forward pass, as log-probabilities (B, T, V) and attention (B, T, S)."""
    logits, weights = model(src, src_lengths, tgt_in)
    return logits.float().log_softmax(-1), weights


@pytest.mark.parametrize(("attention", "rnn", "style"), COMBINATIONS)
def test_teacher_forced_forward_equals_step_path_with_gradients(attention, rnn, style):
    """Covers the fast path (one RNN call) and the hoisted loop against the search's step."""
    model, _ = make_model(attention, rnn, style)
    src, src_lengths, tgt_in, tgt_lengths = padded_batch(seed=3)
    real = (torch.arange(tgt_in.shape[1]) < torch.tensor(tgt_lengths).unsqueeze(1)).unsqueeze(-1)  # (B, T, 1)
    probe = torch.randn(*tgt_in.shape, TGT_VOCAB, generator=torch.Generator().manual_seed(0)) * real
    results = []
    for path in (teacher_forced, step_by_step):
        model.zero_grad()
        log_probs, weights = path(model, src, src_lengths, tgt_in)
        (log_probs * probe).sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        results.append((log_probs.detach(), weights.detach(), grads))
    (fast_log_probs, fast_weights, fast_grads), (step_log_probs, step_weights, step_grads) = results
    torch.testing.assert_close(fast_log_probs, step_log_probs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast_weights, step_weights, atol=1e-5, rtol=1e-5)
    assert fast_grads.keys() == step_grads.keys()
    for name in fast_grads:
        torch.testing.assert_close(fast_grads[name], step_grads[name], atol=1e-5, rtol=1e-5, msg=name)


def known_successor_model(attention="additive", rnn="gru"):
    """A Bahdanau model that always predicts (previous input token + 1) mod V, whatever the source.

    Embeddings are one-hot, the deep output reads only E y_{t-1} (both maxout halves equal), and
    W_out maps one-hot i to a large logit at i + 1. So the argmax reveals which token was fed.
    """
    model, _ = make_model(attention, rnn, ("bahdanau", True), embedding_size=TGT_VOCAB)
    decoder, size = model.decoder, TGT_VOCAB
    with torch.no_grad():
        decoder.embedding.weight.copy_(torch.eye(size))
        decoder.pre_output.weight.zero_()
        decoder.pre_output.bias.zero_()
        identity_twice = torch.eye(size).repeat_interleave(2, dim=0)  # (2E, E): row 2i and 2i+1 read e_i
        decoder.pre_output.weight[:, -size:] = identity_twice
        decoder.output.weight.copy_(10.0 * torch.roll(torch.eye(size), shifts=1, dims=0))  # i -> i + 1
        decoder.output.bias.zero_()
    return model


def test_teacher_forcing_ratio_one_feeds_gold_and_zero_feeds_own_argmax():
    model = known_successor_model()
    src, src_lengths, tgt_in, _ = padded_batch(seed=5, tgt_lengths=(6, 6, 6))
    with torch.no_grad():
        gold_fed = model(src, src_lengths, tgt_in, teacher_forcing_ratio=1.0)[0].argmax(-1)
        self_fed = model(src, src_lengths, tgt_in, teacher_forcing_ratio=0.0)[0].argmax(-1)
    assert torch.equal(gold_fed, (tgt_in + 1) % TGT_VOCAB)
    expected = (BOS + 1 + torch.arange(tgt_in.shape[1])) % TGT_VOCAB  # BOS, then its successors
    assert torch.equal(self_fed, expected.expand_as(self_fed))


def test_teacher_forcing_mixes_per_sentence_per_step_and_repeats_with_a_seed():
    model = known_successor_model(rnn="lstm")
    src = torch.randint(4, SRC_VOCAB, (64, 5), generator=torch.Generator().manual_seed(0))
    tgt_in = torch.randint(4, TGT_VOCAB, (64, 8), generator=torch.Generator().manual_seed(1))
    tgt_in[:, 0] = BOS
    src_lengths = torch.full((64,), 5)
    with torch.no_grad():
        runs = [model(src, src_lengths, tgt_in, 0.5, torch.Generator().manual_seed(7))[0].argmax(-1) for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    fed = (runs[0] - 1) % TGT_VOCAB  # the token fed at each step
    gold = fed[:, 1:] == tgt_in[:, 1:]
    own = fed[:, 1:] == runs[0][:, :-1]
    assert (gold | own).all()
    strictly_gold = gold & ~own
    assert 0.3 < strictly_gold.float().mean() < 0.7  # roughly half of the steps are gold-fed
    per_step = strictly_gold.any(dim=0) & (~gold).any(dim=0)
    assert per_step.all(), "each step mixes gold-fed and self-fed sentences"


@pytest.mark.parametrize("style", STYLES, ids=STYLE_IDS)
def test_ratio_zero_equals_a_greedy_step_loop(style):
    model, _ = make_model("general", "gru", style)
    src, src_lengths, tgt_in, _ = padded_batch(seed=2)
    with torch.no_grad():
        logits, weights = model(src, src_lengths, tgt_in, teacher_forcing_ratio=0.0)
        encoder_output = model.encode(src, src_lengths)
        state, tokens = model.init_state(encoder_output), tgt_in[:, 0]
        for t in range(tgt_in.shape[1]):
            step_log_probs, state, step_weights = model.next_log_probs(tokens, state, encoder_output)
            torch.testing.assert_close(logits[:, t].log_softmax(-1), step_log_probs)
            torch.testing.assert_close(weights[:, t], step_weights)
            tokens = step_log_probs.argmax(-1)


def test_padding_token_at_target_padding_is_irrelevant():
    model, _ = make_model("additive", "lstm", ("luong", True))
    src, src_lengths, tgt_in, tgt_lengths = padded_batch(seed=4)
    real = torch.arange(tgt_in.shape[1]) < torch.tensor(tgt_lengths).unsqueeze(1)
    with torch.no_grad():
        logits, weights = model(src, src_lengths, tgt_in)
        other_logits, other_weights = model(src, src_lengths, tgt_in.masked_fill(~real, PAD))
    assert torch.equal(logits[real], other_logits[real])
    assert torch.equal(weights[real], other_weights[real])
