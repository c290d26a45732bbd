"""The `attnmt` command: the only reader of argv.

Every user mistake surfaces as a `UserError`; `main` prints it as `attnmt: error: ...` on
stderr and returns exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from rich.console import Console

from attnmt.config import load_config
from attnmt.quantize import BLEU_BOUND
from attnmt.quantize import CHOICES as QUANTIZE_CHOICES
from attnmt.tables import length_table, scores_table, stats_table
from attnmt.utils import Interrupted, UserError, WriteFailed, atomic_path, write_text_atomic


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


def _int_list(text: str) -> list[int]:
    """argparse type: "1,3,5" -> [1, 3, 5]; a bad item is a usage error naming it."""
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None


def _member_or_mean(text: str) -> str | int:
    if text == "mean":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'mean' or a member's number (0, 1, ...), got {text!r}") from None


def _float_list(text: str) -> list[float]:
    try:
        return [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


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
    _add_translate_parser(commands)
    evaluate = commands.add_parser("evaluate", help="BLEU, chrF and BLEU by length of trained runs")
    _add_evaluation_arguments(evaluate)
    evaluate.add_argument("--output-dir", metavar="DIR", help="write evaluation.json, length.png and hypotheses")
    evaluate.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap samples")
    evaluate.add_argument(
        "--tune", action="store_true", help="choose beam size and length penalty on the valid split, then score"
    )
    evaluate.add_argument(
        "--tune-beams", type=_int_list, metavar="K,K,...", help="beam sizes to try (default 1,3,5,10)"
    )
    evaluate.add_argument(
        "--tune-penalties", type=_float_list, metavar="A,A,...", help="length penalties to try (default 0,0.5,1,1.5,2)"
    )
    average = commands.add_parser("average", help="average a run's last checkpoints into one checkpoint")
    average.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    chosen = average.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--last", type=int, metavar="N", help="the last N checkpoints the run kept")
    chosen.add_argument("--steps", type=int, nargs="+", metavar="STEP", help="the checkpoints of these steps")
    average.add_argument("--output", metavar="DIR", help="checkpoint folder (default: RUN_DIR/checkpoints/averaged)")
    _add_plot_parsers(commands)
    export = commands.add_parser("export", help="write a run as ONNX graphs that onnxruntime runs")
    export.add_argument("run_dir", metavar="RUN_DIR", help="run directory (or one checkpoint folder)")
    export.add_argument("--format", choices=("onnx",), default="onnx", help="the only format: onnx")
    export.add_argument("--output", metavar="DIR", help="export directory (default: RUN_DIR/export-onnx)")
    export.add_argument("--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run")
    export.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        default="none",
        help=f"int8: quantized graphs, kept only within {BLEU_BOUND} BLEU of float32 on the valid split",
    )
    export.add_argument("--data-dir", metavar="DIR", help="corpus folder for the int8 check's valid split")
    _add_sweep_parser(commands)
    _add_serve_parser(commands)
    return parser


def _add_model_arguments(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """Which model(s) to load and how to search."""
    if several:
        parser.add_argument(
            "runs", nargs="+", metavar="RUN_DIR", help="run directories (or checkpoint folders, or ONNX exports)"
        )
    else:
        parser.add_argument(
            "run_dir", metavar="RUN_DIR", help="run directory (or one checkpoint folder, or an ONNX export)"
        )
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run")
    parser.add_argument(
        "--engine",
        choices=("auto", "torch", "onnxruntime"),
        default="auto",
        help="what runs the model: auto (onnxruntime for an export, else torch), torch, onnxruntime",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        default="none",
        help="int8: dynamic int8 quantization of a run's weights (CPU; an export is quantized when made)",
    )
    parser.add_argument(
        "--beam", type=int, metavar="K", help="beam size (default: the run's decode.beam_size); 1 = greedy"
    )
    parser.add_argument(
        "--length-penalty", type=float, metavar="ALPHA", help="default: the run's decode.length_penalty"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")


def _add_translate_parser(commands) -> None:
    translate = commands.add_parser("translate", help="translate sentences (arguments, a file, or stdin)")
    _add_model_arguments(translate)
    translate.add_argument("sentences", nargs="*", metavar="SENTENCE", help="sentences to translate")
    translate.add_argument("--input", metavar="FILE", help="one sentence per line ('-': stdin)")
    translate.add_argument("--output", metavar="FILE", help="write translations here (default: stdout)")
    translate.add_argument("--n-best", type=int, default=1, metavar="N", help="print 'i ||| text ||| score' lines")
    translate.add_argument("--attention", metavar="OUT_DIR", help="write OUT_DIR/0001.png ... and grid.png")
    translate.add_argument(
        "--workers", type=int, default=1, metavar="N", help="translate in N processes, the CPU's threads shared"
    )
    translate.add_argument(
        "--ensemble",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="decode with this run too, by the mean of the runs' log-probabilities (repeatable)",
    )
    translate.add_argument(
        "--ensemble-attention",
        type=_member_or_mean,
        default="mean",
        metavar="mean|N",
        help="an ensemble's attention shown: the members' mean, or member N's (0 = RUN_DIR)",
    )


def _add_evaluation_arguments(parser: argparse.ArgumentParser) -> None:
    _add_model_arguments(parser, several=True)
    parser.add_argument("--split", choices=("test", "valid"), default="test", help="split of each run's corpus")
    parser.add_argument("--src", metavar="FILE", help="evaluate on this source file instead of the run's split")
    parser.add_argument("--ref", metavar="FILE", action="append", default=[], help="reference file (repeatable)")
    parser.add_argument("--data-dir", metavar="DIR", help="corpus folder (else $ATTNMT_DATA, the cache, download)")
    parser.add_argument(
        "--ensemble", action="store_true", help="the runs are one system: the mean of their log-probabilities"
    )


def _add_plot_parsers(commands) -> None:
    plot = commands.add_parser("plot", help="attention heatmaps, training curves, BLEU by length")
    kinds = plot.add_subparsers(dest="plot_command", required=True)
    attention = kinds.add_parser("attention", help="heatmap of one sentence, or a grid of several")
    _add_model_arguments(attention)
    attention.add_argument("sentences", nargs="+", metavar="SENTENCE")
    attention.add_argument("--output", required=True, metavar="FILE", help="PNG, SVG or PDF")
    curves = kinds.add_parser("curves", help="metrics.jsonl curves of one or more runs")
    curves.add_argument("runs", nargs="+", metavar="RUN_DIR")
    curves.add_argument("--output", required=True, metavar="FILE", help="PNG, SVG or PDF")
    curves.add_argument("--metrics", default="train_loss,valid_loss,valid_bleu", help="comma-separated keys")
    length = kinds.add_parser("length", help="BLEU by source length of one or more runs")
    _add_evaluation_arguments(length)
    length.add_argument("--output", required=True, metavar="FILE", help="PNG, SVG or PDF")


def _run_validate(args: argparse.Namespace, console: Console) -> None:
    config = load_config(args.config, args.overrides)
    console.print(config.to_yaml(), end="", markup=False, highlight=False)
    console.print(f"# {args.config}: valid", style="green")


def _run_data_stats(args: argparse.Namespace, console: Console) -> None:
    from attnmt.data import build_data
    from attnmt.stats import describe

    config = load_config(args.config, args.overrides)
    bundle = build_data(config.data, data_dir=args.data_dir)
    figures = describe(bundle, config.data, seed=config.train.seed)
    console.print(stats_table(figures))
    if figures["attribution"]:
        console.print(f"[dim]{figures['attribution']}[/dim]")
    if args.json_path:
        try:
            write_text_atomic(args.json_path, json.dumps(figures, indent=2) + "\n")
        except WriteFailed as error:  # a folder, a read-only place, a full disk
            raise UserError(f"--json {error}") from None


def _run_train(args: argparse.Namespace, console: Console) -> None:
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

    # One line per event, also in a log file or CI (where rich would wrap at 80 columns), and
    # messages are text, not markup (a path may hold brackets).
    def log(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    summary = fit(config, resume=bool(args.resume), data_dir=args.data_dir, log=log)
    best = summary["best_score"]
    console.print(
        f"done: {summary['steps']} steps in {summary['elapsed'] / 60:.1f} min, best validation "
        f"{config.train.early_stopping_metric} {best if best is None else round(best, 2)}; run in {summary['run_dir']}"
    )


# --- translate ----------------------------------------------------------------------------

GRID_SENTENCES = 6


def _search_options(args: argparse.Namespace, translator):
    """The run's SearchOptions with the arguments' beam/n-best/penalty, checked before any input is read."""
    return translator.search_options(
        beam_size=args.beam, n_best=getattr(args, "n_best", None), length_penalty=args.length_penalty
    )


def _sentence_lines(args: argparse.Namespace) -> Iterable[str]:
    """The sentences to translate: the arguments, or the lines of --input (or of piped stdin),
    read as they are needed."""
    from attnmt.textfiles import stream_lines

    if args.sentences and args.input:
        raise UserError("give sentences as arguments or with --input FILE, not both")
    return list(args.sentences) if args.sentences else stream_lines(args.input)


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


def _run_translate(args: argparse.Namespace) -> None:
    from attnmt.export import is_export
    from attnmt.stream import ModelSource, StreamProgress, translate_windows
    from attnmt.textfiles import count_lines, prompt_lines
    from attnmt.translate import temporary_export_of

    if args.workers < 1:
        raise UserError(f"--workers: expected at least 1 process, got {args.workers}")
    with contextlib.ExitStack() as stack:
        paths, quantize = [args.run_dir, *args.ensemble], args.quantize
        if args.engine == "onnxruntime" and not any(map(is_export, paths)):  # export once, for every process
            exports = (temporary_export_of(path, args.checkpoint, quantize) for path in paths)
            paths, quantize = [str(stack.enter_context(export)) for export in exports], "none"
        source = ModelSource(
            paths[0], args.checkpoint, args.device, args.engine, quantize, tuple(paths[1:]), args.ensemble_attention
        )
        translator = source.load()
        options = _search_options(args, translator)
        out = stack.enter_context(_output_stream(args.output))
        if not args.sentences and args.input is None and sys.stdin.isatty():  # typed lines, answered at once
            chunks = (translator.translate(line, options) for line in prompt_lines())
        else:
            lines = _sentence_lines(args)
            chunks = translate_windows(lines, options, translator=translator, source=source, workers=args.workers)
        total = count_lines(args.input) if args.input not in (None, "-") and not args.sentences else None
        progress = stack.enter_context(contextlib.closing(StreamProgress(total)))
        _write_translations(args, chunks, out, progress)


def _write_translations(args: argparse.Namespace, chunks, out: TextIO, progress) -> None:
    """Each chunk's lines (or n-best lines) as soon as it is translated, and heatmaps when asked."""
    from attnmt.translate import heatmap_grid, nbest_lines, write_heatmaps

    done, shown = 0, []
    for translations in chunks:
        if args.n_best > 1:
            lines = nbest_lines(translations, first_index=done)
        else:
            lines = [translation.text for translation in translations]
        out.write("".join(line + "\n" for line in lines))
        out.flush()
        progress.update(translations)
        if args.attention:
            shown += write_heatmaps(translations, args.attention, done)[: GRID_SENTENCES - len(shown)]
        done += len(translations)
    if args.attention and shown:
        heatmap_grid(shown, Path(args.attention) / "grid.png")


# --- evaluate ----------------------------------------------------------------------------


def _examples(args: argparse.Namespace, translator, cache: dict) -> list:
    """The test set: --src/--ref files, or the --split of the run's own corpus (each read once)."""
    from attnmt.corpora import read_test_files
    from attnmt.translate import split_examples

    if not (args.src or args.ref):
        return split_examples(translator.config.data, args.split, data_dir=args.data_dir, cache=cache)
    if not args.src:
        raise UserError("--ref needs --src FILE (the source side of the references)")
    if "files" not in cache:
        cache["files"] = read_test_files(args.src, args.ref)
    return cache["files"]


def _evaluate_runs(args: argparse.Namespace, console: Console, bootstrap_samples: int = 1000) -> list:
    from attnmt.translate import evaluate_runs

    cache: dict = {}
    announce = lambda note: console.print(note, style="dim", markup=False, highlight=False)  # noqa: E731
    return evaluate_runs(
        args.runs,
        lambda translator: _examples(args, translator, cache),
        which=args.checkpoint,
        device=args.device,
        engine=args.engine,
        quantize=args.quantize,
        options_for=lambda translator: _chosen_search(args, translator, cache, announce),
        bootstrap_samples=bootstrap_samples,
        ensemble=args.ensemble,
        announce=announce,
    )


def _chosen_search(args: argparse.Namespace, translator, cache: dict, announce):
    """The arguments' search options, or with --tune those that score best on the valid split."""
    from attnmt.translate import TUNE_BEAMS, TUNE_PENALTIES, split_examples, tune_search

    if not getattr(args, "tune", False):
        if getattr(args, "tune_beams", None) or getattr(args, "tune_penalties", None):
            raise UserError("--tune-beams and --tune-penalties go with --tune")
        return _search_options(args, translator)
    if args.beam is not None or args.length_penalty is not None:
        raise UserError("--tune chooses the beam size and length penalty: drop --beam and --length-penalty")
    if args.split == "valid" or args.src:
        raise UserError("--tune tunes on the valid split and scores the run's test split: drop --split valid/--src")
    valid = split_examples(translator.config.data, "valid", data_dir=args.data_dir, cache=cache)
    beams, penalties = args.tune_beams or TUNE_BEAMS, args.tune_penalties or TUNE_PENALTIES
    if not beams or min(beams) < 1 or (penalties and min(penalties) < 0):
        raise UserError("--tune-beams: beam sizes of at least 1; --tune-penalties: penalties of at least 0")
    tuning = tune_search(translator, valid, beams=beams, penalties=penalties, announce=announce)
    best = tuning.options
    announce(f"tuned on valid: beam {best.beam_size}, length penalty {best.length_penalty}")
    return tuning


def _run_evaluate(args: argparse.Namespace, console: Console) -> None:
    from attnmt.translate import write_evaluation

    results = _evaluate_runs(args, console, args.bootstrap)
    title = f"{args.src} ({len(args.ref)} reference files)" if args.src else f"{args.split} split"
    console.print(scores_table(results, title))
    first = results[0].evaluation
    plain = {"markup": False, "highlight": False, "soft_wrap": True}  # signatures stay one copyable line
    console.print(f"BLEU signature: {first.bleu.signature}", **plain)
    console.print(f"chrF signature: {first.chrf.signature}", **plain)
    console.print(f"BLEU tok-lc signature: {first.tokenized_bleu.signature} (word tokens; not sacreBLEU's)", **plain)
    if len(results) > 1 and results[0].bootstrap is None:
        console.print("[yellow]runs were evaluated on different test sets: no significance test[/yellow]")
    console.print(length_table(results))
    if args.output_dir:
        from attnmt.utils import choose_device, describe_machine

        test_set = {"split": None if args.src else args.split, "src": args.src, "refs": args.ref}
        test_set |= {"command": args.command_line, "machine": describe_machine(choose_device(args.device))}
        try:
            out_dir = write_evaluation(results, args.output_dir, test_set)
        except UserError as error:
            raise UserError(f"--output-dir {error}") from None
        console.print(f"wrote {out_dir}/evaluation.json and length.png", markup=False, soft_wrap=True)


# --- plot --------------------------------------------------------------------------------


def _plot_curves(args: argparse.Namespace) -> Path:
    from attnmt.plot import curves
    from attnmt.runlog import read_metrics
    from attnmt.translate import run_names

    runs = dict(zip(run_names(args.runs), (read_metrics(run) for run in args.runs), strict=True))
    metrics = [metric.strip() for metric in args.metrics.split(",") if metric.strip()]
    available = sorted({key for records in runs.values() for record in records for key in record} - {"step"})
    unknown = [metric for metric in metrics if metric not in available]
    if unknown or not metrics:
        raise UserError(f"--metrics: {', '.join(unknown) or '(none)'} not logged; available: {', '.join(available)}")
    return curves(runs, metrics, args.output)


def _plot_attention(args: argparse.Namespace) -> Path:
    from attnmt.translate import Translator, heatmap, heatmap_grid

    translator = Translator.load(
        args.run_dir, which=args.checkpoint, device=args.device, engine=args.engine, quantize=args.quantize
    )
    translations = translator.translate(args.sentences, _search_options(args, translator))
    if len(translations) == 1:
        return heatmap(translations[0], args.output, title=translations[0].text)
    return heatmap_grid(translations, args.output)


def _run_plot(args: argparse.Namespace, console: Console) -> None:
    from attnmt.plot import length_plot
    from attnmt.translate import length_points

    try:
        if args.plot_command == "attention":
            path = _plot_attention(args)
        elif args.plot_command == "curves":
            path = _plot_curves(args)
        else:
            path = length_plot(length_points(_evaluate_runs(args, console)), args.output)
    except OSError as exc:
        raise UserError(f"--output {args.output}: cannot write ({exc.strerror or exc})") from None
    console.print(f"wrote {path}", markup=False, soft_wrap=True)


# --- export -----------------------------------------------------------------------------


def _run_export(args: argparse.Namespace, console: Console) -> None:
    from attnmt.export import check_output, export_onnx, replace_export
    from attnmt.quantize import quantize_export
    from attnmt.translate import Translator, evaluate, split_examples

    output = Path(args.output) if args.output else Path(args.run_dir) / "export-onnx"
    hint = f"attnmt translate {shlex.quote(str(output))} SENTENCE"
    if args.quantize == "none":
        export_onnx(args.run_dir, output, which=args.checkpoint)
        console.print(f"wrote {output}; translate with: {hint}", markup=False, soft_wrap=True)
        return
    check_output(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{output.name}.", dir=output.parent) as folder:
        float32 = export_onnx(args.run_dir, Path(folder) / "float32", which=args.checkpoint)
        int8 = quantize_export(float32, Path(folder) / "int8")
        translators = [Translator.from_export(directory) for directory in (float32, int8)]
        examples = split_examples(translators[0].config.data, "valid", data_dir=args.data_dir)
        greedy = translators[0].search_options(beam_size=1)
        float_bleu, int8_bleu = (evaluate(translator, examples, greedy).bleu.score for translator in translators)
        scores = f"valid BLEU (greedy, {len(examples):,} sentences): float32 {float_bleu:.2f}, int8 {int8_bleu:.2f}"
        if float_bleu - int8_bleu > BLEU_BOUND:
            replace_export(float32, output)
            raise UserError(
                f"int8 loses {float_bleu - int8_bleu:.2f} BLEU, more than {BLEU_BOUND}: wrote the float32 "
                f"export to {output} instead ({scores})"
            )
        replace_export(int8, output)
    console.print(f"{scores}: int8 kept", markup=False, soft_wrap=True)
    console.print(f"wrote {output}; translate with: {hint}", markup=False, soft_wrap=True)


# --- average ----------------------------------------------------------------------------


def _run_average(args: argparse.Namespace, console: Console) -> None:
    from attnmt.average import DEFAULT_NAME, average_checkpoints, choose_checkpoints

    checkpoints = choose_checkpoints(args.run_dir, last=args.last, steps=args.steps)
    output = Path(args.output) if args.output else Path(args.run_dir) / "checkpoints" / DEFAULT_NAME
    average_checkpoints(checkpoints, output)
    names = ", ".join(checkpoint.name for checkpoint in checkpoints)
    console.print(f"wrote {output}: the mean of {names}", markup=False, soft_wrap=True)
    console.print(f"evaluate with: attnmt evaluate {shlex.quote(str(output))}", markup=False, soft_wrap=True)


# --- sweep ------------------------------------------------------------------------------


def _add_sweep_parser(commands) -> None:
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
    sweep.add_argument(
        "--data-dir", metavar="DIR", help="folder holding the corpora (else $ATTNMT_DATA, the cache, download)"
    )
    sweep.add_argument("--retry-failed", action="store_true", help="run failed trials again")
    sweep.add_argument("--dry-run", action="store_true", help="validate the sweep and list its trials")
    sweep.add_argument("--output-dir", metavar="DIR", help="report: where tables and plots go (SWEEP_DIR/report)")


def _run_sweep(args: argparse.Namespace, console: Console) -> None:
    from attnmt.sweep.run import run_sweep
    from attnmt.sweep.spec import load_plan

    words = args.target
    if words[0] == "report" and len(words) == 2:
        from attnmt.sweep.report import report

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
    console.print(
        f"sweep: {', '.join(f'{n} {state}' for state, n in counts.items())}; "
        f"tables and plots: attnmt sweep report {words[0]}",
        markup=False,
        soft_wrap=True,
    )


def _print_plan(plan, console: Console) -> None:
    from rich.table import Table

    from attnmt.sweep.spec import SET_BY_SWEEP, describe, flatten

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


# `attnmt serve`'s limit options and the `Limits` fields they set
SERVE_LIMITS = {
    "--max-sentences": ("max_sentences", int, "N", "sentences per request"),
    "--max-chars": ("max_chars", int, "N", "characters per sentence"),
    "--max-beam": ("max_beam", int, "K", "beam size a request may ask for"),
    "--timeout": ("timeout_s", float, "S", "seconds a request may wait for its answer"),
    "--max-queue": ("max_queue", int, "N", "requests waiting to be decoded; beyond, 503"),
    "--batch-wait-ms": ("batch_wait_ms", float, "MS", "how long a request waits for batch-mates"),
}


def _add_serve_parser(commands) -> None:
    from attnmt.serve.schemas import Limits  # no torch: the parser stays fast to build

    serve = commands.add_parser("serve", help="a JSON translation API and a page to explore attention")
    serve.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (or checkpoint folders) to serve")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free one)")
    serve.add_argument("--checkpoint", choices=("best", "last"), default="best", help="which checkpoint of a run")
    serve.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    serve.add_argument("--data-dir", metavar="DIR", help="corpus folder for the test-set views (else as `evaluate`)")
    limits = serve.add_argument_group("limits")
    for flag, (field, kind, metavar, help_text) in SERVE_LIMITS.items():
        default = getattr(Limits, field)
        limits.add_argument(
            flag, dest=field, type=kind, default=default, metavar=metavar, help=f"{help_text} ({default})"
        )
    limits.add_argument("--no-batching", action="store_true", help="decode each request alone")


def _run_serve(args: argparse.Namespace) -> None:
    from attnmt.serve.schemas import InvalidLimit, Limits
    from attnmt.serve.server import serve

    chosen = {field: getattr(args, field) for field, *_ in SERVE_LIMITS.values()}
    try:
        limits = Limits(**chosen, batching=not args.no_batching)
    except InvalidLimit as error:  # it names the field; the user typed the option
        flag = next(flag for flag, (field, *_) in SERVE_LIMITS.items() if field == error.field)
        raise UserError(f"{flag}: {error.problem}") from None
    serve(
        args.runs,
        host=args.host,
        port=args.port,
        which=args.checkpoint,
        device=args.device,
        data_dir=args.data_dir,
        limits=limits,
    )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """parse_args, except that `translate RUN --beam 2 SENTENCE` works: argparse gives an optional
    positional list (nargs="*") its empty match before the first option, leaving the rest over."""
    parser = _build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras and args.command == "translate" and not any(extra.startswith("-") for extra in extras):
        args.sentences = [*args.sentences, *extras]
    elif extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    args.command_line = shlex.join(["attnmt", *(sys.argv[1:] if argv is None else argv)])  # recorded in results
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = Console()
    try:
        if args.command == "validate":
            _run_validate(args, console)
        elif args.command == "train":
            _run_train(args, console)
        elif args.command == "data":
            _run_data_stats(args, console)
        elif args.command == "translate":
            _run_translate(args)
        elif args.command == "evaluate":
            _run_evaluate(args, console)
        elif args.command == "plot":
            _run_plot(args, console)
        elif args.command == "export":
            _run_export(args, console)
        elif args.command == "average":
            _run_average(args, console)
        elif args.command == "sweep":
            _run_sweep(args, console)
        elif args.command == "serve":
            _run_serve(args)
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
