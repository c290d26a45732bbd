"""The paired bootstrap of the peers benchmark, checked against sacrebleu's corpus BLEU and
against BLEU written from its definition."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from benchmarks.peers.significance import corpus_bleu, paired_bootstrap, sentence_stats


def _table(stats: list[str]) -> np.ndarray:
    return np.array([[int(value) for value in row.split()] for row in stats])


def _random_texts(rng: random.Random, count: int, longest: int) -> list[str]:
    words = ["a", "b", "c", "d", "e", "f", "g", "h"]
    return [" ".join(rng.choices(words, k=rng.randint(0, longest))) for _ in range(count)]


def test_corpus_bleu_from_kept_statistics_is_sacrebleus_corpus_score():
    rng = random.Random(7)
    references = _random_texts(rng, 200, 14)
    metric = BLEU(tokenize="none", lowercase=True, force=True)
    for longest in (3, 8, 16):  # a short system has no 4-grams in many sentences: the smoothing
        hypotheses = _random_texts(rng, 200, longest)
        expected = metric.corpus_score(hypotheses, [references]).score
        assert float(corpus_bleu(_table(sentence_stats(hypotheses, references)))) == pytest.approx(expected)


def test_corpus_bleu_follows_its_definition():
    # every n-gram matches, 4 tokens against 5: BLEU = BP = exp(1 - 5/4)
    stats = sentence_stats(["a b c d"], ["a b c d e"])
    assert stats == ["4 5 4 3 2 1"]
    assert float(corpus_bleu(_table(stats))) == pytest.approx(100 * math.exp(1 - 5 / 4))
    # no 4-gram matches out of 1: the first zero count is smoothed to 1/2 ("exp")
    stats = sentence_stats(["a b c x"], ["a b c d"])
    precisions = [3 / 4, 2 / 3, 1 / 2, (1 / 2) / 1]
    expected = 100 * math.exp(sum(math.log(p) for p in precisions) / 4)
    assert float(corpus_bleu(_table(stats))) == pytest.approx(expected)
    assert float(corpus_bleu(_table(sentence_stats(["a b"], ["a b c d"])))) == 0.0  # no 3-grams at all
    assert float(corpus_bleu(_table(sentence_stats([""], ["a b"])))) == 0.0
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        sentence_stats(["a", "b"], ["a"])


def test_the_bootstrap_compares_the_same_draws_of_sentences():
    rng = random.Random(3)
    references = _random_texts(rng, 120, 12)
    exact = sentence_stats(references, references)
    shorter = sentence_stats([" ".join(line.split()[:-1]) for line in references], references)
    found = paired_bootstrap(exact, shorter, samples=200)
    assert found["bleu"][0] == pytest.approx(100.0) and found["bleu"][1] < 100.0
    assert found["delta"] == pytest.approx(found["bleu"][0] - found["bleu"][1])
    assert found["interval95"][0] <= found["delta"] <= found["interval95"][1]
    assert found["first_better_share"] == 1.0 and found["samples"] == 200
    assert paired_bootstrap(shorter, exact, samples=200)["first_better_share"] == 0.0
    same = paired_bootstrap(shorter, shorter, samples=200)
    assert same["delta"] == 0.0 and same["interval95"] == [0.0, 0.0] and same["first_better_share"] == 0.0
    assert paired_bootstrap(exact, shorter, samples=200) == found  # the same draws every time
    with pytest.raises(ValueError, match="120 and 119 sentences"):
        paired_bootstrap(exact, shorter[:-1])
