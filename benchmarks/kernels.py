"""The one-step kernels the decoder is built from, against the alternatives they replaced.

    python -m benchmarks.kernels [--batch 64] [--hidden 512] [--source 16] [--repeats 5]
                                 [--iterations 200] [--threads 1] [--json OUT]

Each case runs forward and backward `--iterations` times per repeat; the variants of a case
alternate in every repeat and the figures are medians (and ranges) of the repeats, in
microseconds per call:

- one-step attention scores, query (B, 1, H) against keys (B, S, H): multiply and sum (what
  `attention._dot_scores` does for one step) against `torch.bmm`;
- one GRU step at (B, H): the gate equations on `nn.GRU`'s weights (`rnn.gru_cell`) against
  `nn.GRUCell` and `nn.GRU` on a length-1 sequence; the same for the LSTM.

Each variant's output is checked against the first one's before timing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from attnmt.models.attention import _dot_scores
from attnmt.models.rnn import gru_cell, lstm_cell
from benchmarks.measure import describe_machine, positive_int, rotated, spread, write_results

Variant = Callable[[], torch.Tensor]  # runs forward, returns a tensor to backpropagate from


def _time(variant: Variant, leaves: list[torch.Tensor], iterations: int) -> float:
    """Microseconds per forward+backward call."""
    start = time.perf_counter()
    for _ in range(iterations):
        variant().sum().backward()
        for leaf in leaves:
            leaf.grad = None
    return 1e6 * (time.perf_counter() - start) / iterations


def attention_scores(batch: int, hidden: int, source: int) -> tuple[dict[str, Variant], list[torch.Tensor]]:
    query = torch.randn(batch, 1, hidden, requires_grad=True)
    keys = torch.randn(batch, source, hidden, requires_grad=True)
    variants = {
        "multiply and sum (attnmt)": lambda: _dot_scores(query, keys),
        "bmm": lambda: torch.bmm(query, keys.transpose(1, 2)),
    }
    return variants, [query, keys]


def gru_step(batch: int, hidden: int) -> tuple[dict[str, Variant], list[torch.Tensor]]:
    rnn, cell = nn.GRU(hidden, hidden, batch_first=True), nn.GRUCell(hidden, hidden)
    cell.load_state_dict({name.removesuffix("_l0"): value for name, value in rnn.state_dict().items()})
    inputs, state = torch.randn(batch, hidden, requires_grad=True), torch.randn(batch, hidden, requires_grad=True)

    def gate_equations() -> torch.Tensor:
        gates = nn.functional.linear(inputs, rnn.weight_ih_l0, rnn.bias_ih_l0)
        return gru_cell(gates, state, rnn.weight_hh_l0, rnn.bias_hh_l0)

    variants = {
        "gate equations on nn.GRU weights (attnmt)": gate_equations,
        "nn.GRUCell": lambda: cell(inputs, state),
        "nn.GRU, length 1": lambda: rnn(inputs.unsqueeze(1), state.unsqueeze(0))[0].squeeze(1),
    }
    return variants, [inputs, state, *rnn.parameters(), *cell.parameters()]


def lstm_step(batch: int, hidden: int) -> tuple[dict[str, Variant], list[torch.Tensor]]:
    rnn, cell = nn.LSTM(hidden, hidden, batch_first=True), nn.LSTMCell(hidden, hidden)
    cell.load_state_dict({name.removesuffix("_l0"): value for name, value in rnn.state_dict().items()})
    inputs = torch.randn(batch, hidden, requires_grad=True)
    state, memory = torch.randn(batch, hidden, requires_grad=True), torch.randn(batch, hidden, requires_grad=True)

    def gate_equations() -> torch.Tensor:
        gates = nn.functional.linear(inputs, rnn.weight_ih_l0, rnn.bias_ih_l0)
        return lstm_cell(gates, state, memory, rnn.weight_hh_l0, rnn.bias_hh_l0)[0]

    def sequence() -> torch.Tensor:
        output, _ = rnn(inputs.unsqueeze(1), (state.unsqueeze(0), memory.unsqueeze(0)))
        return output.squeeze(1)

    variants = {
        "gate equations on nn.LSTM weights (attnmt)": gate_equations,
        "nn.LSTMCell": lambda: cell(inputs, (state, memory))[0],
        "nn.LSTM, length 1": sequence,
    }
    return variants, [inputs, state, memory, *rnn.parameters(), *cell.parameters()]


def measure(variants: dict[str, Variant], leaves: list[torch.Tensor], repeats: int, iterations: int) -> dict:
    reference = next(iter(variants.values()))().detach()
    for name, variant in variants.items():
        if not torch.allclose(variant().detach(), reference, atol=1e-5, rtol=1e-4):
            raise AssertionError(f"{name} computes something else than {next(iter(variants))}")
    microseconds: dict[str, list[float]] = {name: [] for name in variants}
    for variant in variants.values():  # warm-up: allocator, thread pool
        _time(variant, leaves, max(1, iterations // 10))
    for turn in range(repeats):
        for name in rotated(list(variants), turn):
            microseconds[name].append(_time(variants[name], leaves, iterations))
    return {name: spread(values) for name, values in microseconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=positive_int, default=64)
    parser.add_argument("--hidden", type=positive_int, default=512)
    parser.add_argument("--source", type=positive_int, default=16, help="source positions of the attention case")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--iterations", type=positive_int, default=200, help="calls per repeat")
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    machine = describe_machine(torch.device("cpu"))
    cases = {
        "attention scores, one step": attention_scores(args.batch, args.hidden, args.source),
        "GRU, one step": gru_step(args.batch, args.hidden),
        "LSTM, one step": lstm_step(args.batch, args.hidden),
    }
    results = {case: measure(*made, args.repeats, args.iterations) for case, made in cases.items()}
    print(f"machine: {machine['cpu']}, {machine['cores']} cores; torch {machine['torch']}, {args.threads} threads")
    print(f"forward + backward, B={args.batch}, H={args.hidden}, S={args.source}: median (min-max) of {args.repeats}")
    for case, variants in results.items():
        first = next(iter(variants.values()))["median"]
        print(case)
        for name, figure in variants.items():
            print(
                f"  {name:<44} {figure['median']:9.1f} us ({figure['min']:.1f}-{figure['max']:.1f})"
                f"  {figure['median'] / first:5.2f}x attnmt's time"
            )
    if args.json:
        keys = ("batch", "hidden", "source", "repeats", "iterations", "threads")
        settings = {key: getattr(args, key) for key in keys}
        write_results(args.json, {"machine": machine, **settings, "cases": results}, "benchmarks.kernels", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
