"""`attnmt plot attention|curves|length`: attention heatmaps, training curves, BLEU by length."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import add_model_arguments, model_spec, printer, search_overrides
from attnmt.cli.evaluate import add_evaluation_arguments, evaluated
from attnmt.utils import UserError


def add_parser(commands) -> None:
    plot = commands.add_parser("plot", help="attention heatmaps, training curves, BLEU by length")
    kinds = plot.add_subparsers(dest="plot_command", required=True)
    attention = kinds.add_parser("attention", help="heatmap of one sentence, or a grid of several")
    add_model_arguments(attention)
    attention.add_argument("sentences", nargs="+", metavar="SENTENCE")
    curves = kinds.add_parser("curves", help="metrics.jsonl curves of one or more runs")
    curves.add_argument("runs", nargs="+", metavar="RUN_DIR")
    curves.add_argument("--metrics", default="train_loss,valid_loss,valid_bleu", help="comma-separated keys")
    length = kinds.add_parser("length", help="BLEU by source length of one or more runs")
    add_evaluation_arguments(length)
    for parser, draw in ((attention, _attention), (curves, _curves), (length, _length)):
        parser.add_argument("--output", required=True, metavar="FILE", help="PNG, SVG or PDF")
        parser.set_defaults(run=run, draw=draw)


def _attention(args: argparse.Namespace, console: Console) -> Path:
    from attnmt.heatmaps import heatmap, heatmap_grid
    from attnmt.loading import load  # torch: not loaded to build the parser

    translator = load(model_spec(args, [args.run_dir]))
    options = translator.search_options(search_overrides(args))
    translations = translator.translate(args.sentences, options)
    if len(translations) == 1:
        return heatmap(translations[0], args.output, title=translations[0].text)
    return heatmap_grid(translations, args.output)


def _curves(args: argparse.Namespace, console: Console) -> Path:
    from attnmt.evaluation import run_names
    from attnmt.plot import curves
    from attnmt.runlog import read_metrics

    runs = dict(zip(run_names(args.runs), (read_metrics(run) for run in args.runs), strict=True))
    metrics = [metric.strip() for metric in args.metrics.split(",") if metric.strip()]
    available = sorted({key for records in runs.values() for record in records for key in record} - {"step"})
    unknown = [metric for metric in metrics if metric not in available]
    if unknown or not metrics:
        raise UserError(f"--metrics: {', '.join(unknown) or '(none)'} not logged; available: {', '.join(available)}")
    return curves(runs, metrics, args.output)


def _length(args: argparse.Namespace, console: Console) -> Path:
    from attnmt.evaluation import length_points
    from attnmt.plot import length_plot

    return length_plot(length_points(evaluated(args, console)), args.output)


def run(args: argparse.Namespace, console: Console) -> None:
    try:
        path = args.draw(args, console)
    except OSError as exc:
        raise UserError(f"--output {args.output}: cannot write ({exc.strerror or exc})") from None
    printer(console)(f"wrote {path}")
