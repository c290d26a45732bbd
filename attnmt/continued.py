"""Continued training: a new run that starts from a trained model instead of from nothing.

`attnmt train CONFIG --from RUN` (`train.init_from`: a run directory, whose best checkpoint is
taken, or one checkpoint folder) gives the new run the starting model's weights, tokenizers and
vocabularies, and an optimizer, step count and schedule of its own: adapting a model to a
domain or to more data, as OpenNMT-py's `train_from`, Marian's `--pretrained-model` and
fairseq's `--restore-file --reset-optimizer` do.

- The settings that shape the weights or the ids (`MODEL_SETTINGS`, `DATA_SETTINGS`) must equal
  the starting run's; any other (dropout, label smoothing, the corpus, everything under train)
  is the new config's.
- The new corpus is encoded with the starting vocabularies (its unknown words become `<unk>`);
  with `train.extend_vocab`, a word-level run's vocabularies first take the new corpus's words
  seen at least `data.min_freq` times, their embedding and output rows starting at the mean of
  the trained ones. A SentencePiece run keeps its piece models, which spell any text.
- Unless the config sets them, the rate schedule is the one for continued training
  (`CONTINUED_DEFAULTS`): half the starting run's peak rate, a short warmup, then cosine decay
  where the run has a step limit.
- `train.freeze` keeps the encoder or the embeddings as they were.
- The run records where it started (`Start.record`: run, checkpoint, step, hash of the weights)
  in every checkpoint's meta.json, so `attnmt evaluate` and the explorer can say so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnmt.checkpoint import WEIGHTS, read_meta, read_weights, resolve_checkpoint, run_dir_of, set_weights
from attnmt.codec import TextCodec
from attnmt.config import Config, DataConfig, load_config
from attnmt.data.batching import DataBundle, TokenBatchSampler, prepared_data
from attnmt.data.mixing import mixed_training
from attnmt.data.prepare import GivenCodec
from attnmt.utils import UserError, write_text_atomic

# What must equal the starting run's: the shapes of the weights and what the ids mean.
MODEL_SETTINGS = (
    "family",
    "rnn",
    "embedding_size",
    "encoder_hidden",
    "encoder_layers",
    "bidirectional",
    "decoder_hidden",
    "decoder_layers",
    "attention",
    "attention_size",
    "decoder",
    "input_feeding",
    "bridge",
    "tie_embeddings",
    "tie_source_embeddings",
    "d_model",
    "heads",
    "feed_forward",
    "norm",
)
DATA_SETTINGS = ("src_lang", "tgt_lang", "tokenizer", "lowercase", "shared_vocab", "spm_model_type", "spm_vocab_size")
WARMUP_STEPS = 100  # of continued training's default schedule


@dataclass(frozen=True)
class Start:
    """The trained model a run continues from."""

    run_dir: Path
    checkpoint: Path
    step: int | None
    weights_sha256: str
    config: Config

    def record(self) -> dict[str, Any]:
        """What a continued run keeps of where it started (meta.json's `started_from`)."""
        return {
            "run": str(self.run_dir),
            "checkpoint": self.checkpoint.name,
            "step": self.step,
            "weights_sha256": self.weights_sha256,
        }


def find_start(path: str | Path) -> Start:
    """The run directory (its best checkpoint) or checkpoint folder `path` names."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such run directory or checkpoint folder", field="train.init_from")
    if not (path / WEIGHTS).is_file() and not (path / "config.yaml").is_file():
        raise UserError(
            f"{path}: not a run directory (no config.yaml) nor a checkpoint folder (no {WEIGHTS})",
            field="train.init_from",
        )
    checkpoint = resolve_checkpoint(path, "best")
    run_dir = run_dir_of(checkpoint)
    if not (run_dir / "config.yaml").is_file():
        raise UserError(f"{run_dir}: not a run directory (no config.yaml beside checkpoints/)", field="train.init_from")
    digest = hashlib.sha256((checkpoint / WEIGHTS).read_bytes()).hexdigest()
    step = read_meta(checkpoint).get("step")
    return Start(run_dir, checkpoint, step, digest, load_config(run_dir / "config.yaml"))


def check_compatible(config: Config, start: Start) -> None:
    """The first setting in which `config` contradicts the starting run, as a UserError."""
    for section, names in (("model", MODEL_SETTINGS), ("data", DATA_SETTINGS)):
        ours, theirs = getattr(config, section), getattr(start.config, section)
        for name in names:
            if getattr(ours, name) != getattr(theirs, name):
                raise UserError(
                    f"{section}.{name} is {getattr(ours, name)!r} but {start.run_dir} was trained with "
                    f"{getattr(theirs, name)!r}; a continued run keeps the settings that shape its weights and ids",
                    field=f"{section}.{name}",
                )


def with_continued_defaults(config: Config, start: Start) -> tuple[Config, list[str]]:
    """`config` with the continued-training schedule wherever it sets none of its own, and one
    line per default taken: half the starting run's peak rate, a warmup of WARMUP_STEPS, cosine
    decay to a tenth of the peak where the run has a step limit (else a constant rate)."""
    given = config.train.model_fields_set
    defaults: dict[str, Any] = {}
    if "lr" not in given:
        defaults["lr"] = start.config.train.lr / 2
    if "warmup_steps" not in given:
        defaults["warmup_steps"] = WARMUP_STEPS
    if "lr_schedule" not in given:
        defaults["lr_schedule"] = "cosine" if config.train.max_steps is not None else "constant"
        if defaults["lr_schedule"] == "cosine" and "min_lr" not in given:
            defaults["min_lr"] = defaults.get("lr", config.train.lr) / 10
    if not defaults:
        return config, []
    train = config.train.model_copy(update=defaults)
    said = [f"train.{name}: {value} (continued training's default)" for name, value in defaults.items()]
    return config.model_copy(update={"train": train}), said


def start_codec(start: Start) -> TextCodec:
    """The starting run's tokenizers and vocabularies."""
    return TextCodec.load(start.run_dir, start.config.data)


def load_start_weights(model: torch.nn.Module, start: Start) -> None:
    """The starting weights into `model`, whose vocabularies may be the starting ones grown at
    the end (`train.extend_vocab`): each grown embedding or output row, and output bias, starts
    at the mean of the trained ones."""
    state = read_weights(start.checkpoint)
    expected = model.state_dict()
    for key, tensor in state.items():
        want = expected.get(key)
        if want is None or want.shape == tensor.shape:
            continue
        if want.shape[1:] != tensor.shape[1:] or want.shape[0] < tensor.shape[0]:
            continue  # set_weights names the mismatch
        extra = want.shape[0] - tensor.shape[0]
        state[key] = torch.cat([tensor, tensor.mean(dim=0, keepdim=True).expand(extra, *tensor.shape[1:])])
    set_weights(model, state, start.checkpoint / WEIGHTS)


def freeze(model: torch.nn.Module, parts: Sequence[str]) -> list[str]:
    """Stop training `parts` ("encoder": the whole encoder; "embeddings": the source and target
    embeddings, and so a tied output layer); the names of the frozen parameters."""
    frozen = []
    for name, parameter in model.named_parameters():
        is_embedding = name.endswith("embedding.weight")
        if ("encoder" in parts and name.startswith("encoder.")) or ("embeddings" in parts and is_embedding):
            parameter.requires_grad_(False)
            frozen.append(name)
    return frozen


RECORD = "started_from.json"
MIXED_DATA = "mixed_data"  # the record's key for the starting run's data settings, when mixing


@dataclass
class Continuation:
    """A continued run as its trainer uses it: the config with continued training's defaults,
    the start (None on a resume, whose own checkpoint holds the weights), where it started from,
    the codec its data is encoded with, and what to tell the user."""

    config: Config
    start: Start | None
    record: dict[str, Any]
    given: GivenCodec
    notes: list[str]

    def prepare_model(self, model: torch.nn.Module, run_dir: Path, is_main: bool) -> list[str]:
        """The starting weights into `model` (not on a resume), the frozen parts frozen, the
        record of the start written into the run; what was done, as lines for the user."""
        notes = list(self.notes)
        if self.start is not None:
            load_start_weights(model, self.start)
            notes.append(f"continuing from {self.start.checkpoint} (step {self.start.step})")
            trained = (len(self.given.codec.src_vocab), len(self.given.codec.tgt_vocab))
            now = (model.encoder.embedding.num_embeddings, model.decoder.embedding.num_embeddings)  # type: ignore[union-attr]  # a model of either family; the layering keeps models out of here
            if now != trained:
                notes.append(
                    f"vocabularies extended by the new corpus: source {trained[0]:,} -> {now[0]:,}, target "
                    f"{trained[1]:,} -> {now[1]:,} (new rows start at the mean of the trained ones)"
                )
            if is_main:
                write_text_atomic(run_dir / RECORD, json.dumps(self.record, indent=2) + "\n")
        if self.config.train.freeze:
            frozen = freeze(model, self.config.train.freeze)
            notes.append(f"frozen: {', '.join(self.config.train.freeze)} ({len(frozen)} tensors)")
        if self.config.data.mix_previous:
            share = self.config.data.mix_previous
            notes.append(f"data.mix_previous: {share:.0%} of the batches from the starting run's training data")
        return notes

    def mixed_data(self) -> DataConfig | None:
        """The starting run's data settings, whose training split `data.mix_previous` draws from
        (kept in the record, so a resume needs no starting run); None without mixing."""
        if not self.config.data.mix_previous:
            return None
        if MIXED_DATA not in self.record:
            raise UserError(
                f"{RECORD} holds no {MIXED_DATA}: the run was started without mixing", field="data.mix_previous"
            )
        return DataConfig.model_validate(self.record[MIXED_DATA])


def training_batches(
    bundle: DataBundle, config: Config, continued: Continuation | None
) -> tuple[DataBundle, TokenBatchSampler]:
    """The training split and the sampler of its batches: the config's corpus, and with
    `data.mix_previous` that share of the batches drawn from the starting run's training data,
    encoded with this run's vocabularies (`mixing`)."""
    sampler = bundle.sampler(config.data, shuffle=True, seed=config.train.seed)
    previous = continued.mixed_data() if continued is not None else None
    if previous is None:
        return bundle, sampler
    old = prepared_data(previous, given=GivenCodec(bundle.codec)).train
    return mixed_training(bundle, sampler, old, config.data, config.train.seed)


def continuation(config: Config, resume: bool) -> Continuation | None:
    """How a run with `train.init_from` starts (None for a run from scratch): on a first start,
    the starting run found and checked, the defaults applied; on a resume, the run's own record
    and codec, so that the run it started from may be gone."""
    if config.train.init_from is None:
        return None
    run_dir = Path(config.train.run_dir)
    if resume:
        try:
            record = json.loads((run_dir / RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise UserError(f"{run_dir / RECORD}: unreadable ({error}); the run's start is not known") from None
        return Continuation(config, None, record, GivenCodec(TextCodec.load(run_dir, config.data)), [])
    start = find_start(config.train.init_from)
    check_compatible(config, start)
    config, notes = with_continued_defaults(config, start)
    words = config.data.tokenizer == "word"
    if config.train.extend_vocab and not words:
        notes.append("train.extend_vocab: SentencePiece pieces spell any text, so the vocabularies are kept")
    given = GivenCodec(start_codec(start), extend=config.train.extend_vocab and words)
    record = start.record()
    if config.data.mix_previous:  # the starting run's corpus, read from where this run reads its own
        data_dir = config.data.data_dir or start.config.data.data_dir
        record[MIXED_DATA] = start.config.data.model_copy(update={"data_dir": data_dir}).model_dump(mode="json")
    return Continuation(config, start, record, given, notes)
