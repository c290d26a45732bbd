"""The exported page's tokenizers (attnmt/web/static/tokenizers.js, run in Node) against
`attnmt.tokenize`: the same tokens and the same text on every test sentence of Multi30k and of
the demo's Tatoeba split, on seeded adversarial text, on every Unicode character, and on
SentencePiece models built by hand to hit the library's tie-breaks and rounding.

Each comparison runs one Node process for a whole batch. The tests that run the page are
skipped where `node` is missing, with a line saying so; under CI (the environment variable CI
set) they fail instead.
"""

import json
import os
import random
import struct

import pytest

from attnmt.tokenize import SentencePieceTokenizer, WordTokenizer, normalize_text
from attnmt.utils import UserError
from attnmt.web.tokenizers import sentencepiece_spec, web_tokenizer
from benchmarks.web_tokenizers import TOKENIZER_NAMES, compare, languages, node_program, run_in_node, tokenizers

LANGUAGES = [
    ("multi30k-test2016", "en"),
    ("multi30k-test2016", "de"),
    ("tatoeba-demo-test", "en"),
    ("tatoeba-demo-test", "fr"),
]


@pytest.fixture(scope="session")
def node():
    """Node.js runs the page's tokenizers: a skip where it is missing, a failure under CI."""
    if node_program() is None:
        reason = "needs Node.js 20 or later (`node` on PATH)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the web tokenizer tests: {reason}")
        pytest.skip(reason)


needs_node = pytest.mark.usefixtures("node")


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> dict:
    """{(corpus, lang): (test sentences, {name: tokenizer})}, SentencePiece models trained as
    `attnmt train` trains them (benchmarks.web_tokenizers), on at most 30,000 pairs for speed."""
    cache = tmp_path_factory.mktemp("spm")
    return {(each.corpus, each.lang): (each.sentences, tokenizers(each, cache)) for each in languages(None, 30_000)}


@pytest.fixture(scope="session")
def corpus_rows(trained, node) -> dict:
    cases = [(tokenizer, sentences) for sentences, made in trained.values() for tokenizer in made.values()]
    keys = [(*key, name) for key, (_, made) in trained.items() for name in made]
    return dict(zip(keys, compare(cases, examples=5), strict=True))


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize(("corpus", "lang"), LANGUAGES)
def test_the_page_tokenizes_and_detokenizes_every_test_sentence_as_python_does(corpus_rows, corpus, lang, name):
    row = corpus_rows[corpus, lang, name]
    assert row["sentences"] >= 1000
    assert row["tokenize_equal"] == row["detokenize_equal"] == row["sentences"], row["differ"]


# --- adversarial text -------------------------------------------------------------------------

FRAGMENTS = [
    *"aBcZé",
    *["don't", "can't", "Tom's", "I'M", "we'll", "they’re", "o'clock", "rock'n'roll", "goin'", "boys'"],
    *["j'ai", "J’AI", "qu'il", "jusqu'à", "aujourd'hui", "quelqu'un", "l'homme", "PUISQU'IL", "lorsqu’on", "s'"],
    *["ſ's", "ıt's", "puısqu'ıl", "İ", "ß", "ẞ", "ΟΔΟΣ", "Σ", "ǅ", "K"],
    *["3.5", "1,000", "10:30", "2021-03-05", "3202-5625", "-5", "5-", "1-a", "$5", "15$", "#19", "²", "٣", "𝟗", "½"],
    *["...", "…", "!", "?!", "?", ":", ";", ",", ".", "«", "»", "„", "“", "”", "‘", "’", "'", '"', "(", ")"],
    *["¿", "¡", "/", "-", "--", "%", "°", "_", "@", "&", "€", "¥", "£", "#", "[", "]", "{", "}", "*", "+"],
    *[" ", "  ", "\t", "\n", "\x85", "\u202f", "\u00a0", "\u3000", "\x1c", "\x1f", "\u2028", "\u205f", "\u180e"],
    *["\ufeff", "\u200b", "\u00ad", "\u2060", "\x00", "\x7f", "\x9f", "\u200d", "\u200e"],
    *["e\u0301", "\u0301", "a\u0308", "\u0327", "\u0345", "ñ", "n\u0303", "\u1e9b\u0323", "\uac00\u11a8"],
    *["😀", "👍🏽", "🫨", "🇫🇷", "👩‍👩‍👧", "\U000e0041", "\U0001d400", "中文", "ㄱ", "ℌ", "ﬁ", "Ⅻ"],
    *["▁", "▁▁", "<unk>", "<s>", "</s>", "<pad>", "„Thriller“-Video", "Ess- und", "-tassen", "U.S.", "p.m."],
]


def random_character(rng: random.Random) -> str:
    code = rng.choice([rng.randrange(0x20, 0x3000), rng.randrange(0xA000, 0x10000), rng.randrange(0x10000, 0x20000)])
    return "?" if 0xD800 <= code < 0xE000 else chr(code)


def adversarial_texts(seed: int, count: int) -> list[str]:
    """Seeded strings of 1 to 12 fragments and random characters, glued or spaced."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [
            rng.choice(FRAGMENTS) if rng.random() < 0.8 else random_character(rng) for _ in range(rng.randint(1, 12))
        ]
        texts.append("".join(part + rng.choice(["", "", " ", "  "]) for part in parts))
    return texts


def token_sequences(pool: list[str], seed: int, count: int) -> list[list[str]]:
    """Seeded token lists such as a model may write: any tokens of `pool`, in any order."""
    rng = random.Random(seed)
    return [[rng.choice(pool) for _ in range(rng.randint(1, 10))] for _ in range(count)]


def word_tokenizers() -> list[WordTokenizer]:
    return [WordTokenizer(lang, lowercase) for lang in ("en", "fr", "de") for lowercase in (False, True)]


def check_against_python(tokenizers_and_cases: list[tuple], what: str) -> None:
    """Run (tokenizer, texts, token lists) in Node; assert Python's tokens and texts, showing the
    first differences."""
    jobs = [
        {"spec": web_tokenizer(tokenizer), "texts": texts, "token_lists": lists}
        for tokenizer, texts, lists in tokenizers_and_cases
    ]
    differ = []
    for (tokenizer, texts, lists), page in zip(tokenizers_and_cases, run_in_node(jobs), strict=True):
        for text, got in zip(texts, page["tokens"], strict=True):
            if tokenizer.tokenize(text) != got:
                differ.append((repr(tokenizer), "tokenize", text, tokenizer.tokenize(text), got))
        for tokens, got in zip(lists, page["texts"], strict=True):
            if tokenizer.detokenize(tokens) != got:
                differ.append((repr(tokenizer), "detokenize", tokens, tokenizer.detokenize(tokens), got))
    assert not differ, f"{len(differ)} {what} differ, the first: {differ[:5]}"


@needs_node
def test_normalize_text_agrees_on_adversarial_text():
    texts = adversarial_texts(seed=1, count=3000)
    spec = web_tokenizer(WordTokenizer("en"))
    page = run_in_node([{"spec": spec, "normalize": True, "texts": texts}])[0]["tokens"]
    assert page == [normalize_text(text) for text in texts]


@needs_node
def test_word_tokenizers_agree_on_adversarial_text():
    texts = adversarial_texts(seed=1, count=3000)
    cases = []
    for tokenizer in word_tokenizers():
        tokens = [tokenizer.tokenize(text) for text in texts]
        pool = sorted({token for each in tokens for token in each})
        cases.append((tokenizer, texts, tokens + token_sequences(pool, seed=2, count=2000)))
    check_against_python(cases, "word tokenizations of adversarial text")


@needs_node
def test_sentencepiece_models_agree_on_adversarial_text(trained):
    texts = adversarial_texts(seed=3, count=3000)
    odd_pieces = ["<unk>", "<s>", "</s>", "<pad>", "", "▁", "▁▁", "x▁y", "☃", "▁☃", "<unk>x", "▁<unk>", "▁<unk>▁"]
    cases = []
    for _, made in trained.values():
        for name in ("bpe", "unigram"):
            tokenizer = made[name]
            pool = [*web_tokenizer(tokenizer)["pieces"], *odd_pieces * 20]
            tokens = [tokenizer.tokenize(text) for text in texts]
            cases.append((tokenizer, texts, tokens + token_sequences(pool, seed=4, count=1000)))
    check_against_python(cases, "SentencePiece tokenizations of adversarial text")


# --- every character ---------------------------------------------------------------------------


def swept_characters() -> list[str]:
    """Planes 0 and 1, the CJK compatibility supplement, plane 3's blocks (newer than Python
    3.11's Unicode), the variation selectors, and a sample of the rest of Unicode."""
    blocks = [(0, 0x20000), (0x2F800, 0x2FA20), (0x30000, 0x323B0), (0xE0000, 0xE01F0)]
    return [
        chr(code)
        for code in range(0x110000)
        if not 0xD800 <= code < 0xE000 and (any(a <= code < b for a, b in blocks) or code % 997 == 0)
    ]


@needs_node
def test_every_character_is_normalized_lowercased_and_classified_as_in_python():
    """The spec carries Python's character classes and the characters its Unicode version knows,
    so the page agrees with Python whatever the browser's Unicode version (Node 20's is 17,
    Python 3.11's 14: without them, letters newer than 14 would lowercase, new symbols split words)."""
    tokenizer = WordTokenizer("en", lowercase=True)
    characters = swept_characters()
    probes = [f"{c}A{c}'s e{c}\u0301 3{c}5" for c in characters]
    chunk = 64  # probes per text; a text that differs is then looked at probe by probe

    def differing(texts: list[str]) -> list[int]:
        page = run_in_node([{"spec": web_tokenizer(tokenizer), "texts": texts}])[0]["tokens"]
        return [i for i, (text, got) in enumerate(zip(texts, page, strict=True)) if tokenizer.tokenize(text) != got]

    texts = ["  ".join(probes[i : i + chunk]) for i in range(0, len(probes), chunk)]
    suspects = [i for index in differing(texts) for i in range(index * chunk, min((index + 1) * chunk, len(probes)))]
    differ = (
        [f"U+{ord(characters[suspects[i]]):04X}" for i in differing([probes[i] for i in suspects])] if suspects else []
    )
    assert not differ, f"{len(differ)} characters differ: {differ[:50]}"


# --- SentencePiece models built by hand ---------------------------------------------------------

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | float | bytes) -> bytes:
    """One protobuf field: an int as a varint, a float as a float32, bytes length-delimited."""
    if isinstance(value, bool | int):
        return _varint(number << 3) + _varint(int(value))
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def model_file(
    tmp_path, pieces, model_type=1, add_dummy_prefix=True, remove_extra_whitespaces=True, trainer=b"", normalizer=b""
):
    """A serialized SentencePiece ModelProto: `pieces` as (piece, score, type); model_type 1
    unigram, 2 bpe; identity normalization unless `normalizer` adds fields."""
    proto = b"".join(_field(1, _field(1, p.encode()) + _field(2, float(s)) + _field(3, t)) for p, s, t in pieces)
    proto += _field(2, _field(3, model_type) + trainer)
    proto += _field(
        3,
        _field(1, b"identity")
        + _field(3, add_dummy_prefix)
        + _field(4, remove_extra_whitespaces)
        + _field(5, 1)
        + normalizer,
    )
    path = tmp_path / f"model-{len(list(tmp_path.iterdir()))}.model"
    path.write_bytes(proto)
    return path


def encode_both(tokenizer: SentencePieceTokenizer, texts: list[str]) -> list[list[str]]:
    """The pieces of each text from Python, asserted equal to the page's."""
    page = run_in_node([{"spec": web_tokenizer(tokenizer), "texts": texts}])[0]["tokens"]
    python = [tokenizer.tokenize(text) for text in texts]
    assert page == python
    return python


@needs_node
def test_bpe_merges_the_best_scoring_pair_first_and_the_leftmost_of_equals(tmp_path):
    pieces = [("<unk>", 0, UNKNOWN), ("a", -3, NORMAL), ("b", -4, NORMAL), ("c", -5, NORMAL), ("▁", -6, NORMAL)]
    ties = SentencePieceTokenizer(model_file(tmp_path, [*pieces, ("ab", -1, NORMAL), ("bc", -1, NORMAL)], 2))
    assert encode_both(ties, ["abc", "abcbc", "a bc"]) == [
        ["▁", "ab", "c"],
        ["▁", "ab", "c", "bc"],
        ["▁", "a", "▁", "bc"],
    ]
    better = SentencePieceTokenizer(model_file(tmp_path, [*pieces, ("ab", -2, NORMAL), ("bc", -1, NORMAL)], 2))
    assert encode_both(better, ["abc"]) == [["▁", "a", "bc"]]
    runs = SentencePieceTokenizer(model_file(tmp_path, [*pieces, ("aa", -1, NORMAL), ("aaa", -2, NORMAL)], 2))
    assert encode_both(runs, ["aaaa", "aaaaa"]) == [["▁", "aa", "aa"], ["▁", "aa", "aaa"]]


@needs_node
def test_unigram_keeps_the_earliest_start_of_equal_paths(tmp_path):
    singles = [("<unk>", 0, UNKNOWN), ("a", -1, NORMAL), ("b", -1, NORMAL), ("c", -1, NORMAL)]
    pairs = [("ab", -2, NORMAL), ("bc", -2, NORMAL)]
    two = SentencePieceTokenizer(model_file(tmp_path, [*singles, *pairs], add_dummy_prefix=False))
    assert encode_both(two, ["ab", "abc"]) == [["ab"], ["a", "bc"]]
    three = SentencePieceTokenizer(
        model_file(tmp_path, [*singles, *pairs, ("abc", -3, NORMAL)], add_dummy_prefix=False)
    )
    assert encode_both(three, ["abc"]) == [["abc"]]


def float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


@needs_node
def test_unigram_rounds_path_scores_to_float32_before_comparing_them(tmp_path):
    """a + b sums above its float32 rounding, which equals the score of ab: compared unrounded, a
    b would win; SentencePiece rounds first, so the equal sum of the earlier-starting ab stays."""
    rng = random.Random(0)
    while True:
        a, b = float32(-rng.uniform(0.1, 5)), float32(-rng.uniform(0.1, 5))
        if a + b > float32(a + b):
            break
    pieces = [("<unk>", 0, UNKNOWN), ("a", a, NORMAL), ("b", b, NORMAL), ("ab", float32(a + b), NORMAL)]
    tokenizer = SentencePieceTokenizer(model_file(tmp_path, pieces, add_dummy_prefix=False))
    assert encode_both(tokenizer, ["ab", "abab", "aabb"])[0] == ["ab"]


@needs_node
def test_unigram_scores_an_unknown_character_10_below_the_lowest_normal_piece(tmp_path):
    """x has no piece of its own: unknown x + y (y's score - 11: the lowest normal score is -1,
    the unknown piece's own score does not count) against the piece xy (-1)."""
    for y_score, expected in ((10.1, ["x", "y"]), (9.9, ["xy"])):
        pieces = [("<unk>", -100, UNKNOWN), ("y", y_score, NORMAL), ("xy", -1, NORMAL)]
        tokenizer = SentencePieceTokenizer(model_file(tmp_path, pieces, add_dummy_prefix=False))
        assert encode_both(tokenizer, ["xy"]) == [expected]


@needs_node
@pytest.mark.parametrize("model_type", [1, 2], ids=["unigram", "bpe"])
def test_consecutive_unknown_characters_are_one_piece(tmp_path, model_type):
    pieces = [("<unk>", 0, UNKNOWN), ("a", -1, NORMAL), ("▁", -2, NORMAL)]
    tokenizer = SentencePieceTokenizer(model_file(tmp_path, pieces, model_type))
    assert encode_both(tokenizer, ["a☃☃a ☃", "☃ ☃😀x", "<s>a"]) == [
        ["▁", "a", "☃☃", "a", "▁", "☃"],
        ["▁", "☃", "▁", "☃😀x"],
        ["▁", "<s>", "a"],
    ]


@needs_node
@pytest.mark.parametrize("add_dummy_prefix", [True, False])
@pytest.mark.parametrize("remove_extra_whitespaces", [True, False])
@pytest.mark.parametrize("model_type", [1, 2], ids=["unigram", "bpe"])
def test_normalizer_settings_and_control_pieces_encode_and_decode_as_sentencepiece_does(
    tmp_path, add_dummy_prefix, remove_extra_whitespaces, model_type
):
    """Typed "▁" is text: kept, but trailing ones are removed with trailing spaces; decoding drops
    the leading "▁" of the first pieces, writes "<unk>" as " ⁇ ", control pieces as nothing, and
    pieces the model lacks as they are."""
    letters = [(c, -1.0 - i / 10, NORMAL) for i, c in enumerate("abc▁")]
    merged = [("▁a", -1, NORMAL), ("bc", -1.5, NORMAL), ("▁▁", -2, NORMAL), ("ab", -1.2, NORMAL)]
    pieces = [("<unk>", 0, UNKNOWN), ("<s>", 0, CONTROL), ("</s>", 0, CONTROL), *letters, *merged]
    path = model_file(tmp_path, pieces, model_type, add_dummy_prefix, remove_extra_whitespaces)
    tokenizer = SentencePieceTokenizer(path)
    texts = ["a", "▁", "▁a", "a▁", "a ▁ b", "▁▁abc▁▁", "abc ab ▁bc", "x", "", " ", "<s>a", "</s>", "<unk>"]
    pool = ["▁", "▁a", "a", "bc", "▁▁", "<unk>", "<s>", "</s>", "", "x▁", "▁x", "☃"]
    check_against_python([(tokenizer, texts, token_sequences(pool, seed=5, count=500))], "encodings and decodings")
    assert tokenizer.detokenize(["<s>", "▁", "▁a", "<unk>", "▁x▁", "</s>"]) == (
        "a ⁇ ▁x▁" if remove_extra_whitespaces else " a ⁇ ▁x▁" if add_dummy_prefix else "  a ⁇ ▁x▁"
    )


@needs_node
def test_decoding_writes_the_unknown_piece_as_the_models_unk_surface(tmp_path):
    pieces = [("<unk>", 0, UNKNOWN), ("a", -1, NORMAL), ("▁a", -1, NORMAL)]
    tokenizer = SentencePieceTokenizer(model_file(tmp_path, pieces, trainer=_field(44, b"<?>")))
    lists = [["▁a", "<unk>", "▁a"], ["<unk>"], ["<unk>", "<unk>", "a"]]
    check_against_python([(tokenizer, [], lists)], "decodings")
    assert tokenizer.detokenize(lists[0]) == "a<?> a"


def test_a_model_the_page_cannot_reproduce_is_a_user_error_naming_the_file(tmp_path):
    good = [("<unk>", 0, UNKNOWN), ("a", -1, NORMAL)]
    refusals = {
        "model type word": model_file(tmp_path, good, model_type=3),
        "a normalization rule": model_file(tmp_path, good, normalizer=_field(2, b"\x01\x02")),
        "byte_fallback": model_file(tmp_path, good, trainer=_field(35, 1)),
        "whitespace treated as a suffix": model_file(tmp_path, good, trainer=_field(24, 1)),
        "user-defined pieces": model_file(tmp_path, [*good, ("<b>", 0, USER_DEFINED)]),
        "unused pieces": model_file(tmp_path, [*good, ("b", 0, UNUSED)]),
        "byte pieces": model_file(tmp_path, [*good, ("<0x00>", 0, BYTE)]),
    }
    for what, path in refusals.items():
        with pytest.raises(UserError) as caught:
            sentencepiece_spec(path)
        assert str(path) in str(caught.value) and what in str(caught.value) and "\n" not in str(caught.value)
    (tmp_path / "broken.model").write_bytes(b"\x0a\xff")
    with pytest.raises(UserError, match=r"broken\.model: not a readable SentencePiece model"):
        sentencepiece_spec(tmp_path / "broken.model")


def test_a_spec_holds_the_models_pieces_and_float32_scores_and_stays_small(trained):
    _, made = trained["multi30k-test2016", "en"]
    for name in ("bpe", "unigram"):
        tokenizer = made[name]
        spec = web_tokenizer(tokenizer)
        processor = tokenizer._processor
        assert spec["pieces"] == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        assert [float32(score) for score in spec["scores"]] == [
            float32(processor.get_score(i)) for i in range(processor.get_piece_size())
        ]
        assert (spec["model"], spec["unk_id"], spec["control_ids"]) == (name, 0, [])
        assert len(spec["pieces"]) == 6000
        assert len(json.dumps(spec, ensure_ascii=False).encode()) < 250_000  # shipped to browsers
    assert len(json.dumps(web_tokenizer(made["word"])).encode()) < 20_000
