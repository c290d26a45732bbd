"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, as one checkpoint.

The last checkpoints of a run sit near one another on the loss surface, and their mean often
scores a little better than any of them (Junczys-Dowmunt et al., 2016; Vaswani et al., 2017),
at no cost when translating. The mean is taken in float64 and stored in each weight's own
dtype. The result is a checkpoint folder inside the run's `checkpoints/` (so it finds the
run's config and vocabularies) that every command takes like any other; the run's index does
not name it, so training never prunes it, and it cannot be resumed (it has no trainer state).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from attnmt.checkpoint import WEIGHTS, checkpoints_dir, read_index, read_meta, write_meta, write_weights
from attnmt.utils import UserError, atomic_folder

DEFAULT_NAME = "averaged"


def _step(name: str) -> int:
    return int(name.removeprefix("step-"))


def choose_checkpoints(run_dir: str | Path, *, last: int | None = None, steps: list[int] | None = None) -> list[Path]:
    """The checkpoint folders to average: the `last` N the run kept (by step), or those of `steps`."""
    run_dir = Path(run_dir)
    folder = checkpoints_dir(run_dir)
    if not folder.is_dir():
        raise UserError(f"{run_dir}: not a run directory with checkpoints (no {folder})")
    if (last is None) == (steps is None):
        raise UserError("give the last N checkpoints or the steps to average, not both", field="last")
    if steps is not None:
        chosen = [folder / f"step-{step:07d}" for step in steps]
        missing = [path.name for path in chosen if not (path / WEIGHTS).is_file()]
        if missing:
            kept = sorted(p.name for p in folder.glob("step-*") if (p / WEIGHTS).is_file())
            raise UserError(f"{folder}: no checkpoint {', '.join(missing)}; the run has {', '.join(kept) or 'none'}")
        return chosen
    assert last is not None  # given, since steps is not
    if last < 1:
        raise UserError(f"expected at least 1 checkpoint, got {last}", field="last")
    kept = sorted((name for name in read_index(run_dir).kept if not name.startswith(".")), key=_step)
    if len(kept) < last:
        raise UserError(
            f"{run_dir}: asked for the last {last} checkpoints, the run kept {len(kept)} "
            f"({', '.join(kept) or 'none'}); train with a higher train.keep_checkpoints"
        )
    return [folder / name for name in kept[-last:]]


def average_weights(checkpoints: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the checkpoints' weights; every file must hold the same tensors."""
    total: dict[str, torch.Tensor] = {}
    first_path = checkpoints[0] / WEIGHTS
    dtypes: dict[str, torch.dtype] = {}
    for checkpoint in checkpoints:
        path = checkpoint / WEIGHTS
        try:
            state = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise UserError(f"{path}: corrupted or truncated checkpoint ({exc})") from None
        if total and state.keys() != total.keys():
            differing = sorted(state.keys() ^ total.keys())[:3]
            raise UserError(f"{path}: holds other parameters than {first_path} ({', '.join(differing)})")
        for key, tensor in state.items():
            if key not in total:
                total[key], dtypes[key] = tensor.to(torch.float64), tensor.dtype
            elif tensor.shape != total[key].shape:
                raise UserError(
                    f"{path}: parameter {key!r} has shape {tuple(tensor.shape)}, {first_path} has "
                    f"{tuple(total[key].shape)} (checkpoints of different models)"
                )
            else:
                total[key] += tensor.to(torch.float64)
    return {key: (tensor / len(checkpoints)).to(dtypes[key]).contiguous() for key, tensor in total.items()}


def _shared_code(codes: list[dict | None]) -> dict | None:
    """The members' code state (commit, dirty paths) when all record the same one, else None."""
    keys = (
        {(code or {}).get("commit") for code in codes},
        {tuple((code or {}).get("dirty_paths") or []) for code in codes},
    )
    return codes[-1] if all(codes) and all(len(key) == 1 for key in keys) else None


def average_checkpoints(checkpoints: list[Path], output: str | Path) -> Path:
    """Write the average of `checkpoints` as the checkpoint folder `output`, which must lie in
    the same run's `checkpoints/`; an existing folder there is replaced only once the new one is
    complete."""
    output = Path(output)
    folder = checkpoints[0].parent
    if output.resolve().parent != folder.resolve():
        raise UserError(f"{output}: must be a folder in {folder} (where the run's config is found)", field="output")
    if output.name.startswith(("step-", ".")) or output.name == "index.json":
        raise UserError(f"{output}: that name is the trainer's; choose another, such as {DEFAULT_NAME}", field="output")
    weights = average_weights(checkpoints)
    metas = [read_meta(checkpoint) for checkpoint in checkpoints]
    last = max(metas, key=lambda meta: meta.get("step", -1))
    meta = {
        "step": last.get("step"),
        "score": None,  # not validated: `attnmt evaluate --split valid` scores it
        "elapsed": last.get("elapsed"),
        "tokens": last.get("tokens"),
        "averaged": [checkpoint.name for checkpoint in checkpoints],
        # the code that trained the members, where they share it: an average is theirs, no more
        "code": _shared_code([meta.get("code") for meta in metas]),
    }
    with atomic_folder(output) as staging:
        write_weights(staging / WEIGHTS, weights)
        write_meta(staging, meta)
    return output
