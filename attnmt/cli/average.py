"""`attnmt average RUN_DIR --last N`: average a run's last checkpoints into one checkpoint."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import printer


def add_parser(commands) -> None:
    parser = commands.add_parser("average", help="average a run's last checkpoints into one checkpoint")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--last", type=int, metavar="N", help="the last N checkpoints the run kept")
    chosen.add_argument("--steps", type=int, nargs="+", metavar="STEP", help="the checkpoints of these steps")
    parser.add_argument("--output", metavar="DIR", help="checkpoint folder (default: RUN_DIR/checkpoints/averaged)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.average import DEFAULT_NAME, average_checkpoints, choose_checkpoints  # torch

    checkpoints = choose_checkpoints(args.run_dir, last=args.last, steps=args.steps)
    output = Path(args.output) if args.output else Path(args.run_dir) / "checkpoints" / DEFAULT_NAME
    average_checkpoints(checkpoints, output)
    say = printer(console)
    say(f"wrote {output}: the mean of {', '.join(checkpoint.name for checkpoint in checkpoints)}")
    say(f"evaluate with: attnmt evaluate {shlex.quote(str(output))}")
