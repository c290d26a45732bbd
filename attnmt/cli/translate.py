"""`attnmt translate RUN_DIR [SENTENCE ...]`: translate arguments, a file, stdin, or typed lines."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from rich.console import Console

from attnmt.cli.common import add_model_arguments, model_spec
from attnmt.utils import UserError, atomic_path

GRID_SENTENCES = 6  # sentences drawn in --attention's grid.png


def _member_or_mean(text: str) -> str | int:
    if text == "mean":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'mean' or a member's number (0, 1, ...), got {text!r}") from None


def add_parser(commands) -> None:
    parser = commands.add_parser("translate", help="translate sentences (arguments, a file, or stdin)")
    add_model_arguments(parser)
    parser.add_argument("sentences", nargs="*", metavar="SENTENCE", help="sentences to translate")
    parser.add_argument("--input", metavar="FILE", help="one sentence per line ('-': stdin)")
    parser.add_argument("--output", metavar="FILE", help="write translations here (default: stdout)")
    parser.add_argument(
        "--n-best",
        type=int,
        metavar="N",
        help="print N hypotheses a sentence as 'i ||| text ||| score' lines (default: the run's decode.n_best)",
    )
    parser.add_argument("--attention", metavar="OUT_DIR", help="write OUT_DIR/0001.png ... and grid.png")
    parser.add_argument(
        "--workers", type=int, default=1, metavar="N", help="translate in N processes, the CPU's threads shared"
    )
    parser.add_argument(
        "--ensemble",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="decode with this run too, by the mean of the runs' log-probabilities (repeatable)",
    )
    parser.add_argument(
        "--ensemble-attention",
        type=_member_or_mean,
        default="mean",
        metavar="mean|N",
        help="an ensemble's attention shown: the members' mean, or member N's (0 = RUN_DIR)",
    )
    parser.set_defaults(run=run)


@contextlib.contextmanager
def _output_stream(path: str | None) -> Iterator[TextIO]:
    """stdout, or a file that appears (atomically) only once everything is written."""
    if path is None:
        yield sys.stdout
        return
    try:
        with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise UserError(f"--output {path}: cannot write ({exc.strerror or exc})") from None


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.loading import load  # torch: not loaded to build the parser
    from attnmt.stream import StreamProgress, translate_windows
    from attnmt.textfiles import count_lines, prompt_lines, stream_lines

    if args.workers < 1:
        raise UserError(f"expected at least 1 process, got {args.workers}", field="workers")
    if args.sentences and args.input:
        raise UserError("give sentences as arguments or with --input FILE, not both")
    spec = model_spec(args, [args.run_dir, *args.ensemble], ensemble_attention=args.ensemble_attention)
    with contextlib.ExitStack() as stack:
        spec = stack.enter_context(spec.exported())  # a run on onnxruntime: exported once, for every process
        translator = load(spec)
        n_best = translator.config.decode.n_best if args.n_best is None else args.n_best
        options = translator.search_options(beam_size=args.beam, n_best=n_best, length_penalty=args.length_penalty)
        out = stack.enter_context(_output_stream(args.output))
        if not args.sentences and args.input is None and sys.stdin.isatty():  # typed lines, answered at once
            chunks = (translator.translate(line, options) for line in prompt_lines())
        else:
            lines = list(args.sentences) if args.sentences else stream_lines(args.input)
            chunks = translate_windows(lines, options, translator=translator, spec=spec, workers=args.workers)
        total = count_lines(args.input) if args.input not in (None, "-") and not args.sentences else None
        progress = stack.enter_context(contextlib.closing(StreamProgress(total)))
        _write_translations(chunks, out, progress, n_best=n_best, attention=args.attention)


def _write_translations(chunks, out: TextIO, progress, *, n_best: int, attention: str | None) -> None:
    """Each chunk's lines (or n-best lines) as soon as it is translated, and heatmaps when asked."""
    from attnmt.translate import heatmap_grid, nbest_lines, write_heatmaps

    done, shown = 0, []
    for translations in chunks:
        lines = nbest_lines(translations, first_index=done) if n_best > 1 else [t.text for t in translations]
        out.write("".join(line + "\n" for line in lines))
        out.flush()
        progress.update(translations)
        if attention:
            shown += write_heatmaps(translations, attention, done)[: GRID_SENTENCES - len(shown)]
        done += len(translations)
    if attention and shown:
        heatmap_grid(shown, Path(attention) / "grid.png")
