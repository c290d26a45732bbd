"""A screen's trials grouped into points: seeds of one config together, each against the baseline,
and the length ratio on tokens reported only where every seed's evaluation recorded it."""

import json
from pathlib import Path

import pytest

from attnmt.utils import UserError
from tools.screen_results import collect, points, screen_table


def _trial(point: str, seed: int, bleu: float, ratio: float, tokenized: float | None) -> dict:
    valid_beam = {"bleu": bleu, "chrf": 50.0 + bleu, "length_ratio": ratio, "tokenized_bleu": bleu + 0.5}
    if tokenized is not None:
        valid_beam["tokenized_length_ratio"] = tokenized
    return {
        "state": "complete",
        "experiment": [point],
        "config": {"point": point},
        "seed": seed,
        "steps": 4600,
        "valid_beam": valid_beam,
        "validation": [{"step": 250 * (i + 1), "valid_bleu": bleu - 4 + i, "valid_loss": 4.0 - i} for i in range(4)],
    }


def test_seeds_of_one_config_are_one_point_measured_against_the_baseline():
    trials = [
        _trial("baseline", 1, 36.0, 1.02, 0.95),
        _trial("baseline", 2, 37.0, 1.00, 0.97),
        _trial("variant", 1, 38.0, 1.01, 0.99),
        _trial("variant", 2, 38.5, 1.03, 1.01),
    ]
    rows = points(trials)
    assert [row["point"] for row in rows] == ["variant", "baseline"]
    variant, baseline = rows
    assert variant["seeds"] == [1, 2] and variant["delta_bleu"] == 38.25 - 36.5
    assert baseline["valid_beam_tokenized_length_ratio"]["values"] == [0.95, 0.97]
    assert baseline["valid_beam_tokenized_bleu"]["values"] == [36.5, 37.5]
    table = screen_table(rows)
    assert "length ratio, tokens" in table[0]
    assert "| 0.960 (0.950-0.970) |" in table[3]
    # validations at 250-1,000: the second half is 750 and 1,000, one and zero below the beam's BLEU
    assert baseline["valid_greedy_bleu_last"]["values"] == [36.0 - 1, 37.0 - 1]
    assert baseline["valid_greedy_bleu_second_half"]["values"] == [36.0 - 1.5, 37.0 - 1.5]
    assert baseline["valid_loss_second_half"]["values"] == [1.5, 1.5]
    assert "valid_greedy_tokenized_bleu_second_half" not in baseline  # validated before it was recorded
    assert table[0].endswith("| greedy valid BLEU, second half's mean |") and table[3].endswith(
        "| 35.00 (34.50-35.50) |"
    )


def test_a_word_models_second_half_is_also_read_on_word_tokens():
    trial = _trial("baseline", 1, 36.0, 1.02, 0.95)
    for row in trial["validation"]:
        row["valid_tokenized_bleu"] = row["valid_bleu"] + 2
    (row,) = points([trial])
    assert row["valid_greedy_tokenized_bleu_second_half"]["values"] == [36.0 - 1.5 + 2]


def test_a_screen_written_before_the_second_half_mean_renders_without_its_column():
    (row,) = points([_trial("baseline", 1, 36.0, 1.02, 0.95)])
    del row["valid_greedy_bleu_second_half"]
    assert "second half" not in screen_table([row])[0]


def test_the_tokenized_ratio_is_left_out_where_a_seed_lacks_it():
    trials = [_trial("baseline", 1, 36.0, 1.02, 0.95), _trial("baseline", 2, 37.0, 1.00, None)]
    (row,) = points(trials)
    assert "valid_beam_tokenized_length_ratio" not in row
    assert "tokens" not in screen_table([row])[0]


def test_an_earlier_raw_result_is_grouped_again_from_its_own_trials(tmp_path):
    kept = [
        _trial("baseline", 1, 36.0, 1.02, 0.95) | {"study": "a"},
        _trial("variant", 1, 37.0, 1.0, 0.9) | {"study": "a"},
    ]
    earlier = tmp_path / "a.json"
    earlier.write_text(
        json.dumps({"points": [], "trials": [*kept, _trial("other", 1, 1.0, 1.0, 1.0) | {"study": "b"}]})
    )
    assert collect([earlier], ["a"]) == kept  # the other study's trial stays out
    with pytest.raises(UserError, match=r"no report of study 'c' in .*a\.json"):
        collect([earlier], ["c"])
    (tmp_path / "notes.json").write_text("[]")
    with pytest.raises(UserError, match=r"notes\.json: not a screen's raw result"):
        collect([tmp_path / "notes.json"], ["a"])


def test_a_trial_not_finished_or_dropped_from_its_study_before_it_finished_is_left_out(tmp_path):
    sweep = tmp_path / "runs" / "sweeps" / "s"
    (sweep / "trials" / "kept").mkdir(parents=True)
    (sweep / "trials" / "kept" / "config.yaml").write_text(
        (Path(__file__).parents[1] / "configs" / "multi30k-en-de-race.yaml").read_text()
    )
    (sweep / "report").mkdir()
    report = [{"name": "kept", "state": "complete", "run_dir": "trials/kept", "experiment": ["baseline"]}]
    report.append({"name": "dropped", "state": "waiting", "run_dir": "trials/dropped", "experiment": ["other"]})
    report.append({"name": "kept", "state": "running", "run_dir": "trials/kept", "experiment": ["seed 2"]})
    (sweep / "report" / "trials.json").write_text(json.dumps({"trials": report}))
    (trial,) = collect([tmp_path / "runs"], ["s"])
    assert trial["name"] == "kept" and trial["seed"] == 1 and trial["valid_beam"] is None
    report[1]["state"] = "complete"  # a finished trial whose folder is gone is an error, not a gap
    (sweep / "report" / "trials.json").write_text(json.dumps({"trials": report}))
    with pytest.raises(UserError, match=r"dropped/config\.yaml"):
        collect([tmp_path / "runs"], ["s"])
