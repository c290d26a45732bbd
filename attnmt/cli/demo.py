"""`attnmt demo [--dir DIR]`: what `make demo` shows, from a pip install: train the shipped demo
config (unless its run is there), evaluate it with beam 5, translate the tutorials' sentences and
draw their attention."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import add_data_dir
from attnmt.shipped import config_path

# the tutorials' examples written as natural text, and two longer ones
SENTENCES = ("Go.", "I lost.", "He's calm.", "I'm home.", "We're not afraid of the dark.", "She asked him to help her.")


def add_parser(commands) -> None:
    parser = commands.add_parser("demo", help="train, evaluate and try the demo model (what `make demo` does)")
    parser.add_argument("--dir", default=".", metavar="DIR", help="where its run goes: DIR/runs/demo (default: here)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override the demo config"
    )
    add_data_dir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.cli import main as attnmt  # the commands themselves, as `make demo` runs them

    run_dir = Path(args.dir) / "runs" / "demo"
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    steps = []
    if (run_dir / "checkpoints" / "index.json").is_file():
        print(f"{run_dir} is already trained (remove it to train again)")
    else:
        settings = [item for override in [f"train.run_dir={run_dir}", *args.overrides] for item in ("--set", override)]
        steps.append(["train", "{config}", *settings, *data])
    steps.append(["evaluate", str(run_dir), "--beam", "5", "--output-dir", str(run_dir / "evaluation"), *data])
    steps.append(["translate", str(run_dir), "--beam", "5", "--attention", str(run_dir / "attention"), *SENTENCES])
    with config_path("demo") as config:
        for step in steps:
            code = attnmt([str(config) if word == "{config}" else word for word in step])
            if code:
                raise SystemExit(code)  # the command has said why, in one line
    print(f"attention heatmaps: {run_dir / 'attention'}/ (grid.png shows them together)")
