"""Fuzzing the readers and tokenizers: any bytes either load or raise one `UserError` line.

Random bytes, encodings (UTF-8, UTF-16, Latin-1, a BOM), line endings (LF, CRLF, CR, U+2028),
gzip or not, and lengths: the file and TSV readers and both tokenizers must never raise
another exception and never hang (each example has a deadline).
"""

from __future__ import annotations

import gzip
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmt.data.parallel_files import read_parallel, read_test_files, read_tsv
from attnmt.data.textfiles import decode_lines, read_lines
from attnmt.tokenize import SentencePieceTokenizer, WordTokenizer, train_sentencepiece
from attnmt.utils import UserError

FUZZ = settings(
    max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

# Text that looks like a corpus, with the characters that break readers: tabs, every line end,
# BOMs, NULs, surrogate-free Unicode of all planes, and lone combining marks.
tricky_characters = st.sampled_from(["\t", "\n", "\r\n", "\r", "\u2028", "\ufeff", "\x00", "\u0301", " ", "\u00a0"])
words = st.text(string.ascii_letters, min_size=1, max_size=8)
text_strategy = st.lists(st.one_of(words, tricky_characters, st.text(max_size=4)), max_size=60).map("".join)


@st.composite
def file_bytes(draw) -> bytes:
    """A text in some encoding, or raw bytes; gzipped or not (the name decides how it is read)."""
    text = draw(text_strategy)
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1", "raw"]))
    return draw(st.binary(max_size=200)) if encoding == "raw" else text.encode(encoding, errors="replace")


def one_line(error: UserError) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message, message
    return message


def write(tmp_path: Path, name: str, data: bytes, packed: bool) -> Path:
    path = tmp_path / (name + (".gz" if packed else ""))
    path.write_bytes(gzip.compress(data) if packed else data)
    return path


@FUZZ
@given(data=file_bytes(), packed=st.booleans(), corrupt_gzip=st.booleans())
def test_read_lines_loads_or_names_the_problem(tmp_path, data, packed, corrupt_gzip):
    path = write(tmp_path, "train.en", data, packed)
    if packed and corrupt_gzip:
        path.write_bytes(path.read_bytes()[: max(1, len(path.read_bytes()) // 2)])
    try:
        lines = read_lines(path)
    except UserError as error:
        assert one_line(error).startswith(str(path))
        return
    assert all(line.strip() and "\n" not in line for line in lines)


@FUZZ
@given(source=file_bytes(), target=file_bytes())
def test_read_parallel_loads_or_names_the_problem(tmp_path, source, target):
    src, tgt = write(tmp_path, "train.en", source, False), write(tmp_path, "train.fr", target, False)
    try:
        pairs = read_parallel(src, tgt)
    except UserError as error:
        one_line(error)
        return
    assert all(isinstance(s, str) and isinstance(t, str) for s, t in pairs)


@FUZZ
@given(data=file_bytes())
def test_read_tsv_loads_or_names_the_problem(tmp_path, data):
    path = write(tmp_path, "train.tsv", data, False)
    try:
        pairs = read_tsv(path)
    except UserError as error:
        assert one_line(error).startswith(str(path))
        return
    assert all(src and tgt and "\t" not in src for src, tgt in pairs)


@FUZZ
@given(source=file_bytes(), reference=file_bytes())
def test_evaluation_files_load_or_name_the_problem(tmp_path, source, reference):
    src, ref = write(tmp_path, "test.en", source, False), write(tmp_path, "test.fr", reference, False)
    try:
        examples = read_test_files(str(src), [str(ref)])
    except UserError as error:
        one_line(error)
        return
    assert all(example.refs for example in examples)


@FUZZ
@given(data=st.binary(max_size=300), first_line=st.integers(1, 10_000))
def test_decoding_typed_input_loads_or_names_the_line(data, first_line):
    try:
        decode_lines(data, "<stdin>", first_line=first_line)
    except UserError as error:
        assert one_line(error).startswith("<stdin>:")


@FUZZ
@given(text=text_strategy, lang=st.sampled_from(["en", "fr", "de", "cs"]), lowercase=st.booleans())
def test_the_word_tokenizer_takes_any_text(text, lang, lowercase):
    tokenizer = WordTokenizer(lang, lowercase=lowercase)
    tokens = tokenizer.tokenize(text)
    assert all(token and not any(c.isspace() for c in token) for token in tokens)
    tokenizer.detokenize(tokens)


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory) -> Path:
    sentences = [f"the {word} sat on the mat number {n}" for n in range(40) for word in ("cat", "dog", "bird")]
    return train_sentencepiece(sentences, vocab_size=60, model_type="bpe", cache_dir=tmp_path_factory.mktemp("spm"))


@FUZZ
@given(text=text_strategy, lowercase=st.booleans())
def test_sentencepiece_takes_any_text(sentencepiece_model, text, lowercase):
    tokenizer = SentencePieceTokenizer(sentencepiece_model, lowercase=lowercase)
    pieces = tokenizer.tokenize(text)
    assert all(pieces)
    tokenizer.detokenize(pieces)
