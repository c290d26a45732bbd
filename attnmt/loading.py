"""Loading a model to translate with: `load(ModelSpec(path, device="cpu"))`.

One value says what to load and how (`ModelSpec`: the runs, checkpoint folders or ONNX exports,
which checkpoint of a run, the device, the engine, int8 quantization, an ensemble's attention, the
corpus folder); one function loads it. `attnmt translate`, `evaluate`, `plot`, `export`'s int8
check, the stream's worker processes and `attnmt serve` all load through here, so every engine,
quantization and ensemble is open to each of them alike.

The engine decides how a path runs: torch for a run or checkpoint folder, onnxruntime for an
export; a run asked for with onnxruntime is exported first (`ModelSpec.exported`, the one place
that decides it), into a temporary folder that is gone once its sessions are loaded.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import torch

from attnmt.checkpoint import load_trained, resolve_checkpoint, run_dir_of
from attnmt.codec import TextCodec
from attnmt.config import CHECKPOINTS, ENGINES, Config, load_config
from attnmt.engine import OnnxModel
from attnmt.ensemble import Ensemble, check_compatible
from attnmt.export import export_onnx, is_export, read_export
from attnmt.models.seq2seq import Seq2Seq, build_model
from attnmt.quantize import CHOICES as QUANTIZE_CHOICES
from attnmt.quantize import quantize_export, quantize_model
from attnmt.shortlist import FILENAME as SHORTLIST_FILE
from attnmt.shortlist import Shortlist
from attnmt.shortlist import load as load_shortlist
from attnmt.translate import Translator
from attnmt.utils import UserError, choose_device


def _choice(value: str, choices: Sequence[str], field: str) -> None:
    if value not in choices:
        raise UserError(f"{value!r}: expected one of {', '.join(choices)}", field=field)


@dataclass(frozen=True)
class ModelSpec:
    """What to load and how; picklable, so worker processes load the same model from it.

    paths: one run directory, checkpoint folder or ONNX export (a path or a string), or several,
        which decode as one ensemble by the mean of their log-probabilities; kept as strings.
    checkpoint: a run's "best" or "last" checkpoint (a checkpoint folder or export is itself).
    device: "auto" (cuda, then mps, then cpu), "cpu", "cuda", "cuda:N" or "mps".
    engine: "torch", "onnxruntime", or "auto" (onnxruntime for an export, torch otherwise).
    quantize: "int8" quantizes a run's weights dynamically, on the CPU; an export is quantized
        when it is made, and must already be int8.
    ensemble_attention: the attention an ensemble shows: "mean", or member N's (0 = the first).
    data_dir: the corpus folder, set once as the loaded config's `data.data_dir` (None keeps it).
    threads: onnxruntime's threads per session (None: torch's thread count).
    shortlist: decode with the vocabulary shortlist stored with the (first) run or export
        (`attnmt shortlist`), computing the output layer for each batch's candidates only.
    beam_size: the loaded model's default beam size, in place of its config's decode.beam_size
        (its n_best lowered to fit; None keeps both): how the fast preset sets its search.
    """

    paths: tuple[str, ...]
    checkpoint: str = "best"
    device: str = "auto"
    engine: str = "auto"
    quantize: str = "none"
    ensemble_attention: str | int = "mean"
    data_dir: str | None = None
    threads: int | None = None
    shortlist: bool = False
    beam_size: int | None = None

    def __post_init__(self) -> None:
        paths = (self.paths,) if isinstance(self.paths, (str, os.PathLike)) else self.paths
        object.__setattr__(self, "paths", tuple(str(path) for path in paths))
        if not self.paths:
            raise UserError("give at least one run directory, checkpoint folder or export", field="paths")
        _choice(self.checkpoint, CHECKPOINTS, "checkpoint")
        _choice(self.engine, ENGINES, "engine")
        _choice(self.quantize, QUANTIZE_CHOICES, "quantize")
        if self.beam_size is not None and self.beam_size < 1:
            raise UserError(f"beam size must be at least 1, got {self.beam_size}", field="decode.beam_size")
        attention = self.ensemble_attention
        if attention != "mean" and not (isinstance(attention, int) and 0 <= attention < len(self.paths)):
            last = len(self.paths) - 1
            raise UserError(f"{attention!r}: expected 'mean' or a member from 0 to {last}", field="ensemble_attention")

    def alone(self) -> list[ModelSpec]:
        """One spec per path, with these settings: the members, each loaded on its own."""
        return [replace(self, paths=(path,), ensemble_attention="mean") for path in self.paths]

    def runs_on_onnxruntime(self, path: str) -> bool:
        return self.engine == "onnxruntime" or (self.engine == "auto" and is_export(path))

    @contextlib.contextmanager
    def exported(self) -> Iterator[ModelSpec]:
        """This spec with every run that onnxruntime is to run exported (quantized as asked) into
        a temporary folder, removed on leaving the block; what is already an export stays as it
        is. Worker processes load the exported spec, so one export serves them all."""
        for path in self.paths:
            self._check_engine(path)
        if not any(self.runs_on_onnxruntime(path) and not is_export(path) for path in self.paths):
            yield self
            return
        with tempfile.TemporaryDirectory(prefix="attnmt-export-") as folder:
            paths = []
            for index, path in enumerate(self.paths):
                if is_export(path) or not self.runs_on_onnxruntime(path):
                    paths.append(path)
                    continue
                made = export_onnx(path, Path(folder) / f"{index}-float32", which=self.checkpoint)
                if self.quantize != "none":
                    made = quantize_export(made, Path(folder) / f"{index}-{self.quantize}")
                paths.append(str(made))
            yield replace(self, paths=tuple(paths), quantize="none")

    def _check_engine(self, path: str) -> None:
        """What cannot run as asked: a path's engine against the device and quantization."""
        exported = is_export(path)
        if exported and self.engine == "torch":
            raise UserError(f"{path}: an ONNX export has no torch weights; run it with onnxruntime", field="engine")
        if self.runs_on_onnxruntime(path) and self.device not in ("auto", "cpu"):
            raise UserError(f"{self.device!r}: the onnxruntime engine runs on the CPU", field="device")
        if not exported and self.quantize != "none" and self.device not in ("auto", "cpu"):
            raise UserError(f"{self.device!r}: {self.quantize} runs on the CPU; choose the cpu device", field="device")
        if exported and self.quantize != "none":
            quantized = read_export(path).manifest.get("quantization", "none")
            if quantized != self.quantize:
                raise UserError(
                    f"{path}: not quantized to {self.quantize}; an export is quantized when it is made: "
                    f"export the run again with {self.quantize} quantization",
                    field="quantize",
                )


def load(spec: ModelSpec) -> Translator:
    """The model `spec` describes, ready to translate: one path's, or an ensemble of them all."""
    with spec.exported() as ready:
        members = [_load_one(ready, path) for path in ready.paths]
    for original, made, member in zip(spec.paths, ready.paths, members, strict=True):
        if original != made:  # exported on the fly: name the checkpoint the export was made from
            member.checkpoint = member.members[0] = resolve_checkpoint(original, spec.checkpoint)
    if spec.shortlist:
        members[0].shortlist = _shortlist_of(spec.paths[0], members[0])
    if len(members) == 1:
        return members[0]
    check_compatible([(path, member.codec) for path, member in zip(spec.paths, members, strict=True)])
    for path, member in zip(spec.paths[1:], members[1:], strict=True):
        if member.config.model.family != members[0].config.model.family:  # an ensemble is of one family
            raise UserError(
                f"{path}: a {member.config.model.family} run, but {spec.paths[0]} is a "
                f"{members[0].config.model.family} run; an ensemble's runs are of one model family",
                field="ensemble",
            )
    first = members[0]
    return Translator(
        Ensemble([member.model for member in members], attention=spec.ensemble_attention),
        first.codec,
        first.config,
        device=first.device,
        checkpoint=first.checkpoint,
        members=[member.checkpoint for member in members],
        parameters=sum(member.parameters for member in members),
        shortlist=first.shortlist,  # the members share their vocabularies, so one shortlist serves all
    )


def _shortlist_of(path: str, translator: Translator) -> Shortlist:
    """The shortlist stored with a run (beside its vocabularies) or an export, checked against
    the model's vocabularies."""
    folder = Path(path) if is_export(path) else run_dir_of(resolve_checkpoint(path))
    found = load_shortlist(folder)
    if found is None:
        raise UserError(
            f"{path}: has no vocabulary shortlist ({SHORTLIST_FILE}); build one with `attnmt shortlist {path}`",
            field="shortlist",
        )
    found.check(translator.codec.src_vocab, translator.codec.tgt_vocab, str(folder / SHORTLIST_FILE))
    return found


def _configured(config: Config, spec: ModelSpec) -> Config:
    """`config` with the spec's corpus folder and default beam size, where it sets them."""
    config = config.with_data_dir(spec.data_dir)
    if spec.beam_size is not None:
        decode = {"beam_size": spec.beam_size, "n_best": min(config.decode.n_best, spec.beam_size)}
        config = config.model_copy(update={"decode": config.decode.model_copy(update=decode)})
    return config


def _load_one(spec: ModelSpec, path: str) -> Translator:
    if spec.runs_on_onnxruntime(path):
        onnx_model = OnnxModel(path, threads=spec.threads)
        directory = onnx_model.export.directory
        config = _configured(load_config(directory / "config.yaml"), spec)
        codec = TextCodec.load(directory, config.data)
        parameters = _parameters_of(config, codec)
        return Translator(onnx_model, codec, config, device="cpu", checkpoint=directory, parameters=parameters)
    device = choose_device("cpu" if spec.quantize != "none" else spec.device, field="device")
    trained = load_trained(path, spec.checkpoint)
    config = _configured(trained.config, spec)
    codec = TextCodec.load(trained.run_dir, config.data)
    model = trained.model.to(device)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    if spec.quantize != "none":
        model = cast(Seq2Seq, quantize_model(model))  # a copy of the Seq2Seq, its linear layers int8
    return Translator(model, codec, config, device=device, checkpoint=trained.checkpoint, parameters=parameters)


def _parameters_of(config: Config, codec: TextCodec) -> int:
    """The parameters of the model an export was made from: its config's model, built without memory."""
    with torch.device("meta"):
        model = build_model(config.model, len(codec.src_vocab), len(codec.tgt_vocab))
    return sum(parameter.numel() for parameter in model.parameters())
