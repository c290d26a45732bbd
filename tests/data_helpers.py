"""The real corpora in tests: where ../shared/data (or $ATTNMT_DATA) is, markers that skip a test
without a corpus, a fixed sample of a corpus's lines, writing small text files (gzipped by
name) as a corpus's files would be, and spies on how a run locates and reads its corpus."""

from __future__ import annotations

import functools
import gzip
import os
import random
from pathlib import Path

import pytest

from attnmt.data import corpora, parallel_files, prepare

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


class CorpusLookups:
    """What a run's data path looks up and reads, recorded by spies on the data wing:
    `located` (cfg, CorpusFiles) per `locate_corpus` call, `found` each built-in file name or
    user prefix looked up, `keyed` the files each prepared-data key was computed from, `read`
    each corpus file opened for its pairs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.located: list = []
        self.found: list = []
        self.keyed: list = []
        self.read: list = []

        def spy(module, name: str, record: list, pick) -> None:
            real = getattr(module, name)

            def recorded(*args, **kwargs):
                result = real(*args, **kwargs)
                record.append(pick(args, result))
                return result

            monkeypatch.setattr(module, name, recorded)

        for module in (corpora, prepare):  # prepare holds its own name for it
            spy(module, "locate_corpus", self.located, lambda args, files: (args[0], files))
        spy(corpora, "locate", self.found, lambda args, _: args[0])
        for module in (corpora, parallel_files):
            spy(module, "prefix_paths", self.found, lambda args, _: args[0])
        spy(prepare, "data_key", self.keyed, lambda args, _: args[1])
        spy(parallel_files, "stream_corpus_lines", self.read, lambda args, _: Path(args[0]))
