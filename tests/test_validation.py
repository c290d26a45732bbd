"""Validation during training: the greedy BLEU on sacreBLEU's tokens and on word tokens with a
word model's <unk> one token."""

import torch

from attnmt import validation
from attnmt.config import Config
from attnmt.data.batching import build_data
from attnmt.models.seq2seq import build_model
from attnmt.search.hypotheses import Hypothesis
from attnmt.vocab import UNK


def test_a_word_models_unk_is_one_word_in_the_tokenized_figures_and_three_in_sacrebleus(monkeypatch):
    config = Config.model_validate(
        {"data": {"corpus": "reverse", "synthetic_size": 200, "valid_size": 20, "test_size": 20}}
    )
    bundle = build_data(config.data)
    model = build_model(config.model, len(bundle.codec.src_vocab), len(bundle.codec.tgt_vocab))
    examples = bundle.valid.examples[: config.train.valid_bleu_sentences]

    def references_with_an_unk(model, sources, options, **kwargs):
        # each reference's tokens, its first one written as <unk>: as long as the reference in words
        outputs = [bundle.codec.tgt_vocab.encode(example.refs[0].split()) for example in examples]
        return [[Hypothesis([UNK, *ids[1:]], 0.0, 0.0, torch.zeros(len(ids) + 1, 1))] for ids in outputs]

    monkeypatch.setattr(validation, "decode_all", references_with_an_unk)
    results = validation.validate(model, bundle, config, torch.device("cpu"))
    assert results["valid_tokenized_length_ratio"] == 1.0
    assert results["valid_length_ratio"] > 1.0  # "<unk>" read as "<", "unk", ">"
    assert results["valid_tokenized_bleu"] > results["valid_bleu"]
    # a subword model writes no <unk> to speak of: its figures are sacreBLEU's alone
    pieces = config.model_copy(update={"data": config.data.model_copy(update={"tokenizer": "sentencepiece"})})
    assert "valid_tokenized_bleu" not in validation.validate(model, bundle, pieces, torch.device("cpu"))
