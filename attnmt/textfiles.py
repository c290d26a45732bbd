"""Reading the user's text: sentences one per line from a file, standard input or a prompt,
and line-aligned source/reference files for evaluation.

Everything comes in as bytes and is decoded here, so that a file that is not UTF-8, missing,
a folder, or misaligned with its references is a `UserError` naming the file and line (one
line of output and exit code 2 from the CLI), never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from attnmt.corpora import Example
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
    """Sentences, one per line, from a file or (for None or "-") standard input."""
    if path is None or path == "-":
        return decode_lines(sys.stdin.buffer.read(), "<stdin>")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; expected a text file with one sentence per line") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return decode_lines(data, path)


def read_test_files(src_path: str, ref_paths: Sequence[str]) -> list[Example]:
    """Examples from a source file and one or more line-aligned reference files. A reference
    line left empty just means fewer references for that sentence."""
    if not ref_paths:
        raise UserError("--src needs at least one --ref file")
    sources = read_input(src_path)
    columns = []
    for ref_path in ref_paths:
        refs = read_input(ref_path)
        if len(refs) != len(sources):
            raise UserError(f"{ref_path} has {len(refs)} lines but {src_path} has {len(sources)}")
        columns.append(refs)
    examples = []
    for line, (source, *refs) in enumerate(zip(sources, *columns, strict=True), 1):
        kept = tuple(ref.strip() for ref in refs if ref.strip())
        if not kept:
            raise UserError(f"{ref_paths[0]}:{line}: no reference for this sentence in any --ref file")
        examples.append(Example(src=source.strip(), refs=kept))
    return examples
