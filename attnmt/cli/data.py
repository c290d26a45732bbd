"""`attnmt data prepare CONFIG`: encode a config's corpus once, for every later run;
`attnmt data stats CONFIG`: pairs, lengths, vocabulary coverage and padding of the batching."""

from __future__ import annotations

import argparse
import json
import sys
import time

from rich.console import Console

from attnmt.cli.common import add_config_arguments, add_data_dir
from attnmt.config import load_config
from attnmt.tables import stats_table
from attnmt.utils import UserError, WriteFailed, write_text_atomic


def add_parser(commands) -> None:
    data = commands.add_parser("data", help="inspect a config's data")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    prepare = data_commands.add_parser(
        "prepare", help="tokenize and encode the corpus once, into memory-mappable arrays every run then reads"
    )
    add_config_arguments(prepare)
    add_data_dir(prepare)
    prepare.add_argument(
        "--workers", type=_positive, metavar="N", help="processes that tokenize and encode (default: every core)"
    )
    prepare.add_argument("--force", action="store_true", help="prepare again even if prepared data exists")
    prepare.set_defaults(run=run_prepare)
    stats = data_commands.add_parser("stats", help="pairs, lengths, vocabulary coverage and padding of the batching")
    add_config_arguments(stats)
    add_data_dir(stats)
    stats.add_argument("--json", dest="json_path", help="also write the figures as JSON to this file")
    stats.set_defaults(run=run)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _say(console: Console):
    """A line for the user, never wrapped (it names a folder)."""
    return lambda line: console.print(line, soft_wrap=True)


def run_prepare(args: argparse.Namespace, console: Console) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from attnmt.data.prepare import ensure_prepared

    config = load_config(args.config, args.overrides).with_data_dir(args.data_dir)
    started = time.perf_counter()
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]prepare[/bold] {task.fields[pairs]:,} pairs read  {task.fields[speed]} pairs/s"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("prepare", total=None, pairs=0, speed="-")

        def advance(pairs: int) -> None:
            speed = pairs / max(time.perf_counter() - started, 1e-9)
            progress.update(task, pairs=pairs, speed=f"{speed:,.0f}")

        prepared = ensure_prepared(
            config.data, workers=args.workers, progress=advance, force=args.force, say=_say(console)
        )
    manifest, train = prepared.manifest, prepared.manifest["train"]
    console.print(
        f"{prepared.folder}: {train['src']['sentences']:,} training pairs ({manifest['raw_pairs']:,} read), "
        f"{train['src']['tokens']:,} source and {train['tgt']['tokens']:,} target tokens, vocabularies "
        f"{manifest['vocab']['src']:,} / {manifest['vocab']['tgt']:,}; prepared in {manifest['seconds']:.1f} s "
        f"with {manifest['workers']} worker(s)",
        soft_wrap=True,
    )


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.data.batching import prepared_data  # torch: not loaded to build the parser
    from attnmt.data.stats import describe

    config = load_config(args.config, args.overrides).with_data_dir(args.data_dir)
    bundle = prepared_data(config.data, say=_say(console))
    figures = describe(bundle, config.data, seed=config.train.seed)
    console.print(stats_table(figures))
    if figures["attribution"]:
        console.print(f"[dim]{figures['attribution']}[/dim]")
    if args.json_path:
        try:
            write_text_atomic(args.json_path, json.dumps(figures, indent=2) + "\n")
        except WriteFailed as error:  # a folder, a read-only place, a full disk
            raise UserError(f"--json {error}") from None
