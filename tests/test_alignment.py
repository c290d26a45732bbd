"""Word alignments from attention: tokens mapped to the words of the detokenized text, each target
word aligned to its most-attended source word, Pharaoh pairs, and the alignment error rate; on
the reverse task, where the true alignment is known, the model's alignments are nearly all right."""

import random

import pytest
import torch

from attnmt.alignment import aer, alignment, pharaoh, word_of_tokens
from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions
from attnmt.tokenize import WordTokenizer
from tests.cli_helpers import run_ok


def test_tokens_map_to_the_words_of_the_detokenized_text():
    pieces = ["\u2581Ein", "\u2581Ma", "nn", "\u2581spielt", "."]
    assert word_of_tokens(pieces, "Ein Mann spielt.", lambda p: p.replace("\u2581", " ")) == [0, 1, 1, 2, 2]
    words = WordTokenizer("en")
    tokens = words.tokenize("A man, he said: don't.")
    text = words.detokenize(tokens)
    assert tokens == ["A", "man", ",", "he", "said", ":", "do", "n't", "."]
    assert word_of_tokens(tokens, text, words.surface) == [0, 1, 1, 2, 3, 3, 4, 4, 4]


def test_each_target_word_gets_its_most_attended_source_word_once():
    attention = torch.tensor(
        [[0.1, 0.7, 0.2], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.9, 0.05, 0.05]]  # three tokens, then </s>
    )
    source_words, target_words = [0, 1, 1], [0, 0, 1]  # source tokens 1 and 2 one word; target tokens 0 and 1
    assert alignment(attention, source_words, target_words) == [(0, 0), (1, 0), (1, 1)]
    assert pharaoh([(0, 0), (1, 0), (1, 1)]) == "0-0 1-0 1-1"


def test_alignment_error_rate_follows_och_and_ney():
    sure, possible = {(0, 0), (1, 1)}, {(2, 1)}
    assert aer(sure, sure) == 0.0
    assert aer({(0, 0), (2, 1)}, sure, possible) == pytest.approx(1 - (1 + 2) / 4)
    assert aer({(0, 1)}, sure, possible) == 1.0
    assert aer((), (), ()) == 0.0


def test_on_the_reverse_task_the_alignments_of_the_true_reversal_are_at_most_5_percent_wrong(reverse_run):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    rng = random.Random(3)
    sources = [" ".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 8))) for _ in range(100)]
    reversals = [" ".join(reversed(source.split())) for source in sources]
    found, sure = set(), set()
    for number, scored in enumerate(translator.score(sources, reversals, SearchOptions())):
        length = len(scored.source_tokens)
        found |= {(number, i, j) for i, j in translator.align(scored)}
        sure |= {(number, length - 1 - j, j) for j in range(length)}
    assert aer(found, sure) <= 0.05


def test_translate_and_score_write_alignments(reverse_run, capsys):
    line = run_ok(capsys, "translate", str(reverse_run), "a b c", "--alignment").strip()
    text, alignment_field = line.split(" ||| ")
    assert len(text.split()) == 3 and all("-" in pair for pair in alignment_field.split())
    nbest = run_ok(capsys, "translate", str(reverse_run), "a b c", "--alignment", "--beam", "2", "--n-best", "2")
    assert all(len(line.split(" ||| ")) == 4 for line in nbest.splitlines())
    scored = run_ok(capsys, "score", str(reverse_run), "--source", "a b c", "--target", "c b a", "--alignment")
    assert '"alignment": "' in scored
