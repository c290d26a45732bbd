"""Reading text: corpus files (gzipped or not), sentences one per line from a file, standard
input or a prompt.

Everything comes in as bytes and is decoded here, in one place, so that a file that is not
UTF-8, missing, a folder, or not gzip where its name says so is a `UserError` naming the file
and line (one line of output and exit code 2 from the CLI), never a traceback.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from attnmt.utils import UserError


def decode_lines(data: bytes, name: str, first_line: int = 1) -> list[str]:
    """UTF-8 bytes -> lines without line ends (blank lines kept: they keep the alignment).
    Invalid UTF-8 is a UserError naming `name` and the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise UserError(f"{name}:{line}: not valid UTF-8 (byte {exc.start}); expected UTF-8 text") from None
    if first_line == 1:
        text = text.removeprefix("\ufeff")
    # split("\n") rather than splitlines(): U+2028 and friends inside a sentence are not line ends.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def prompt_lines() -> Iterator[list[str]]:
    """A prompt loop on a terminal: yields each typed line (as a one-sentence list) until end
    of input; a line that is not UTF-8 is reported and translated as empty."""
    number = 0
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        raw = sys.stdin.buffer.readline()
        if not raw:
            print(file=sys.stderr)
            return
        number += 1
        try:
            yield decode_lines(raw, "<stdin>", first_line=number) or [""]
        except UserError as error:  # one mistyped line should not end the session
            print(f"attnmt: error: {error}", file=sys.stderr)
            yield [""]


def read_input(path: str | None) -> list[str]:
    """Sentences, one per line, from a file (gzipped if its name ends in .gz) or (for None or
    "-") standard input."""
    if path is None or path == "-":
        return decode_lines(sys.stdin.buffer.read(), "<stdin>")
    return decode_lines(_read_bytes(Path(path), gzipped=Path(path).suffix == ".gz"), path)


def stream_lines(path: str | None) -> Iterator[str]:
    """Sentences, one per line, read lazily from a file or (None or "-") standard input: memory
    stays flat whatever the file's size. Invalid UTF-8 is a UserError naming the line."""
    if path is None or path == "-":
        yield from _decoded(sys.stdin.buffer, "<stdin>")
        return
    with reading(path), Path(path).open("rb") as handle:
        yield from _decoded(handle, path)


def _decoded(handle: BinaryIO, name: str) -> Iterator[str]:
    for number, raw in enumerate(handle, 1):
        yield from decode_lines(raw, name, first_line=number) or [""]


def count_lines(path: str) -> int:
    """How many lines `stream_lines(path)` will give, counted in blocks (a progress bar's total)."""
    lines, last = 0, b"\n"
    with reading(path), Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def stream_corpus_lines(path: str | os.PathLike) -> Iterator[str]:
    """The lines of a UTF-8 corpus file (gzipped if the name ends in .gz), read lazily: memory
    stays flat whatever the file's size. Errors as `read_lines`, found when their line is read."""
    path = Path(path)
    with reading(path), (gzip.open if path.suffix == ".gz" else open)(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            line = (decode_lines(raw, str(path), first_line=number) or [""])[0]
            if not line.strip():
                raise UserError(f"{path}:{number}: empty line; expected one sentence per line")
            yield line


def read_lines(path: str | os.PathLike) -> list[str]:
    """Lines of a UTF-8 corpus file (gzipped if the name ends in .gz), without line ends.

    Empty or blank lines are errors: in parallel data they almost always mean misalignment.
    """
    return list(stream_corpus_lines(path))


def _read_bytes(path: Path, *, gzipped: bool) -> bytes:
    """A file's bytes (decompressed when `gzipped`); every way reading fails is one UserError."""
    with reading(path):
        return gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes()


@contextlib.contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Every way reading `path` fails in the block, as one UserError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; expected a text file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: not a valid gzip file ({exc})") from None
    except OSError as exc:  # no permission, a symlink loop, ...; after BadGzipFile, which is one too
        raise UserError(f"{path}: cannot read ({exc.strerror or exc}); expected a readable text file") from None
