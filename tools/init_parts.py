"""Which part of a model's initialization decides whether its attention learns to align.

    python -m tools.init_parts CONFIG [--set KEY=VALUE ...] [--steps 150] [--sentences 200]
                               [--variants NAME,...] [--work DIR] [--json FILE]

Trains the config for a few updates once per variant: the whole model from one scheme, with the
parameters whose names start with a given prefix drawn again from another (the variants below).
After training it reports the validation loss and greedy BLEU and, over the first N validation
sentences, the share of attention on source position 0 (`tools.attention_focus`). A variant
already in the results file is kept, so an interrupted comparison resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import sys
from pathlib import Path

import torch
from torch import nn

import attnmt.train
from attnmt.config import load_config
from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.utils import UserError
from benchmarks.measure import describe_machine, positive_int, write_results
from benchmarks.report import markdown_table
from tools.attention_focus import first_position_focus

OUTPUT = "decoder.output.weight"
# name -> (scheme for the whole model, {parameter-name prefix: how to draw it again})
VARIANTS = {
    "glorot": ("xavier", {}),
    "uniform": ("uniform", {}),
    "glorot+output-uniform": ("xavier", {OUTPUT: "uniform"}),  # U(-0.1, 0.1)
    "glorot+output-fan-in": ("xavier", {OUTPUT: "fan_in"}),  # U(-1/sqrt(H), 1/sqrt(H))
    "uniform+output-glorot": ("uniform", {OUTPUT: "glorot"}),
}


def redraw(parameter: torch.Tensor, how: str) -> None:
    """uniform: U(-0.1, 0.1); fan_in: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); glorot: Glorot-uniform."""
    if how == "uniform":
        parameter.uniform_(-0.1, 0.1)
    elif how == "fan_in":
        bound = 1 / math.sqrt(parameter.shape[1])
        parameter.uniform_(-bound, bound)
    else:
        nn.init.xavier_uniform_(parameter)


@contextlib.contextmanager
def initialized_as(scheme: str, redrawn: dict[str, str]):
    """While open, the trainer's models start from `scheme` with the `redrawn` parameters drawn
    again; yields a dict that each build fills with the output matrix's shape and starting range."""
    build = attnmt.train.build_model
    started: dict = {}

    def build_and_redraw(config, src_vocab_size, tgt_vocab_size):
        model = build(config.model_copy(update={"init": scheme}), src_vocab_size, tgt_vocab_size)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                for prefix, how in redrawn.items():
                    if name.startswith(prefix):
                        redraw(parameter, how)
        output = model.decoder.output.weight
        started.update(output_shape=list(output.shape), output_range=output.detach().abs().max().item())
        return model

    attnmt.train.build_model = build_and_redraw
    try:
        yield started
    finally:
        attnmt.train.build_model = build


def run_variant(name: str, config, work: Path, sentences: int) -> dict:
    scheme, redrawn = VARIANTS[name]
    run_dir = work / name
    shutil.rmtree(run_dir, ignore_errors=True)  # a variant not in the results starts over
    config = config.model_copy(deep=True)
    config.train.run_dir = str(run_dir)
    with initialized_as(scheme, redrawn) as started:
        result = attnmt.train.fit(config, log=lambda *_: None)
    translator = load(ModelSpec(str(run_dir), device="cpu"))
    first = [example.src for example in split_examples(translator.config.data, "valid")[:sentences]]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    validation = [record for record in records if "valid_loss" in record][-1]
    losses = [record["train_loss"] for record in records if "train_loss" in record]
    return {
        "variant": name,
        "init": scheme,
        "redrawn": redrawn,
        **started,  # the output matrix (V, H) and its largest starting weight
        "steps": result["steps"],
        "last_train_loss": losses[-1],
        "valid_loss": validation["valid_loss"],
        "valid_bleu": validation.get("valid_bleu"),
        "sentences": len(first),
        **first_position_focus(translator, first),
    }


def recorded_arguments(argv: list[str] | None) -> list[str]:
    """The command line as the results record it: without `--work DIR`, where this machine kept
    the run folders (scratch, not part of the result)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "--work" in arguments:
        at = arguments.index("--work")
        del arguments[at : at + 2]
    return [argument for argument in arguments if not argument.startswith("--work=")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.init_parts", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--steps", type=positive_int, default=150, help="updates per variant")
    parser.add_argument("--sentences", type=positive_int, default=200, help="validation sentences for attention")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--work", type=Path, default=Path("runs/init-parts"), help="run folders")
    parser.add_argument("--json", type=Path, help="results file (kept variants are not trained again)")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.variants.split(",") if name.strip()]
    if any(name not in VARIANTS for name in chosen):
        parser.error(f"unknown variant in {args.variants!r}; valid: {', '.join(VARIANTS)}")
    try:
        config = load_config(args.config, args.set)
        config.train.max_steps, config.train.max_minutes, config.train.max_epochs = args.steps, None, None
        config.train.valid_every = args.steps
        earlier = (
            json.loads(args.json.read_text(encoding="utf-8"))["variants"] if args.json and args.json.exists() else []
        )
        results = [row for row in earlier if row["variant"] in chosen]
        for name in chosen:
            if any(row["variant"] == name for row in results):
                continue
            print(f"tools.init_parts: training {name!r} for {args.steps} updates", file=sys.stderr)
            results.append(run_variant(name, config, args.work, args.sentences))
            if args.json:
                machine = describe_machine(torch.device("cpu"))
                body = {"machine": machine, "config": str(args.config), "overrides": args.set, "variants": results}
                write_results(args.json, body, "tools.init_parts", recorded_arguments(argv))
    except UserError as error:
        print(f"tools.init_parts: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(markdown_table(*parts_rows({"variants": results}))))
    return 0


def parts_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per variant: its last training loss, validation loss and BLEU, and its attention."""
    header = ["variant", "train loss", "valid loss", "valid BLEU", "weight on position 0", "1 / length"]
    body = []
    for r in results["variants"]:
        losses = [f"{r['last_train_loss']:.3f}", f"{r['valid_loss']:.3f}"]
        body.append([f"`{r['variant']}`", *losses, f"{r['valid_bleu']:.2f}", f"{r['mean_weight_first']:.3f}"])
        body[-1].append(f"{r['uniform_weight']:.3f}")
    return header, body


if __name__ == "__main__":
    raise SystemExit(main())
