"""The training loop, readable top to bottom: `fit(config)`.

config -> data (`build_data`) -> `build_model` -> for each token batch: forward with teacher
forcing -> cross-entropy over non-pad tokens -> backward -> clip -> step; every
`valid_every` steps: validation loss/perplexity and greedy BLEU -> checkpoint -> early stop.

Resuming restores weights, optimizer, RNG states and the position in the batch order, so the
loss curve continues exactly as an uninterrupted run's would (on the CPU, bit for bit).
Under `torchrun`, each process takes its share of every global batch (`data.shares`) and
DistributedDataParallel averages the gradients.
"""

from __future__ import annotations

import random
import shlex
import time
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from attnmt import distributed
from attnmt.checkpoint import load_trainer_state, load_weights, read_index, resolve_checkpoint, save_checkpoint
from attnmt.codec import TextCodec
from attnmt.config import Config, save_config
from attnmt.continued import continuation, training_batches
from attnmt.data.batching import Batch, DataBundle, prepared_data
from attnmt.data.shares import LocalBatches, fingerprint
from attnmt.loss import loss_denominator, token_loss
from attnmt.models.seq2seq import build_model
from attnmt.precision import autocast, grad_scaler
from attnmt.provenance import code_state
from attnmt.runlog import MetricsLog, ProgressDisplay
from attnmt.schedules import learning_rate, teacher_forcing_ratio
from attnmt.subwords import Resegmenter
from attnmt.utils import Interrupted, StopSignal, UserError, WriteFailed, choose_device, seed_everything
from attnmt.validation import validate


class TrainingDiverged(UserError):
    """The loss became NaN or infinite; the last good state was saved first."""


@dataclass
class Progress:
    """Everything besides weights and optimizer that a resume needs."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # next batch of the epoch
    elapsed: float = 0.0  # seconds of training so far, across resumes
    tokens: int = 0  # non-pad target tokens seen
    best_score: float | None = None
    bad_validations: int = 0
    plateau_scale: float = 1.0  # reduce-on-plateau factor applied to the scheduled lr
    history: list[float] = field(default_factory=list)  # validation scores, oldest first


@dataclass
class LogWindow:
    """The updates since the last log line."""

    loss: torch.Tensor  # their summed loss, on the device: no step waits for the GPU, the log line reads it
    tokens: int  # progress.tokens when the window opened
    opened: float  # time.perf_counter() then
    steps: int = 0


def _prepare_run_dir(config: Config, bundle: DataBundle, resume: bool, is_main: bool) -> Path:
    """Write config and vocabularies; refuse to overwrite another run's checkpoints."""
    run_dir = Path(config.train.run_dir)
    has_checkpoints = read_index(run_dir).last is not None
    if resume:
        saved = TextCodec.load(run_dir, config.data)
        if saved.src_vocab != bundle.src_vocab or saved.tgt_vocab != bundle.tgt_vocab:
            raise UserError(f"{run_dir}: the data now gives other vocabularies than the run was trained with")
    elif has_checkpoints:
        raise UserError(f"{run_dir}: already holds checkpoints; resume with --resume {run_dir} or set train.run_dir")
    if is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(config, run_dir / "config.yaml")
        bundle.codec.save(run_dir)
    return run_dir


def _trainer_state(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, progress: Progress) -> dict:
    state = {
        "optimizer": optimizer.state_dict(),
        "grad_scaler": scaler.state_dict(),
        "progress": asdict(progress),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return state


def _restore(checkpoint: Path, model, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> Progress:
    load_weights(model, checkpoint)
    state = load_trainer_state(checkpoint)
    optimizer.load_state_dict(state["optimizer"])
    if state.get("grad_scaler"):  # empty when the run was not fp16
        scaler.load_state_dict(state["grad_scaler"])
    torch.set_rng_state(state["torch_rng"])
    version, internal, gauss = state["python_rng"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return Progress(**state["progress"])


def _improved(score: float, progress: Progress, higher_is_better: bool) -> bool:
    best = progress.best_score
    return best is None or (score > best if higher_is_better else score < best)


def _optimizer(model: torch.nn.Module, config: Config) -> torch.optim.Optimizer:
    train = config.train
    kind = torch.optim.AdamW if train.optimizer == "adamw" else torch.optim.Adam
    # One pass over all parameters instead of one per tensor (`python -m benchmarks.optimizer`).
    fused = next(model.parameters()).device.type in ("cpu", "cuda")
    return kind(model.parameters(), lr=train.lr, betas=train.betas, weight_decay=train.weight_decay, fused=fused)


def _limit_reached(config: Config, progress: Progress) -> bool:
    train = config.train
    return (train.max_steps is not None and progress.step >= train.max_steps) or (
        train.max_minutes is not None and progress.elapsed >= 60.0 * train.max_minutes
    )


class Trainer:
    """One training run: holds the model, optimizer, data and progress between steps."""

    def __init__(
        self, config: Config, *, resume: bool, log=print, bundle: DataBundle | None = None, on_validation=None
    ) -> None:
        self.continued = continuation(config, resume)  # None for a run from scratch (`continued`)
        config = self.continued.config if self.continued else config
        self.config, self.log, self.on_validation = config, log, on_validation
        self.code = code_state()  # what trains from here on: each checkpoint records it
        device_name = choose_device(config.train.device)
        self.context = distributed.setup(device_name.split(":")[0])
        self.device = distributed.device_for(self.context, device_name)
        if config.train.threads:
            torch.set_num_threads(config.train.threads)
        seed_everything(config.train.seed)
        self.bundle = bundle if bundle is not None else self._prepared_data()
        self._check_ranks_agree_on_the_data()
        self.run_dir = _prepare_run_dir(config, self.bundle, resume, self.context.is_main)
        distributed.barrier(self.context)
        self.model = build_model(config.model, len(self.bundle.src_vocab), len(self.bundle.tgt_vocab)).to(self.device)
        self.optimizer = _optimizer(self.model, config)
        self.scaler = grad_scaler(self.device, config.train.precision)
        self.progress = Progress()
        if resume:
            checkpoint = resolve_checkpoint(self.run_dir, "last")
            self.progress = _restore(checkpoint, self.model, self.optimizer, self.scaler)
        notes = self.continued.prepare_model(self.model, self.run_dir, self.context.is_main) if self.continued else []
        self.metrics = MetricsLog(self.run_dir, self.progress.step if resume else None, self.context.is_main)
        self.ddp_model = distributed.wrap(self.model, self.context, self.device)
        self.bundle, self.sampler = training_batches(self.bundle, config, self.continued)
        alpha, rank, world_size = config.data.subword_sampling, self.context.rank, self.context.world_size
        on_gpu = self.device.type == "cuda"
        if alpha > 0 and world_size > 1:  # a rank would not know the others' sampled lengths
            raise UserError("data.subword_sampling is for one training process; run without torchrun")
        resegment = Resegmenter(self.bundle.codec, alpha, config.train.seed) if alpha > 0 else None
        self.batches = LocalBatches(
            self.sampler, self.bundle.train, rank=rank, world_size=world_size, resegment=resegment, on_gpu=on_gpu
        )
        self.display = ProgressDisplay(
            total_steps=config.train.max_steps, total_minutes=config.train.max_minutes, enabled=self.context.is_main
        )
        self._warn_about_left_out_pairs()
        for note in notes:
            self.say(note)
        if self.metrics.torn_line is not None:
            self.say(f"{self.metrics.path}:{self.metrics.torn_line}: dropped a torn last line (a write cut short)")

    def _prepared_data(self) -> DataBundle:
        """The training data, encoded once and memory-mapped (`prepare`): the first run on a
        corpus prepares it, later runs and resumes open it."""
        say = self.log if self.context.is_main else None
        return prepared_data(self.config.data, say=say, given=self.continued.given if self.continued else None)

    def _check_ranks_agree_on_the_data(self) -> None:
        """Every process must train on the same ids: machines that each prepared their own copy
        of the corpus could differ (another file, another tokenizer) and would then train on
        different vocabularies in silence."""
        if not self.context.active:
            return
        ours = fingerprint(self.bundle)
        (first,) = distributed.broadcast(self.context, [ours])
        if first != ours:
            raise UserError(
                f"rank {self.context.rank}: its training data differs from rank 0's (vocabularies or pair counts); "
                "every machine needs the same corpus files and data settings"
            )

    def _warn_about_left_out_pairs(self) -> None:
        dropped = self.bundle.splits.dropped_summary()
        if dropped:
            self.say(f"warning: {dropped}")
        over_budget = len(self.sampler.over_budget)
        if over_budget:
            self.say(
                f"warning: {over_budget:,} training pairs are longer on their own than data.batch_tokens "
                f"({self.config.data.batch_tokens:,} padded tokens) and are left out of every batch"
            )

    def say(self, message: str) -> None:
        """A line for the user: above the progress bar when there is one."""
        if self.context.is_main and not self.display.print(message):
            self.log(message)

    def save(self, score: float | None = None) -> Path | None:
        if not self.context.is_main:
            return None
        higher = self.config.train.early_stopping_metric == "bleu"
        meta = {"elapsed": self.progress.elapsed, "tokens": self.progress.tokens, "code": self.code}
        if self.continued is not None:
            meta["started_from"] = self.continued.record
        return save_checkpoint(
            self.run_dir,
            self.progress.step,
            self.model,
            _trainer_state(self.optimizer, self.scaler, self.progress),
            meta,
            score=score,
            higher_is_better=higher,
            keep=self.config.train.keep_checkpoints,
        )

    def train_step(self, indices: list[int], batch: Batch | None = None) -> torch.Tensor:
        """One optimizer step on a global batch (`batch`: this process's share, made ahead by
        `self.batches`; else made here); returns the loss as `train.loss_normalization` divides it (detached)."""
        train = self.config.train
        batch = batch or self.batches(indices)
        tgt_lengths = self.batches.target_lengths(indices, batch)
        batch = batch.to(self.device, non_blocking=True)
        global_tokens = int(tgt_lengths.sum()) + len(indices)  # +1 a pair: EOS
        ratio = teacher_forcing_ratio(
            self.progress.step,
            schedule=train.teacher_forcing_schedule,
            start=train.teacher_forcing,
            minimum=train.teacher_forcing_min,
            decay_steps=train.teacher_forcing_decay_steps,
        )
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.config.train, self.progress.step, self.progress.plateau_scale)
        with autocast(self.device, train.precision):
            logits, _ = self.ddp_model(batch.src, batch.src_lengths, batch.tgt_in, teacher_forcing_ratio=ratio)
        # Each process divides by the *global* token (or sentence) count and DDP averages over
        # processes, so the gradient is that of the global batch's mean, as in one process.
        loss = token_loss(logits, batch.tgt_out, train.label_smoothing, train.smooth_eos)
        weight = self.batches.weight(indices) * self.context.world_size
        loss = loss * weight / loss_denominator(tgt_lengths, train.loss_normalization)
        if distributed.any_flag(self.context, not bool(torch.isfinite(loss)), self.device):
            path = self.save()
            raise TrainingDiverged(
                f"step {self.progress.step + 1}: the loss is {float(loss.detach())}; stopped, last good state saved in "
                f"{path or self.run_dir}; try a lower train.lr or train.clip_grad_norm"
            )
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if train.clip_grad_norm:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), train.clip_grad_norm)
        self.scaler.step(self.optimizer)  # without fp16: optimizer.step(); with: skipped if a gradient overflowed
        self.scaler.update()
        self.progress.tokens += global_tokens
        return loss.detach()

    def skipped_steps(self) -> int:
        """Training steps whose update the fp16 scaler skipped (their gradients overflowed).

        Derived rather than counted: Adam counts the updates it made (a skipped one is undone or
        never made), so the difference needs no device sync at every step, only when logged.
        """
        updates = max((int(state["step"]) for state in self.optimizer.state.values() if "step" in state), default=0)
        return self.progress.step - updates

    def run(self) -> dict:
        """Train until a limit, early stopping or a signal; validate and checkpoint on the way.
        A write that fails (a full disk) stops the run with one error saying what is intact."""
        try:
            return self._train()
        except WriteFailed as error:
            last = read_index(self.run_dir).last
            resume = f"attnmt train --resume {shlex.quote(str(self.run_dir))}"
            intact = (
                f"the last complete checkpoint {last} is intact; free space and resume with: {resume}"
                if last
                else "no checkpoint is complete yet; free space and train again"
            )
            raise UserError(f"{error.failure}; {intact}") from None

    def _train(self) -> dict:
        train, progress = self.config.train, self.progress
        stream = self.batches.stream(progress.epoch, progress.position)
        started, elapsed_before = time.perf_counter(), progress.elapsed
        window = LogWindow(torch.zeros((), device=self.device), progress.tokens, started)
        last_validated = progress.step if progress.history else -1
        with StopSignal(train.stop_grace_seconds, what="training") as stop, closing(stream):
            while not _limit_reached(self.config, progress):
                (epoch, position, indices), batch = next(stream)
                if train.max_epochs is not None and epoch >= train.max_epochs:
                    break
                loss = self.train_step(indices, batch)
                progress.step += 1
                progress.epoch, progress.position = epoch, position + 1
                progress.elapsed = elapsed_before + time.perf_counter() - started
                self.display.update(step=progress.step, elapsed=progress.elapsed)
                window.loss += loss.float()
                window.steps += 1
                if progress.step % train.log_every == 0:
                    window = self._log(window)
                if progress.step % train.valid_every == 0:
                    last_validated = progress.step
                    if self._validate_and_save():
                        self.say(f"early stop at step {progress.step}: no improvement in {train.patience} validations")
                        break
                if distributed.any_flag(self.context, stop.received is not None, self.device):
                    path = self.save()
                    raise Interrupted(f"interrupted at step {progress.step}; resumable checkpoint: {path}")
        if last_validated != progress.step and progress.step > 0:
            self._validate_and_save()
        self.display.close()
        self.metrics.close()
        return {
            "run_dir": str(self.run_dir),
            "steps": progress.step,
            "best_score": progress.best_score,
            "elapsed": progress.elapsed,
            "tokens": progress.tokens,
        }

    def _log(self, window: LogWindow) -> LogWindow:
        """Write the window's log line (metrics.jsonl, the progress bar or the log); the next window."""
        now = time.perf_counter()
        tokens = self.progress.tokens - window.tokens
        record = {
            "step": self.progress.step,
            "epoch": self.progress.epoch,
            "train_loss": float(window.loss) / max(1, window.steps),
            "lr": self.optimizer.param_groups[0]["lr"],
            "tokens_per_s": tokens / max(1e-9, now - window.opened),
            "elapsed": self.progress.elapsed,
        }
        if self.scaler.is_enabled():
            record["skipped_steps"] = self.skipped_steps()
            record["loss_scale"] = self.scaler.get_scale()
        self.metrics.write(record)
        self.display.update(
            step=record["step"],
            elapsed=record["elapsed"],
            loss=record["train_loss"],
            speed=record["tokens_per_s"],
            lr=record["lr"],
        )
        if self.context.is_main and self.display.progress is None:
            self.log(
                f"step {record['step']:>6}  epoch {record['epoch']}  loss {record['train_loss']:.3f}  "
                f"lr {record['lr']:.2e}  {record['tokens_per_s']:,.0f} tok/s  {record['elapsed'] / 60:.1f} min"
                + (f"  fp16 steps skipped {record['skipped_steps']}" if "skipped_steps" in record else "")
            )
        return LogWindow(torch.zeros((), device=self.device), self.progress.tokens, now)

    def _validate_and_save(self) -> bool:
        """Validate (main process), checkpoint, update plateau/early-stop state; True = stop."""
        train, progress = self.config.train, self.progress
        stop = False
        if self.context.is_main:
            results = validate(self.model, self.bundle, self.config, self.device)
            score = results["valid_bleu"] if train.early_stopping_metric == "bleu" else results["valid_loss"]
            improved = _improved(score, progress, higher_is_better=train.early_stopping_metric == "bleu")
            progress.history.append(score)
            if improved:
                progress.best_score, progress.bad_validations = score, 0
            else:
                progress.bad_validations += 1
                if train.lr_schedule == "plateau" and progress.bad_validations % (train.plateau_patience + 1) == 0:
                    progress.plateau_scale *= train.plateau_factor
            self.metrics.write({"step": progress.step, **results, "best": progress.best_score})
            shown = ", ".join(f"{key} {value:.3f}" for key, value in results.items())
            self.say(f"validation at step {progress.step}: {shown}{'  (best)' if improved else ''}")
            self.save(score)
            if self.on_validation is not None:  # e.g. a sweep's pruner, which may raise to stop the run
                self.on_validation(progress.step, results)
            stop = train.patience is not None and progress.bad_validations >= train.patience
        # Every process must agree on what validation decided (lr scale, best score, stopping).
        shared = [progress.best_score, progress.bad_validations, progress.plateau_scale, progress.history, stop]
        progress.best_score, progress.bad_validations, progress.plateau_scale, progress.history, stop = (
            distributed.broadcast(self.context, shared)
        )
        return stop


def fit(
    config: Config,
    *,
    resume: bool = False,
    log=print,
    bundle: DataBundle | None = None,
    on_validation=None,
) -> dict:
    """Train a model as `config` says; with `resume`, continue the run in config.train.run_dir.

    `bundle`: data already built by `build_data(config.data)`, so that several runs on one
    corpus (a notebook, a comparison) read and tokenize it once; it must come from this
    config's data section; without it, the data is prepared once on disk and memory-mapped.
    `on_validation(step, results)` runs after each validation's checkpoint.
    """
    trainer = Trainer(config, resume=resume, log=log, bundle=bundle, on_validation=on_validation)
    try:
        return trainer.run()
    finally:
        trainer.display.close()
        distributed.teardown(trainer.context)
