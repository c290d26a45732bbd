"""How the search's stopping rule and length penalty change output length and BLEU, on the same weights.

    python -m benchmarks.stopping RUN_DIR [RUN_DIR ...] [--data-dir DIR] [--json OUT]

Each run's best checkpoint translates its valid and test splits with every search below, and
each output is scored against all its references: sacreBLEU, the tokenized-lowercased BLEU of
older papers, chrF, and sacreBLEU's hypothesis/reference length ratio with the brevity penalty
it costs. Whether short outputs come from the search or from the weights shows here: a search
that lengthens them on identical weights lifts the ratio; one that does not leaves the cause to
training.

    greedy                   beam 1
    default                  the run's decode settings at beam 5: attnmt's k_finished (a sentence
                             ends once K hypotheses have ended), ranked with GNMT's length
                             penalty (decode.length_penalty, 1.0 unless the config says otherwise)
    k_finished, alpha 0      the same, ranked by raw log-probability
    best_finished, alpha 0   OpenNMT-py's rule: a sentence ends as soon as a step's best candidate
                             ends, ranked by raw log-probability (no penalty)
    tuned                    k_finished with the length penalty chosen on valid (PENALTIES); valid
                             is where it was chosen, so only its test score is fair

Not a timing: nothing here is timed, and it may run beside other work.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from rich.console import Console

from attnmt.evaluation import evaluate, split_examples, tune_search
from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions, SearchOverrides
from attnmt.translate import Translator
from benchmarks.measure import describe_machine, write_results
from benchmarks.report import markdown_table, rows_by_search

BEAM = 5
PENALTIES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0)
SPLITS = ("valid", "test")


def brevity_penalty(ratio: float) -> float:
    """BLEU's brevity penalty at a hypothesis/reference length ratio (1 at or above 1)."""
    return 1.0 if ratio >= 1 else math.exp(1 - 1 / ratio) if ratio > 0 else 0.0


def searches(translator: Translator, tuned_penalty: float) -> dict[str, SearchOptions]:
    """The searches compared, by name (module docstring)."""
    options = translator.search_options
    tuned = options(beam_size=BEAM, length_penalty=tuned_penalty, stopping="k_finished")
    return {
        "greedy": options(beam_size=1, length_penalty=0.0),
        "default": options(beam_size=BEAM),
        "k_finished, alpha 0": options(beam_size=BEAM, length_penalty=0.0, stopping="k_finished"),
        "best_finished, alpha 0": options(beam_size=BEAM, length_penalty=0.0, stopping="best_finished"),
        "tuned": tuned,
    }


def measure_run(run_dir: Path, data_dir: str | None, say) -> dict:
    """Every search on the run's valid and test splits (module docstring)."""
    translator = load(ModelSpec(str(run_dir), device="cpu", data_dir=data_dir))
    examples = {split: split_examples(translator.config.data, split) for split in SPLITS}
    tuning = tune_search(
        translator,
        examples["valid"],
        beams=[BEAM],
        penalties=PENALTIES,
        overrides=SearchOverrides(stopping="k_finished"),
    )
    rows = []
    for name, options in searches(translator, tuning.options.length_penalty).items():
        for split in SPLITS:
            scored = evaluate(translator, examples[split], options)
            ratio = scored.bleu.length_ratio
            rows.append(
                {
                    "search": name,
                    "split": split,
                    "beam_size": options.beam_size,
                    "length_penalty": options.length_penalty,
                    "stopping": options.stopping,
                    "sentences": len(examples[split]),
                    "bleu": scored.bleu.score,
                    "tokenized_bleu": scored.tokenized_bleu.score,
                    "chrf": scored.chrf.score,
                    "length_ratio": ratio,
                    "brevity_penalty": None if ratio is None else brevity_penalty(ratio),
                    # on the tokens tokenized BLEU reads, where a word model's <unk> is one token
                    # (in the detokenized text sacreBLEU splits it in three)
                    "tokenized_length_ratio": scored.tokenized_bleu.length_ratio,
                }
            )
            say(f"{run_dir}: {name} on {split}: BLEU {scored.bleu.score:.2f}, length ratio {ratio:.3f}")
    return {
        "run": str(run_dir),
        "config": translator.config.model_dump(mode="json"),
        "tuning": tuning.trials,
        "rows": rows,
    }


def result_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One line per run and search: valid and test BLEU with their length ratios."""
    header = ["run", "search", "valid BLEU", "valid ratio", "test BLEU", "test ratio", "test tok BLEU"]
    lines = []
    for run in results["runs"]:
        for name, splits in rows_by_search(run["rows"]).items():
            valid, test = splits["valid"], splits["test"]
            lines.append(
                [
                    Path(run["run"]).name,
                    name,
                    f"{valid['bleu']:.2f}",
                    f"{valid['length_ratio']:.3f}",
                    f"{test['bleu']:.2f}",
                    f"{test['length_ratio']:.3f}",
                    f"{test['tokenized_bleu']:.2f}",
                ]
            )
    return header, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stopping", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="trained attnmt run directories")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", type=Path, required=True, help="where to write the raw result")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    results = {
        "machine": describe_machine(torch.device("cpu")),
        "settings": {"beam_size": BEAM, "tuned_penalties": list(PENALTIES), "threads": torch.get_num_threads()},
        "runs": [measure_run(run, args.data_dir, console.log) for run in args.runs],
    }
    write_results(args.json, results, "benchmarks.stopping", argv)
    print("\n".join(markdown_table(*result_rows(results))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
