"""Sweeps: grids and searches over configs in an Optuna study, resumable, shared by workers.

Every trial is a tiny model on the synthetic reversal task (20 steps, a second or two).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
import yaml

from attnmt import train
from attnmt.cli import main
from attnmt.config import TrainConfig
from attnmt.runlog import read_metrics
from attnmt.sweep.report import _raw_results, collect, end_train_loss, report
from attnmt.sweep.run import run_sweep
from attnmt.sweep.spec import SET_BY_SWEEP, flatten, load_plan
from attnmt.sweep.store import Store, default_url
from attnmt.utils import UserError
from tests.run_helpers import is_score

BASE = {
    "data": {
        "corpus": "reverse",
        "synthetic_size": 400,
        "synthetic_max_len": 8,
        "valid_size": 30,
        "test_size": 30,
        "batch_tokens": 300,
    },
    "model": {"embedding_size": 16, "encoder_hidden": 16, "decoder_hidden": 32, "attention": "dot"},
    "train": {"device": "cpu", "lr": 0.003, "max_steps": 20, "valid_every": 10, "log_every": 5},
    "decode": {"beam_size": 2},
}
GRID_2X2 = {"grid": {"model.attention": ["dot", "none"], "train.lr": [0.003, 0.01]}}


def write_sweep(tmp_path: Path, experiments: dict, name: str = "sweep", **settings) -> Path:
    # the pace probe times an 11M-parameter model for seconds: one test below runs it
    spec = {
        "output_dir": str(tmp_path / name),
        "base": BASE,
        "pace_probe": False,
        **settings,
        "experiments": experiments,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def trials(spec: Path, study: str | None = None) -> list[optuna.trial.FrozenTrial]:
    plan = load_plan(spec)
    return Store(default_url(plan.sweep_dir)).load(study or plan.name).get_trials()


def quiet(message: str) -> None:
    pass


@pytest.fixture(scope="module")
def grid_2x2(tmp_path_factory) -> tuple[Path, dict]:
    """A 2x2 grid run once; the tests below read what it left."""
    tmp_path = tmp_path_factory.mktemp("grid")
    spec = write_sweep(tmp_path, {"grid": GRID_2X2})
    return spec, run_sweep(spec, threads=1, say=quiet)


def test_a_2x2_grid_runs_to_completion_with_sqlite(grid_2x2):
    spec, counts = grid_2x2
    assert counts == {"complete": 4}
    done = trials(spec)
    assert {(t.user_attrs["config"]["model.attention"], t.user_attrs["config"]["train.lr"]) for t in done} == {
        ("dot", 0.003),
        ("dot", 0.01),
        ("none", 0.003),
        ("none", 0.01),
    }
    sweep_dir = load_plan(spec).sweep_dir
    assert (sweep_dir / "study.db").is_file()
    for trial in done:
        attrs = trial.user_attrs
        assert trial.value == attrs["valid_bleu"] == max(trial.intermediate_values.values())
        assert is_score(attrs["test_bleu"]) and attrs["test_sentences"] == 30 and attrs["test_beam"] == 2
        assert attrs["parameters"] > 0 and attrs["tokens_per_s"] > 0 and attrs["steps"] == 20
        assert attrs["valid_loss"] > 0 and attrs["train_seconds"] > 0
        assert attrs["machine"]["cpu"] and attrs["machine"]["threads"] == 1 and attrs["command"] is None
        # the code that trained it, when the trial started and when it ended (a checkout: a commit)
        assert attrs["code_at_start"]["commit"] and attrs["code_at_end"]["commit"]
        run_dir = sweep_dir / attrs["run_dir"]
        assert (run_dir / "config.yaml").is_file() and (run_dir / "checkpoints" / "index.json").is_file()
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["train"]["threads"] == 1


def test_a_trial_records_the_pace_probe_taken_before_it_trained(tmp_path):
    """Each trial's minutes stand beside its machine's pace (attnmt.pace), taken in its threads;
    without the probe the trial says so (None), never a number it did not measure."""
    spec = write_sweep(tmp_path, {"one": {"grid": {"train.lr": [0.01]}}}, pace_probe=True)
    assert run_sweep(spec, threads=1, say=quiet) == {"complete": 1}
    (trial,) = trials(spec)
    pace = trial.user_attrs["pace"]
    assert pace["threads"] == 1 and pace["cpu"] == trial.user_attrs["machine"]["cpu"]
    assert 0 < pace["min"] <= pace["seconds_per_update"] <= pace["max"] and pace["updates"] >= 1
    plan = load_plan(spec)
    assert collect(Store(default_url(plan.sweep_dir)), plan.name, plan.layout)[0]["pace"] == pace  # the report's row


def test_the_raw_results_of_trials_on_machines_that_differ_name_each_difference():
    """A study whose seeds ran on two processors keeps one machine record listing both, not none."""
    intel = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "threads": 1}
    amd = intel | {"cpu": "AMD EPYC"}
    rows = [{"name": name, "metrics": [], "config": {}, "machine": m} for name, m in (("a", intel), ("b", amd))]
    assert _raw_results("s", rows, None)["machine"] == {"cpu": [intel["cpu"], "AMD EPYC"], "cores": 2, "threads": 1}
    assert _raw_results("s", rows[:1], None)["machine"] == intel


def test_rerunning_a_finished_sweep_trains_nothing(grid_2x2):
    spec, _ = grid_2x2
    said = []
    assert run_sweep(spec, threads=1, say=said.append) == {"complete": 4}
    assert said == [] and len(trials(spec)) == 4


STUDIES = sorted((Path(__file__).parent.parent / "studies").glob("*.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=[p.name for p in STUDIES])
def test_every_shipped_study_validates(path):
    """A study's trials stop at a step count, so its results do not depend on the machine's
    speed, unless the study names `train.max_minutes` among its overrides: a screen that judges a
    recipe on its time budget says so where it is read."""
    plan = load_plan(path)
    timed = "train.max_minutes" in (yaml.safe_load(path.read_text(encoding="utf-8")).get("overrides") or {})
    assert plan.grid and (timed or all(trial.config.train.max_minutes is None for trial in plan.grid))


def test_a_point_shared_by_experiments_is_one_trial(tmp_path):
    spec = write_sweep(
        tmp_path,
        {
            "attention": {"grid": {"model.attention": ["dot", "none"]}, "seeds": [1, 2]},
            "lr": {"grid": {"train.lr": [0.003, 0.01]}},
            "hidden": {"points": [{"label": "small", "model.decoder_hidden": 16}, {"model.decoder_hidden": 32}]},
        },
    )
    plan = load_plan(spec)
    # attention x seeds = 4 configs; lr and hidden add one each: their other point is the base
    assert len(plan.grid) == 6
    [base] = [trial for trial in plan.grid if len(trial.members) > 1]
    assert base.members == [("attention", 0), ("lr", 0), ("hidden", 1)]
    assert base.config.model.attention == "dot" and base.config.train.seed == 1
    hidden = plan.layout["experiments"]["hidden"]["points"]
    assert [point["label"] for point in hidden] == ["small", "decoder_hidden=32"]


def test_a_setting_added_later_keeps_the_keys_of_trials_that_leave_it_as_before(tmp_path):
    """A sweep begun before `data.fixed_batches` existed hashed configs without it: those trials,
    at its earlier behaviour, keep their keys, and a trial that sets it is another trial."""
    plan = load_plan(write_sweep(tmp_path, {"batches": {"grid": {"data.fixed_batches": [False, True]}}}))
    as_before, fixed = (next(t for t in plan.grid if t.config.data.fixed_batches is v) for v in (False, True))
    earlier = {k: v for k, v in flatten(as_before.config).items() if k not in (*SET_BY_SWEEP, "data.fixed_batches")}
    assert as_before.key == hashlib.sha1(json.dumps(earlier, sort_keys=True).encode()).hexdigest()[:12]
    assert fixed.key != as_before.key


def test_the_report_tables_and_plots_come_from_the_stored_study(grid_2x2, tmp_path, capsys, monkeypatch):
    spec, _ = grid_2x2
    out = report(str(load_plan(spec).sweep_dir), output_dir=str(tmp_path / "report"))
    stored = {t.user_attrs["name"]: t.user_attrs for t in trials(spec)}
    with (out / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["name"] for row in rows} == set(stored)
    for row in rows:
        attrs = stored[row["name"]]
        assert row["state"] == "complete" and row["model.attention"] == attrs["config"]["model.attention"]
        assert float(row["test_bleu"]) == pytest.approx(attrs["test_bleu"])
        assert float(row["valid_bleu"]) == pytest.approx(attrs["valid_bleu"])
        assert int(row["parameters"]) == attrs["parameters"]
    markdown = (out / "trials.md").read_text()
    assert all(f"| {name} |" in markdown for name in stored) and "## grid" in markdown
    # Per point (one seed each here): the training loss at the end is the mean of the last five
    # logged windows, and the convergence table lists validation BLEU at steps 10 and 20.
    summary, by_step = markdown.split("## grid")[1].split("Validation BLEU by step")
    assert "| point | 10 | 20 |" in by_step
    for attrs in stored.values():
        records = read_metrics(load_plan(spec).sweep_dir / attrs["run_dir"])
        losses = [r["train_loss"] for r in records if "train_loss" in r]
        assert len(losses) == 4 and f"| {sum(losses) / 4:.2f} |" in summary
        valid = [f"{r['valid_bleu']:.2f}" for r in records if "valid_bleu" in r]
        assert len(valid) == 2 and f"| {valid[0]} | {valid[1]} |" in by_step.split("Test BLEU by source length")[0]
    # Test BLEU by source length: one row per point, its buckets' scores as stored with the trial.
    by_length = markdown.split("Test BLEU by source length")[1]
    for attrs in stored.values():
        scores = " | ".join(f"{score:.2f}" for _, _, score in attrs["test_by_length"])
        assert f" | {scores} |" in by_length
    assert (out / "length.csv").read_text().count("\n") == 1 + sum(len(a["test_by_length"]) for a in stored.values())
    for plot in ("curves-grid", "bleu-grid-attention", "bleu-grid-lr", "length-grid"):
        assert (out / f"{plot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", plot
    monkeypatch.setenv("COLUMNS", "250")  # rich folds cells to the terminal's width
    assert main(["sweep", "report", str(spec), "--output-dir", str(tmp_path / "cli")]) == 0
    shown = capsys.readouterr().out
    assert "valid BLEU" in shown and all(name in shown for name in stored)
    # The raw results: each trial's figures and validation curve, the command and the machine.
    raw = json.loads((tmp_path / "cli" / "trials.json").read_text())
    assert raw["command"] == f"attnmt sweep report {spec} --output-dir {tmp_path / 'cli'}"
    assert raw["machine"]["cpu"] and {trial["name"] for trial in raw["trials"]} == set(stored)
    for trial in raw["trials"]:
        records = read_metrics(load_plan(spec).sweep_dir / trial["run_dir"])
        keys = ("step", "valid_loss", "valid_bleu", "valid_length_ratio", "valid_tokenized_bleu")
        keys += ("valid_tokenized_length_ratio",)
        assert trial["validation"] == [{key: r[key] for key in keys} for r in records if "valid_loss" in r]
        assert trial["test_bleu"] == pytest.approx(stored[trial["name"]]["test_bleu"])


def test_the_training_loss_at_the_end_is_the_mean_of_the_last_five_windows():
    records = [{"step": 5 * i, "train_loss": float(i)} for i in range(1, 8)] + [{"step": 35, "valid_bleu": 1.0}]
    assert end_train_loss(records) == pytest.approx((3 + 4 + 5 + 6 + 7) / 5)
    assert end_train_loss([{"step": 10, "valid_bleu": 2.0}]) is None


class Killed(BaseException):
    """What SIGKILL does to a worker: nothing after it runs, no handler, no bookkeeping."""


def test_a_trial_left_running_by_a_killed_worker_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    spec = write_sweep(tmp_path, {"one": {"grid": {"model.attention": ["dot"]}}})
    real_fit = train.fit

    def fit_killed_after_step_10(config, **kwargs):
        def hook(step, results):
            kwargs["on_validation"](step, results)
            if step == 10:
                raise Killed

        return real_fit(config, **{**kwargs, "on_validation": hook})

    monkeypatch.setattr(train, "fit", fit_killed_after_step_10)
    with pytest.raises(Killed):
        run_sweep(spec, threads=1, say=quiet)
    [left] = trials(spec)
    assert left.state.name == "RUNNING" and left.user_attrs["pid"] == os.getpid()
    monkeypatch.setattr(train, "fit", real_fit)
    said = []
    assert run_sweep(spec, threads=1, say=said.append) == {"complete": 1}
    first, retry = trials(spec)
    assert first.state.name == "FAIL" and first.user_attrs["interrupted"]
    assert retry.state.name == "COMPLETE" and retry.user_attrs["retry_of"] == 0 and retry.user_attrs["attempt"] == 1
    assert said[0].endswith("resuming")
    run_dir = load_plan(spec).sweep_dir / retry.user_attrs["run_dir"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "valid_bleu" in r] == [10, 20]
    assert [r["step"] for r in records if "train_loss" in r] == [5, 10, 15, 20]


def sweep_process(spec: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    command = [sys.executable, "-m", "attnmt", "sweep", str(spec), "--threads", "1", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_killing_the_sweep_and_rerunning_completes_only_the_missing_trials(tmp_path):
    spec = write_sweep(tmp_path, {"grid": GRID_2X2})
    process = sweep_process(spec)
    deadline = time.time() + 120
    finished: list = []
    while not finished and time.time() < deadline and process.poll() is None:
        time.sleep(0.2)
        with contextlib.suppress(UserError):  # no database or study yet
            finished = [t for t in trials(spec) if t.state.name == "COMPLETE"]
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert finished, "no trial finished before the deadline"
    before = {t.number: t.user_attrs["key"] for t in trials(spec) if t.state.name == "COMPLETE"}
    assert 1 <= len(before) < 4
    said = []
    assert run_sweep(spec, threads=1, say=said.append) == {"complete": 4}
    after = [t for t in trials(spec) if t.state.name == "COMPLETE"]
    assert len({t.user_attrs["key"] for t in after}) == 4 == len(after)  # every config once
    assert {t.number: t.user_attrs["key"] for t in after if t.number in before} == before  # kept, not rerun
    assert len([line for line in said if line.endswith(("started", "resuming"))]) == 4 - len(before)


def test_a_trial_whose_worker_died_between_claiming_and_owning_it_is_retired(tmp_path):
    """SIGKILL can land after a claim made a trial RUNNING and before the worker wrote its pid
    there: the next claim (under the same SQLite lock) retires it and runs its retry."""
    store = Store(default_url(tmp_path))
    study = store.study("orphans", direction="maximize")
    orphan = study.ask()  # RUNNING with no owner, as the killed worker left it
    retry = store.claim_search(study, n_trials=1)
    left = store.storage.get_trial(store.trial_id(study, orphan.number))
    assert left.state.name == "FAIL" and left.user_attrs["interrupted"]
    assert retry is not None and retry.number != orphan.number
    assert store.storage.get_trial(store.trial_id(study, retry.number)).user_attrs["retry_of"] == orphan.number


def test_two_workers_share_one_sqlite_study_without_duplicating_a_trial(tmp_path):
    spec = write_sweep(tmp_path, {"grid": {"grid": {"model.attention": ["dot", "none"], "train.seed": [1, 2, 3]}}})
    process = sweep_process(spec, "--workers", "2")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    done = trials(spec)
    assert [t.state.name for t in done] == ["COMPLETE"] * 6
    assert len({t.user_attrs["key"] for t in done}) == 6
    assert len({t.user_attrs["pid"] for t in done}) == 2, out  # both workers took trials
    assert out.count("[0] trial") + out.count("[1] trial") == 12  # each trial started and finished once


@pytest.fixture(scope="module")
def postgresql_url(tmp_path_factory) -> Iterator[str]:
    """A real PostgreSQL server for this module (pgserver ships its binaries; no root setup)."""
    try:
        import pgserver
        import psycopg  # noqa: F401  (SQLAlchemy's default PostgreSQL driver)
    except ImportError as missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL sweep test: {missing} (pip install -e '.[dev]')")
        pytest.skip(f"no PostgreSQL to test against: {missing}; pip install -e '.[dev]' installs pgserver")
    server = pgserver.get_server(tmp_path_factory.mktemp("postgresql"), cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()


def running_trial_with_checkpoint(store: Store, study: str, sweep_dir: Path, step: int, pid: int):
    """A RUNNING trial of the worker `pid` whose run has saved its checkpoint at `step`, or None."""
    try:
        trials = store.load(study).get_trials()
    except UserError:  # the study does not exist yet
        return None
    running = [t for t in trials if t.state.name == "RUNNING" and t.user_attrs.get("pid") == pid]
    for trial in running:
        index = sweep_dir / trial.user_attrs["run_dir"] / "checkpoints" / "index.json"
        with contextlib.suppress(OSError, ValueError):
            if json.loads(index.read_text())["last"] == f"step-{step:07d}":
                return trial
    return None


def kill_if_still_running(store: Store, study: str, trial):
    """SIGKILL the worker of `trial` if the trial is still running once the worker is frozen, or None.

    A trial of the tiny test model finishes within milliseconds of its step-10 checkpoint, so the
    worker is stopped first and the trial's state read again: a kill must land mid-trial, never on
    the next trial the worker has already moved on to. `kill` returns before the worker has
    stopped, and a commit it sent just before may still be applied by the database server, so the
    state is read only once the worker is stopped and such a commit has had time to land.
    """
    import psutil  # installed with pgserver

    pid = trial.user_attrs["pid"]
    os.kill(pid, signal.SIGSTOP)
    deadline = time.time() + 10
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    [now] = [t for t in store.load(study).get_trials() if t.number == trial.number]
    if now.state.name == "RUNNING":
        os.kill(pid, signal.SIGKILL)
        return trial
    os.kill(pid, signal.SIGCONT)
    return None


def kill_the_second_worker_mid_trial(tmp_path: Path, grid: dict, name: str, url: str):
    """Run a two-worker sweep on `url`, SIGKILL the second worker once a trial of it has saved its
    step-10 checkpoint, and let the first finish the sweep: (plan, killed trial, stdout), or None
    when the kill turned out to land after the trial's last commit.

    Whether it did is known only afterwards: a commit the worker sent just before it was stopped
    may reach the database server later than any wait the test could choose (a loaded machine),
    and then the killed trial is COMPLETE and nothing was left to retry.
    """
    import psutil  # installed with pgserver

    spec = write_sweep(tmp_path, {"grid": grid}, name=name)
    plan, store = load_plan(spec), Store(url)
    process = sweep_process(spec, "--workers", "2", "--storage", url)
    # The second worker: the sweep's main process joins its workers in order, so this one, once
    # killed, stays an unreaped zombie while the first works on; the first must still take over.
    killed, deadline = None, time.time() + 180
    while killed is None and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
        children = psutil.Process(process.pid).children()
        workers = sorted(
            (c for c in children if "resource_tracker" not in " ".join(c.cmdline())), key=lambda c: c.create_time()
        )
        if len(workers) == 2:
            found = running_trial_with_checkpoint(store, plan.name, plan.sweep_dir, step=10, pid=workers[1].pid)
            if found is not None:
                killed = kill_if_still_running(store, plan.name, found)
    assert killed is not None, process.communicate()[1][-2000:]
    out, err = process.communicate(timeout=300)
    assert "ended with exit code -9" in err, err
    [after] = [t for t in store.load(plan.name).get_trials() if t.number == killed.number]
    if after.state.name == "COMPLETE":
        return None
    assert after.state.name == "FAIL" and after.user_attrs["interrupted"], after
    return plan, killed, out


def test_two_workers_on_postgresql_survive_a_killed_worker_and_match_sqlite(tmp_path, postgresql_url):
    grid = {"grid": {"model.attention": ["dot", "none"], "train.seed": [1, 2, 3]}}
    for attempt in range(3):
        if scenario := kill_the_second_worker_mid_trial(tmp_path, grid, f"postgresql{attempt}", postgresql_url):
            break
    assert scenario is not None, "three kills in a row landed after the trial's last commit"
    plan, killed, out = scenario
    states = Store(postgresql_url).load(plan.name).get_trials()
    done = [t for t in states if t.state.name == "COMPLETE"]
    assert len(done) == 6 and len({t.user_attrs["key"] for t in done}) == 6  # each grid point once
    # The killed config is finished by its retry, or by a copy of it that was already waiting:
    # without a claim lock (PostgreSQL) both workers may enqueue every config at the start, and a
    # later copy is dropped as a duplicate when claimed unless its earlier twin was retired first;
    # then the copy stands in and the retry is the duplicate. Either resumes the killed run.
    [finished] = [t for t in done if t.user_attrs["key"] == killed.user_attrs["key"]]
    assert finished.number > killed.number and "resuming" in out
    records = read_metrics(plan.sweep_dir / finished.user_attrs["run_dir"])
    assert [r["step"] for r in records if "valid_bleu" in r] == [10, 20]  # resumed at 10, not retrained
    sqlite_spec = write_sweep(tmp_path, {"grid": grid}, name="sqlite")
    assert run_sweep(sqlite_spec, threads=1, say=quiet) == {"complete": 6}
    on_sqlite = {t.user_attrs["key"]: t for t in trials(sqlite_spec)}
    for trial in done:
        twin = on_sqlite[trial.user_attrs["key"]]
        assert trial.value == twin.value, trial.user_attrs["key"]
        for name in ("valid_loss", "test_bleu", "steps"):
            assert trial.user_attrs[name] == twin.user_attrs[name], (trial.user_attrs["key"], name)


CLAIMER = """
import sys, time
from attnmt.sweep.store import Store
from optuna.trial import TrialState
store = Store(sys.argv[1])
study = store.study("race", direction="maximize")
wanted = {f"k{i}": {"key": f"k{i}"} for i in range(24)}
while (trial := store.claim_grid(study, wanted)) is not None:
    print(trial.user_attrs["key"], flush=True)
    store.finish(study, trial.number, TrialState.COMPLETE, {}, 1.0)
"""


def test_concurrent_claims_never_hand_out_a_trial_twice(tmp_path):
    url = default_url(tmp_path)
    Store(url).study("race", direction="maximize")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    claimers = [
        subprocess.Popen([sys.executable, "-c", CLAIMER, url], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    claimed = [line for claimer in claimers for line in claimer.communicate(timeout=120)[0].split()]
    assert [claimer.returncode for claimer in claimers] == [0, 0, 0]
    assert sorted(claimed) == sorted(f"k{i}" for i in range(24))
    study = optuna.load_study(study_name="race", storage=url)
    assert len(study.get_trials()) == 24


def test_a_failing_trial_is_marked_failed_and_the_sweep_goes_on(tmp_path):
    # a learning rate of 1e30 overflows the weights at the first step: that trial diverges, everywhere
    spec = write_sweep(tmp_path, {"lr": {"grid": {"train.lr": [1.0e30, 0.003]}}})
    said = []
    assert run_sweep(spec, threads=1, say=said.append) == {"fail": 1, "complete": 1}
    failed, done = trials(spec)
    assert failed.state.name == "FAIL" and "step 2: the loss is" in failed.user_attrs["error"]
    assert (load_plan(spec).sweep_dir / failed.user_attrs["run_dir"] / "error.txt").is_file()
    assert done.state.name == "COMPLETE"
    assert any("failed: step 2: the loss is" in line for line in said)
    assert run_sweep(spec, threads=1, say=quiet) == {"fail": 1, "complete": 1}  # not retried unless asked
    assert len(trials(spec)) == 2
    # --retry-failed: one more attempt per failed config in this run (it fails again, and stops)
    assert run_sweep(spec, threads=1, say=quiet, retry_failed=True) == {"fail": 1, "complete": 1}
    assert [t.state.name for t in trials(spec)] == ["FAIL", "COMPLETE", "FAIL"]


def test_a_search_runs_its_trials_with_pruning(tmp_path):
    search = {
        "n_trials": 4,
        "sampler": "random",
        "startup_trials": 1,
        "params": {
            "train.lr": {"type": "float", "low": 1.0e-3, "high": 3.0e-2, "log": True},
            "model.attention": {"type": "categorical", "choices": ["dot", "general"]},
        },
    }
    spec = write_sweep(tmp_path, {"lr": {"search": search}})
    counts = run_sweep(spec, threads=1, say=quiet)
    assert sum(counts.values()) == 4 and set(counts) <= {"complete", "pruned"}
    found = trials(spec, "sweep:lr")
    assert len(found) == 4
    for trial in found:
        assert 1.0e-3 <= trial.params["train.lr"] <= 3.0e-2
        assert trial.user_attrs["config"]["train.lr"] == trial.params["train.lr"]
    out = report(str(spec))
    assert (out / "bleu-lr-lr.png").is_file() and (out / "curves-lr.png").is_file()


def errors(capsys, *args: str) -> list[str]:
    code = main(["sweep", *args])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "Traceback" not in stderr
    return stderr.splitlines()


def test_an_unknown_axis_is_rejected_before_any_trial_naming_the_axis(tmp_path, capsys):
    spec = write_sweep(tmp_path, {"lr": {"grid": {"train.lrr": [0.1]}}, "x": {"points": [{"modle.rnn": "gru"}]}})
    lines = errors(capsys, str(spec))
    assert lines == [
        f"attnmt: error: {spec}: experiments.lr.grid: train.lrr: unknown config key (did you mean 'train.lr'?); "
        "valid keys of train: " + ", ".join(TrainConfig.model_fields),
        f"attnmt: error: {spec}: experiments.x.points[0]: modle.rnn: unknown section 'modle' (did you mean "
        "'model'?); valid sections: data, model, train, decode",
    ]
    assert not (tmp_path / "sweep").exists()


def test_an_invalid_axis_value_is_rejected_before_any_trial(tmp_path, capsys):
    spec = write_sweep(tmp_path, {"lr": {"grid": {"train.lr": [0.01, -1], "model.rnn": ["gru", "rnn"]}}})
    lines = errors(capsys, str(spec))
    assert lines == [  # each bad value once, at the first point that has it
        f"attnmt: error: {spec}: experiments.lr (lr=0.01, rnn=rnn): model.rnn: Input should be 'gru' or 'lstm' "
        "(got 'rnn')",
        f"attnmt: error: {spec}: experiments.lr (lr=-1, rnn=gru): train.lr: Input should be greater than 0 (got -1)",
    ]
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:////nonexistent/folder/study.db", "cannot open the study database (No such file or directory)"),
        ("not a url", "not a database URL"),
        ("postgresql://someone:secret@127.0.0.1:9/sweeps", None),
    ],
)
def test_an_unreachable_database_is_one_clear_error(tmp_path, capsys, url, expected):
    spec = write_sweep(tmp_path, {"grid": GRID_2X2})
    [line] = errors(capsys, str(spec), "--storage", url)
    assert line.startswith("attnmt: error: --storage: ")
    assert "secret" not in line
    if expected:
        assert expected in line
    else:  # no driver installed, or the connection is refused: either way one line naming the URL
        assert "postgresql://someone:***@127.0.0.1:9/sweeps" in line


def test_a_sweep_file_with_mistakes_reports_them_all(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("experiments:\n  a:\n    grid: {train.lr: []}\n    serach: {}\nmetric: bleu\n")
    lines = errors(capsys, str(path))
    assert any("experiments.a.serach: unknown key" in line for line in lines)
    assert any("metric: Input should be 'valid_bleu' or 'valid_loss'" in line for line in lines)
