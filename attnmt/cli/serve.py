"""`attnmt serve RUN_DIR ...`: a JSON translation API and a page to explore attention.

The runs load as `attnmt translate` loads them (`--checkpoint`, `--engine`, `--quantize`,
`--device`, an `--ensemble` of them all), so every engine and quantization can be served.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from attnmt.cli.common import add_data_dir, add_fast_arguments, add_loading_arguments, fast_specs, model_spec
from attnmt.serve.schemas import InvalidLimit, Limits
from attnmt.utils import UserError

# `attnmt serve`'s limit options and the `Limits` fields they set
SERVE_LIMITS = {
    "--max-sentences": ("max_sentences", int, "N", "sentences per request"),
    "--max-chars": ("max_chars", int, "N", "characters per sentence"),
    "--max-document-chars": ("max_document_chars", int, "N", "characters per paragraph of a document request"),
    "--max-beam": ("max_beam", int, "K", "beam size a request may ask for"),
    "--timeout": ("timeout_s", float, "S", "seconds a request may wait for its answer"),
    "--max-queue": ("max_queue", int, "N", "requests waiting to be decoded; beyond, 503"),
    "--batch-wait-ms": ("batch_wait_ms", float, "MS", "how long a request waits for batch-mates"),
}


def add_parser(commands) -> None:
    serve = commands.add_parser("serve", help="a JSON translation API and a page to explore attention")
    serve.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="run directories (or checkpoint folders, or ONNX exports) to serve"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free one)")
    serve.add_argument(
        "--glossary",
        metavar="FILE",
        help="SOURCE<TAB>TARGET terms for every /v1/translate request that sends no glossary of its own",
    )
    add_loading_arguments(serve)
    add_fast_arguments(serve)
    add_data_dir(serve)
    serve.add_argument(
        "--ensemble", action="store_true", help="serve the runs as one model: the mean of their log-probabilities"
    )
    limits = serve.add_argument_group("limits")
    for flag, (field, kind, metavar, help_text) in SERVE_LIMITS.items():
        default = getattr(Limits, field)  # the dataclass's default, not argv
        limits.add_argument(
            flag, dest=field, type=kind, default=default, metavar=metavar, help=f"{help_text} ({default})"
        )
    limits.add_argument("--no-batching", action="store_true", help="decode each request alone")
    serve.set_defaults(run=run)


def _limits(args: argparse.Namespace) -> Limits:
    try:
        return Limits(
            max_sentences=args.max_sentences,
            max_chars=args.max_chars,
            max_document_chars=args.max_document_chars,
            max_beam=args.max_beam,
            timeout_s=args.timeout_s,
            max_queue=args.max_queue,
            batch_wait_ms=args.batch_wait_ms,
            batching=not args.no_batching,
        )
    except InvalidLimit as error:  # it names the field; the user typed the option
        flag = next(flag for flag, (field, *_) in SERVE_LIMITS.items() if field == error.field)
        raise UserError(f"{flag}: {error.problem}") from None


def models(args: argparse.Namespace, console: Console) -> list:
    """The `ModelSpec` of every model served: each run alone, or one ensemble of them all, with
    the fast preset where asked."""
    spec = model_spec(args, args.runs, data_dir=args.data_dir)
    return fast_specs(args, [spec] if args.ensemble else spec.alone(), console)


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.serve.server import serve  # torch and uvicorn: not loaded to build the parser

    serve(models(args, console), host=args.host, port=args.port, limits=_limits(args), glossary=args.glossary)
