"""Vocab: fixed special ids, deterministic building, encode/decode, save/load and bad files."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab

SENTENCES = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat"], ["the", "end"]]


def test_specials_have_fixed_ids_in_every_vocabulary():
    for vocab in (Vocab.build([]), Vocab.build(SENTENCES), Vocab.build([["<s>", "x"]], max_size=5)):
        assert [vocab.token_to_id(token) for token in SPECIALS] == [PAD, UNK, BOS, EOS]
        assert [vocab.id_to_token(index) for index in (PAD, UNK, BOS, EOS)] == list(SPECIALS)
    assert len(Vocab.build([["<s>", "x"]])) == len(SPECIALS) + 1  # a literal "<s>" is not added twice


def test_tokens_are_ordered_by_frequency_then_text():
    vocab = Vocab.build(SENTENCES)
    assert vocab.tokens[len(SPECIALS) :] == ("the", "cat", "sat", "a", "dog", "end")
    assert Vocab.build(reversed(SENTENCES)) == vocab  # input order does not matter


def test_min_freq_and_max_size():
    assert Vocab.build(SENTENCES, min_freq=2).tokens[len(SPECIALS) :] == ("the", "cat", "sat")
    small = Vocab.build(SENTENCES, max_size=6)  # max_size counts the specials
    assert len(small) == 6 and small.tokens[len(SPECIALS) :] == ("the", "cat")
    assert len(Vocab.build(SENTENCES, max_size=100)) == len(SPECIALS) + 6
    with pytest.raises(ValueError, match="max_size"):
        Vocab.build(SENTENCES, max_size=3)


def test_encode_maps_unknown_tokens_to_unk_and_adds_nothing():
    vocab = Vocab.build(SENTENCES)
    ids = vocab.encode(["the", "zebra", "sat"])
    assert ids == [vocab.token_to_id("the"), UNK, vocab.token_to_id("sat")]
    assert "zebra" not in vocab and "the" in vocab


def test_decode_stops_at_eos_and_drops_padding():
    vocab = Vocab.build(SENTENCES)
    the, cat = vocab.token_to_id("the"), vocab.token_to_id("cat")
    ids = [BOS, the, UNK, cat, EOS, the, PAD, PAD]
    assert vocab.decode(ids) == ["the", "<unk>", "cat"]
    assert vocab.decode(ids, strip_specials=False) == ["<s>", "the", "<unk>", "cat", "</s>", "the", "<pad>", "<pad>"]
    with pytest.raises(IndexError, match="outside"):
        vocab.decode([len(vocab)])


@given(st.lists(st.lists(st.text(min_size=1, max_size=4), max_size=8), max_size=8))
def test_decode_inverts_encode_for_known_tokens(sentences):
    vocab = Vocab.build(sentences)
    for tokens in sentences:
        if not set(tokens) & set(SPECIALS):
            assert vocab.decode(vocab.encode(tokens)) == tokens


def test_coverage_is_the_fraction_of_known_tokens():
    vocab = Vocab.build(SENTENCES)
    assert vocab.coverage(SENTENCES) == 1.0
    assert vocab.coverage([["the", "zebra"], ["cat", "gnu", "yak", "sat"]]) == pytest.approx(0.5)
    assert vocab.coverage([]) == 1.0


def test_save_load_round_trip(tmp_path):
    vocab = Vocab.build([*SENTENCES, ["élan", "naïve", '"quoted"', "日本"]])
    path = tmp_path / "sub" / "tgt.vocab.json"
    vocab.save(path)
    assert Vocab.load(path) == vocab
    assert json.loads(path.read_text(encoding="utf-8"))["tokens"][: len(SPECIALS)] == list(SPECIALS)
    assert [p.name for p in path.parent.iterdir()] == ["tgt.vocab.json"]  # no temporary left behind


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "not valid JSON"),  # truncated file, filled in below
        ("", "not valid JSON"),
        ("[1, 2]", "not an attnmt vocabulary"),
        ('{"format": "attnmt-vocab", "version": 1, "tokens": "abc"}', "must be a list of strings"),
        ('{"format": "attnmt-vocab", "version": 9, "tokens": []}', "version 9"),
        ('{"format": "attnmt-vocab", "version": 1, "tokens": ["a", "b"]}', "must start with"),
        ('{"format": "attnmt-vocab", "version": 1, "tokens": ["<pad>", "<unk>", "<s>", "</s>", "x", "x"]}', "repeated"),
    ],
)
def test_bad_vocabulary_files_are_user_errors_naming_the_file(tmp_path, content, message):
    path = tmp_path / "src.vocab.json"
    if content is None:
        Vocab.build(SENTENCES).save(path)
        content = path.read_text(encoding="utf-8")[:-20]
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message) as error:
        Vocab.load(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_missing_vocabulary_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        Vocab.load(tmp_path / "absent.json")
