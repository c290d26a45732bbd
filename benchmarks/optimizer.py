"""Fused against default Adam on the joey model: time per optimizer step and the weights' agreement.

    python -m benchmarks.optimizer [--steps 10] [--threads N] [--json OUT]

Two copies of the benchmark's joey model (word vocabularies of the speed benchmark's sizes)
get the same fixed random gradients; each copy's Adam steps `--steps` times, the two
alternating. Printed: the median milliseconds per step of each, their ratio, and the largest
difference between the two copies' weights afterwards (attnmt's trainer uses the fused one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from attnmt.models.seq2seq import build_model
from benchmarks import speed_models
from benchmarks.measure import describe_machine, write_results

VOCAB_SIZES = (5920, 7859)  # Multi30k en->de word types seen twice: the speed benchmark's data


def compare(steps: int) -> dict:
    torch.manual_seed(0)
    config = speed_models.model_config("joey", 0.1)
    models = [build_model(config, *VOCAB_SIZES) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optimizers = {
        fused: torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
        for model, fused in zip(models, (False, True), strict=True)
    }
    generator = torch.Generator().manual_seed(1)
    gradients = [torch.randn(p.shape, generator=generator) for p in models[0].parameters()]
    for model in models:
        for parameter, gradient in zip(model.parameters(), gradients, strict=True):
            parameter.grad = gradient.clone()
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(steps):
        for fused, optimizer in optimizers.items():
            start = time.perf_counter()
            optimizer.step()
            seconds[fused].append(time.perf_counter() - start)
    difference = max(
        (a - b).abs().max().item() for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True)
    )
    return {
        "default_ms": 1e3 * statistics.median(seconds[False]),
        "fused_ms": 1e3 * statistics.median(seconds[True]),
        "default_ms_per_step": [1e3 * value for value in seconds[False]],
        "fused_ms_per_step": [1e3 * value for value in seconds[True]],
        "max_weight_difference": difference,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.optimizer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    machine = describe_machine(torch.device("cpu"))
    result = compare(args.steps)
    print(
        f"machine: {machine['cpu']}, {machine['cores']} cores; torch {machine['torch']}, {machine['threads']} threads"
    )
    print(
        f"joey Adam step, median of {args.steps}: default {result['default_ms']:.1f} ms, fused "
        f"{result['fused_ms']:.1f} ms ({result['default_ms'] / result['fused_ms']:.1f}x); largest weight "
        f"difference after {args.steps} steps {result['max_weight_difference']:.1e}"
    )
    if args.json:
        write_results(args.json, {"machine": machine, "steps": args.steps, **result}, "benchmarks.optimizer", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
