"""`attnmt translate RUN_DIR [SENTENCE ...]`: translate arguments, a file, stdin, or typed lines."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from rich.console import Console

from attnmt.cli.common import add_fast_arguments, add_model_arguments, fast_specs, model_spec, output_stream
from attnmt.utils import UserError

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
    add_fast_arguments(parser)
    parser.add_argument("sentences", nargs="*", metavar="SENTENCE", help="sentences to translate")
    _add_input_arguments(parser)
    parser.add_argument(
        "--prefix",
        action="append",
        default=[],
        metavar="TEXT",
        help="the start of a SENTENCE's translation, to be continued (one per SENTENCE, in order)",
    )
    parser.add_argument(
        "--prefix-column",
        action="store_true",
        help="each --input line is SOURCE<TAB>PREFIX: the translation continues PREFIX (no tab: none); with "
        "--require-column, SOURCE<TAB>PREFIX<TAB>PHRASE...",
    )
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="PHRASE",
        help="a target phrase every translation must contain (repeatable; for every sentence)",
    )
    parser.add_argument(
        "--require-column",
        action="store_true",
        help="each --input line is SOURCE<TAB>PHRASE<TAB>...: phrases its translation must contain; with "
        "--prefix-column, SOURCE<TAB>PREFIX<TAB>PHRASE...",
    )
    parser.add_argument(
        "--glossary",
        metavar="FILE",
        help="SOURCE<TAB>TARGET per line: where a source term occurs (whole words), its target is required",
    )
    parser.add_argument(
        "--glossary-report",
        metavar="FILE",
        help="with --glossary: one JSON line per sentence, the terms applied and those left out (no room)",
    )
    _add_output_arguments(parser)
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


def _add_output_arguments(parser) -> None:
    """What is written beside each translation: its n-best list, heatmaps, alignment."""
    parser.add_argument(
        "--n-best",
        type=int,
        metavar="N",
        help="print N hypotheses a sentence as 'i ||| text ||| score' lines (default: the run's decode.n_best)",
    )
    parser.add_argument("--attention", metavar="OUT_DIR", help="write OUT_DIR/0001.png ... and grid.png")
    parser.add_argument(
        "--heads",
        action="store_true",
        help="with --attention, a transformer run: also OUT_DIR/0001-heads.png ..., every decoder layer's and "
        "head's attention over the source",
    )
    parser.add_argument(
        "--alignment",
        action="store_true",
        help="add each translation's word alignment from attention after ' ||| ' (Pharaoh i-j, words from 0)",
    )


def _add_input_arguments(parser) -> None:
    """What the lines are and where the translations go."""
    parser.add_argument("--input", metavar="FILE", help="one sentence per line ('-': stdin)")
    parser.add_argument("--output", metavar="FILE", help="write translations here (default: stdout)")
    parser.add_argument(
        "--markup",
        choices=["html"],
        help="lines hold inline tags (<b>, <a href=...>): taken out, put back around the aligned target words",
    )
    parser.add_argument(
        "--document",
        action="store_true",
        help="each line is a paragraph: cut into sentences, translated, and put back with its spacing",
    )


def _check_lines(args: argparse.Namespace) -> None:
    """Refuse prefixes and required phrases that do not fit the way the lines are given."""
    if args.prefix and not args.sentences:
        raise UserError("--prefix goes with SENTENCE arguments; for --input lines use --prefix-column", field="prefix")
    if args.prefix and len(args.prefix) != len(args.sentences):
        counts = f"{len(args.prefix)} prefixes for {len(args.sentences)} sentences"
        raise UserError(f"{counts}: give one each", field="prefix")
    if (args.prefix_column or args.require_column) and args.sentences:
        raise UserError("a column option reads --input lines; for SENTENCE arguments use --prefix or --require")
    if args.glossary_report and not args.glossary:
        raise UserError("--glossary-report goes with --glossary", field="glossary")


def _job(args: argparse.Namespace, overrides):
    """The translation job argv asks for, its features checked (`jobs.job.REFUSED`) in the words
    of the flags given."""
    from attnmt.jobs.job import TranslationJob

    job = TranslationJob(
        document=args.document,
        markup=args.markup,
        prefixes=bool(args.prefix or args.prefix_column),
        required_phrases=bool(args.require or args.require_column),
        glossary=args.glossary,
        search=overrides,
        attention=bool(args.attention),
        alignment=args.alignment,
    )
    given = {
        "prefixes": "--prefix" if args.prefix else "--prefix-column",
        "required_phrases": "--require" if args.require else "--require-column",
    }
    job.check(spell=lambda feature: given.get(feature) or "--" + feature.replace("_", "-"))
    return job


def _lines(args: argparse.Namespace, lines: Iterable[str]) -> Iterator:
    """Each line as the job takes it: as it is, or a `Source` with its prefix and required
    phrases (tab-separated columns: SOURCE<TAB>PREFIX with --prefix-column, SOURCE<TAB>PHRASE...
    with --require-column, SOURCE<TAB>PREFIX<TAB>PHRASE... with both; --prefix's, one per
    SENTENCE; --require's phrases for every line)."""
    from attnmt.translation import Source

    prefixes = iter(args.prefix)
    for line in lines:
        prefix, phrases = next(prefixes, ""), []
        if args.prefix_column and args.require_column:
            line, _, rest = line.partition("\t")
            prefix, *phrases = rest.split("\t")  # no tab: no prefix and no phrases
        elif args.prefix_column:
            line, _, prefix = line.partition("\t")
        elif args.require_column:
            line, *phrases = line.split("\t")
        phrases += args.require
        yield Source(line, prefix, tuple(phrases)) if prefix or phrases else line


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.alignment import pharaoh
    from attnmt.cli.common import search_overrides
    from attnmt.data.textfiles import count_lines, prompt_lines, stream_lines
    from attnmt.jobs.markup import MarkupError
    from attnmt.loading import load  # torch: not loaded to build the parser
    from attnmt.stream import StreamProgress, translate_windows
    from attnmt.translation import Translation

    if args.workers < 1:
        raise UserError(f"expected at least 1 process, got {args.workers}", field="workers")
    if args.sentences and args.input:
        raise UserError("give sentences as arguments or with --input FILE, not both")
    _check_lines(args)
    if args.heads and not args.attention:
        raise UserError("--heads draws into the --attention folder: give --attention OUT_DIR", field="heads")
    job = _job(args, search_overrides(args).replace(n_best=args.n_best))
    interactive = not args.sentences and args.input is None and sys.stdin.isatty()
    where = "argument" if args.sentences else "<stdin>" if args.input in (None, "-") else args.input
    if job.markup is not None and not interactive:
        _check_markup(args, where)
    spec = model_spec(args, [args.run_dir, *args.ensemble], ensemble_attention=args.ensemble_attention)
    [spec] = fast_specs(args, [spec], console)
    with contextlib.ExitStack() as stack:
        spec = stack.enter_context(spec.exported())  # a run on onnxruntime: exported once, for every process
        translator = load(spec)
        n_best = translator.n_best if args.n_best is None else args.n_best  # the run's own by default
        options = translator.search_options(job.search.replace(n_best=n_best))

        def bad_line(number: int, problem: str) -> UserError:
            return MarkupError(f"{where}:{number}: {problem}", field="markup")

        bound = job.bind(translator, bad_line=bad_line)
        out = stack.enter_context(output_stream(args.output))
        chunks: Iterator[list[Translation]]
        if interactive:  # typed lines, answered at once
            typed = (list(bound.sources(_lines(args, line))) for line in prompt_lines())
            chunks = (translator.translate_sources(sources, options) for sources in typed)
        else:
            sources = bound.sources(_lines(args, args.sentences or stream_lines(args.input)))
            chunks = translate_windows(sources, options, translator=translator, spec=spec, workers=args.workers)
        total = count_lines(args.input) if args.input not in (None, "-") and not args.sentences else None
        progress = stack.enter_context(contextlib.closing(StreamProgress(None if args.document else total)))
        report_out = stack.enter_context(output_stream(args.glossary_report, "--glossary-report"))
        report = _GlossaryReport(report_out if args.glossary_report else None)
        aligned = (lambda translation: pharaoh(translator.align(translation))) if args.alignment else None
        writer = _Writer(out, options.n_best, args.attention, aligned, _heads(translator) if args.heads else None)
        for finished in bound.finish(chunks):
            writer.write(finished)
            report.seen(finished)
            progress.update([sentence for unit in finished for sentence in unit.sentences])
        writer.close()
        report.summary()


def _check_markup(args: argparse.Namespace, where: str) -> None:
    """Every tagged line read first, so that a line that is not well-formed stops the run before
    anything is written (standard input is checked as it is read)."""
    from attnmt.data.textfiles import stream_lines
    from attnmt.jobs.markup import read_line

    if args.sentences:
        for number, sentence in enumerate(args.sentences, start=1):
            read_line(sentence, f"{where} {number}")
    elif args.input not in (None, "-"):
        for number, line in enumerate(stream_lines(args.input), start=1):
            read_line(line, f"{where}:{number}")


class _GlossaryReport:
    """Counts what the glossary did to each sentence, writes it as a JSON line per sentence to
    `out` (--glossary-report), and says the totals on stderr at the end."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out
        self.sentences = self.with_terms = self.applied = self.missing = 0

    def seen(self, finished) -> None:
        import json

        for applied in (outcome for unit in finished for outcome in unit.glossary or ()):
            self.sentences += 1
            self.with_terms += bool(applied.applied or applied.missing)
            self.applied, self.missing = self.applied + len(applied.applied), self.missing + len(applied.missing)
            if self.out:
                self.out.write(json.dumps({"line": self.sentences, **applied.record()}, ensure_ascii=False) + "\n")

    def summary(self) -> None:
        if self.sentences:
            left = f"; {self.missing:,} left out (no room)" if self.missing else ""
            counts = f"{self.applied:,} terms applied in {self.with_terms:,} of {self.sentences:,} sentences"
            print(f"glossary: {counts}{left}", file=sys.stderr)


def _heads(translator):
    """What draws a sentence's every layer and head (`--heads`): a UserError at once for a model
    without layers of heads, before anything is translated."""
    from attnmt.attention_heads import check_heads, head_attention
    from attnmt.heatmaps import layer_head_heatmaps

    check_heads(translator)

    def draw(translation, path: Path) -> None:
        heads = head_attention(translator, translation)
        layer_head_heatmaps(heads.cross, heads.source, heads.outputs, path, heads.alignment_layer)

    return draw


class _Writer:
    """Each finished line or paragraph as soon as it is complete: its text, or its n-best lines,
    with its alignment after ' ||| ' when `aligned` writes one; its sentences' heatmaps when
    `attention` names a folder, and each layer's and head's when `heads` draws them."""

    def __init__(self, out: TextIO, n_best: int, attention: str | None, aligned=None, heads=None) -> None:
        self.out, self.n_best, self.attention, self.aligned, self.heads = out, n_best, attention, aligned, heads
        self.lines = self.sentences = 0
        self.shown: list = []

    def write(self, finished) -> None:
        from attnmt.heatmaps import write_heatmaps
        from attnmt.translation import nbest_lines

        translations = [unit.translation for unit in finished]
        if self.n_best > 1:
            lines = nbest_lines(translations, first_index=self.lines, aligned=self.aligned)
        else:
            lines = [t.text if self.aligned is None else f"{t.text} ||| {self.aligned(t)}" for t in translations]
        self.out.write("".join(line + "\n" for line in lines))
        self.out.flush()
        self.lines += len(finished)
        sentences = [sentence for unit in finished for sentence in unit.sentences]
        if self.attention:
            drawn = write_heatmaps(sentences, self.attention, self.sentences)
            if self.heads is not None:
                for offset, sentence in enumerate(sentences):
                    if sentence.source_tokens:
                        self.heads(sentence, Path(self.attention) / f"{self.sentences + offset + 1:04d}-heads.png")
            self.shown += drawn[: GRID_SENTENCES - len(self.shown)]
        self.sentences += len(sentences)

    def close(self) -> None:
        from attnmt.heatmaps import heatmap_grid

        if self.attention and self.shown:
            heatmap_grid(self.shown, Path(self.attention) / "grid.png")
