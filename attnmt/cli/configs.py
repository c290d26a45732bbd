"""`attnmt configs [NAME] [--output FILE]`: list the configs that ship in the package, or write one out to edit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from attnmt.shipped import config_names, config_text, summary
from attnmt.utils import UserError, atomic_path


def add_parser(commands) -> None:
    parser = commands.add_parser("configs", help="list the shipped configs, or write one out to edit")
    parser.add_argument("name", nargs="?", metavar="NAME", help="the config to write out (default: list them)")
    parser.add_argument("--output", metavar="FILE", help="write it here instead of to stdout (never over a file)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    if args.name is None:
        if args.output:
            raise UserError("--output goes with a NAME: which config to write", field="output")
        for name in config_names():
            print(f"{name:<26} {summary(name)}")
        print("attnmt configs NAME --output FILE writes one out to edit")
        return
    text = config_text(args.name)
    if args.output is None:
        sys.stdout.write(text)
        return
    path = Path(args.output)
    if path.exists():
        raise UserError(f"{path} exists; name another file or remove it", field="output")
    if not path.resolve().parent.is_dir():
        raise UserError(f"{path}: the folder {path.parent} does not exist", field="output")
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    console.print(f"wrote {path}: edit it, then `attnmt train {path}`", markup=False, highlight=False)
