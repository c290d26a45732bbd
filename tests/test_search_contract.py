"""The contract of steering: a sentence that is not steered is searched exactly as the plain search
would, whatever its batch-mates ask for. In a batch where other sentences must begin with a
prefix or contain required phrases, a free sentence gets the plain search's hypotheses (the same
tokens; scores and attention equal within float tolerance), greedy or beam, for every decoder and
score."""

import random

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.model import build_model
from attnmt.prefix import Prefix
from attnmt.search import SearchOptions, decode_all

SRC_VOCAB, TGT_VOCAB = 15, 17
SOURCES = [[random.Random(n).randrange(4, SRC_VOCAB) for _ in range(1 + n % 7)] for n in range(12)]
STEERED = {0, 5, 7}  # the sentences given a prefix or phrases; the others are free
SEARCHES = [
    SearchOptions(),
    SearchOptions(beam_size=3, n_best=3),
    SearchOptions(beam_size=5, n_best=2, length_penalty=0.6),
]
SEARCH_NAMES = ["greedy", "beam 3", "beam 5, alpha 0.6"]
KINDS = [
    {"decoder": decoder, "attention": attention}
    for decoder in ("bahdanau", "luong")
    for attention in ("additive", "dot", "scaled_dot", "general", "none")
    if not (attention in ("dot", "scaled_dot") and decoder == "bahdanau")  # sizes differ: keys 2x5, queries 7
]


def untrained(kind: dict) -> torch.nn.Module:
    """A model whose random weights give varied, sentence-specific outputs (init scale 0.5)."""
    torch.manual_seed(0)
    sizes = {"embedding_size": 6, "encoder_hidden": 5, "decoder_hidden": 10 if "dot" in kind["attention"] else 7}
    config = ModelConfig(**sizes, attention_size=4, dropout=0.0, init="uniform", init_scale=0.5, **kind)
    return build_model(config, SRC_VOCAB, TGT_VOCAB).eval()


def assert_same_search(steered, plain, sentence: int) -> None:
    assert len(steered) == len(plain), f"sentence {sentence}: {len(steered)} hypotheses, plainly {len(plain)}"
    for rank, (mine, theirs) in enumerate(zip(steered, plain, strict=True)):
        where = f"sentence {sentence}, hypothesis {rank}"
        assert mine.tokens == theirs.tokens, where
        assert mine.score == pytest.approx(theirs.score, abs=1e-5), where
        assert mine.log_prob == pytest.approx(theirs.log_prob, abs=1e-5), where
        torch.testing.assert_close(mine.attention, theirs.attention, atol=1e-5, rtol=0, msg=where)


@pytest.mark.parametrize("options", SEARCHES, ids=SEARCH_NAMES)
@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: f"{kind['decoder']}-{kind['attention']}")
def test_a_free_sentence_beside_required_phrases_is_searched_as_plain_search(kind, options):
    model = untrained(kind)
    plain = decode_all(model, SOURCES, options, batch_size=4)
    required = [[[4 + n % 5], [6, 7]] if n in STEERED else [] for n in range(len(SOURCES))]
    steered = decode_all(model, SOURCES, options, batch_size=4, required=required)
    for sentence in range(len(SOURCES)):
        if sentence not in STEERED:
            assert_same_search(steered[sentence], plain[sentence], sentence)


@pytest.mark.parametrize("options", SEARCHES, ids=SEARCH_NAMES)
@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: f"{kind['decoder']}-{kind['attention']}")
def test_a_free_sentence_beside_prefixed_ones_is_searched_as_plain_search(kind, options):
    model = untrained(kind)
    plain = decode_all(model, SOURCES, options, batch_size=4)
    prefixes = [Prefix((4 + n % 5, 9), (), TGT_VOCAB) if n in STEERED else None for n in range(len(SOURCES))]
    steered = decode_all(model, SOURCES, options, batch_size=4, prefixes=prefixes)
    for sentence in range(len(SOURCES)):
        if sentence not in STEERED:
            assert_same_search(steered[sentence], plain[sentence], sentence)
        else:
            assert all(h.tokens[:2] == [4 + sentence % 5, 9] for h in steered[sentence])  # steering did apply
