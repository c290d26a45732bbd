"""`attnmt train CONFIG` (`--from RUN`: continuing a trained model) or `attnmt train --resume RUN_DIR`
(under torchrun: one process per device)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import add_config_arguments, add_data_dir, printer
from attnmt.config import load_config
from attnmt.utils import UserError


def add_parser(commands) -> None:
    parser = commands.add_parser("train", help="train a model (under torchrun: one process per device)")
    add_config_arguments(parser, required=False)
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    parser.add_argument(
        "--from",
        dest="init_from",
        metavar="RUN",
        help="a new run that starts from a trained run's weights and vocabularies (or one checkpoint folder's)",
    )
    parser.add_argument(
        "--extend-vocab",
        action="store_true",
        help="with --from and word tokens: add the new corpus's words seen data.min_freq times to the vocabularies",
    )
    parser.add_argument(
        "--freeze",
        action="append",
        choices=("encoder", "embeddings"),
        default=[],
        help="with --from: keep this part as it was (repeatable)",
    )
    add_data_dir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.train import fit  # torch: not loaded to build the parser

    if args.resume:
        if args.init_from or args.extend_vocab or args.freeze:
            raise UserError("--resume continues a run as it began; --from, --extend-vocab and --freeze begin a new one")
        if args.config:
            raise UserError("give either a config or --resume RUN_DIR (the run's own config.yaml is used)")
        config_path = Path(args.resume) / "config.yaml"
        if not config_path.exists():
            raise UserError(f"{args.resume}: not a run directory (no config.yaml)")
        config = load_config(config_path, [*args.overrides, f"train.run_dir={args.resume}"])
    else:  # no config file: the defaults plus --set overrides
        config = load_config(args.config, [*args.overrides, *_continuing(args)])
    summary = fit(config.with_data_dir(args.data_dir), resume=bool(args.resume), log=printer(console))
    best = summary["best_score"]
    console.print(
        f"done: {summary['steps']} steps in {summary['elapsed'] / 60:.1f} min, best validation "
        f"{config.train.early_stopping_metric} {best if best is None else round(best, 2)}; run in {summary['run_dir']}"
    )


def _continuing(args: argparse.Namespace) -> list[str]:
    """--from, --extend-vocab and --freeze as the config overrides they stand for."""
    overrides = [f"train.init_from={json.dumps(args.init_from)}"] if args.init_from else []
    if args.extend_vocab:
        overrides.append("train.extend_vocab=true")
    if args.freeze:
        overrides.append(f"train.freeze={json.dumps(sorted(set(args.freeze)))}")
    return overrides
