"""`attnmt data stats CONFIG`: pairs, lengths, vocabulary coverage and padding of the batching."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from attnmt.cli.common import add_config_arguments, add_data_dir
from attnmt.config import load_config
from attnmt.tables import stats_table
from attnmt.utils import UserError, WriteFailed, write_text_atomic


def add_parser(commands) -> None:
    data = commands.add_parser("data", help="inspect a config's data")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    stats = data_commands.add_parser("stats", help="pairs, lengths, vocabulary coverage and padding of the batching")
    add_config_arguments(stats)
    add_data_dir(stats)
    stats.add_argument("--json", dest="json_path", help="also write the figures as JSON to this file")
    stats.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.data import build_data  # torch: not loaded to build the parser
    from attnmt.stats import describe

    config = load_config(args.config, args.overrides)
    bundle = build_data(config.data, data_dir=args.data_dir)
    figures = describe(bundle, config.data, seed=config.train.seed)
    console.print(stats_table(figures))
    if figures["attribution"]:
        console.print(f"[dim]{figures['attribution']}[/dim]")
    if args.json_path:
        try:
            write_text_atomic(args.json_path, json.dumps(figures, indent=2) + "\n")
        except WriteFailed as error:  # a folder, a read-only place, a full disk
            raise UserError(f"--json {error}") from None
