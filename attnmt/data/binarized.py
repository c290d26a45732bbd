"""Token ids of a whole corpus side on disk: one flat integer array and its offsets, memory-mapped.

A side of N sentences is two raw little-endian files: `{name}.ids` (every sentence's ids one
after another: uint16 while the vocabulary has at most 65,536 tokens, else uint32) and
`{name}.offsets` (int64, N + 1 entries: sentence i is ids[offsets[i]:offsets[i + 1]]).
numpy maps them (`numpy.memmap`), so opening a corpus of any size reads nothing: the pages a
batch touches are read when it is collated, and the kernel may drop them again, so they are
never the process's own (anonymous) memory. The manifest that describes a prepared dataset
records each file's dtype and length; `open_side` checks the files against it, so a file cut
short (a full disk, a copy interrupted) is refused, never read past its end.

No torch: preparation workers import this.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np

from attnmt.utils import UserError, naming_file

OFFSET_DTYPE = np.dtype("<i8")


def ids_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned type holding every id of a vocabulary of `vocab_size` tokens."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


class TokenArrays:
    """N sentences of token ids: a sequence whose item i is sentence i's ids (int64 array)."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        """`ids`: (total,) unsigned ids; `offsets`: (N + 1,) int64, from 0 up to total."""
        self.ids, self.offsets = ids, offsets
        self._lengths: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        return self.ids[self.offsets[index] : self.offsets[index + 1]].astype(np.int64)

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    @property
    def lengths(self) -> np.ndarray:
        """(N,) int64 sentence lengths in tokens, computed once from the offsets."""
        if self._lengths is None:
            self._lengths = np.diff(self.offsets)
        return self._lengths


def side_files(folder: Path, name: str) -> tuple[Path, Path]:
    return folder / f"{name}.ids", folder / f"{name}.offsets"


def open_side(folder: Path, name: str, record: dict) -> TokenArrays:
    """Map one side's two files, after checking their sizes against the manifest's `record`
    ({"dtype": ..., "tokens": ..., "sentences": ...}); a mismatch is a UserError naming the file."""
    ids_path, offsets_path = side_files(folder, name)
    dtype = np.dtype(record["dtype"])
    expected = {ids_path: record["tokens"] * dtype.itemsize, offsets_path: (record["sentences"] + 1) * 8}
    for path, size in expected.items():
        actual = path.stat().st_size if path.is_file() else None
        if actual != size:
            found = "missing" if actual is None else f"{actual:,} bytes"
            raise UserError(
                f"{path}: {found}, the manifest says {size:,} bytes; the prepared data is damaged: "
                "prepare it again (attnmt data prepare CONFIG --force)"
            )
    ids = np.memmap(ids_path, dtype=dtype, mode="r") if record["tokens"] else np.zeros(0, dtype)
    offsets = np.memmap(offsets_path, dtype=OFFSET_DTYPE, mode="r")
    return TokenArrays(ids, offsets)


class SideWriter:
    """Appends sentences' ids, chunk by chunk, to one side's files in a folder being written
    (an `atomic_folder`, which syncs them and names them only once every file is complete).

    Chunks arrive as flat id arrays with their lengths; nothing but the running totals is kept
    in memory. An OSError names the file it was writing (`naming_file`)."""

    def __init__(self, folder: Path, name: str, dtype: np.dtype) -> None:
        self.ids_path, self.offsets_path = side_files(folder, name)
        self.dtype = dtype
        self.tokens, self.sentences = 0, 0
        self._ids = self.ids_path.open("wb")
        self._offsets = self.offsets_path.open("wb")
        self._write(self._offsets, np.zeros(1, OFFSET_DTYPE))

    @staticmethod
    def _write(handle: BinaryIO, array: np.ndarray) -> None:
        with naming_file(handle.name):
            handle.write(array.tobytes())

    def append(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """`ids`: (sum(lengths),) ids of the chunk's sentences in order; `lengths`: (n,)."""
        if len(ids) and int(ids.max()) > np.iinfo(self.dtype).max:
            raise ValueError(f"an id of {self.ids_path.name} does not fit {self.dtype}")
        self._write(self._ids, ids.astype(self.dtype, copy=False))
        self._write(self._offsets, (self.tokens + np.cumsum(lengths, dtype=np.int64)).astype(OFFSET_DTYPE))
        self.tokens += int(lengths.sum())
        self.sentences += len(lengths)

    def close(self) -> dict:
        """Close both files; the manifest's record of this side."""
        for handle in (self._ids, self._offsets):
            with naming_file(handle.name):
                handle.close()
        return {"dtype": self.dtype.str, "tokens": self.tokens, "sentences": self.sentences}


def remap(source: TokenArrays, table: np.ndarray, writer: SideWriter, chunk_sentences: int = 1 << 20) -> None:
    """Write `source` through a lookup `table` (id -> new id) into `writer`, a chunk at a time."""
    for start in range(0, len(source), chunk_sentences):
        end = min(len(source), start + chunk_sentences)
        low, high = int(source.offsets[start]), int(source.offsets[end])
        writer.append(table[source.ids[low:high]], source.lengths[start:end])
