"""`attnmt validate CONFIG`: check a config and print it with every default filled in."""

from __future__ import annotations

import argparse

from rich.console import Console

from attnmt.cli.common import add_config_arguments
from attnmt.config import load_config


def add_parser(commands) -> None:
    parser = commands.add_parser("validate", help="check a config and print it with every default filled in")
    add_config_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    config = load_config(args.config, args.overrides)
    console.print(config.to_yaml(), end="", markup=False, highlight=False)
    console.print(f"# {args.config}: valid", style="green")
