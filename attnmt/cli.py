"""The `attnmt` command: the only reader of argv.

Every user mistake surfaces as a `UserError`; `main` prints it as `attnmt: error: ...` on
stderr and returns exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from attnmt.config import load_config
from attnmt.utils import Interrupted, UserError


def _add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML config file")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. --set train.lr=0.0005",
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description="Attention-based RNN sequence-to-sequence translation.")
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check a config and print it with every default filled in")
    _add_config_arguments(validate)

    train = commands.add_parser("train", help="train a model (under torchrun: one process per device)")
    train.add_argument("config", nargs="?", help="YAML config file (not needed with --resume)")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    train.add_argument("--data-dir", help="folder holding the corpora (else $ATTNMT_DATA, the cache, download)")

    data = commands.add_parser("data", help="inspect a config's data")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    stats = data_commands.add_parser("stats", help="pairs, lengths, vocabulary coverage and padding of the batching")
    _add_config_arguments(stats)
    stats.add_argument("--data-dir", help="folder holding the corpora (else $ATTNMT_DATA, the cache, download)")
    stats.add_argument("--json", dest="json_path", help="also write the figures as JSON to this file")
    return parser


def _run_validate(args: argparse.Namespace, console: Console) -> None:
    config = load_config(args.config, args.overrides)
    console.print(config.to_yaml(), end="", markup=False, highlight=False)
    console.print(f"# {args.config}: valid", style="green")


def _stats_table(figures: dict) -> Table:
    table = Table(title=f"{figures['corpus']} {figures['direction']}", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("pairs read (before filtering and splitting)", f"{figures['raw_pairs']:,}")
    for split in ("train", "valid", "test"):
        sources = figures["sources"].get(split)
        detail = f" ({sources:,} sources)" if sources is not None else ""
        table.add_row(f"{split} pairs", f"{figures['pairs'][split]:,}{detail}")
    for side in ("train_src", "train_tgt"):
        lengths = figures["lengths"][side]
        table.add_row(
            f"{side} tokens mean / p50 / p90 / p99 / max",
            f"{lengths['mean']:.1f} / {lengths['p50']} / {lengths['p90']} / {lengths['p99']} / {lengths['max']}",
        )
    table.add_row("vocabulary src / tgt", f"{figures['vocab']['src']:,} / {figures['vocab']['tgt']:,}")
    oov = figures["oov_rate"]
    table.add_row("OOV rate valid src / tgt", f"{oov['valid_src']:.2%} / {oov['valid_tgt']:.2%}")
    table.add_row("OOV rate test src / tgt", f"{oov['test_src']:.2%} / {oov['test_tgt']:.2%}")
    batching = figures["batching"]
    table.add_row("train batches (mean sentences each)", f"{batching['batches']:,} ({batching['mean_sentences']:.1f})")
    table.add_row(
        "padding: bucketed / random batches",
        f"{batching['padding_bucketed']:.1%} / {batching['padding_random']:.1%}",
    )
    return table


def _run_data_stats(args: argparse.Namespace, console: Console) -> None:
    from attnmt.data import build_data
    from attnmt.stats import describe
    from attnmt.utils import write_text_atomic

    config = load_config(args.config, args.overrides)
    bundle = build_data(config.data, data_dir=args.data_dir)
    figures = describe(bundle, config.data, seed=config.train.seed)
    console.print(_stats_table(figures))
    if figures["attribution"]:
        console.print(f"[dim]{figures['attribution']}[/dim]")
    if args.json_path:
        try:
            write_text_atomic(args.json_path, json.dumps(figures, indent=2) + "\n")
        except OSError as exc:  # a folder, a read-only place, a full disk
            raise UserError(f"--json {args.json_path}: cannot write ({exc.strerror or exc})") from None


def _run_train(args: argparse.Namespace, console: Console) -> None:
    from pathlib import Path

    from attnmt.train import fit

    if args.resume:
        if args.config:
            raise UserError("give either a config or --resume RUN_DIR (the run's own config.yaml is used)")
        config_path = Path(args.resume) / "config.yaml"
        if not config_path.exists():
            raise UserError(f"{args.resume}: not a run directory (no config.yaml)")
        config = load_config(config_path, [*args.overrides, f"train.run_dir={args.resume}"])
    else:  # no config file: the defaults plus --set overrides
        config = load_config(args.config, args.overrides)
    summary = fit(config, resume=bool(args.resume), data_dir=args.data_dir, log=console.print)
    best = summary["best_score"]
    console.print(
        f"done: {summary['steps']} steps in {summary['elapsed'] / 60:.1f} min, best validation "
        f"{config.train.early_stopping_metric} {best if best is None else round(best, 2)}; run in {summary['run_dir']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    console = Console()
    try:
        if args.command == "validate":
            _run_validate(args, console)
        elif args.command == "train":
            _run_train(args, console)
        elif args.command == "data":
            _run_data_stats(args, console)
        return 0
    except UserError as error:
        for line in str(error).splitlines() or ["(no message)"]:
            print(f"attnmt: error: {line}", file=sys.stderr)
        return 2
    except Interrupted as interruption:
        print(f"attnmt: {interruption}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("attnmt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
