"""Schedules are pure functions of the step with the documented shapes."""

import itertools
import math

import pytest

from attnmt.schedules import lr_multiplier, teacher_forcing_ratio


def test_warmup_is_linear_then_constant():
    values = [lr_multiplier(step, schedule="constant", warmup_steps=4) for step in range(6)]
    assert values == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_inverse_sqrt_decays_after_warmup():
    assert lr_multiplier(99, schedule="inverse_sqrt", warmup_steps=100) == 1.0
    assert lr_multiplier(399, schedule="inverse_sqrt", warmup_steps=100) == pytest.approx(0.5)


def test_cosine_reaches_the_floor_at_the_last_step():
    kwargs = {"schedule": "cosine", "warmup_steps": 10, "total_steps": 110, "min_ratio": 0.1}
    assert lr_multiplier(9, **kwargs) == pytest.approx(1.0)
    assert lr_multiplier(59, **kwargs) == pytest.approx(0.55)
    assert lr_multiplier(109, **kwargs) == pytest.approx(0.1)
    assert lr_multiplier(500, **kwargs) == pytest.approx(0.1)
    values = [lr_multiplier(step, **kwargs) for step in range(10, 110)]
    assert all(a >= b for a, b in itertools.pairwise(values))
    with pytest.raises(ValueError, match="max_steps"):
        lr_multiplier(5, schedule="cosine")


@pytest.mark.parametrize("schedule", ["linear", "inverse_sigmoid"])
def test_teacher_forcing_decays_from_start_to_minimum(schedule):
    ratios = [
        teacher_forcing_ratio(step, schedule=schedule, start=1.0, minimum=0.2, decay_steps=1000)
        for step in range(0, 5000, 50)
    ]
    assert all(a >= b for a, b in itertools.pairwise(ratios))
    assert ratios[0] == pytest.approx(1.0, abs=0.02) and ratios[-1] == pytest.approx(0.2, abs=0.01)
    halfway = teacher_forcing_ratio(500, schedule=schedule, start=1.0, minimum=0.2, decay_steps=1000)
    assert halfway == pytest.approx(0.6, abs=0.01)  # both are halfway at decay_steps / 2


def test_constant_teacher_forcing():
    assert teacher_forcing_ratio(10**6, schedule="constant", start=0.5, minimum=0.0, decay_steps=1) == 0.5
    assert math.isfinite(teacher_forcing_ratio(10**9, schedule="inverse_sigmoid", start=1, minimum=0, decay_steps=10))
