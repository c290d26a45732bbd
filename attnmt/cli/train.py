"""`attnmt train CONFIG` or `attnmt train --resume RUN_DIR` (under torchrun: one process per device)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import add_config_arguments, add_data_dir, printer
from attnmt.config import load_config
from attnmt.utils import UserError


def add_parser(commands) -> None:
    parser = commands.add_parser("train", help="train a model (under torchrun: one process per device)")
    add_config_arguments(parser, required=False)
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    add_data_dir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.train import fit  # torch: not loaded to build the parser

    if args.resume:
        if args.config:
            raise UserError("give either a config or --resume RUN_DIR (the run's own config.yaml is used)")
        config_path = Path(args.resume) / "config.yaml"
        if not config_path.exists():
            raise UserError(f"{args.resume}: not a run directory (no config.yaml)")
        config = load_config(config_path, [*args.overrides, f"train.run_dir={args.resume}"])
    else:  # no config file: the defaults plus --set overrides
        config = load_config(args.config, args.overrides)
    summary = fit(config.with_data_dir(args.data_dir), resume=bool(args.resume), log=printer(console))
    best = summary["best_score"]
    console.print(
        f"done: {summary['steps']} steps in {summary['elapsed'] / 60:.1f} min, best validation "
        f"{config.train.early_stopping_metric} {best if best is None else round(best, 2)}; run in {summary['run_dir']}"
    )
