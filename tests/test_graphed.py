"""The fixed-shape search (`graphed`) against `search`, on real decoders run eagerly on the CPU.

The CUDA-graph replay itself needs a CUDA device (benchmarks.gpu measures it there); the step
it replays is the one tested here, with the same buffers."""

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.models.seq2seq import build_model
from attnmt.search.beam import beam_search
from attnmt.search.decode import decode_all
from attnmt.search.graphed import fixed_beam_search, fixed_greedy
from attnmt.search.greedy import greedy
from attnmt.search.options import SearchOptions
from attnmt.vocab import EOS

SRC_VOCAB, TGT_VOCAB = 17, 13

# Each with the initialization range and EOS bias that spread its output lengths on the test
# sources: some sentences end within a step or two, others run to their length limit.
DECODERS = {
    "bahdanau gru": ModelConfig(embedding_size=8, encoder_hidden=6, decoder_hidden=10, dropout=0.0, init_scale=1.0),
    "luong lstm, input feeding, general": ModelConfig(
        rnn="lstm",
        decoder="luong",
        attention="general",
        embedding_size=8,
        encoder_hidden=5,
        decoder_hidden=10,
        decoder_layers=2,
        dropout=0.0,
        init_scale=2.0,
    ),
    "luong gru, dot, no feeding": ModelConfig(
        decoder="luong",
        attention="dot",
        input_feeding=False,
        embedding_size=8,
        encoder_hidden=5,
        dropout=0.0,
        init_scale=2.0,
    ),
    "vanilla": ModelConfig(
        attention="none", embedding_size=8, encoder_hidden=6, decoder_hidden=10, dropout=0.0, init_scale=1.0
    ),
}
EOS_BIAS = {
    "bahdanau gru": 3.0,
    "luong lstm, input feeding, general": 2.0,
    "luong gru, dot, no feeding": 3.0,
    "vanilla": 1.0,
}


def model_for(name: str) -> torch.nn.Module:
    torch.manual_seed(3)
    model = build_model(DECODERS[name], SRC_VOCAB, TGT_VOCAB).eval()
    with torch.no_grad():
        model.decoder.output.bias[EOS] += EOS_BIAS[name]
    return model


def random_sources(count: int = 12, seed: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (count,), generator=generator)
    src = torch.randint(4, SRC_VOCAB, (count, int(lengths.max())), generator=generator)
    src[torch.arange(src.size(1))[None, :] >= lengths[:, None]] = 0  # PAD after each sentence
    return src, lengths


def assert_same(fixed, searched) -> None:
    assert [h.tokens for h in fixed] == [h.tokens for h in searched]
    for a, b in zip(fixed, searched, strict=True):
        assert a.log_prob == pytest.approx(b.log_prob, rel=1e-5, abs=1e-5)
        assert a.score == pytest.approx(b.score, rel=1e-5, abs=1e-5)
        assert a.attention.shape == b.attention.shape
        assert torch.allclose(a.attention, b.attention, atol=1e-5)


@pytest.mark.parametrize("name", list(DECODERS))
def test_fixed_greedy_equals_greedy(name):
    model = model_for(name)
    src, lengths = random_sources()
    options = SearchOptions(max_length_a=1.0, max_length_b=3)
    searched = greedy(model, src, lengths, options)
    assert len({len(h.tokens) for h in searched}) > 2  # the lengths differ: rows finish at different steps
    assert_same(fixed_greedy(model, src, lengths, options, graphs=False), searched)


@pytest.mark.parametrize("name", list(DECODERS))
@pytest.mark.parametrize(("beam", "alpha"), [(3, 1.0), (4, 0.0)])
def test_fixed_beam_search_equals_beam_search(name, beam, alpha):
    model = model_for(name)
    src, lengths = random_sources()
    options = SearchOptions(beam_size=beam, n_best=2, length_penalty=alpha, max_length_a=1.0, max_length_b=3)
    searched = beam_search(model, src, lengths, options)
    fixed = fixed_beam_search(model, src, lengths, options, graphs=False)
    assert [len(hypotheses) for hypotheses in fixed] == [len(hypotheses) for hypotheses in searched]
    for ours, theirs in zip(fixed, searched, strict=True):
        assert_same(ours, theirs)


@pytest.mark.parametrize("check_every", [1, 3, 100])
def test_how_often_the_host_checks_changes_nothing(check_every):
    model = model_for("bahdanau gru")
    src, lengths = random_sources()
    options = SearchOptions(beam_size=3, n_best=3)
    reference = fixed_beam_search(model, src, lengths, options, graphs=False)
    again = fixed_beam_search(model, src, lengths, options, graphs=False, check_every=check_every)
    for ours, theirs in zip(again, reference, strict=True):
        assert_same(ours, theirs)
    greedy_options = SearchOptions()
    assert_same(
        fixed_greedy(model, src, lengths, greedy_options, graphs=False, check_every=check_every),
        greedy(model, src, lengths, greedy_options),
    )


@pytest.mark.parametrize("beam", [1, 3])
def test_decode_all_with_fixed_shapes_equals_the_search(beam):
    model = model_for("luong lstm, input feeding, general")
    src, lengths = random_sources(count=30, seed=8)
    sources = [row[:length].tolist() for row, length in zip(src, lengths, strict=True)] + [[]]
    options = SearchOptions(beam_size=beam, n_best=beam)
    searched = decode_all(model, sources, options, batch_size=7)
    fixed = decode_all(model, sources, options, batch_size=7, fixed_shapes=True)
    for ours, theirs in zip(fixed, searched, strict=True):
        assert_same(ours, theirs)


def test_an_ensemble_searches_the_same_in_fixed_shapes():
    from attnmt.ensemble import Ensemble

    ensemble = Ensemble([model_for("bahdanau gru"), model_for("luong lstm, input feeding, general")])
    src, lengths = random_sources()
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=2)):
        searched = decode_all(ensemble, [row[:n].tolist() for row, n in zip(src, lengths, strict=True)], options)
        fixed = decode_all(
            ensemble, [row[:n].tolist() for row, n in zip(src, lengths, strict=True)], options, fixed_shapes=True
        )
        for ours, theirs in zip(fixed, searched, strict=True):
            assert_same(ours, theirs)
