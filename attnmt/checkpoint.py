"""Checkpoints: safetensors weights + trainer state, written atomically, loaded safely.

Layout inside a run directory:

    config.yaml  src.vocab.json  tgt.vocab.json  [src.spm.model  tgt.spm.model]
    checkpoints/step-0000500/{model.safetensors, trainer.pt, meta.json}
    checkpoints/index.json   {"last": "step-0000500", "best": "step-0000500", ...}

Each checkpoint is written into a temporary folder and renamed into place, then the index
is replaced atomically: a kill at any moment leaves the previous checkpoint and index intact.
Weights are safetensors (no pickle at all); the trainer state is loaded with
`weights_only=True`, so loading never runs code from a file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from attnmt.utils import UserError, write_text_atomic

INDEX = "index.json"
WEIGHTS = "model.safetensors"
TRAINER_STATE = "trainer.pt"
META = "meta.json"


@dataclass(frozen=True)
class CheckpointIndex:
    last: str | None = None
    best: str | None = None
    best_score: float | None = None
    kept: tuple[str, ...] = ()


def checkpoints_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def read_index(run_dir: str | Path) -> CheckpointIndex:
    path = checkpoints_dir(run_dir) / INDEX
    if not path.exists():
        return CheckpointIndex()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return CheckpointIndex(raw.get("last"), raw.get("best"), raw.get("best_score"), tuple(raw.get("kept", ())))
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise UserError(f"{path}: unreadable checkpoint index ({exc})") from None


def _write_index(run_dir: Path, index: CheckpointIndex) -> None:
    payload = {"last": index.last, "best": index.best, "best_score": index.best_score, "kept": list(index.kept)}
    write_text_atomic(checkpoints_dir(run_dir) / INDEX, json.dumps(payload, indent=2) + "\n")


def state_dict_for_saving(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Contiguous CPU tensors; tied weights are stored once (safetensors refuses shared memory)."""
    state, seen = {}, {}
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tensor.shape, tensor.stride()) if tensor.numel() else None
        if key is not None and key in seen:
            continue  # a tied parameter: restored by load_state_dict(strict=False) through its twin
        if key is not None:
            seen[key] = name
        state[name] = tensor.detach().to("cpu").contiguous()
    return state


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: torch.nn.Module,
    trainer_state: dict[str, Any],
    meta: dict[str, Any],
    *,
    score: float | None = None,
    higher_is_better: bool = True,
    keep: int = 2,
) -> Path:
    """Write checkpoint `step-N`, update last/best, prune to `keep` (plus best)."""
    run_dir = Path(run_dir)
    folder = checkpoints_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:07d}"
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=folder))
    try:
        save_file(state_dict_for_saving(model), str(staging / WEIGHTS))
        torch.save(trainer_state, staging / TRAINER_STATE)
        (staging / META).write_text(json.dumps({"step": step, "score": score, **meta}, indent=2) + "\n")
        final = folder / name
        if final.exists():
            shutil.rmtree(final)  # the same step written again (a rerun after a resume)
        os.replace(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    _update_index(run_dir, name, score, higher_is_better, keep)
    return folder / name


def _update_index(run_dir: Path, name: str, score: float | None, higher_is_better: bool, keep: int) -> None:
    index = read_index(run_dir)
    best, best_score = index.best, index.best_score
    improved = score is not None and (
        best_score is None or (score > best_score if higher_is_better else score < best_score)
    )
    if improved:
        best, best_score = name, score
    kept = [k for k in index.kept if k != name] + [name]
    recent = kept[-keep:]
    survivors = tuple(k for k in kept if k in recent or k == best)
    _write_index(run_dir, CheckpointIndex(last=name, best=best, best_score=best_score, kept=survivors))
    for stale in set(kept) - set(survivors):  # only after the new index no longer names them
        shutil.rmtree(checkpoints_dir(run_dir) / stale, ignore_errors=True)


def resolve_checkpoint(path: str | Path, which: str = "best") -> Path:
    """A checkpoint folder from a run directory (its best or last), or a checkpoint folder itself."""
    path = Path(path)
    if (path / WEIGHTS).exists():
        return path
    if not path.exists():
        raise UserError(f"{path}: no such run directory or checkpoint")
    index = read_index(path)
    chosen = getattr(index, which, None) or index.last
    if chosen is None:
        raise UserError(f"{path}: not a run directory with checkpoints (no {checkpoints_dir(path) / INDEX})")
    folder = checkpoints_dir(path) / chosen
    if not (folder / WEIGHTS).exists():
        raise UserError(f"{folder}: checkpoint named in the index is missing its {WEIGHTS}")
    return folder


def run_dir_of(checkpoint: Path) -> Path:
    """checkpoints/step-N -> the run directory holding config and vocabularies."""
    return checkpoint.parent.parent


def load_weights(model: torch.nn.Module, checkpoint: str | Path) -> None:
    """Load safetensors weights into a model built from the same config; mismatches are UserErrors."""
    path = Path(checkpoint) / WEIGHTS
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise UserError(f"{path}: corrupted or truncated checkpoint ({exc})") from None
    expected = model.state_dict()
    for key, tensor in state.items():
        if key not in expected:
            raise UserError(f"{path}: parameter {key!r} does not exist in a model built from this config")
        if expected[key].shape != tensor.shape:
            raise UserError(
                f"{path}: parameter {key!r} has shape {tuple(tensor.shape)}, the config/vocabulary expects "
                f"{tuple(expected[key].shape)} (checkpoint from another config or vocabulary?)"
            )
    missing = model.load_state_dict(state, strict=False).missing_keys
    untied = [key for key in missing if not _is_tied(model, key, state)]
    if untied:
        raise UserError(f"{path}: checkpoint lacks parameters {untied[:3]} of a model built from this config")


def _is_tied(model: torch.nn.Module, key: str, state: dict[str, torch.Tensor]) -> bool:
    """A missing key is fine if it shares storage with a loaded parameter (weight tying)."""
    pointer = model.state_dict()[key].data_ptr()
    return any(model.state_dict()[other].data_ptr() == pointer for other in state)


def load_trainer_state(checkpoint: str | Path) -> dict[str, Any]:
    path = Path(checkpoint) / TRAINER_STATE
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(f"{path}: missing (this checkpoint cannot be resumed)") from None
    except Exception as exc:  # torch raises many types for a damaged file
        raise UserError(f"{path}: corrupted or truncated trainer state ({type(exc).__name__})") from None


def read_meta(checkpoint: str | Path) -> dict[str, Any]:
    path = Path(checkpoint) / META
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: unreadable checkpoint metadata ({exc})") from None
