"""The domain adaptation study: its arms are valid continued runs, its marks the right checkpoints,
and its targets read off the scores as the study states them."""

import json
import subprocess
from pathlib import Path

import pytest

from attnmt.config import load_config
from attnmt.continued import Start, check_compatible
from attnmt.utils import UserError
from benchmarks import adaptation, adaptation_report


def _arm_config(arm: str, tmp_path: Path):
    settings = adaptation.arm_settings(tmp_path, arm, seed=2, steps=1000, threads=1)
    return load_config(adaptation.NEW_DOMAIN, settings)


def _start_config(name: str, tmp_path: Path):
    command = adaptation.start_command(tmp_path, name)
    settings = [command[i + 1] for i, item in enumerate(command) if item == "--set"]
    return load_config(adaptation.OLD_DOMAIN, settings)


@pytest.mark.parametrize("arm", [name for name, spec in adaptation.ARMS.items() if spec.start])
def test_every_continued_arm_keeps_the_settings_its_starting_model_was_trained_with(arm, tmp_path):
    config = _arm_config(arm, tmp_path)
    name = adaptation.ARMS[arm].start
    start = _start_config(name, tmp_path)
    check_compatible(config, Start(tmp_path / name, tmp_path, None, "", start))  # raises on a contradiction
    assert config.train.init_from == str(tmp_path / name)
    assert config.train.lr_schedule == "constant" and config.train.max_steps == 1000 and config.train.seed == 2
    assert config.data.corpus == "multi30k" and start.data.corpus == "tatoeba-eng-fra"
    assert config.train.extend_vocab == (arm == "extended")
    assert config.data.mix_previous == (adaptation.MIX if arm == "mixed" else 0.0)


def test_a_continued_arm_whose_tokenizer_differs_from_its_start_is_refused(tmp_path):
    config = _arm_config("continued", tmp_path)
    start = _start_config("start-word", tmp_path)
    with pytest.raises(UserError, match=r"data\.tokenizer"):
        check_compatible(config, Start(tmp_path, tmp_path, None, "", start))


def test_the_scratch_arm_is_the_new_domains_own_config_at_a_constant_rate(tmp_path):
    config, recommended = _arm_config("scratch", tmp_path), load_config(adaptation.NEW_DOMAIN)
    assert config.train.init_from is None and config.train.max_minutes is None
    assert config.data == recommended.data and config.model == recommended.model
    assert config.train.lr == recommended.train.lr and config.train.warmup_steps == recommended.train.warmup_steps


@pytest.mark.parametrize("rate", [97.3, 141.0, 160.0, 212.6])
def test_marks_are_kept_checkpoints_nearest_their_minutes_within_the_run(rate):
    budget = adaptation.budget_steps(rate)
    assert budget % adaptation.CHECK == 0 and rate * 40 <= budget < rate * 40 + adaptation.CHECK
    for minutes in adaptation.MINUTES:
        step = adaptation.mark_step(rate, minutes)
        assert step % adaptation.CHECK == 0 and adaptation.CHECK <= step <= budget
        assert abs(step - rate * minutes) <= adaptation.CHECK / 2


def _results(scores: dict[str, list[tuple[float, float]]], start: tuple[float, float]) -> dict:
    """Results with, per arm, one (Multi30k, Tatoeba) BLEU pair per seed at every mark."""

    def scored(new: float, old: float) -> dict:
        return {"multi30k-test2016": {"tokenized_bleu": new}, "tatoeba-test": {"tokenized_bleu": old}}

    started = {"run": "runs/start-sp", "weights_sha256": "ab" * 32}
    runs = [
        {
            "seed": seed,
            "arm": arm,
            "started_from": None if arm == "scratch" else started,
            "marks": [{"minutes": m, "step": 100 * m, "scores": scored(new + m / 10, old)} for m in adaptation.MINUTES],
        }
        for arm, pairs in scores.items()
        for seed, (new, old) in enumerate(pairs, start=1)
    ]
    other = {"name": "start-sp", "step": 2500, "weights_sha256": "cd" * 32, "scores": scored(0.0, 0.0)}
    starts = [other, {"name": "start-sp", "step": 2500, **started, "scores": scored(*start)}]
    settings = {
        "minutes": list(adaptation.MINUTES),
        "arms": {name: {} for name in adaptation.ARMS},
    }  # as `score` writes
    return {"settings": settings, "starts": starts, "runs": runs}


def test_the_targets_hold_only_when_every_continued_seed_beats_the_better_scratch_seed():
    results = _results({"scratch": [(30.0, 5.0), (31.0, 5.0)], "continued": [(31.5, 20.0), (33.0, 21.0)]}, (10, 40))
    assert adaptation_report.summary(results)["targets"]["continued"] == {
        "margin_over_best_scratch_up_to_20_min": pytest.approx(0.5),
        "holds": True,
    }
    results = _results({"scratch": [(30.0, 5.0), (31.0, 5.0)], "continued": [(30.5, 20.0), (33.0, 21.0)]}, (10, 40))
    assert adaptation_report.summary(results)["targets"]["continued"]["holds"] is False


def test_mixing_keeps_the_old_domain_within_two_bleu_of_the_start_at_every_mark():
    results = _results({"scratch": [(30.0, 5.0)], "mixed": [(32.0, 38.5), (32.0, 38.0)]}, (10, 40))
    kept = adaptation_report.summary(results)["targets"]["mixed_old_domain"]
    assert kept == {"largest_drop": pytest.approx(2.0), "holds": True}  # from the start the runs name
    results = _results({"scratch": [(30.0, 5.0)], "mixed": [(32.0, 38.5), (32.0, 37.9)]}, (10, 40))
    assert adaptation_report.summary(results)["targets"]["mixed_old_domain"]["holds"] is False


def test_the_table_has_the_start_at_minute_zero_and_each_arm_at_every_mark_and_the_plot_is_written(tmp_path):
    results = _results({"scratch": [(30.0, 5.0), (31.0, 6.0)], "continued": [(32.0, 20.0)]}, (10.0, 40.0))
    header, lines = adaptation_report.adaptation_rows(results)
    assert header[-2:] == ["Multi30k test2016", "Tatoeba test"]
    assert lines[1][:2] == ["start-sp (Tatoeba, weights abababab)", "0"] and lines[1][-2:] == ["10.00", "40.00"]
    assert [line[:2] for line in lines[2:]] == [
        [arm, str(m)] for arm in ("scratch", "continued") for m in (5, 10, 20, 40)
    ]
    assert lines[2][-2:] == ["31.00 (30.50-31.50)", "5.50 (5.00-6.00)"]
    png = adaptation_report.plot(json.loads(json.dumps(results)), tmp_path / "adaptation.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(adaptation_report.TITLES) == list(adaptation.TEST_SETS)  # the report names each test set scored


def test_score_reads_finished_runs_at_their_marks_keeps_what_was_scored_and_each_start_once(tmp_path, monkeypatch):
    rate = {"scratch": 50.0, "continued": 40.0}
    for arm, last in (("scratch", 2000), ("continued", 1600), ("mixed", 2000)):  # mixed: no rate, not read
        for step in range(adaptation.CHECK, last + 1, adaptation.CHECK):
            (tmp_path / "seed-1" / arm / "checkpoints" / f"step-{step:07d}").mkdir(parents=True)
    (tmp_path / "seed-2" / "scratch" / "checkpoints" / "step-0000200").mkdir(parents=True)  # short of its budget
    started = {"run": str(tmp_path / "start-sp"), "checkpoint": "step-0002500", "weights_sha256": "ab" * 32}
    (tmp_path / "seed-1" / "continued" / adaptation.RECORD).write_text(json.dumps(started))
    (tmp_path / "start-sp" / "checkpoints").mkdir(parents=True)
    scored = []
    monkeypatch.setattr(adaptation, "_scores", lambda checkpoint, data_dir, cache: scored.append(checkpoint) or {})
    start = Start(tmp_path / "start-sp", tmp_path / "step-0002500", 2500, "ab" * 32, load_config(None))
    monkeypatch.setattr(adaptation, "find_start", lambda path: start)
    results = adaptation.score(tmp_path, rate, None, None, lambda line: None)
    assert [(run["seed"], run["arm"]) for run in results["runs"]] == [(1, "continued"), (1, "scratch")]
    continued, scratch = results["runs"]
    assert [mark["step"] for mark in scratch["marks"]] == [200, 400, 1000, 2000]
    assert [mark["step"] for mark in continued["marks"]] == [200, 400, 800, 1600]
    assert continued["started_from"] == started and scratch["started_from"] is None
    assert [entry["weights_sha256"] for entry in results["starts"]] == ["ab" * 32]
    assert len(scored) == 9  # eight marks and the start
    again = adaptation.score(tmp_path, rate, json.loads(json.dumps(results)), None, lambda line: None)
    assert len(scored) == 9 and again["runs"] == results["runs"] and again["starts"] == results["starts"]


def test_train_finishes_the_starting_model_before_an_arm_and_resumes_a_run_cut_short(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(adaptation, "_attnmt", lambda arguments, log: commands.append(arguments))
    (tmp_path / "start-sp" / "checkpoints" / "step-0001000").mkdir(parents=True)  # stopped short of START_STEPS
    adaptation.train(tmp_path, 1, "continued", None, lambda line: None)
    assert commands[0] == ["attnmt", "train", "--resume", str(tmp_path / "start-sp")]
    assert f"train.init_from={tmp_path / 'start-sp'}" in commands[1]
    assert f"train.max_steps={adaptation.DEFAULT_STEPS}" in commands[1]
    commands.clear()
    (tmp_path / "start-sp" / "checkpoints" / f"step-{adaptation.START_STEPS:07d}").mkdir()
    (tmp_path / "seed-1" / "continued" / "checkpoints" / "step-0000400").mkdir(parents=True)
    rates = tmp_path / "rates.json"
    rates.write_text(json.dumps({"probes": {"continued": {"updates_per_minute": 100.0}}}))
    adaptation.train(tmp_path, 1, "continued", rates, lambda line: None)
    resumed = ["attnmt", "train", "--resume", str(tmp_path / "seed-1" / "continued"), "--set", "train.max_steps=4000"]
    assert commands == [resumed]


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "rates.json"
    assert adaptation.main(["score", str(tmp_path), "--rates", str(missing), "--json", str(tmp_path / "r.json")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: {missing}: no probe result (python -m benchmarks.adaptation probe WORK --json FILE)"
    )
    assert adaptation.main(["plot", str(tmp_path / "none.json"), "--png", str(tmp_path / "a.png")]) == 2
    assert capsys.readouterr().err.startswith("error: ")

    def fails(arguments, log):
        raise subprocess.CalledProcessError(1, ["attnmt", "train", "--resume"])

    monkeypatch.setattr(adaptation, "_attnmt", fails)
    assert adaptation.main(["train", str(tmp_path), "--seed", "1", "--arm", "scratch"]) == 2
    assert "attnmt train --resume ... exited with 1" in capsys.readouterr().err
