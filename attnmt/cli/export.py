"""`attnmt export RUN_DIR`: write a run as ONNX graphs that onnxruntime runs (int8 if it keeps its BLEU),
or, with `--format web`, as a static web page that translates in the browser."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console

from attnmt.cli.common import add_data_dir, printer
from attnmt.config import CHECKPOINTS
from attnmt.quantize import BLEU_BOUND
from attnmt.quantize import CHOICES as QUANTIZE_CHOICES


def add_parser(commands) -> None:
    parser = commands.add_parser("export", help="write a run as ONNX graphs, or as a web page that translates")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory (or one checkpoint folder)")
    parser.add_argument(
        "--format",
        choices=("onnx", "web"),
        default="onnx",
        help="onnx: graphs for onnxruntime; web: a static folder (page, graphs, onnxruntime-web) to serve as files",
    )
    parser.add_argument("--output", metavar="DIR", help="export directory (default: RUN_DIR/export-FORMAT)")
    parser.add_argument("--checkpoint", choices=CHECKPOINTS, default="best", help="which checkpoint of a run")
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        help=f"int8: quantized graphs, kept only within {BLEU_BOUND} BLEU of float32 on the valid split "
        "(default: none for onnx, int8 for web)",
    )
    add_data_dir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> None:
    output = Path(args.output) if args.output else Path(args.run_dir) / f"export-{args.format}"
    say = printer(console)
    if args.format == "web":
        _export_web(args, output, say)
        return
    from attnmt.export import export_onnx
    from attnmt.int8_export import export_int8  # torch: not loaded to build the parser
    from attnmt.loading import ModelSpec

    if (args.quantize or "none") == "none":
        export_onnx(args.run_dir, output, which=args.checkpoint)
    else:
        check = export_int8(ModelSpec(args.run_dir, checkpoint=args.checkpoint, data_dir=args.data_dir), output)
        say(f"{check}: int8 kept")
    say(f"wrote {output}; translate with: attnmt translate {shlex.quote(str(output))} SENTENCE")


def _export_web(args: argparse.Namespace, output: Path, say) -> None:
    from attnmt.web.export import MODEL_FOLDER, export_web

    made = export_web(
        args.run_dir, output, which=args.checkpoint, int8=(args.quantize or "int8") == "int8", data_dir=args.data_dir
    )
    if made.int8 is not None:
        say(f"{made.int8}: {'int8 kept' if made.int8.kept else f'float32 kept (int8 loses more than {BLEU_BOUND})'}")
    if made.shortlist_left_out:
        say("the run's vocabulary shortlist is left out: the page decodes over the whole target vocabulary")
    folder = shlex.quote(str(output))
    say(f"wrote {output} ({made.size / 2**20:.1f} MiB); serve it with: python -m http.server -d {folder}")
    say(f"the same graphs in Python: attnmt translate {shlex.quote(str(output / MODEL_FOLDER))} --engine onnxruntime")
