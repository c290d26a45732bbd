"""TensorFloat-32 on a CUDA GPU: how far it moves the encoder from float32, and what it saves.

    python -m benchmarks.tf32 [--repeats 5] [--json benchmarks/results/tf32.json]

The notebook turns TF32 off so that its checks hold on a GPU: they compare attnmt's encoder (one
cuDNN GRU call) with GRUCell loops written from the equations, to 1e-5. This measures why and at
what cost, for the notebook's encoder (E 64, H 64 per direction) and a large one (E 512, H 1024),
on a random padded batch (64 sentences of 5 to 30 tokens): the largest |difference| of the
annotations from the same encoder in float64 and from the GRUCell loop (what the notebook checks),
with TF32 off and on; and the time of a forward and backward pass, TF32 off and on, the median of
`--repeats` alternating runs of 10 passes each. Needs a CUDA GPU; TF32 exists from Ampere on.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch

from attnmt.models.encoder import Encoder
from attnmt.utils import seed_everything
from benchmarks.measure import describe_machine, positive_int, spread, write_results

SIZES = {"notebook": (64, 64), "large": (512, 1024)}  # (embedding E, hidden H per direction)
VOCAB, BATCH, SHORTEST, LONGEST = 1000, 64, 5, 30
DEFAULT_JSON = Path("benchmarks/results/tf32.json")


def set_tf32(allowed: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed


def random_batch(device: torch.device, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) padded with 0 after each sentence, lengths (B,) from SHORTEST to LONGEST."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(SHORTEST, LONGEST + 1, (BATCH,), generator=generator)
    src = torch.randint(1, VOCAB, (BATCH, LONGEST), generator=generator)
    src[torch.arange(LONGEST)[None, :] >= lengths[:, None]] = 0
    return src.to(device), lengths.to(device)


def gru_loop(encoder: Encoder, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The annotations by GRUCell steps with the encoder's weights (one bidirectional GRU layer):
    forward left to right, backward right to left, each keeping its state over padding. (B, S, 2H)"""
    rnn, x = encoder.rnn, encoder.embedding(src)  # (B, S, E)
    real = torch.arange(src.shape[1], device=src.device)[None, :] < lengths[:, None]  # (B, S)
    annotations = []
    for suffix, order in (("", range(src.shape[1])), ("_reverse", reversed(range(src.shape[1])))):
        cell = torch.nn.GRUCell(rnn.input_size, rnn.hidden_size).to(src.device, x.dtype)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).data.copy_(getattr(rnn, f"{name}_l0{suffix}"))
        h, states = x.new_zeros(len(src), rnn.hidden_size), {}
        for j in order:
            h = torch.where(real[:, j, None], cell(x[:, j], h), h)
            states[j] = torch.where(real[:, j, None], h, 0.0)
        annotations.append(torch.stack([states[j] for j in range(src.shape[1])], dim=1))
    return torch.cat(annotations, dim=-1)


@torch.no_grad()
def differences(encoder: Encoder, src: torch.Tensor, lengths: torch.Tensor) -> dict:
    """Largest |difference| of the float32 annotations from float64's and from the GRUCell loop's."""
    exact, _ = copy.deepcopy(encoder).double()(src, lengths)
    memory, _ = encoder(src, lengths)
    return {
        "from_float64": float((memory.double() - exact).abs().max()),
        "from_gru_cells": float((memory - gru_loop(encoder, src, lengths)).abs().max()),
    }


def pass_seconds(encoder: Encoder, src: torch.Tensor, lengths: torch.Tensor, passes: int = 10) -> float:
    """Seconds per forward and backward pass, over `passes` after the clock starts."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(passes):
        memory, _ = encoder(src, lengths)
        memory.sum().backward()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / passes


def measure(repeats: int) -> dict:
    device = torch.device("cuda")
    src, lengths = random_batch(device)
    rows = []
    for name, (embedding, hidden) in SIZES.items():
        seed_everything(0)
        encoder = Encoder(vocab_size=VOCAB, embedding_size=embedding, hidden_size=hidden).to(device).eval()
        row = {"encoder": name, "embedding_size": embedding, "hidden_size": hidden}
        for allowed in (False, True):
            set_tf32(allowed)
            row["tf32" if allowed else "float32"] = differences(encoder, src, lengths)
        encoder.train()  # cuDNN's RNN backward needs training mode (no dropout here: the same arithmetic)
        times: dict[bool, list[float]] = {False: [], True: []}
        for turn in range(repeats + 1):  # the first turn warms both up and is not kept
            for allowed in (turn % 2 == 0, turn % 2 == 1):
                set_tf32(allowed)
                seconds = pass_seconds(encoder, src, lengths)
                if turn:
                    times[allowed].append(seconds)
        row["seconds_float32"], row["seconds_tf32"] = spread(times[False]), spread(times[True])
        row["speedup_tf32"] = row["seconds_float32"]["median"] / row["seconds_tf32"]["median"]
        rows.append(row)
    set_tf32(False)
    return {"machine": describe_machine(device), "batch": BATCH, "lengths": [SHORTEST, LONGEST], "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: benchmarks.tf32 needs a CUDA GPU; torch sees none", file=sys.stderr)
        return 2
    results = measure(args.repeats)
    for row in results["rows"]:
        print(
            f"{row['encoder']:>8}: max |float32 - float64| {row['float32']['from_float64']:.1e}, "
            f"TF32 {row['tf32']['from_float64']:.1e}; |library - GRUCell loop| {row['float32']['from_gru_cells']:.1e}, "
            f"TF32 {row['tf32']['from_gru_cells']:.1e}; TF32 {row['speedup_tf32']:.2f}x the speed"
        )
    write_results(args.json, results, "benchmarks.tf32", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
