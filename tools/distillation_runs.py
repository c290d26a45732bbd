"""The distillation study's training record, collected from the folder `scripts/distillation.sh` fills.

    python -m tools.distillation_runs runs/distill [--json docs/results/distillation-runs.json]

Reads the teachers (RUNS/teacher-s*), the distillation's record (RUNS/distilled/train.distill.json,
written by `attnmt distill`) and the students (RUNS/student-*), and writes one file: per run its
seed, torch threads, step and minute budgets, what it trained on (the corpus or the distilled
corpus), the updates and minutes it ran, its median training tokens/s over the logged windows and
the checkpoint with the best validation BLEU (step, score, minutes); for the distillation, its
teachers (each as run/checkpoint), search, lines and seconds. Runs and checkpoints are named by
their folders, never by a machine's paths. The machine recorded is the one collecting: the
runs do not record theirs, so collect where they were trained.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from attnmt.checkpoint import checkpoints_dir, read_index, training_summary
from attnmt.config import load_config
from attnmt.runlog import read_metrics
from attnmt.utils import UserError, describe_machine
from benchmarks.measure import write_results
from benchmarks.report import markdown_table

DEFAULT_JSON = Path("docs/results/distillation-runs.json")
DISTILL_RECORD = Path("distilled") / "train.distill.json"


def run_record(run_dir: Path, role: str) -> dict:
    """One trained run's budgets, what it trained on and how far it got (module docstring)."""
    index = read_index(run_dir)
    if index.best is None:
        raise UserError(f"{run_dir}: no checkpoint index with a best checkpoint; expected a finished attnmt train run")
    config = load_config(run_dir / "config.yaml")
    summary = training_summary(checkpoints_dir(run_dir) / index.best)
    rates = [record["tokens_per_s"] for record in read_metrics(run_dir) if "tokens_per_s" in record]
    model = config.model
    return {
        "run": run_dir.name,
        "role": role,
        "seed": config.train.seed,
        "threads": config.train.threads,
        "max_steps": config.train.max_steps,
        "max_minutes": config.train.max_minutes,
        "train_data": _train_data(config.data),
        "model": {
            "embedding_size": model.embedding_size,
            "encoder_hidden": model.encoder_hidden,
            "decoder_hidden": model.decoder_hidden,
        },
        "steps": summary["run_steps"],
        "minutes": summary["run_minutes"],
        "tokens_per_s": statistics.median(rates) if rates else None,
        "best": {"checkpoint": index.best, "step": summary["step"], "valid_bleu": summary["valid_score"]},
        "best_minutes": summary["minutes"],
    }


def _train_data(data) -> str:
    """The corpus's name, or the given training files as their folder/prefix (a distilled corpus)."""
    if data.train is None:
        return data.corpus
    return f"{Path(data.train).parent.name}/{Path(data.train).name}"


def distillation_record(path: Path) -> dict:
    """The distillation's teachers (run/checkpoint), search, lines and seconds, from `attnmt distill`'s record."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        teachers = record["teacher"]
        return {
            "teachers": [f"{Path(teacher).parent.parent.name}/{Path(teacher).name}" for teacher in teachers],
            "search": record["search"],
            "lines": record["lines_done"],
            "complete": record["complete"],
            "seconds": record["seconds"],
        }
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise UserError(f"{path}: unreadable ({error!r}); expected the record attnmt distill writes") from None


def collect(runs_dir: Path) -> dict:
    """The teachers, the distillation and the students under `runs_dir`, in that order."""
    teachers = sorted(path for path in runs_dir.glob("teacher-s*") if path.is_dir())
    students = sorted(path for path in runs_dir.glob("student-*") if path.is_dir())
    if not teachers or not students:
        raise UserError(f"{runs_dir}: expected teacher-s* and student-* run folders (scripts/distillation.sh)")
    return {
        "runs": [run_record(run, "teacher") for run in teachers] + [run_record(run, "student") for run in students],
        "distillation": distillation_record(runs_dir / DISTILL_RECORD),
    }


def _of(done: str, budget: float | None, template: str) -> str:
    """What a run did, and its budget where it had one ("5,200 of 5,200")."""
    return done if budget is None else f"{done} of {template.format(budget)}"


def run_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The Markdown table: one row per run, teachers first."""
    header = ["run", "trained on", "model (emb/enc/dec)", "threads", "updates", "minutes", "tok/s", "best valid BLEU"]
    body = []
    for run in results["runs"]:
        model = run["model"]
        best = run["best"]
        body.append(
            [
                run["run"],
                run["train_data"],
                f"{model['embedding_size']}/{model['encoder_hidden']}/{model['decoder_hidden']}",
                str(run["threads"] or "all cores"),
                _of(f"{run['steps']:,}", run["max_steps"], "{:,}"),
                _of(f"{run['minutes']:.1f}", run["max_minutes"], "{:g}"),
                f"{run['tokens_per_s']:,.0f}",
                f"{best['valid_bleu']:.2f} (step {best['step']:,})",
            ]
        )
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.distillation_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir", type=Path, help="the folder scripts/distillation.sh trained in")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"where the record goes ({DEFAULT_JSON})")
    args = parser.parse_args(argv)
    try:
        results = collect(args.runs_dir)
    except UserError as error:
        print(f"tools.distillation_runs: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(markdown_table(*run_rows(results))))
    machine = describe_machine(torch.device("cpu"))
    write_results(args.json, {"machine": machine, **results}, "tools.distillation_runs", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
