"""attnmt.data.corpora: the real corpora, leakage-free splits, user data, and bad input.

Downloads are tested in test_download.py; here no test reaches the network either (every
download URL points at 127.0.0.1). The real corpora are read from $ATTNMT_DATA (default:
the repository's sibling `shared/data`).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attnmt.config import DataConfig
from attnmt.data import corpora, pair_filters, parallel_files, splits
from attnmt.data.splits import Example
from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError
from tests.data_helpers import SHARED_DATA, TATOEBA_NAME, needs_multi30k, needs_tatoeba, put

pytestmark = pytest.mark.usefixtures("isolated")


def sources(examples: list[Example]) -> set[str]:
    return {example.src for example in examples}


# --- the real corpora --------------------------------------------------------------------


@pytest.fixture(scope="module")
def tatoeba_pairs():
    return parallel_files.read_tsv(SHARED_DATA / TATOEBA_NAME)


@pytest.fixture(scope="module")
def tatoeba_full():
    return corpora.load_corpus(DataConfig(data_dir=str(SHARED_DATA)))


@needs_tatoeba
def test_tatoeba_is_read_whole_with_its_attribution(tatoeba_full, tatoeba_pairs):
    assert tatoeba_full.raw_pairs == len(tatoeba_pairs) == 167_130
    assert len({src for src, _ in tatoeba_pairs}) == 116_830
    assert "tatoeba.org" in tatoeba_full.attribution and "CC BY 2.0" in tatoeba_full.attribution
    held_out_refs = sum(len(example.refs) for example in tatoeba_full.valid + tatoeba_full.test)
    assert len(tatoeba_full.train) + held_out_refs == 167_130  # no filter: every pair lands somewhere


@needs_tatoeba
def test_tatoeba_split_never_shares_a_source_and_keeps_every_reference(tatoeba_full, tatoeba_pairs):
    train_sources = {src for src, _ in tatoeba_full.train}
    valid_sources, test_sources = sources(tatoeba_full.valid), sources(tatoeba_full.test)
    assert len(valid_sources) == len(tatoeba_full.valid) == 1000
    assert len(test_sources) == len(tatoeba_full.test) == 1000
    assert not train_sources & valid_sources and not train_sources & test_sources and not valid_sources & test_sources
    all_refs: dict[str, set[str]] = {}
    for src, tgt in tatoeba_pairs:
        all_refs.setdefault(src, set()).add(tgt)
    for example in tatoeba_full.valid + tatoeba_full.test:
        assert set(example.refs) == all_refs[example.src]
    assert any(len(example.refs) > 1 for example in tatoeba_full.test)


@needs_tatoeba
def test_tatoeba_split_is_fixed_by_the_seed(tatoeba_full):
    again = corpora.load_corpus(DataConfig(data_dir=str(SHARED_DATA)))
    assert again == tatoeba_full
    other = corpora.load_corpus(DataConfig(split_seed=7, data_dir=str(SHARED_DATA)))
    assert sources(other.test) != sources(tatoeba_full.test)
    assert len(other.test) == 1000


@needs_tatoeba
def test_tatoeba_test_set_does_not_move_with_valid_size(tatoeba_pairs):
    _, _, test = splits.split_by_source(tatoeba_pairs, valid_size=1000, test_size=1000, seed=1234)
    _, _, same_test = splits.split_by_source(tatoeba_pairs, valid_size=10, test_size=1000, seed=1234)
    assert test == same_test


def test_split_does_not_depend_on_the_hash_seed():
    script = (
        "from attnmt.data.splits import split_by_source\n"
        "pairs = [(f'source {i % 50}', f'target {i}') for i in range(200)]\n"
        "print(split_by_source(pairs, valid_size=5, test_size=5, seed=3))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for hash_seed in ("1", "2")
    }
    assert len(outputs) == 1


@needs_tatoeba
def test_french_to_english_splits_by_distinct_french_source(tatoeba_pairs):
    splits = corpora.load_corpus(DataConfig(src_lang="fr", tgt_lang="en", data_dir=str(SHARED_DATA)))
    train_sources = {src for src, _ in splits.train}
    assert len(sources(splits.test)) == 1000
    assert not train_sources & (sources(splits.valid) | sources(splits.test))
    french = {fr for _, fr in tatoeba_pairs}
    assert sources(splits.test) <= french and {src for src, _ in splits.train[:100]} <= french


@needs_tatoeba
def test_short_subset_bounds_every_split():
    splits = corpora.load_corpus(DataConfig(subset="short", data_dir=str(SHARED_DATA)))
    english, french = WordTokenizer("en"), WordTokenizer("fr")
    assert splits.raw_pairs == 167_130
    assert len(splits.test) == 1000 and len(splits.valid) == 1000
    held_out = [(example.src, ref) for example in splits.valid + splits.test for ref in example.refs]
    # Tokenizing all ~115k training pairs again would double the test's time; a sample will do.
    for src, tgt in held_out + random.Random(0).sample(splits.train, 3000):
        assert len(english.tokenize(src)) <= 8 and len(french.tokenize(tgt)) <= 12
    assert 100_000 < len(splits.train) < 167_130


@needs_multi30k
def test_multi30k_official_splits_from_attnmt_data(monkeypatch):
    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))
    splits = corpora.load_corpus(DataConfig(corpus="multi30k", src_lang="de", tgt_lang="en"))
    assert splits.raw_pairs == len(splits.train) == 29_000
    assert len(splits.valid) == 1014 and len(splits.test) == 1000
    assert all(len(example.refs) == 1 for example in splits.test)
    assert "Multi30K" in splits.attribution


def test_multi30k_rejects_missing_languages_and_splits():
    with pytest.raises(UserError, match=r"test_2017_flickr has no 'cs'.*train, val, test_2016_flickr"):
        corpora.load_corpus(DataConfig(corpus="multi30k", src_lang="en", tgt_lang="cs", test_split="test_2017_flickr"))
    with pytest.raises(UserError, match=r"data\.valid_split: unknown multi30k split 'dev'; known: train, val"):
        corpora.load_corpus(DataConfig(corpus="multi30k", valid_split="dev"))


def test_a_corpus_is_located_by_split_in_the_order_prepared_data_is_keyed_by(tmp_path):
    """Every file a corpus is read from, in the order a prepared dataset's key has always listed
    them (another order would orphan every prepared dataset): a whole corpus's file, then the
    training, valid and test files, data.train's standing for a built-in corpus's training files."""
    data, user = tmp_path / "data", tmp_path / "user"
    for name in ("val.en.gz", "val.de", "test_2016_flickr.en.gz", "test_2016_flickr.de.gz"):
        put(data / "multi30k" / name, "a\n")
    put(data / TATOEBA_NAME, "a\tb\n")
    for name in ("train.en", "train.de.gz", "train.fr", "test.en", "test.de"):
        put(user / name, "a\n")
    multi30k = corpora.locate_corpus(
        DataConfig(corpus="multi30k", src_lang="en", tgt_lang="de", train=str(user / "train"), data_dir=str(data))
    )
    assert multi30k.in_order == [
        user / "train.en",
        user / "train.de.gz",
        data / "multi30k/val.en.gz",
        data / "multi30k/val.de",
        data / "multi30k/test_2016_flickr.en.gz",
        data / "multi30k/test_2016_flickr.de.gz",
    ]
    tatoeba = corpora.locate_corpus(DataConfig(train=str(user / "train"), data_dir=str(data)))
    assert tatoeba.in_order == [data / TATOEBA_NAME, user / "train.en", user / "train.fr"]
    files = corpora.locate_corpus(
        DataConfig(corpus="files", tgt_lang="de", train=str(user / "train"), test=str(user / "test"))
    )
    assert (files.train, files.valid, files.test) == (
        (user / "train.en", user / "train.de.gz"),
        (),
        (user / "test.en", user / "test.de"),
    )
    assert corpora.locate_corpus(DataConfig(corpus="tsv", train="pairs.tsv")).in_order == [Path("pairs.tsv")]
    assert corpora.locate_corpus(DataConfig(corpus="reverse")).in_order == []


# --- user data and synthetic tasks -------------------------------------------------------


def test_parallel_files_with_prefix_and_gzip(tmp_path):
    put(tmp_path / "train.en.gz", "".join(f"s{i}\n" for i in range(30)))
    put(tmp_path / "train.fr", "".join(f"t{i}\n" for i in range(30)))
    put(tmp_path / "dev.en", "a\na\n")
    put(tmp_path / "dev.fr", "b\nc\n")
    cfg = DataConfig(corpus="files", train=str(tmp_path / "train"), valid=str(tmp_path / "dev"), test_size=5)
    splits = corpora.load_corpus(cfg)
    assert splits.raw_pairs == 30 and len(splits.train) == 25 and splits.attribution is None
    assert splits.valid == [Example("a", ("b",)), Example("a", ("c",))]  # given: one per line
    assert len(splits.test) == 5 and not sources(splits.test) & {src for src, _ in splits.train}


def test_training_filters_leave_valid_and_test_alone(tmp_path):
    lines = ["a\tb", "a b c d\tb", "a\tb c d e", "x y\tz w", "p\tq", "long long long\tlong long long", "q\tr s t"]
    put(tmp_path / "train.tsv", "\n".join(lines) + "\n")
    put(tmp_path / "test.tsv", "a b c d e f\tg\n")
    held_out = str(tmp_path / "test.tsv")
    cfg = DataConfig(
        corpus="tsv",
        train=str(tmp_path / "train.tsv"),
        valid=held_out,
        test=held_out,
        max_src_tokens=3,
        max_tgt_tokens=3,
        max_length_ratio=2.0,
    )
    splits = corpora.load_corpus(cfg)
    assert splits.train == [("a", "b"), ("x y", "z w"), ("p", "q"), ("long long long", "long long long")]
    assert splits.dropped == {"max_src_tokens": 1, "max_tgt_tokens": 1, "max_length_ratio": 1}
    assert splits.dropped_summary() == (
        "3 training pairs dropped by the length filters "
        "(1 by data.max_src_tokens, 1 by data.max_tgt_tokens, 1 by data.max_length_ratio)"
    )
    assert splits.test == [Example("a b c d e f", ("g",))]


def test_short_limits_by_language():
    assert pair_filters.short_limits("en", "fr") == (8, 12)
    assert pair_filters.short_limits("fr", "en") == (12, 8)
    assert pair_filters.short_limits("de", "cs") == (8, 12)


def test_synthetic_splits_are_seeded_and_disjoint():
    cfg = DataConfig(corpus="reverse", synthetic_size=300, valid_size=30, test_size=20, synthetic_max_len=6)
    splits = corpora.load_corpus(cfg)
    assert splits.raw_pairs == 300 and len(splits.valid) == 30 and len(splits.test) == 20
    assert not {src for src, _ in splits.train} & (sources(splits.valid) | sources(splits.test))
    assert corpora.load_corpus(cfg) == splits
    assert corpora.load_corpus(cfg.model_copy(update={"split_seed": 5})).test != splits.test


# --- bad input ---------------------------------------------------------------------------


def load_files(tmp_path, **overrides):
    cfg = DataConfig(corpus="files", train=str(tmp_path / "train"), valid_size=1, test_size=1, **overrides)
    return corpora.load_corpus(cfg)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(UserError, match=re.escape(f"{tmp_path / 'train.en'}: file not found")):
        load_files(tmp_path)
    with pytest.raises(UserError, match=r"nope\.tsv: file not found"):
        corpora.load_corpus(DataConfig(corpus="tsv", train=str(tmp_path / "nope.tsv")))


def test_line_counts_must_match(tmp_path):
    put(tmp_path / "train.en", "a\nb\nc\n")
    put(tmp_path / "train.fr.gz", "a\nb\n")
    with pytest.raises(UserError) as caught:
        load_files(tmp_path)
    message = str(caught.value)
    assert "train.en has 3 lines" in message and "train.fr.gz has 2" in message


def test_empty_line_is_located(tmp_path):
    put(tmp_path / "train.en", "a\nb\nc\n")
    put(tmp_path / "train.fr", "a\n  \nc\n")
    with pytest.raises(UserError, match=r"train\.fr:2: empty line"):
        load_files(tmp_path)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_invalid_utf8_is_located(tmp_path, suffix):
    put(tmp_path / f"train.en{suffix}", "a\nb\nc\n")
    put(tmp_path / f"train.fr{suffix}", "é\nb\nc \xff\n".encode() + b"\xff\n")
    with pytest.raises(UserError, match=rf"train\.fr{suffix}:4: not valid UTF-8"):
        load_files(tmp_path)


def test_tsv_line_without_tab_is_located(tmp_path):
    put(tmp_path / "pairs.tsv.gz", "a\tb\nc\td\nno tab here\n")
    with pytest.raises(UserError, match=r"pairs\.tsv\.gz:3: no tab"):
        corpora.load_corpus(DataConfig(corpus="tsv", train=str(tmp_path / "pairs.tsv.gz")))


def test_unknown_corpus_lists_the_known_ones():
    with pytest.raises(UserError, match="unknown corpus 'europarl'; known: tatoeba-eng-fra, multi30k, files, tsv"):
        corpora.load_corpus(DataConfig(corpus="europarl"))


def test_unknown_language_pair_lists_the_known_ones():
    with pytest.raises(UserError, match="tatoeba-eng-fra has no en-de pair; known pairs: en-fr, fr-en"):
        corpora.load_corpus(DataConfig(tgt_lang="de"))
    with pytest.raises(UserError, match="multi30k has no fr-fr pair; known pairs: en-de, en-fr, en-cs"):
        corpora.load_corpus(DataConfig(corpus="multi30k", src_lang="fr"))


def test_held_out_sizes_must_leave_training_data(tmp_path):
    put(tmp_path / "pairs.tsv", "".join(f"Sentence {i}.\tPhrase {i}.\n" for i in range(8)))
    with pytest.raises(UserError, match=r"data.valid_size \(5\) \+ data.test_size \(3\).*\(8\)"):
        corpora.load_corpus(DataConfig(corpus="tsv", train=str(tmp_path / "pairs.tsv"), valid_size=5, test_size=3))
