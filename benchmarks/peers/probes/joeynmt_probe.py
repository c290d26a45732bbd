"""JoeyNMT 2.3.0's probe: its own training and decoding, in-process, measured as the benchmark does.

Runs in JoeyNMT's virtual environment, so it imports only torch, joeynmt, the standard library
and `_probe`.

    joeynmt_probe.py train --config C --events E --save-every N --threads T [--steps S] [--max-minutes M]
    joeynmt_probe.py translate --checkpoint K --source F --output O --result R --beam-size B --batch-size N
                               --max-output-length L --threads T [--attention-focus FOCUS.json]

Training is JoeyNMT's `TrainManager.train_and_validate` with three additions in a subclass: the
recorder hears each batch's target tokens, a checkpoint is written every `save_every` steps with
no validation (JoeyNMT writes checkpoints only where it validates, and the harness scores
checkpoints itself), and the time budget ends training the way JoeyNMT's own `updates` limit
does, so in both cases JoeyNMT writes the checkpoint of the last step on its way out.

As JoeyNMT's own `train` command does, training leaves its configuration in the model directory
next to the vocabularies and checkpoints; decoding needs nothing else than that directory.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from pathlib import Path

import torch
from joeynmt.batch import Batch
from joeynmt.config import BaseConfig, load_config, log_config, parse_global_args, set_validation_args
from joeynmt.datasets import StreamDataset
from joeynmt.helpers import make_model_dir, set_seed
from joeynmt.helpers_for_ddp import get_logger
from joeynmt.model import Model
from joeynmt.prediction import predict, prepare
from joeynmt.training import TrainManager

sys.path.insert(0, str(Path(__file__).parent))
from _probe import Recorder, record_training, set_threads, write_attention_focus, write_translation_result

MODEL_CONFIG = "config.yaml"  # where JoeyNMT's `train` command keeps a copy of its configuration


class BenchmarkTrainManager(TrainManager):
    """JoeyNMT's trainer, plus token counting, checkpoints without validation and a time budget."""

    def __init__(self, recorder: Recorder, **kwargs) -> None:
        super().__init__(**kwargs)
        self.recorder = recorder
        # Runs after the recorder's global hook, so the step that crosses the deadline is recorded.
        self.optimizer.register_step_post_hook(self._stop_if_over_budget)

    def _train_step(self, batch: Batch) -> tuple[float, int]:
        # batch.trg is the target without its BOS; ntokens counts its non-pad positions: the
        # sentence's tokens plus EOS. With batch_multiplier 1 every batch is one step.
        self.recorder.add_tokens(batch.ntokens)
        return super()._train_step(batch)

    def _validate(self, valid_data) -> None:
        """Called every validation_freq (= save_every) steps: save the checkpoint, skip validation."""
        self._save_checkpoint(new_best=False, score=float("nan"))  # NaN: no checkpoint is ever deleted

    def _stop_if_over_budget(self, *_) -> None:
        # The flag JoeyNMT sets when `updates` is reached: it ends the loop after this step and
        # saves the last step's checkpoint.
        if self.recorder.over_budget() and not self.stats.is_max_update:
            self.stats.is_max_update = True
            get_logger("").info("Time budget reached at step %d: training ends after it.", self.recorder.step)


def train(options: argparse.Namespace) -> None:
    set_threads(options.threads)
    # First: the benchmark's clock and time budget include loading the data and building the model.
    recorder = record_training(options.events, options.max_minutes)
    cfg = load_config(options.config)
    schedule_run(cfg["training"], options.steps, options.save_every)
    model_dir = Path(cfg["model_dir"])
    make_model_dir(model_dir, overwrite=True)
    shutil.copy2(options.config, model_dir / MODEL_CONFIG)
    get_logger("", log_file=str(model_dir / "train.log"))
    log_config(cfg)
    args = parse_global_args(cfg, rank=0, mode="train")
    set_seed(args.seed)  # JoeyNMT 2.3.0 seeds only after building the model; this seeds its initialization
    model, train_data, dev_data, _ = prepare(args, rank=0, mode="train")
    trainer = BenchmarkTrainManager(
        recorder,
        rank=0,
        model=model,
        model_dir=args.model_dir,
        device=args.device,
        n_gpu=args.n_gpu,
        num_workers=args.num_workers,
        autocast=args.autocast,
        seed=args.seed,
        train_args=args.train,
        dev_args=set_validation_args(args.test),
    )
    trainer.train_and_validate(train_data=train_data, valid_data=dev_data)


def schedule_run(training: dict, steps: int | None, save_every: int) -> None:
    """The run's length and checkpoint interval, as JoeyNMT options: `updates` ends training,
    `validation_freq` is where the trainer calls _validate; JoeyNMT wants the logging interval to
    divide it."""
    if steps is not None:
        training["updates"] = steps
    training["validation_freq"] = save_every
    training["logging_freq"] = math.gcd(save_every, 100)


def translate(options: argparse.Namespace) -> None:
    set_threads(options.threads)
    cfg = model_config(options.checkpoint.parent)
    cfg["testing"].update(
        load_model=str(options.checkpoint),
        beam_size=options.beam_size,
        batch_size=options.batch_size,
        batch_type="sentence",
        max_output_length=options.max_output_length,
    )
    if options.attention_focus:
        cfg["testing"]["return_attention"] = True
    get_logger("")
    args = parse_global_args(cfg, rank=0, mode="translate")
    model, _, _, stream = prepare(args, rank=0, mode="translate")  # untimed: vocabularies, model, checkpoint
    started = time.perf_counter()
    hypotheses, decoded, attention = translate_file(model, stream, args, options.source)
    seconds = time.perf_counter() - started
    options.output.write_text("".join(hypothesis + "\n" for hypothesis in hypotheses), encoding="utf-8")
    write_translation_result(options.result, seconds, options.output)
    if options.attention_focus:
        # JoeyNMT attends over the source words and the </s> it appends; a row per output token, </s> included
        sources = options.source.read_text(encoding="utf-8").splitlines()
        rows = [
            torch.as_tensor(weights[: len(tokens), : len(source.split()) + 1])
            for weights, tokens, source in zip(attention, decoded, sources, strict=True)
        ]
        write_attention_focus(options.attention_focus, rows)


def model_config(model_dir: Path) -> dict:
    """The training configuration, pointed at `model_dir` and its vocabularies (JoeyNMT's `prepare`
    reads src_vocab.txt and trg_vocab.txt there when the configuration names no vocabulary file)."""
    cfg = load_config(model_dir / MODEL_CONFIG)
    cfg["model_dir"] = str(model_dir)
    for side in ("src", "trg"):
        cfg["data"][side].pop("voc_file", None)
    return cfg


def translate_file(model: Model, stream: StreamDataset, args: BaseConfig, source: Path) -> tuple[list, list, list]:
    """What JoeyNMT's `translate` command does with lines on stdin: every line into its stream
    dataset, then `predict` in batches of testing.batch_size sentences in input order. Returns the
    hypotheses post-processed (word tokens joined by single spaces, specials removed), each one's
    tokens up to and with </s>, and, when the test options ask for it, each one's attention
    (padded to its batch's lengths; else an empty list)."""
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            raise SystemExit(f"joeynmt probe: line {number} of {source} is empty; JoeyNMT cannot translate it")
        stream.set_item(line)
    _, _, hypotheses, decoded, _, attention = predict(
        model=model,
        data=stream,
        device=args.device,
        n_gpu=args.n_gpu,
        compute_loss=False,
        normalization="none",
        num_workers=args.num_workers,
        args=args.test,
        autocast=args.autocast,
    )
    return hypotheses, decoded, attention


def parse_options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="JoeyNMT 2.3.0 probe for the peer benchmark")
    modes = parser.add_subparsers(dest="mode", required=True)
    for mode in ("train", "translate"):
        modes.add_parser(mode).add_argument("--threads", type=int, required=True)
    training = modes.choices["train"]
    training.add_argument("--config", type=Path, required=True)
    training.add_argument("--events", type=Path, required=True)
    training.add_argument("--save-every", type=int, required=True)
    training.add_argument("--steps", type=int)
    training.add_argument("--max-minutes", type=float)
    translating = modes.choices["translate"]
    translating.add_argument("--checkpoint", type=Path, required=True)
    translating.add_argument("--source", type=Path, required=True)
    translating.add_argument("--output", type=Path, required=True)
    translating.add_argument("--result", type=Path, required=True)
    translating.add_argument("--beam-size", type=int, required=True)
    translating.add_argument("--batch-size", type=int, required=True)
    translating.add_argument("--max-output-length", type=int, required=True)
    translating.add_argument("--attention-focus", type=Path, help="write where the attention goes (JSON)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    options = parse_options(argv)
    if options.mode == "train":
        train(options)
    else:
        translate(options)


if __name__ == "__main__":
    main(sys.argv[1:])
