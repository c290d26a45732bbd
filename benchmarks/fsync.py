"""What syncing a checkpoint to the disk costs: `save_checkpoint` of the README's model, with
and without fsync.

    python -m benchmarks.fsync [--repeats 7] [--folder DIR] [--json OUT]

The joey model of the speed benchmark (the one the README's speed table trains), with Adam's
state after one step, is saved as training saves it (weights, trainer state, meta, index; two
checkpoints kept), alternately with attnmt's syncs and with `os.fsync` replaced by a no-op.
Before each timed save the whole page cache is written back (`os.sync`, untimed), so neither
kind of save pays for the other's dirty pages. The folder's file system is recorded: on a
tmpfs, fsync costs nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from attnmt.checkpoint import save_checkpoint
from attnmt.models.seq2seq import build_model
from benchmarks import speed_models
from benchmarks.measure import describe_machine, positive_int, rotated, spread, write_results
from benchmarks.optimizer import VOCAB_SIZES


def trained_state(config_name: str) -> tuple[torch.nn.Module, dict]:
    """The model and a trainer state as training holds them: Adam's moments after one step."""
    torch.manual_seed(0)
    model = build_model(speed_models.model_config(config_name, 0.1), *VOCAB_SIZES)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter)
    optimizer.step()
    return model, {"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state()}


@contextmanager
def without_fsync():
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


def file_system(folder: Path) -> str:
    """The type of the file system holding `folder` (from /proc/mounts), or "unknown"."""
    folder, best = folder.resolve(), ("", "unknown")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mount, kind, *_ = line.split()
            if folder.is_relative_to(mount) and len(mount) > len(best[0]):
                best = (mount, kind)
    except (OSError, ValueError):
        pass
    return best[1]


def measure(folder: Path, repeats: int, config_name: str = "joey") -> dict:
    model, trainer_state = trained_state(config_name)
    run_dir = Path(tempfile.mkdtemp(prefix="attnmt-fsync-", dir=folder))
    seconds: dict[str, list[float]] = {"fsync": [], "no_fsync": []}
    step = 0
    for turn in range(repeats):
        for kind in rotated(list(seconds), turn):
            step += 1
            os.sync()
            start = time.perf_counter()
            with without_fsync() if kind == "no_fsync" else nullcontext():
                saved = save_checkpoint(run_dir, step, model, trainer_state, {}, keep=2)
            seconds[kind].append(time.perf_counter() - start)
    checkpoint_bytes = sum(file.stat().st_size for file in saved.iterdir())
    shutil.rmtree(run_dir)
    return {
        "model": config_name,
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
        "checkpoint_mib": checkpoint_bytes / 2**20,
        "seconds": {kind: spread(values) for kind, values in seconds.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fsync", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=positive_int, default=7, help="saves of each kind, alternating")
    parser.add_argument("--folder", type=Path, default=Path("."), help="where the run folder goes (its disk is timed)")
    parser.add_argument(
        "--model", choices=sorted(speed_models.CONFIGS), default="joey", help="the speed benchmark's model"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    machine = describe_machine(torch.device("cpu"))
    result = measure(args.folder, args.repeats, args.model)
    times = result["seconds"]
    fsync, plain = times["fsync"]["median"], times["no_fsync"]["median"]
    print(f"machine: {machine['cpu']}, {machine['cores']} cores; torch {machine['torch']}; {file_system(args.folder)}")
    print(
        f"save_checkpoint of {result['parameters'] / 1e6:.2f}M parameters ({result['checkpoint_mib']:.0f} MiB), "
        f"median of {args.repeats}: with fsync {fsync * 1e3:.0f} ms "
        f"({times['fsync']['min'] * 1e3:.0f}-{times['fsync']['max'] * 1e3:.0f}), without "
        f"{plain * 1e3:.0f} ms ({times['no_fsync']['min'] * 1e3:.0f}-{times['no_fsync']['max'] * 1e3:.0f})"
    )
    if args.json:
        extra = {"machine": machine, "file_system": file_system(args.folder)}  # write_results adds the commit
        write_results(args.json, {**extra, "repeats": args.repeats, **result}, "benchmarks.fsync", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
