"""`attnmt score RUN_DIR`: how the model reads given translations: each token's log-probability,
the sentence's score under the run's length penalty, and the attention, as JSON lines."""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator

from rich.console import Console

from attnmt.cli.common import add_loading_arguments, model_spec, output_stream
from attnmt.utils import UserError

WINDOW = 1000  # pairs scored together; files are read a window at a time


def add_parser(commands) -> None:
    parser = commands.add_parser("score", help="score given translations: per-token log-probabilities and attention")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory (or a checkpoint folder, or an ONNX export)")
    add_loading_arguments(parser)
    parser.add_argument("--source", action="append", default=[], metavar="TEXT", help="a source sentence (repeatable)")
    parser.add_argument(
        "--target", action="append", default=[], metavar="TEXT", help="its translation, in order (repeatable)"
    )
    parser.add_argument("--source-file", metavar="FILE", help="source sentences, one per line")
    parser.add_argument("--target-file", metavar="FILE", help="their translations, line by line")
    parser.add_argument(
        "--length-penalty", type=float, metavar="ALPHA", help="for the score (default: the run's decode.length_penalty)"
    )
    parser.add_argument("--attention", action="store_true", help="add each translation's (tokens + 1) x S attention")
    parser.add_argument(
        "--alignment", action="store_true", help="add each translation's word alignment (Pharaoh i-j, words from 0)"
    )
    parser.add_argument("--output", metavar="FILE", help="write the JSON lines here (default: stdout)")
    parser.set_defaults(run=run)


def _check(args: argparse.Namespace) -> None:
    """Refuse what cannot be scored before a model is loaded."""
    if (args.source or args.target) and (args.source_file or args.target_file):
        raise UserError("give sentences with --source/--target or files with --source-file/--target-file, not both")
    if args.source or args.target:
        if len(args.source) != len(args.target):
            raise UserError(f"{len(args.source)} sources but {len(args.target)} targets: give one each", field="target")
    elif not (args.source_file and args.target_file):
        raise UserError("give --source and --target, or --source-file and --target-file", field="target")
    if args.shortlist:
        raise UserError("a score is the model's over the whole vocabulary: drop --shortlist", field="shortlist")


def _pairs(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(source, target) pairs from the arguments or, lazily, from the two files."""
    from attnmt.data.textfiles import stream_lines

    if args.source:
        yield from zip(args.source, args.target, strict=True)
        return
    sources, targets = stream_lines(args.source_file), stream_lines(args.target_file)
    for number, (source, target) in enumerate(itertools.zip_longest(sources, targets), 1):
        if source is None or target is None:
            shorter = args.source_file if source is None else args.target_file
            raise UserError(f"{shorter}: ends at line {number - 1}; the other file goes on: expected as many lines")
        yield source, target


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.alignment import pharaoh
    from attnmt.loading import load  # torch: not loaded to build the parser
    from attnmt.translation import scored_record

    _check(args)
    pairs = _pairs(args)
    translator = load(model_spec(args, [args.run_dir]))
    options = translator.search_options(length_penalty=args.length_penalty)
    with output_stream(args.output) as out:
        first = 1
        while window := list(itertools.islice(pairs, WINDOW)):
            sources, targets = [source for source, _ in window], [target for _, target in window]
            for translation in translator.score(sources, targets, options, first_number=first):
                fields = scored_record(translation, args.attention)
                if args.alignment:
                    fields["alignment"] = pharaoh(translator.align(translation))
                out.write(json.dumps(fields, ensure_ascii=False) + "\n")
            first += len(window)
