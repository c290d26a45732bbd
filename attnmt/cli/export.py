"""`attnmt export RUN_DIR`: write a run as ONNX graphs that onnxruntime runs (int8 if it keeps its BLEU)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import add_data_dir, printer
from attnmt.quantize import BLEU_BOUND
from attnmt.quantize import CHOICES as QUANTIZE_CHOICES


def add_parser(commands) -> None:
    parser = commands.add_parser("export", help="write a run as ONNX graphs that onnxruntime runs")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory (or one checkpoint folder)")
    parser.add_argument("--format", choices=("onnx",), default="onnx", help="the only format: onnx")
    parser.add_argument("--output", metavar="DIR", help="export directory (default: RUN_DIR/export-onnx)")
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run")
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        default="none",
        help=f"int8: quantized graphs, kept only within {BLEU_BOUND} BLEU of float32 on the valid split",
    )
    add_data_dir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.evaluation import export_int8  # torch: not loaded to build the parser
    from attnmt.export import export_onnx
    from attnmt.loading import ModelSpec

    output = Path(args.output) if args.output else Path(args.run_dir) / "export-onnx"
    say = printer(console)
    if args.quantize == "none":
        export_onnx(args.run_dir, output, which=args.checkpoint)
    else:
        check = export_int8(ModelSpec(args.run_dir, checkpoint=args.checkpoint, data_dir=args.data_dir), output)
        say(f"{check}: int8 kept")
    say(f"wrote {output}; translate with: attnmt translate {shlex.quote(str(output))} SENTENCE")
