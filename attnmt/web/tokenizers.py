"""A run's tokenizers described for the page's JavaScript twin of them (`static/tokenizers.js`).

The exported page tokenizes what the user types and detokenizes what the model writes in the
browser, so its tokens must be exactly the ones `attnmt.tokenize` gives in Python: any other
token is an unknown word to the model. `web_tokenizer(tokenizer)` returns a JSON-serializable
spec that `createTokenizer(spec)` in tokenizers.js turns back into the same tokenizer, with
nothing else to fetch. `tests/test_web_tokenizers.py` holds the two equal on whole corpora.

The spec, format "attnmt-web-tokenizer" version 1, is one object:

- every spec: `format`, `version`, `kind` ("word" or "sentencepiece"), `lowercase` (bool),
  and `unicode`: {`version`: Python's Unicode version, `assigned`: the characters it knows}.
  A browser's Unicode version is not Python's (Node 20 knows Unicode 17, Python 3.11 Unicode
  14): the page leaves a character Python does not know as Python does, out of NFC and
  lowercasing, rather than as the browser's newer tables would change it.
- `kind: "word"` (`WordTokenizer`): `lang`, and `classes`, the character classes its rules
  test, as Python's Unicode tables define them (`punctuation`: the word tokenizer's P* and S*
  class; `alnum`: `str.isalnum`; `decimal`: regex `\\d`; `digit`: `str.isdigit`), for the
  same reason: a newer emoji is a word character to Python 3.11 and a symbol to the browser.
- `kind: "sentencepiece"` (`SentencePieceTokenizer`): `model` ("bpe" or "unigram"),
  `pieces` (every piece, in id order), `scores` (their float32 scores, each written as the
  shortest decimal that rounds back to the same float32), `unk_id`, `control_ids` (pieces
  that decode to nothing; every other piece but the unknown one is a normal piece),
  `unk_surface` (what decoding "<unk>" writes), and the normalizer's `add_dummy_prefix` and
  `remove_extra_whitespaces`. A 6,000-piece model is 130 to 160 KB of JSON (UTF-8, not escaped).

A set of characters is a list of code point ranges, flattened and delta-coded: [gap, span, gap,
span, ...], a range running from `previous end + gap` to `start + span`, the first range's gap
counted from 0. The Unicode tables and classes take about 13 KB.

Only what tokenizers.js reproduces is described: a SentencePiece model with a normalization
rule (a precompiled character map), byte fallback, a model type other than bpe and unigram,
user-defined or unused pieces is a UserError naming the model file. attnmt trains none of
these (`tokenize.train_sentencepiece`: identity normalization, no byte fallback).
"""

from __future__ import annotations

import functools
import re
import struct
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

from attnmt.tokenize import SentencePieceTokenizer, Tokenizer, WordTokenizer, punctuation_class
from attnmt.utils import UserError

FORMAT = "attnmt-web-tokenizer"
FORMAT_VERSION = 1


def web_tokenizer(tokenizer: Tokenizer) -> dict:
    """The JSON-serializable spec of `tokenizer` for tokenizers.js (the module docstring)."""
    if not isinstance(tokenizer, WordTokenizer | SentencePieceTokenizer):  # tokenizers.js has twins of these two only
        raise TypeError(f"no web tokenizer for {type(tokenizer).__name__}")
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "lowercase": tokenizer.lowercase,
        "unicode": {"version": unicodedata.unidata_version, "assigned": assigned_characters()},
    }
    if isinstance(tokenizer, WordTokenizer):
        return {**header, "kind": "word", "lang": tokenizer.lang, "classes": character_classes()}
    return {**header, "kind": "sentencepiece", **sentencepiece_spec(tokenizer.model_path)}


@functools.cache
def assigned_characters() -> list[int]:
    """Every character Python's Unicode tables know (any category but Cn), delta-coded ranges."""
    return _delta_code(_ranges(lambda character: unicodedata.category(character) != "Cn"))


@functools.cache
def character_classes() -> dict[str, list[int]]:
    """The word tokenizer's character classes over all of Unicode, delta-coded ranges each."""
    every_character = "".join(map(chr, range(0x110000)))

    def runs(pattern: str) -> list[tuple[int, int]]:
        return [(match.start(), match.end() - 1) for match in re.finditer(pattern, every_character)]

    return {
        "punctuation": _delta_code(runs(f"[{punctuation_class()}]+")),
        "alnum": _delta_code(runs(r"[^\W_]+")),  # regex \w is str.isalnum() or "_"
        "decimal": _delta_code(runs(r"\d+")),
        "digit": _delta_code(_ranges(str.isdigit)),
    }


def _ranges(predicate: Callable[[str], bool]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for code in range(0x110000):
        if predicate(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return ranges


def _delta_code(ranges: list[tuple[int, int]]) -> list[int]:
    flat, end = [], 0
    for first, last in ranges:
        flat += [first - end, last - first]
        end = last
    return flat


# sentencepiece_model.proto: the fields read here, by number.
_PIECES, _TRAINER_SPEC, _NORMALIZER_SPEC, _DENORMALIZER_SPEC = 1, 2, 3, 5
_PIECE_TEXT, _PIECE_SCORE, _PIECE_TYPE = 1, 2, 3
_MODEL_TYPE, _TREAT_WHITESPACE_AS_SUFFIX, _BYTE_FALLBACK, _UNK_SURFACE = 3, 24, 35, 44
_CHARSMAP, _ADD_DUMMY_PREFIX, _REMOVE_EXTRA_WHITESPACES, _ESCAPE_WHITESPACES = 2, 3, 4, 5
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3
_TYPE_NAMES = {4: "user-defined", 5: "unused", 6: "byte"}
_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
_DEFAULT_UNK_SURFACE = " \u2047 "


def sentencepiece_spec(model_path: str | Path) -> dict:
    """The `sentencepiece` part of a spec, read from the serialized model; a UserError naming the
    file for what tokenizers.js does not reproduce."""
    model_path = Path(model_path)

    def unsupported(what: str) -> UserError:
        return UserError(f"{model_path}: a web page cannot use a SentencePiece model with {what}")

    try:
        model = _message(model_path.read_bytes())
        trainer = _message(_last(model, _TRAINER_SPEC, b""))
        normalizer = _message(_last(model, _NORMALIZER_SPEC, b""))
        denormalizer = _message(_last(model, _DENORMALIZER_SPEC, b""))
        pieces = [_piece(_message(raw)) for raw in model.get(_PIECES, [])]
    except (OSError, ValueError, TypeError, AttributeError, struct.error) as error:  # not a ModelProto
        raise UserError(f"{model_path}: not a readable SentencePiece model ({error})") from None
    model_type = _MODEL_TYPES.get(_last(trainer, _MODEL_TYPE, 1), "an unknown type")
    if model_type not in ("bpe", "unigram"):
        raise unsupported(f"model type {model_type} (only bpe and unigram)")
    if _last(normalizer, _CHARSMAP, b"") or _last(denormalizer, _CHARSMAP, b""):
        raise unsupported("a normalization rule (train it with normalization_rule_name=identity)")
    if _last(trainer, _BYTE_FALLBACK, 0):
        raise unsupported("byte_fallback")
    if _last(trainer, _TREAT_WHITESPACE_AS_SUFFIX, 0) or not _last(normalizer, _ESCAPE_WHITESPACES, 1):
        raise unsupported("whitespace treated as a suffix or not escaped")
    kinds = [kind for _, _, kind in pieces]
    if other := [kind for kind in kinds if kind not in (_NORMAL, _UNKNOWN, _CONTROL)]:
        raise unsupported(f"{_TYPE_NAMES.get(other[0], f'type-{other[0]}')} pieces")
    if _UNKNOWN not in kinds:
        raise unsupported("no unknown piece")
    return {
        "model": model_type,
        "pieces": [text for text, _, _ in pieces],
        "scores": [score for _, score, _ in pieces],
        "unk_id": kinds.index(_UNKNOWN),
        "control_ids": [index for index, kind in enumerate(kinds) if kind == _CONTROL],
        "unk_surface": _last(trainer, _UNK_SURFACE, _DEFAULT_UNK_SURFACE.encode()).decode(),
        "add_dummy_prefix": bool(_last(normalizer, _ADD_DUMMY_PREFIX, 1)),
        "remove_extra_whitespaces": bool(_last(normalizer, _REMOVE_EXTRA_WHITESPACES, 1)),
    }


def _piece(piece: dict[int, list]) -> tuple[str, float, int]:
    """(text, score, type) of a ModelProto.SentencePiece."""
    (score,) = struct.unpack("<f", _last(piece, _PIECE_SCORE, bytes(4)))
    return _last(piece, _PIECE_TEXT, b"").decode(), _shortest_float32(score), _last(piece, _PIECE_TYPE, _NORMAL)


def _shortest_float32(value: float) -> float:
    """The shortest decimal that rounds to the float32 `value` (JavaScript's Math.fround of it
    gives `value` back): -3.2 rather than -3.200000047683716."""
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == value:
            return candidate
    return value


def _message(data: bytes) -> dict[int, list]:
    """A protobuf message's fields: {number: [value, ...]}, varints as ints, the rest as bytes."""
    fields: dict[int, list] = {}
    for number, value in _fields(data):
        fields.setdefault(number, []).append(value)
    return fields


def _last(message: dict[int, list], number: int, default):
    """A singular field: protobuf keeps the last value written."""
    return message[number][-1] if number in message else default


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a serialized protobuf message."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(data, position)
            yield number, value
            continue
        if wire_type == 2:
            size, position = _varint(data, position)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"protobuf wire type {wire_type}")
        if position + size > len(data):
            raise ValueError("truncated")
        yield number, data[position : position + size]
        position += size


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(data):
            raise ValueError("truncated")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if byte < 0x80:
            return value, position
