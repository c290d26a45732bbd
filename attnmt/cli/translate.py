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
    parser.add_argument(
        "--n-best",
        type=int,
        metavar="N",
        help="print N hypotheses a sentence as 'i ||| text ||| score' lines (default: the run's decode.n_best)",
    )
    parser.add_argument("--attention", metavar="OUT_DIR", help="write OUT_DIR/0001.png ... and grid.png")
    parser.add_argument(
        "--alignment",
        action="store_true",
        help="add each translation's word alignment from attention after ' ||| ' (Pharaoh i-j, words from 0)",
    )
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


def _refuse(options: dict, problem: str, field: str) -> None:
    """A UserError naming the first of `options` that was given (a true value): `problem` with it."""
    given = [name for name, value in options.items() if value]
    if given:
        raise UserError(f"{given[0]} {problem}", field=field)


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


def _check_steering(args: argparse.Namespace) -> None:
    """Refuse prefixes and required phrases that do not fit the sentences given."""
    if args.prefix and not args.sentences:
        raise UserError("--prefix goes with SENTENCE arguments; for --input lines use --prefix-column", field="prefix")
    if args.prefix and len(args.prefix) != len(args.sentences):
        counts = f"{len(args.prefix)} prefixes for {len(args.sentences)} sentences"
        raise UserError(f"{counts}: give one each", field="prefix")
    if (args.prefix_column or args.require_column) and args.sentences:
        raise UserError("a column option reads --input lines; for SENTENCE arguments use --prefix or --require")
    per_sentence = {
        "--prefix": args.prefix,
        "--prefix-column": args.prefix_column,
        "--alignment": args.alignment,
        "--attention": args.attention,
        "--n-best": args.n_best not in (None, 1),
    }
    if args.markup:
        _refuse({"--document": args.document, **per_sentence}, "cannot be combined with --markup: it writes one "
                "tagged line per line", "markup")  # fmt: skip
    if args.document:
        with_document = {**per_sentence, "--require": args.require, "--require-column": args.require_column}
        with_document["--glossary-report"] = args.glossary_report
        _refuse(with_document, "is given per sentence, and --document writes one line per paragraph: translate "
                "sentence lines for it", "document")  # fmt: skip


def _sources(lines: Iterable[str], args: argparse.Namespace, glossary=None) -> Iterator:
    """Each line as translate_windows takes it: as it is, or a `Source` with its prefix and
    required phrases (tab-separated columns: SOURCE<TAB>PREFIX with --prefix-column,
    SOURCE<TAB>PHRASE... with --require-column, SOURCE<TAB>PREFIX<TAB>PHRASE... with both;
    --require's phrases for every line; the targets of the `glossary`'s terms found in it)."""
    from attnmt.glossary import required_phrases
    from attnmt.translate import Source

    for line in lines:
        if not (args.prefix_column or args.require_column or args.require or glossary):
            yield line
            continue
        prefix, phrases = "", []
        if args.prefix_column and args.require_column:
            source, _, rest = line.partition("\t")
            prefix, *phrases = rest.split("\t")  # no tab: no prefix and no phrases
        elif args.prefix_column:
            source, _, prefix = line.partition("\t")
        elif args.require_column:
            source, *phrases = line.split("\t")
        else:
            source = line
        phrases = [*phrases, *args.require]
        yield Source(source, prefix=prefix, required_phrases=required_phrases(source, phrases, glossary))


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.alignment import pharaoh
    from attnmt.data.textfiles import count_lines, prompt_lines
    from attnmt.glossary import required_phrases
    from attnmt.loading import load  # torch: not loaded to build the parser
    from attnmt.stream import StreamProgress, translate_windows
    from attnmt.translate import Source, Translation

    if args.workers < 1:
        raise UserError(f"expected at least 1 process, got {args.workers}", field="workers")
    if args.sentences and args.input:
        raise UserError("give sentences as arguments or with --input FILE, not both")
    _check_steering(args)
    spec = model_spec(args, [args.run_dir, *args.ensemble], ensemble_attention=args.ensemble_attention)
    [spec] = fast_specs(args, [spec], console)
    with contextlib.ExitStack() as stack:
        spec = stack.enter_context(spec.exported())  # a run on onnxruntime: exported once, for every process
        translator = load(spec)
        glossary = _glossary(args, translator)
        n_best = translator.config.decode.n_best if args.n_best is None else args.n_best
        options = translator.search_options(
            beam_size=args.beam,
            n_best=n_best,
            length_penalty=args.length_penalty,
            stopping=args.stopping,
            min_length=args.min_length,
        )
        out = stack.enter_context(output_stream(args.output))
        interactive = not args.sentences and args.input is None and sys.stdin.isatty()
        tags = _markup(args, translator, interactive)
        if args.document:
            _translate_documents(args, translator, spec, options, glossary, out, interactive)
            return
        if interactive:  # typed lines, answered at once
            typed = (
                list(_sources(line if tags is None else tags.texts(line), args, glossary)) for line in prompt_lines()
            )
            chunks: Iterator[list[Translation]] = (translator.translate_sources(line, options) for line in typed)
        else:
            lines: Iterable[str | Source]
            if args.prefix:
                pairs = zip(args.sentences, args.prefix, strict=True)
                lines = [Source(s, prefix, required_phrases(s, args.require, glossary)) for s, prefix in pairs]
            else:
                lines = _sources(_texts(args, translator, tags), args, glossary)
            chunks = translate_windows(lines, options, translator=translator, spec=spec, workers=args.workers)
        total = count_lines(args.input) if args.input not in (None, "-") and not args.sentences else None
        progress = stack.enter_context(contextlib.closing(StreamProgress(total)))
        aligned = (lambda translation: pharaoh(translator.align(translation))) if args.alignment else None
        report_out = stack.enter_context(output_stream(args.glossary_report, "--glossary-report"))
        report = _GlossaryReport(glossary, report_out if args.glossary_report else None)
        chunks = (report.seen(translations) for translations in chunks)
        if tags is not None:
            chunks = (tags.put_back(translations) for translations in chunks)
        _write_translations(chunks, out, progress, n_best=n_best, attention=args.attention, aligned=aligned)
        report.summary()


def _markup(args: argparse.Namespace, translator, interactive: bool):
    """With --markup, the `MarkupLines` that takes the tags out and puts them back; a file's lines
    are all checked first, so a line that is not well-formed stops the run before anything is
    written (standard input is checked as it is read)."""
    if not args.markup:
        return None
    from attnmt.data.textfiles import stream_lines
    from attnmt.markup import MarkupLines, read_line

    where = "argument" if args.sentences else "<stdin>" if args.input in (None, "-") else args.input
    if args.sentences:
        for number, sentence in enumerate(args.sentences, start=1):
            read_line(sentence, f"{where} {number}")
    elif not interactive and args.input not in (None, "-"):
        for number, line in enumerate(stream_lines(args.input), start=1):
            read_line(line, f"{where}:{number}")
    return MarkupLines(translator.codec, translator.config.data.lowercase, where)


def _texts(args: argparse.Namespace, translator, tags):
    """The lines to translate: the arguments or the input's lines, without their tags with --markup."""
    from attnmt.data.textfiles import stream_lines

    lines = args.sentences or stream_lines(args.input)
    return lines if tags is None else tags.texts(lines)


def _translate_documents(args, translator, spec, options, glossary, out: TextIO, interactive: bool) -> None:
    """--document: every line a paragraph (`attnmt.documents`), its sentences translated as
    sentence lines are (windows, workers, the glossary), each paragraph written when complete."""
    from attnmt.data.textfiles import prompt_lines, stream_lines
    from attnmt.documents import Documents
    from attnmt.stream import StreamProgress, translate_windows
    from attnmt.translate import MAX_SOURCE_TOKENS, Translation, warn

    def count_tokens(text: str) -> int:
        return len(translator.codec.source_tokens(text))

    documents = Documents(translator.config.data.src_lang, count_tokens, MAX_SOURCE_TOKENS, warn)
    if interactive:
        typed = (list(_sources(documents.sentences(line), args, glossary)) for line in prompt_lines())
        chunks: Iterator[list[Translation]] = (translator.translate_sources(sentences, options) for sentences in typed)
    else:
        sentences = _sources(documents.sentences(args.sentences or stream_lines(args.input)), args, glossary)
        chunks = translate_windows(sentences, options, translator=translator, spec=spec, workers=args.workers)
    with contextlib.closing(StreamProgress(None)) as progress:
        for paragraph, translations in documents.joined(chunks):
            out.write(paragraph.join([translation.text for translation in translations]) + "\n")
            out.flush()
            progress.update(translations)


def _glossary(args: argparse.Namespace, translator):
    """The --glossary read for this run's languages and vocabularies (None without one)."""
    from attnmt.glossary import read_glossary

    if args.glossary_report and not args.glossary:
        raise UserError("--glossary-report goes with --glossary", field="glossary")
    if not args.glossary:
        return None
    data = translator.config.data
    return read_glossary(args.glossary, data.src_lang, data.lowercase, translator.codec.encode_target)


class _GlossaryReport:
    """Counts what the glossary did to each translation, writes it as a JSON line per sentence
    to `out` (--glossary-report), and says the totals on stderr at the end."""

    def __init__(self, glossary, out: TextIO | None) -> None:
        self.glossary, self.out = glossary, out
        self.sentences = self.with_terms = self.applied = self.missing = 0

    def seen(self, translations):
        import json

        for translation in translations if self.glossary else ():
            applied = self.glossary.applied(translation.source, translation.missing_required_phrases)
            self.sentences += 1
            self.with_terms += bool(applied.applied or applied.missing)
            self.applied, self.missing = self.applied + len(applied.applied), self.missing + len(applied.missing)
            if self.out:
                self.out.write(json.dumps({"line": self.sentences, **applied.record()}, ensure_ascii=False) + "\n")
        return translations

    def summary(self) -> None:
        if self.glossary:
            left = f"; {self.missing:,} left out (no room)" if self.missing else ""
            counts = f"{self.applied:,} terms applied in {self.with_terms:,} of {self.sentences:,} sentences"
            print(f"glossary: {counts}{left}", file=sys.stderr)


def _write_translations(chunks, out: TextIO, progress, *, n_best: int, attention: str | None, aligned=None) -> None:
    """Each chunk's lines (or n-best lines) as soon as it is translated, with its alignment after
    ' ||| ' when `aligned` writes one, and heatmaps when asked."""
    from attnmt.heatmaps import heatmap_grid, write_heatmaps
    from attnmt.translate import Translation, nbest_lines

    done = 0
    shown: list[Translation] = []
    for translations in chunks:
        if n_best > 1:
            lines = nbest_lines(translations, first_index=done, aligned=aligned)
        else:
            lines = [t.text if aligned is None else f"{t.text} ||| {aligned(t)}" for t in translations]
        out.write("".join(line + "\n" for line in lines))
        out.flush()
        progress.update(translations)
        if attention:
            shown += write_heatmaps(translations, attention, done)[: GRID_SENTENCES - len(shown)]
        done += len(translations)
    if attention and shown:
        heatmap_grid(shown, Path(attention) / "grid.png")
