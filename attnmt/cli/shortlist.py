"""`attnmt shortlist RUN_DIR`: build the run's vocabulary shortlist from its training data, check
it on the valid split, and store it with the run (`--shortlist` then decodes with it)."""

from __future__ import annotations

import argparse

from rich.console import Console

from attnmt.cli.common import add_data_dir, model_spec, printer
from attnmt.config import CHECKPOINTS


def _at_least(minimum: int):
    """argparse type: a whole number of at least `minimum`; anything else is a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {minimum}, got {text!r}")
        return value

    return parse


def add_parser(commands) -> None:
    from attnmt.shortlist import FREQUENT, PER_SOURCE

    parser = commands.add_parser("shortlist", help="build a run's vocabulary shortlist for faster decoding")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    parser.add_argument(
        "--per-source",
        type=_at_least(1),
        default=PER_SOURCE,
        metavar="K",
        help=f"candidate target tokens per source token, by Dice co-occurrence (default {PER_SOURCE})",
    )
    parser.add_argument(
        "--frequent",
        type=_at_least(0),
        default=FREQUENT,
        metavar="N",
        help=f"most frequent target tokens every batch may produce (default {FREQUENT})",
    )
    parser.add_argument("--checkpoint", choices=CHECKPOINTS, default="best", help="which checkpoint checks it")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    add_data_dir(parser)
    parser.set_defaults(run=run, engine="auto", quantize="none", shortlist=False)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.shortlist_check import build_shortlist  # torch: not loaded to build the parser

    say = printer(console)
    spec = model_spec(args, [args.run_dir], data_dir=args.data_dir)
    check = build_shortlist(spec, per_source=args.per_source, frequent=args.frequent, say=say)
    say(str(check))
    say(f"wrote {args.run_dir}/shortlist.safetensors; decode with it: attnmt translate {args.run_dir} --shortlist ...")
