"""`attnmt evaluate RUN_DIR ...`: BLEU, chrF and BLEU by length of trained runs, compared.

`add_evaluation_arguments` and `evaluated` also serve `attnmt plot length`.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from attnmt.cli.common import (
    add_data_dir,
    add_fast_arguments,
    add_model_arguments,
    fast_specs,
    float_list,
    int_list,
    model_spec,
    printer,
    search_overrides,
)
from attnmt.tables import length_table, scores_table
from attnmt.utils import UserError, choose_device, describe_machine


def add_evaluation_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, several=True)
    parser.add_argument("--split", choices=("test", "valid"), default="test", help="split of each run's corpus")
    parser.add_argument("--src", metavar="FILE", help="evaluate on this source file instead of the run's split")
    parser.add_argument("--ref", metavar="FILE", action="append", default=[], help="reference file (repeatable)")
    add_fast_arguments(parser)
    add_data_dir(parser)
    parser.add_argument(
        "--ensemble", action="store_true", help="the runs are one system: the mean of their log-probabilities"
    )


def add_parser(commands) -> None:
    parser = commands.add_parser("evaluate", help="BLEU, chrF and BLEU by length of trained runs")
    add_evaluation_arguments(parser)
    parser.add_argument("--output-dir", metavar="DIR", help="write evaluation.json, length.png and hypotheses")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap samples")
    parser.add_argument(
        "--tune", action="store_true", help="choose beam size and length penalty on the valid split, then score"
    )
    parser.add_argument("--tune-beams", type=int_list, metavar="K,K,...", help="beam sizes to try (default 1,3,5,10)")
    parser.add_argument(
        "--tune-penalties", type=float_list, metavar="A,A,...", help="length penalties to try (default 0,0.5,1,1.5,2)"
    )
    parser.set_defaults(run=run)


def evaluated(
    args: argparse.Namespace,
    console: Console,
    *,
    bootstrap: int = 1000,
    tune: bool = False,
    tune_beams: list[int] | None = None,
    tune_penalties: list[float] | None = None,
) -> list:
    """The runs of `add_evaluation_arguments` evaluated on their test set: --src/--ref files, or the
    --split of each run's own corpus (each read once); searched as the arguments say, or tuned."""
    from attnmt.data.parallel_files import read_test_files  # torch: not loaded to build the parser
    from attnmt.evaluation import choose_search, evaluate_runs, files_tokenized, split_examples, split_tokenized

    if args.ref and not args.src:
        raise UserError("--ref needs --src FILE (the source side of the references)")
    say = printer(console, style="dim")
    cache: dict = {}
    spec = model_spec(args, args.runs, data_dir=args.data_dir)

    def examples_for(translator) -> list:
        if not args.src:
            return split_examples(translator.data, args.split, cache=cache)
        if "files" not in cache:
            cache["files"] = read_test_files(args.src, args.ref)
        return cache["files"]

    def options_for(translator):
        return choose_search(
            translator,
            search_overrides(args),
            tune=tune,
            tune_beams=tune_beams,
            tune_penalties=tune_penalties,
            scored="files" if args.src else args.split,
            valid=lambda: split_examples(translator.data, "valid", cache=cache),
            say=say,
        )

    if args.fast and tune:
        raise UserError("the fast preset and --tune each choose the search: give one", field="fast")
    systems = fast_specs(args, [spec] if args.ensemble else spec.alone(), console)

    def tokenized_for(translator):  # the papers' tokenized references: Multi30k's, of a split or a --ref file
        if not args.src:
            return split_tokenized(translator.data, args.split, cache=cache)
        return files_tokenized(args.ref)

    return evaluate_runs(
        systems,
        examples_for,
        options_for=options_for,
        tokenized_for=tokenized_for,
        bootstrap_samples=bootstrap,
        say=say,
    )


def run(args: argparse.Namespace, console: Console) -> None:
    from attnmt.evaluation import write_evaluation  # torch: not loaded to build the parser
    from attnmt.provenance import code_state

    code_at_start = code_state()
    results = evaluated(
        args,
        console,
        bootstrap=args.bootstrap,
        tune=args.tune,
        tune_beams=args.tune_beams,
        tune_penalties=args.tune_penalties,
    )
    title = f"{args.src} ({len(args.ref)} reference files)" if args.src else f"{args.split} split"
    console.print(scores_table(results, title))
    first = results[0].evaluation
    say = printer(console)  # signatures stay one copyable line
    say(f"BLEU signature: {first.bleu.signature}")
    say(f"chrF signature: {first.chrf.signature}")
    if first.moses_bleu is not None:
        say(f"BLEU moses-tok-lc signature: {first.moses_bleu.signature} (the papers' tokenized BLEU; not sacreBLEU's)")
    say(f"BLEU word-tok-lc signature: {first.tokenized_bleu.signature} (attnmt's word tokens; not sacreBLEU's)")
    if len(results) > 1 and results[0].bootstrap is None:
        console.print("[yellow]runs were evaluated on different test sets: no significance test[/yellow]")
    console.print(length_table(results))
    if args.output_dir:
        test_set = {"split": None if args.src else args.split, "src": args.src, "refs": args.ref}
        test_set |= {"command": args.command_line, "machine": describe_machine(choose_device(args.device))}
        test_set |= {"code_at_start": code_at_start, "code_at_end": code_state()}
        out_dir = write_evaluation(results, args.output_dir, test_set)
        say(f"wrote {out_dir}/evaluation.json and length.png")
