"""What several commands share: their arguments, the model they load, and how they tell the user.

Every argument that more than one command takes is defined once here (`--data-dir`, the model
and search options), so its name, default and help cannot drift between commands. `FLAGS` is the
command line's face of a `UserError`'s field: the flag a user typed for the setting at fault.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console

from attnmt.config import CHECKPOINTS, ENGINES, STOPPING
from attnmt.quantize import BLEU_BOUND
from attnmt.quantize import CHOICES as QUANTIZE_CHOICES
from attnmt.utils import Say, UserError, atomic_path

# A UserError's field -> the flag that sets it. A field without a flag here is a config key (or
# has no flag) and is shown as it is named.
FLAGS = {
    "decode.beam_size": "--beam",
    "decode.n_best": "--n-best",
    "decode.length_penalty": "--length-penalty",
    "decode.stopping": "--stopping",
    "decode.min_length": "--min-length",
    "checkpoint": "--checkpoint",
    "device": "--device",
    "engine": "--engine",
    "quantize": "--quantize",
    "shortlist": "--shortlist",
    "fast": "--fast",
    "prefix": "--prefix",
    "prefixes": "--prefix",
    "n_best": "--n-best",
    "attention": "--attention",
    "heads": "--heads",
    "ensemble": "--ensemble",
    "alignment": "--alignment",
    "required_phrases": "--require",
    "fast_bound": "--fast-bound",
    "ensemble_attention": "--ensemble-attention",
    "data_dir": "--data-dir",
    "glossary": "--glossary",
    "document": "--document",
    "markup": "--markup",
    "overrides": "--set",
    "output": "--output",
    "ref": "--ref",
    "last": "--last",
    "output_dir": "--output-dir",
    "workers": "--workers",
    "source": "--source",
    "target": "--target",
    "paths": "RUN_DIR",
    "bootstrap": "--bootstrap",
    "tune": "--tune",
    "tune_beams": "--tune-beams",
    "tune_penalties": "--tune-penalties",
    "host": "--host",
    "port": "--port",
    "storage": "--storage",
}


def add_config_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The config file (optional where a command can do without) and its --set overrides."""
    help_text = "YAML config file" if required else "YAML config file (not needed with --resume)"
    parser.add_argument("config", nargs=None if required else "?", help=help_text)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. --set train.lr=0.0005",
    )


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder holding the corpora (else the config's data.data_dir, $ATTNMT_DATA, the cache, download)",
    )


def add_loading_arguments(parser: argparse.ArgumentParser) -> None:
    """How to load the model(s): what `loading.ModelSpec` takes besides the paths."""
    parser.add_argument("--checkpoint", choices=CHECKPOINTS, default="best", help="which checkpoint of a run")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="what runs the model: auto (onnxruntime for an export, else torch), torch, onnxruntime",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        default="none",
        help="int8: dynamic int8 quantization of a run's weights (CPU; an export is quantized when made)",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--shortlist",
        action="store_true",
        help="compute the output layer for each batch's candidate tokens only (the run's `attnmt shortlist`)",
    )


def add_fast_arguments(parser: argparse.ArgumentParser) -> None:
    """The fast preset (`attnmt.fast`), for the commands that translate with a loaded model."""
    parser.add_argument(
        "--fast",
        action="store_true",
        help="int8, the shortlist and the beam size chosen once on the valid split (stored in the run's fast.json)",
    )
    parser.add_argument(
        "--fast-bound",
        type=float,
        default=BLEU_BOUND,
        metavar="BLEU",
        help=f"the most valid BLEU the fast preset may lose against the run's own search (default {BLEU_BOUND})",
    )


def fast_specs(args: argparse.Namespace, specs: list, console: Console) -> list:
    """`specs` as loaded with the fast preset when --fast asks for it; its choices are told on stderr."""
    if not args.fast:
        if args.fast_bound != BLEU_BOUND:
            raise UserError("a bound for the fast preset needs --fast too", field="fast_bound")
        return specs
    if getattr(args, "beam", None) is not None:
        raise UserError("the fast preset chooses the beam size itself: drop --beam", field="fast")
    from attnmt.fast import fast_spec  # torch: loaded only by the commands that load a model

    say = printer(Console(stderr=True), style="dim")
    return [fast_spec(spec, bound=args.fast_bound, say=say) for spec in specs]


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """The search settings a command may override; `search_overrides` reads them back as one value."""
    parser.add_argument(
        "--beam", type=int, metavar="K", help="beam size (default: the run's decode.beam_size); 1 = greedy"
    )
    parser.add_argument(
        "--length-penalty", type=float, metavar="ALPHA", help="default: the run's decode.length_penalty"
    )
    parser.add_argument(
        "--stopping",
        choices=STOPPING,
        help="when beam search ends a sentence (default: the run's decode.stopping): once K hypotheses have "
        "ended, or as soon as a step's best candidate ends (OpenNMT-py's rule)",
    )
    parser.add_argument(
        "--min-length",
        type=int,
        metavar="N",
        help="the fewest tokens an output has before </s> (default: the run's decode.min_length, 0 = none)",
    )


def search_overrides(args: argparse.Namespace):
    """The search settings `add_search_arguments` read, as one `search.options.SearchOverrides`."""
    from attnmt.search.options import SearchOverrides  # torch: loaded only by the commands that search

    return SearchOverrides(
        beam_size=args.beam, length_penalty=args.length_penalty, stopping=args.stopping, min_length=args.min_length
    )


def add_model_arguments(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """Which model(s) to load, how, and how to search."""
    if several:
        parser.add_argument(
            "runs", nargs="+", metavar="RUN_DIR", help="run directories (or checkpoint folders, or ONNX exports)"
        )
    else:
        parser.add_argument(
            "run_dir", metavar="RUN_DIR", help="run directory (or one checkpoint folder, or an ONNX export)"
        )
    add_loading_arguments(parser)
    add_search_arguments(parser)


def model_spec(args: argparse.Namespace, paths, *, ensemble_attention: str | int = "mean", data_dir: str | None = None):
    """The `ModelSpec` of `paths`, loaded as the arguments of `add_loading_arguments` say."""
    from attnmt.loading import ModelSpec  # torch: loaded only by the commands that load a model

    return ModelSpec(
        tuple(paths),
        checkpoint=args.checkpoint,
        device=args.device,
        engine=args.engine,
        quantize=args.quantize,
        ensemble_attention=ensemble_attention,
        data_dir=data_dir,
        shortlist=args.shortlist,
    )


def printer(console: Console, *, style: str | None = None) -> Say:
    """A `Say` that prints one line as it is: no markup (a path may hold brackets), no wrapping
    (a log file or CI would get rich's 80 columns)."""

    def say(line: str) -> None:
        console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)

    return say


def int_list(text: str) -> list[int]:
    """argparse type: "1,3,5" -> [1, 3, 5]; a bad item is a usage error naming it."""
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None


def float_list(text: str) -> list[float]:
    try:
        return [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


@contextlib.contextmanager
def output_stream(path: str | None, flag: str = "--output") -> Iterator[TextIO]:
    """stdout, or a file that appears (atomically) only once everything is written (`flag`)."""
    if path is None:
        yield sys.stdout
        return
    try:
        with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot write ({exc.strerror or exc})") from None
