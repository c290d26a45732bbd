"""Schedules as pure functions of the step: learning rate and teacher-forcing ratio.

Pure functions make resuming trivial (the step is all the state they need) and make the
curves easy to test and plot. Reduce-on-plateau is the exception: it reacts to validation
scores, so the trainer keeps one float, the plateau scale, in its saved progress and multiplies
the scheduled rate by it.
"""

from __future__ import annotations

import math

from attnmt.config import TrainConfig


def lr_multiplier(
    step: int, *, schedule: str, warmup_steps: int = 0, total_steps: int | None = None, min_ratio: float = 0.0
) -> float:
    """Factor applied to the base learning rate before optimizer step `step` (0-based).

    constant (and plateau, whose decay is applied elsewhere): linear warmup, then 1.
    inverse_sqrt: linear warmup to 1 at `warmup_steps`, then sqrt(warmup_steps / step) (Vaswani et al.).
    cosine: linear warmup, then half a cosine from 1 down to `min_ratio` at `total_steps`.
    """
    position = step + 1
    if warmup_steps and position < warmup_steps:
        return position / warmup_steps
    if schedule in ("constant", "plateau"):
        return 1.0
    if schedule == "inverse_sqrt":
        return math.sqrt(max(1, warmup_steps) / max(position, max(1, warmup_steps)))
    if schedule == "cosine":
        if total_steps is None:
            raise ValueError("the cosine schedule needs train.max_steps")
        progress = min(1.0, (position - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown learning-rate schedule {schedule!r}")


def teacher_forcing_ratio(step: int, *, schedule: str, start: float, minimum: float, decay_steps: int) -> float:
    """Probability of feeding the gold previous token at training step `step`.

    constant: `start` throughout.
    linear: from `start` down to `minimum` over `decay_steps`, then `minimum`.
    inverse_sigmoid: k / (k + exp(step / k)) scaled into [minimum, start], with k chosen so the
    ratio is halfway at `decay_steps` / 2 (Bengio et al. 2015, scheduled sampling).
    """
    if schedule == "constant":
        return start
    if schedule == "linear":
        fraction = min(1.0, step / decay_steps)
        return start - (start - minimum) * fraction
    if schedule == "inverse_sigmoid":
        k = _inverse_sigmoid_k(decay_steps)
        value = k / (k + math.exp(min(step / k, 700.0)))
        return minimum + (start - minimum) * value
    raise ValueError(f"unknown teacher-forcing schedule {schedule!r}")


def _inverse_sigmoid_k(decay_steps: int) -> float:
    """k with k / (k + exp(h / k)) = 1/2 at h = decay_steps / 2, i.e. k = exp(h / k): solved by iteration."""
    half = decay_steps / 2
    k = max(1.0, half / 5)
    for _ in range(100):
        k = half / math.log(k) if k > 1.0 else k + 1.0
    return k


def learning_rate(train: TrainConfig, step: int, plateau_scale: float = 1.0) -> float:
    """The rate of optimizer step `step` under the config's train section: its peak `lr` times
    the schedule's multiplier and the plateau scale, never below `min_lr`."""
    multiplier = lr_multiplier(
        step,
        schedule=train.lr_schedule,
        warmup_steps=train.warmup_steps,
        total_steps=train.max_steps,
        min_ratio=train.min_lr / train.lr,
    )
    return max(train.min_lr, train.lr * multiplier * plateau_scale)
