"""What the search tests share: untrained models of every decoder and score kind and a transformer, whose random
weights give varied, sentence-specific outputs; sources over their vocabularies; the searches
they are run with; and the check that two searches gave the same hypotheses."""

import random

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.loading import ModelSpec, load
from attnmt.models.seq2seq import build_model
from attnmt.search.options import SearchOptions

SRC_VOCAB, TGT_VOCAB = 15, 17
SOURCES = [[random.Random(n).randrange(4, SRC_VOCAB) for _ in range(1 + n % 7)] for n in range(12)]
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
] + [{"family": "transformer"}]
# a two-layer transformer, as small as the recurrent kinds
TRANSFORMER = {"d_model": 8, "heads": 2, "feed_forward": 16, "encoder_layers": 2, "decoder_layers": 2}


def kind_name(kind: dict) -> str:
    return kind.get("family") or f"{kind['decoder']}-{kind['attention']}"


def untrained(kind: dict) -> torch.nn.Module:
    """A model whose random weights give varied, sentence-specific outputs (init scale 0.5)."""
    torch.manual_seed(0)
    if kind.get("family") == "transformer":
        config = ModelConfig(family="transformer", **TRANSFORMER, dropout=0.0, attention_dropout=0.0)
        return build_model(config, SRC_VOCAB, TGT_VOCAB).eval()
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


ENGINES = ["torch", "onnxruntime", "ensemble", "shortlist"]


def translator_for(tiny, engine: str):
    """The tiny run (`tiny` in conftest.py) loaded on `engine`: torch, its ONNX export, an ensemble
    of it with itself, or torch with its shortlist."""
    run = tiny / "run"
    if engine == "onnxruntime":
        return load(ModelSpec(tiny / "export"))
    if engine == "ensemble":
        return load(ModelSpec((run, run), device="cpu"))
    return load(ModelSpec(run, device="cpu", shortlist=engine == "shortlist"))


# sources over the tiny runs' vocabulary (`tiny` in conftest.py), one to eleven tokens
TINY_SOURCES = [[random.Random(n).randrange(4, 12) for _ in range(n)] for n in range(1, 12)]
