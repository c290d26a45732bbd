"""Tables in the README and docs quoted from committed raw results, and kept equal to them.

    python -m benchmarks.quote README.md docs/performance.md    # rewrite every quoted table
    python -m benchmarks.quote --check README.md ...            # exit 1 if one differs

A quoted table follows a marker line naming the results file and the table:

    <!-- results: benchmarks/results/peers-speed.json peers-speed -->

and is exactly what the benchmark's own report renders from that file. `tests/test_results.py`
runs the check over the README and docs/, so a document cannot drift from its data.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.gpu import gpu_rows
from benchmarks.peers.report import quality_rows, speed_rows
from benchmarks.report import headlines, markdown_table, tables
from benchmarks.serving import serving_rows

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!-- results: (\S+) (\S+) -->")


def _speed_table(index: int) -> Callable[[dict], list[str]]:
    def render(results: dict) -> list[str]:
        _, header, body = tables(results)[index]
        return markdown_table(header, body)

    return render


RENDERERS: dict[str, Callable[[dict], list[str]]] = {
    "peers-speed": lambda results: markdown_table(*speed_rows(results)),
    "peers-quality": lambda results: markdown_table(*quality_rows(results)),
    "speed-training": _speed_table(0),
    "speed-greedy": _speed_table(1),
    "speed-beam": _speed_table(2),
    "serving": lambda results: markdown_table(*serving_rows(results)),
    "gpu": lambda results: markdown_table(*gpu_rows(results)),
    "speed-headlines": lambda results: [f"- {line}" for line in headlines(results)],
}


def render(path: str, table: str) -> list[str]:
    """The lines of `table` rendered from the results file `path` (relative to the repository)."""
    if table not in RENDERERS:
        raise ValueError(f"unknown table {table!r}; known: {', '.join(RENDERERS)}")
    return RENDERERS[table](json.loads((ROOT / path).read_text(encoding="utf-8")))


def _quoted_length(lines: list[str], start: int) -> int:
    """How many lines of the quoted block begin at `start` (a table's or a list's lines)."""
    end = start
    while end < len(lines) and lines[end].startswith(("|", "- ")):
        end += 1
    return end - start


def requote(text: str) -> str:
    """`text` with the block after every marker replaced by what its results file renders."""
    lines = text.splitlines()
    out, index = [], 0
    while index < len(lines):
        out.append(lines[index])
        match = MARKER.fullmatch(lines[index].strip())
        index += 1
        if match:
            out += render(match[1], match[2])
            index += _quoted_length(lines, index)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quote", description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs")
    args = parser.parse_args(argv)
    stale = []
    for document in args.documents:
        text = document.read_text(encoding="utf-8")
        quoted = requote(text)
        if quoted != text:
            stale.append(document)
            if not args.check:
                document.write_text(quoted, encoding="utf-8")
    for document in stale:
        print(f"{document}: {'differs from' if args.check else 'requoted from'} its results", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
