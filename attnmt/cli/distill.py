"""`attnmt distill TEACHER_RUN`: the teacher's beam-search translations of its training sources, as
a corpus a student trains on (`data.train: PREFIX` in the student's config)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import (
    add_data_dir,
    add_loading_arguments,
    add_search_arguments,
    model_spec,
    printer,
    search_overrides,
)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "distill", help="translate a run's training sources with beam search: a corpus for a student"
    )
    parser.add_argument("run_dir", metavar="TEACHER_RUN", help="the teacher's run directory")
    parser.add_argument(
        "--ensemble",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="a further teacher: the ensemble of all, by the mean of their log-probabilities (repeatable)",
    )
    parser.add_argument(
        "--output",
        metavar="PREFIX",
        help="write PREFIX.{src}, PREFIX.{tgt} and PREFIX.distill.json (default: TEACHER_RUN/distilled/train)",
    )
    add_loading_arguments(parser)
    add_search_arguments(parser)
    add_data_dir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.data.corpora import load_corpus  # torch: not loaded to build the parser
    from attnmt.distill import distill, distinct_sources
    from attnmt.loading import load

    say = printer(console)
    prefix = Path(args.output) if args.output else Path(args.run_dir) / "distilled" / "train"
    spec = model_spec(args, [args.run_dir, *args.ensemble], data_dir=args.data_dir)
    teacher = load(spec)
    options = teacher.search_options(search_overrides(args), n_best=1)
    sources = distinct_sources(load_corpus(teacher.data).train)
    say(f"distilling {len(sources):,} training sources with beam {options.beam_size} into {prefix}.*")
    done = distill(teacher, sources, prefix, options, say=say)
    if done.seconds:
        say(f"{done.lines - done.resumed_from:,} lines in {done.seconds / 60:.1f} min")
    say(
        f"wrote {done.source} and {done.target}; train a student with data.train: {shlex.quote(str(prefix))} "
        "in its config"
    )
