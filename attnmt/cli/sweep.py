"""`attnmt sweep SWEEP.yaml` runs or resumes a sweep; `attnmt sweep report` tables and plots it."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from attnmt.cli.common import add_data_dir, printer
from attnmt.sweep.run import run_sweep
from attnmt.sweep.spec import SET_BY_SWEEP, describe, flatten, load_plan
from attnmt.utils import UserError


def add_parser(commands) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="run a sweep of configs (grid or Optuna search); `sweep report` tables and plots it",
        usage="attnmt sweep SWEEP.yaml [--workers N] [--threads T] [--storage URL] [--data-dir DIR] "
        "[--retry-failed] [--dry-run]\n       attnmt sweep report SWEEP.yaml|SWEEP_DIR [--storage URL] "
        "[--output-dir DIR]",
        description="attnmt sweep SWEEP.yaml runs or resumes a sweep; "
        "attnmt sweep report SWEEP.yaml (or SWEEP_DIR) writes its tables and plots.",
    )
    sweep.add_argument("target", nargs="+", metavar="[report] SWEEP", help="sweep file (report: or its folder)")
    sweep.add_argument("--storage", metavar="URL", help="study database (default: sqlite:///SWEEP_DIR/study.db)")
    sweep.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes sharing the study")
    sweep.add_argument("--threads", type=int, metavar="T", help="torch threads per worker (default: cores / N)")
    add_data_dir(sweep)
    sweep.add_argument("--retry-failed", action="store_true", help="run failed trials again")
    sweep.add_argument("--dry-run", action="store_true", help="validate the sweep and list its trials")
    sweep.add_argument("--output-dir", metavar="DIR", help="report: where tables and plots go (SWEEP_DIR/report)")
    sweep.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    words = args.target
    if words[0] == "report" and len(words) == 2:
        from attnmt.sweep.report import report  # matplotlib: loaded only for a report

        report(words[1], storage=args.storage, output_dir=args.output_dir, console=console, command=args.command_line)
        return
    if len(words) != 1:
        raise UserError("expected `attnmt sweep SWEEP.yaml` or `attnmt sweep report SWEEP.yaml|SWEEP_DIR`")
    if args.workers < 1 or (args.threads is not None and args.threads < 1):
        raise UserError("--workers and --threads must be at least 1")
    if args.dry_run:
        _print_plan(load_plan(words[0]), console)
        return
    counts = run_sweep(
        words[0],
        workers=args.workers,
        threads=args.threads,
        storage=args.storage,
        data_dir=args.data_dir,
        retry_failed=args.retry_failed,
        command=args.command_line,
    )
    printer(console)(
        f"sweep: {', '.join(f'{n} {state}' for state, n in counts.items())}; "
        f"tables and plots: attnmt sweep report {words[0]}"
    )


def _print_plan(plan, console: Console) -> None:
    table = Table(title=f"sweep {plan.name}: {len(plan.grid)} grid trials -> {plan.sweep_dir}")
    for column in ("trial", "experiments", "changed from the base"):
        table.add_column(column, overflow="fold")
    base = flatten(plan.base)
    for trial in plan.grid:
        changed = {k: v for k, v in flatten(trial.config).items() if v != base[k] and k not in SET_BY_SWEEP}
        table.add_row(trial.name, ", ".join(sorted({name for name, _ in trial.members})), describe(changed))
    console.print(table)
    for name, search in plan.searches.items():
        console.print(f"search {name}: {search.n_trials} trials over {', '.join(search.params)}", markup=False)
