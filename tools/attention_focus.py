"""Where trained models attend: the share of attention on each run's first source position.

    python -m tools.attention_focus RUN_DIR [RUN_DIR ...] [--sentences 200] [--json FILE]

Each run greedily translates the first N sentences of its validation split; over every output
step (the </s> step included) it reports the mean attention weight on source position 0 and how
often position 0 gets the largest weight. A model whose attention has collapsed onto the first
token (whose backward encoder state summarizes the whole sentence) shows a share near 1; a model
that aligns shows about 1 / source length.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.runlog import read_metrics
from attnmt.translate import Translator
from attnmt.utils import UserError
from benchmarks.measure import describe_machine, positive_int, write_results
from benchmarks.report import markdown_table


def first_position_focus(translator: Translator, sentences: list[str]) -> dict:
    """Mean weight on source position 0 and the share of steps whose argmax is position 0."""
    rows = [t.attention for t in translator.translate(sentences) if t.attention.numel()]  # each (T+1, S)
    if not rows:
        raise UserError("no sentence has a non-empty translation to measure attention on")
    weight = torch.cat([attention[:, 0] for attention in rows])
    argmax = torch.cat([attention.argmax(dim=1) == 0 for attention in rows]).float()
    steps = len(weight)
    return {
        "steps": steps,
        "mean_weight_first": round(weight.mean().item(), 4),
        "share_argmax_first": round(argmax.mean().item(), 4),
        # what spreading each step evenly over its source would give
        "uniform_weight": round(sum(a.shape[0] / a.shape[1] for a in rows) / steps, 4),
    }


def focus_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per run: what it is, its best validation BLEU, and where its attention goes."""
    header = ["decoder", "score", "init", "seed", "best valid BLEU", "weight on position 0", "argmax at 0"]
    header.append("1 / length")
    body = []
    for r in results["runs"]:
        bleu = r.get("best_valid_bleu")
        row = [r["decoder"], r["attention"], r["init"], str(r.get("seed", "")), "-" if bleu is None else f"{bleu:.2f}"]
        row += [f"{r[key]:.3f}" for key in ("mean_weight_first", "share_argmax_first", "uniform_weight")]
        body.append(row)
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.attention_focus", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (their best checkpoint)")
    parser.add_argument("--sentences", type=positive_int, default=200, help="first N validation sentences")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    results = []
    try:
        for run in args.runs:
            translator = load(ModelSpec(run, device="cpu"))
            sentences = [example.src for example in split_examples(translator.config.data, "valid")[: args.sentences]]
            model = translator.config.model
            validations = [record["valid_bleu"] for record in read_metrics(run) if "valid_bleu" in record]
            results.append(
                {"run": run.name, "init": model.init, "decoder": model.decoder, "attention": model.attention}
                | {"seed": translator.config.train.seed, "best_valid_bleu": max(validations, default=None)}
                | {"sentences": len(sentences)}
                | first_position_focus(translator, sentences)
            )
    except UserError as error:  # a folder that is not a run, a corpus that cannot be read
        print(f"tools.attention_focus: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(markdown_table(*focus_rows({"runs": results}))))
    if args.json:
        machine = describe_machine(torch.device("cpu"))
        write_results(args.json, {"machine": machine, "runs": results}, "tools.attention_focus", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
