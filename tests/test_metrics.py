"""Metrics: sacreBLEU semantics (multi-reference, signatures), buckets, bootstrap."""

import math

import pytest

from attnmt.metrics import (
    bleu,
    bleu_by_length,
    chrf,
    paired_bootstrap,
    perplexity,
    reference_streams,
    tokenized_bleu,
)
from attnmt.utils import UserError

HYPOTHESES = ["the cat sat on the mat .", "he is calm .", "i am at home ."]


def test_perfect_output_scores_100_and_signature_says_how():
    score = bleu(HYPOTHESES, [(h,) for h in HYPOTHESES])
    assert score.score == pytest.approx(100.0)
    assert "tok:13a" in score.signature and "nrefs:1" in score.signature
    assert chrf(HYPOTHESES, [(h,) for h in HYPOTHESES]).score == pytest.approx(100.0)


def test_extra_matching_reference_can_only_help():
    one_ref = [("a cat is sitting on the mat .",), ("he's calm .",), ("i'm home .",)]
    two_refs = [(*refs, hyp) for refs, hyp in zip(one_ref, HYPOTHESES, strict=True)]
    assert bleu(HYPOTHESES, two_refs).score > bleu(HYPOTHESES, one_ref).score
    assert "nrefs:2" in bleu(HYPOTHESES, two_refs).signature


def test_variable_reference_counts_become_padded_streams():
    streams = reference_streams([("a",), ("b", "c", "d"), ("e", "f")])
    assert streams == [["a", "b", "e"], [None, "c", "f"], [None, "d", None]]
    with pytest.raises(UserError):
        reference_streams([("a",), ()])


def test_tokenized_bleu_ignores_case():
    hyps = [["The", "Cat", "sat", "."]]
    refs = [[["the", "cat", "sat", "."]]]
    assert tokenized_bleu(hyps, refs).score == pytest.approx(100.0)
    assert tokenized_bleu([["the", "cat"]], refs).length_ratio == pytest.approx(2 / 4)


def test_length_buckets_partition_the_sentences():
    lengths = [1, 5, 10, 11, 25, 70]
    hyps = ["a b c d"] * 6
    refs = [("a b c d",)] * 6
    buckets = bleu_by_length(lengths, hyps, refs)
    assert sum(b.sentences for b in buckets) == 6
    assert [b.label for b in buckets] == ["1-10", "11-20", "21-30", ">60"]


def test_mismatched_lengths_are_user_errors():
    with pytest.raises(UserError, match="2 hypotheses but 1 reference sets"):
        bleu(["a", "b"], [("a",)])


def test_perplexity():
    assert perplexity(0.0, 10) == 1.0
    assert perplexity(10 * math.log(4), 10) == pytest.approx(4.0)
    assert perplexity(1e6, 1) == math.inf


def test_paired_bootstrap_prefers_the_better_system():
    refs = [(h,) for h in HYPOTHESES] * 10
    good = HYPOTHESES * 10
    bad = ["the dog ran .", "she is loud .", "you are out ."] * 10
    baseline, other = paired_bootstrap([("good", good), ("bad", bad)], refs, samples=200)
    assert baseline.p_value is None and baseline.bleu > other.bleu
    assert other.p_value < 0.05


def test_evaluation_counts_a_word_models_unk_as_the_one_token_it_wrote():
    """Tokenized BLEU re-tokenizes the detokenized output: "<unk>" must stay one (unmatched)
    token there, or a word model's outputs look 2 tokens longer for each word it did not know."""
    from types import SimpleNamespace

    from attnmt.evaluation import evaluate
    from attnmt.splits import Example

    class Writes:
        config = SimpleNamespace(data=SimpleNamespace(src_lang="en", tgt_lang="de", lowercase=True))

        def translate(self, sources, options):
            return [SimpleNamespace(text="ein <unk> läuft.") for _ in sources]

    scored = evaluate(Writes(), [Example("a man runs.", ("Ein Mann läuft.",))])
    assert "hyp_len = 4 ref_len = 4" in scored.tokenized_bleu.detail and scored.tokenized_bleu.length_ratio == 1
