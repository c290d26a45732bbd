"""The real corpora in tests: where ../shared/data (or $ATTNMT_DATA) is, markers that skip a test
without a corpus, a fixed sample of a corpus's lines, and writing small text files (gzipped by
name) as a corpus's files would be."""

from __future__ import annotations

import functools
import gzip
import os
import random
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("ATTNMT_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
TATOEBA_NAME = "tatoeba-eng-fra/fra.txt.gz"
needs_tatoeba = pytest.mark.skipif(not (SHARED_DATA / TATOEBA_NAME).is_file(), reason="no local Tatoeba copy")
needs_multi30k = pytest.mark.skipif(
    not (SHARED_DATA / "multi30k" / "train.en.gz").is_file(), reason="no local Multi30k copy"
)
LINES_PER_CORPUS = 3000


def put(path: Path, text: str | bytes) -> Path:
    """Write `text` to `path` (gzipped if the name ends in .gz), creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def corpus_lines(corpus: str, lang: str) -> list[str]:
    """A fixed random sample of one side of a real corpus; skips the test without the data."""
    if corpus == "tatoeba":
        path, column = SHARED_DATA / "tatoeba-eng-fra" / "fra.txt.gz", {"en": 0, "fr": 1}[lang]
    else:
        path, column = SHARED_DATA / "multi30k" / f"train.{lang}.gz", 0
    if not path.exists():
        pytest.skip(f"corpus not found: {path} (set ATTNMT_DATA)")
    return _sample(path, column)


@functools.cache
def _sample(path: Path, column: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        texts = [line.rstrip("\n").split("\t")[column] for line in lines]
    return random.Random(0).sample(texts, LINES_PER_CORPUS)
