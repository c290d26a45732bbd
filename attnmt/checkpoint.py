"""Checkpoints: safetensors weights + trainer state, written atomically, loaded safely.

Layout inside a run directory:

    config.yaml  src.vocab.json  tgt.vocab.json  [src.spm.model  tgt.spm.model]
    checkpoints/step-0000500/{model.safetensors, trainer.pt, meta.json}
    checkpoints/index.json   {"last": "step-0000500", "best": "step-0000500", ...}

Each checkpoint is written into a hidden folder, synced to the disk and renamed into place,
then the index is replaced atomically; nothing the index names is ever removed or
half-written, so a kill at any moment (SIGKILL included) leaves checkpoints that load and a
run that resumes. A save that fails (a full disk) is a `WriteFailed` naming the file, with
the index and the checkpoints it names untouched.
Weights are safetensors (no pickle at all); the trainer state is loaded with
`weights_only=True`, so loading never runs code from a file.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as serialize_weights

from attnmt.config import Config, load_config
from attnmt.models.seq2seq import Model, build_model
from attnmt.utils import UserError, atomic_folder, naming_file, sync_folder, write_text_atomic
from attnmt.vocab import Vocab

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

    def named(self) -> set[str]:
        """Every checkpoint the index names."""
        return {name for name in (self.last, self.best, *self.kept) if name is not None}

    def renamed(self, old: str, new: str) -> CheckpointIndex:
        """The same index with checkpoint `old` called `new`."""
        rename = lambda name: new if name == old else name  # noqa: E731
        return CheckpointIndex(rename(self.last), rename(self.best), self.best_score, tuple(map(rename, self.kept)))


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
    """Write checkpoint `step-N`, update last/best, prune to `keep` (plus best).

    At every moment between two filesystem operations, each checkpoint the index names is
    complete: a kill (even SIGKILL) leaves a run that loads and resumes. Visible `step-N`
    folders only ever appear or disappear by an atomic rename, so they are complete too;
    hidden folders (`.step-N.*`) are unfinished work, removed by the next save.
    """
    run_dir = Path(run_dir)
    folder = checkpoints_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:07d}"
    index = read_index(run_dir)
    for hidden in sorted(index.named()):
        if hidden.startswith("."):  # a save of the same step was killed midway: finish it
            index = _promote(run_dir, index, folder / hidden)
    _remove_leftovers(folder, index)
    staging = _write_staging(folder, name, model, trainer_state, {"step": step, "score": score, **meta})
    final = folder / name
    if final.exists():
        # The same step saved again (interrupted right after a validation saved it, or a rerun
        # after a resume). POSIX cannot swap two folders atomically, so the index names the
        # complete staging copy while the old folder goes and the new one takes its name.
        index = index.renamed(name, staging.name)
        _write_index(run_dir, index)
        _fault_point("index names the staging copy")
        index = _promote(run_dir, index, staging)
    else:
        os.replace(staging, final)
        sync_folder(folder)  # the new name on the disk before an index names it
        _fault_point("checkpoint in place")
    updated = _updated_index(index, name, score, higher_is_better, keep)
    _write_index(run_dir, updated)
    _fault_point("index updated")
    for stale in index.named() - updated.named():  # only once the index no longer names them
        _remove(folder / stale)
    return final


def _fault_point(what: str) -> None:
    """Called after each filesystem operation of a save: a seam where tests kill the process
    (SIGKILL) to check that no such moment leaves the index naming a missing checkpoint."""


def _write_staging(folder: Path, name: str, model: torch.nn.Module, trainer_state: dict, meta: dict) -> Path:
    """A complete checkpoint, synced to the disk, under a hidden name."""
    with atomic_folder(folder / name, rename=False) as staging:
        _fault_point("staging folder created")
        write_weights(staging / WEIGHTS, state_dict_for_saving(model))
        _fault_point("weights written")
        _write_trainer_state(staging / TRAINER_STATE, trainer_state)
        _fault_point("trainer state written")
        write_meta(staging, meta)
        _fault_point("meta written")
    return staging


def write_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Weights as safetensors, written by Python from the serialized bytes: safetensors' own
    file writer reports a full disk as a SafetensorError that carries the errno only in its text."""
    data = serialize_weights(tensors)
    with naming_file(path):
        path.write_bytes(data)


def write_meta(checkpoint: Path, meta: dict[str, Any]) -> None:
    with naming_file(checkpoint / META):
        (checkpoint / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


class _KeepsWriteError:
    """A file handle for torch.save that keeps the OSError of a failed write: torch reports
    it as a RuntimeError of its own."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self.handle.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.handle.flush()


def _write_trainer_state(path: Path, trainer_state: dict) -> None:
    with naming_file(path), path.open("wb") as handle:
        keeping = _KeepsWriteError(handle)
        try:
            torch.save(trainer_state, keeping)  # type: ignore[arg-type]  # it needs only write() and flush(), not all of IO[bytes]
        except RuntimeError:
            if keeping.error is None:
                raise
            raise keeping.error from None


def _promote(run_dir: Path, index: CheckpointIndex, hidden: Path) -> CheckpointIndex:
    """Give a complete hidden checkpoint that the index names its visible name `step-N`."""
    visible = hidden.with_name(hidden.name.split(".")[1])
    if visible.exists():
        _remove(visible)
    _copy_by_links(hidden, visible)
    index = index.renamed(hidden.name, visible.name)
    _write_index(run_dir, index)
    _fault_point("index names the visible copy")
    _remove(hidden)
    return index


def _remove(path: Path) -> None:
    """Hide a folder by an atomic rename, then delete it: a kill midway leaves only hidden debris."""
    hidden = path.with_name(f".removing-{path.name}-{os.getpid()}")
    os.replace(path, hidden)
    _fault_point(f"{path.name} hidden for removal")
    shutil.rmtree(hidden)
    _fault_point(f"{path.name} removed")


def _copy_by_links(source: Path, destination: Path) -> None:
    """A complete copy of a checkpoint folder appearing at once (hard links where the file system
    has them: no data copied)."""
    with atomic_folder(destination) as building:
        for file in source.iterdir():
            try:
                os.link(file, building / file.name)
            except OSError:
                shutil.copy2(file, building / file.name)
        _fault_point("copy built")
    _fault_point("copy in place")


def _remove_leftovers(folder: Path, index: CheckpointIndex) -> None:
    """Hidden debris of saves that were killed, except a staging copy the index still names."""
    named = index.named()
    for path in folder.iterdir():
        if path.name.startswith(".") and path.name not in named:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _updated_index(
    index: CheckpointIndex, name: str, score: float | None, higher_is_better: bool, keep: int
) -> CheckpointIndex:
    """`name` as the last checkpoint (and best if `score` improved); the `keep` most recent plus the best."""
    best, best_score = index.best, index.best_score
    improved = score is not None and (
        best_score is None or (score > best_score if higher_is_better else score < best_score)
    )
    if improved:
        best, best_score = name, score
    kept = [k for k in index.kept if k != name] + [name]
    recent = kept[-keep:]
    survivors = tuple(k for k in kept if k in recent or k == best)
    return CheckpointIndex(last=name, best=best, best_score=best_score, kept=survivors)


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


def read_meta(checkpoint: str | Path) -> dict[str, Any]:
    """A checkpoint's meta.json (step, validation score, seconds and tokens of training so far);
    empty when the file is missing or unreadable, since it only describes the weights."""
    try:
        meta = json.loads((Path(checkpoint) / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def run_dir_of(checkpoint: Path) -> Path:
    """checkpoints/step-N -> the run directory holding config and vocabularies."""
    return checkpoint.parent.parent


def load_weights(model: torch.nn.Module, checkpoint: str | Path) -> None:
    """Load safetensors weights into a model built from the same config; mismatches are UserErrors."""
    set_weights(model, read_weights(checkpoint), Path(checkpoint) / WEIGHTS)


def read_weights(checkpoint: str | Path) -> dict[str, torch.Tensor]:
    """A checkpoint's weights by parameter name; a damaged file is a UserError."""
    path = Path(checkpoint) / WEIGHTS
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise UserError(f"{path}: corrupted or truncated checkpoint ({exc})") from None


def set_weights(model: torch.nn.Module, state: dict[str, torch.Tensor], path: Path) -> None:
    """`state` into `model`, every parameter present with its shape (tied ones once), else a
    UserError naming `path`, where the weights came from."""
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


@dataclass
class TrainedModel:
    """A run's model with the weights of one checkpoint, in eval mode on the CPU."""

    model: Model
    config: Config
    checkpoint: Path

    @property
    def run_dir(self) -> Path:
        return run_dir_of(self.checkpoint)


def load_trained(path: str | Path, which: str = "best") -> TrainedModel:
    """`path`: a run directory (its `which` checkpoint, best or last) or one checkpoint folder."""
    checkpoint = resolve_checkpoint(path, which)
    run_dir = run_dir_of(checkpoint)
    if not (run_dir / "config.yaml").is_file():
        raise UserError(f"{run_dir}: not a run directory (no config.yaml beside checkpoints/)")
    config = load_config(run_dir / "config.yaml")
    src_size, tgt_size = (len(Vocab.load(run_dir / f"{side}.vocab.json")) for side in ("src", "tgt"))
    model = build_model(config.model, src_size, tgt_size)
    try:
        load_weights(model, checkpoint)
    except UserError as error:  # point at the run's other checkpoints, which may still be good
        others = sorted(p.name for p in checkpoint.parent.glob("step-*") if p != checkpoint)
        raise UserError(f"{error}; other checkpoints: {', '.join(others)}" if others else str(error)) from None
    return TrainedModel(model.eval(), config, checkpoint)


def training_summary(checkpoint: Path) -> dict:
    """How the scored weights were trained, from the checkpoints' meta.json: the checkpoint's
    step, validation score and minutes of training, the code that trained it (its commit and
    whether the checkout was dirty, as `provenance.code_state` gives them), and the steps and
    minutes of the whole run (its last checkpoint), and for a continued run where it started
    (`continued.Start.record`), and the machine's pace probe taken before it trained (`attnmt.pace`).
    None where a checkpoint does not say."""
    scored = read_meta(checkpoint)
    try:
        last_name = read_index(run_dir_of(checkpoint)).last
    except UserError:  # a damaged index: the scores are still worth writing
        last_name = None
    last = read_meta(checkpoints_dir(run_dir_of(checkpoint)) / last_name) if last_name else {}
    return {
        "step": scored.get("step"),
        "valid_score": scored.get("score"),
        "minutes": _minutes(scored),
        "code": scored.get("code"),
        "run_steps": last.get("step"),
        "run_minutes": _minutes(last),
        "started_from": scored.get("started_from"),
        "pace": _pace_at_start(run_dir_of(checkpoint)),
    }


def _pace_at_start(run_dir: Path) -> dict | None:
    """The pace probe taken before the run trained (`python -m attnmt.pace --json RUN/pace.json`), if one was."""
    try:
        return json.loads((run_dir / "pace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _minutes(meta: dict) -> float | None:
    return None if meta.get("elapsed") is None else meta["elapsed"] / 60
