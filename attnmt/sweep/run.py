"""`attnmt sweep SWEEP.yaml`: run a sweep's trials (see `spec`) in one or N worker processes.

A trial is an ordinary run directory, SWEEP_DIR/trials/NAME, trained by `train.fit` and then
scored on the test split by `evaluation.evaluate` from its best checkpoint, with the trial
config's decode settings (beam search) unless the sweep sets test_beam_size: so
`attnmt evaluate SWEEP_DIR/trials/NAME` prints the same test BLEU. Everything the report needs
is stored in the trial's user attributes in the Optuna study (see `store`): the resolved
config, best validation BLEU, lowest validation loss, test BLEU/chrF and BLEU by source length,
training time, tokens/s, parameter count and the run directory.

Rerunning a sweep skips finished trials and resumes interrupted ones from their checkpoints.
A trial that fails (NaN loss, an exception) is stored as FAIL with its error, and the sweep goes
on; --retry-failed runs failed trials again. This module's top level stays light (no torch or
optuna): its workers import what a trial needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from attnmt.config import Config
from attnmt.config_files import ConfigError
from attnmt.provenance import code_state
from attnmt.sweep.spec import SET_BY_SWEEP, Plan, SearchParam, config_key, describe, flatten, load_plan
from attnmt.utils import Interrupted, UserError, choose_device, describe_machine, write_text_atomic


def run_sweep(
    path: str | Path,
    *,
    workers: int = 1,
    threads: int | None = None,
    storage: str | None = None,
    data_dir: str | None = None,
    retry_failed: bool = False,
    say: Callable[[str], None] | None = None,
    command: str | None = None,
) -> dict[str, int]:
    """Run (or resume) every trial of the sweep file; returns trial counts by state. `command`,
    the command line that ran it, is stored with each trial it completes, with the machine."""
    from attnmt.sweep.store import Store, default_url

    plan = load_plan(path)  # every trial config is validated before the database is touched
    url = storage or default_url(plan.sweep_dir)
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    store = Store(url)
    _prepare(plan, store)
    options = {
        "url": url,
        "threads": threads or max(1, _cores() // workers),
        "data_dir": data_dir,
        "command": command,
        # Optuna stamps trials with the local time; failures before this moment are retried.
        "retry_before": datetime.now() if retry_failed else None,
    }
    if workers == 1:
        Worker(plan, store, 0, options, say or _printer(sys.stdout, "")).work()
    else:
        _spawn(plan, options, workers)
    return _counts(plan, store)


def _cores() -> int:
    """CPU cores this process may use (a container's share, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _direction(plan: Plan) -> Literal["maximize", "minimize"]:
    return "maximize" if plan.spec.metric == "valid_bleu" else "minimize"


def _prepare(plan: Plan, store) -> None:
    from attnmt.sweep.store import shown_url

    """Create the studies, store the sweep's layout, keep a copy of the sweep beside the trials."""
    study = store.study(plan.study_name(), direction=_direction(plan))
    study.set_user_attr("layout", plan.layout)
    for name in plan.searches:
        store.study(plan.study_name(name), direction=_direction(plan))
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(plan.sweep_dir / "sweep.yaml", plan.path.read_text(encoding="utf-8"))
    write_text_atomic(plan.sweep_dir / "base.yaml", plan.base.to_yaml())
    # What `attnmt sweep report SWEEP_DIR` needs to find the study (no password: give --storage).
    write_text_atomic(plan.sweep_dir / "study.json", json.dumps({"name": plan.name, "storage": shown_url(store.url)}))


def _counts(plan: Plan, store) -> dict[str, int]:
    """Configs by the state of the trial that stands for each (as the report counts them)."""
    from attnmt.sweep.report import collect

    layout = store.load(plan.study_name()).user_attrs["layout"]
    return dict(Counter(row["state"] for row in collect(store, plan.name, layout)))


def _printer(stream, prefix: str) -> Callable[[str], None]:
    return lambda message: print(f"{prefix}{message}", file=stream, flush=True)


# --- workers ------------------------------------------------------------------------------


def _spawn(plan: Plan, options: dict, workers: int) -> None:
    """N processes (spawned: no forked torch state), each claiming trials until none is left.
    SIGINT/SIGTERM are passed on; each worker checkpoints its trial and stops."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_worker_main, args=(plan, options, i), daemon=False) for i in range(workers)]
    received: list[int] = []

    def forward(number, frame) -> None:
        received.append(number)
        for process in processes:
            if process.is_alive():
                assert process.pid is not None  # a started process has its pid
                os.kill(process.pid, number)

    previous = {number: signal.signal(number, forward) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        raise Interrupted("sweep interrupted; run the same command again to resume it")
    for index, process in enumerate(processes):
        if process.exitcode != 0:
            print(f"attnmt: warning: worker {index} ended with exit code {process.exitcode}", file=sys.stderr)


def _worker_main(plan: Plan, options: dict, index: int) -> None:
    from attnmt.sweep.store import Store

    # SIGTERM outside training (which checkpoints on it) stops the worker like Ctrl-C: its trial is
    # retired for a retry instead of being left RUNNING until someone notices the pid is gone.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        Worker(plan, Store(options["url"]), index, options, _printer(sys.stdout, f"[{index}] ")).work()
    except (Interrupted, KeyboardInterrupt):
        sys.exit(130)
    except UserError as error:
        print(f"attnmt: error: [worker {index}] {error}", file=sys.stderr)
        sys.exit(2)


def _attrs(config: Config, run_dir: str, experiments: list[str]) -> dict:
    """What a trial stores up front: its identity, folder and resolved config."""
    flat = {k: v for k, v in flatten(config).items() if k not in SET_BY_SWEEP}
    where = {"key": config_key(config), "name": Path(run_dir).name, "run_dir": run_dir}
    return {**where, "config": flat, "experiment": experiments}


class Worker:
    """One process's loop: claim a trial, train and test it, store the results; repeat."""

    def __init__(self, plan: Plan, store, index: int, options: dict, say: Callable[[str], None]) -> None:
        self.plan, self.store, self.index, self.options, self.say = plan, store, index, options, say
        self.bundles: dict[str, object] = {}  # by data config: a corpus is read and encoded once

    def work(self) -> None:
        """The grid first, then each search, until nothing is left to claim."""
        study = self.store.study(self.plan.study_name(), direction=_direction(self.plan))
        wanted = {
            t.key: _attrs(t.config, f"trials/{t.name}", sorted({e for e, _ in t.members})) for t in self.plan.grid
        }
        configs = {trial.key: trial.config for trial in self.plan.grid}
        retry = self.options["retry_before"]
        while (trial := self.store.claim_grid(study, wanted, retry_before=retry)) is not None:
            self.run_trial(study, trial, configs[trial.user_attrs["key"]], trial.user_attrs["run_dir"])
        for name, search in self.plan.searches.items():
            study = self._search_study(name)
            while (trial := self.store.claim_search(study, search.n_trials, retry_before=retry)) is not None:
                params = {key: _suggest(trial, key, param) for key, param in search.params.items()}
                run_dir = trial.user_attrs.get("run_dir", f"trials/{name}-{trial.number:03d}")
                try:
                    config = self.plan.trial_config(name, params, describe(params))
                except ConfigError as error:  # a sampled combination that breaks a cross-field rule
                    self.store.finish(study, trial.number, _state("FAIL"), {"error": str(error), "run_dir": run_dir})
                    continue
                for key, value in _attrs(config, run_dir, [name]).items():
                    trial.set_user_attr(key, value)
                self.run_trial(study, trial, config, run_dir, prune=search.prune)

    def _search_study(self, name: str):
        import optuna

        search = self.plan.searches[name]
        seed = search.seed + self.index  # workers must not propose the same random start points
        sampler: optuna.samplers.BaseSampler
        if search.sampler == "tpe":
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=search.startup_trials)
        else:
            sampler = optuna.samplers.RandomSampler(seed=seed)
        pruner = optuna.pruners.MedianPruner(n_startup_trials=search.startup_trials, n_warmup_steps=search.warmup_steps)
        return self.store.study(
            self.plan.study_name(name),
            direction=_direction(self.plan),
            sampler=sampler,
            pruner=pruner if search.prune else optuna.pruners.NopPruner(),
        )

    def run_trial(self, study, trial, config: Config, run_dir: str, prune: bool = False) -> None:
        import optuna

        from attnmt.checkpoint import read_index
        from attnmt.train import fit

        path, metric, name = self.plan.sweep_dir / run_dir, self.plan.spec.metric, Path(run_dir).name
        config = config.model_copy(deep=True).with_data_dir(self.options["data_dir"])
        config.train.run_dir, config.train.threads = str(path), self.options["threads"]
        try:
            bundle = self._bundle(config)
        except UserError:  # the data is missing or broken: every trial would fail the same way
            self.store.retire(study, trial.number, "its data could not be read")
            raise
        started, code_at_start = time.time(), code_state()
        # in the trial's threads, before it trains: the minutes it reports are read beside this pace
        pace = _pace(config) if self.plan.spec.pace_probe else None

        def report(step: int, results: dict) -> None:
            if metric in results:
                trial.report(results[metric], step)
                if prune and trial.should_prune():
                    raise optuna.TrialPruned(f"pruned at step {step}")

        try:
            resume = read_index(path).last is not None
            self.say(f"trial {name}: {'resuming' if resume else 'started'}")
            with self.store.heartbeat(self.store.trial_id(study, trial.number)), _trial_log(path) as log:
                summary = fit(config, resume=resume, log=log, bundle=bundle, on_validation=report)
                results = _training_results(path, summary)
                results.update(_test_results(path, config, bundle, self.plan))
        except optuna.TrialPruned as pruned:
            results = {**_training_results(path, None), "error": str(pruned)}
            self.store.finish(study, trial.number, _state("PRUNED"), results, results.get(metric))
            self.say(f"trial {name}: {pruned}")
            return
        except (Interrupted, KeyboardInterrupt):
            self.store.retire(study, trial.number, "stopped by a signal; it resumes from its last checkpoint")
            raise
        except Exception as exc:  # the sweep goes on: the error is stored with the trial
            error = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(OSError):
                write_text_atomic(path / "error.txt", traceback.format_exc())
            self.store.finish(study, trial.number, _state("FAIL"), {"error": error[:2000]})
            self.say(f"trial {name}: failed: {(error or type(exc).__name__).splitlines()[0]}")
            return
        results["wall_seconds"] = time.time() - started
        # A trial's figures say how they were made: trials of one study may run on many machines.
        results.update(
            command=self.options["command"],
            machine=describe_machine(choose_device(config.train.device)),
            pace=pace,
            code_at_start=code_at_start,
            code_at_end=code_state(),
        )
        if results.get(metric) is None:
            self.store.finish(study, trial.number, _state("FAIL"), {**results, "error": f"no {metric} was logged"})
        elif self.store.finish(study, trial.number, _state("COMPLETE"), results, results[metric]):
            self.say(
                f"trial {name}: valid BLEU {results['valid_bleu']:.2f}, test BLEU {results['test_bleu']:.2f}, "
                f"{results['train_seconds'] / 60:.1f} min"
            )

    def _bundle(self, config: Config):
        from attnmt.data.batching import build_data

        key = config.data.model_dump_json()
        if key not in self.bundles:
            self.bundles.clear()  # keep one corpus in memory
            self.bundles[key] = build_data(config.data)
        return self.bundles[key]


def _pace(config: Config) -> dict:
    """The pace probe in the threads the trial trains in (its training sets the same count)."""
    import torch

    from attnmt.pace import pace_probe

    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    return pace_probe()


def _state(name: str):
    from optuna.trial import TrialState

    return TrialState[name]


def _suggest(trial, key: str, param: SearchParam):
    if param.type == "categorical":
        return trial.suggest_categorical(key, param.choices)
    assert param.low is not None and param.high is not None  # SearchParam requires both of int and float parameters
    if param.type == "int":
        return trial.suggest_int(key, int(param.low), int(param.high), step=int(param.step or 1), log=param.log)
    return trial.suggest_float(key, param.low, param.high, step=param.step, log=param.log)


@contextlib.contextmanager
def _trial_log(run_dir: Path) -> Iterator[Callable[[str], None]]:
    """Training output goes to RUN_DIR/train.log: N workers' progress bars would garble a terminal."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "train.log").open("a", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
        yield lambda message: print(message, file=handle, flush=True)


def _training_results(path: Path, summary: dict | None) -> dict:
    """Best validation BLEU and lowest loss from metrics.jsonl (complete across resumes)."""
    from attnmt.runlog import read_metrics

    records = read_metrics(path) if (path / "metrics.jsonl").exists() else []
    bleus = [r["valid_bleu"] for r in records if r.get("valid_bleu") is not None]
    losses = [r["valid_loss"] for r in records if r.get("valid_loss") is not None]
    results = {"valid_bleu": max(bleus, default=None), "valid_loss": min(losses, default=None)}
    results["validations"] = len(losses)
    if summary is not None:
        results.update(
            steps=summary["steps"],
            train_seconds=summary["elapsed"],
            tokens_per_s=summary["tokens"] / max(summary["elapsed"], 1e-9),
        )
    return results


def _test_results(path: Path, config: Config, bundle, plan: Plan) -> dict:
    """sacreBLEU on the test split from the best checkpoint (see the module docstring)."""
    from attnmt.evaluation import evaluate
    from attnmt.loading import ModelSpec, load
    from attnmt.metrics import DEFAULT_LENGTH_BUCKETS

    translator = load(ModelSpec((str(path),), device=config.train.device))
    beam = plan.spec.test_beam_size or config.decode.beam_size
    buckets = plan.spec.length_buckets or DEFAULT_LENGTH_BUCKETS
    evaluation = evaluate(
        translator, bundle.test.examples, translator.search_options(beam_size=beam), length_buckets=buckets
    )
    return {
        "test_bleu": evaluation.bleu.score,
        "test_chrf": evaluation.chrf.score,
        "test_length_ratio": evaluation.bleu.length_ratio,
        "test_bleu_signature": evaluation.bleu.signature,
        "test_beam": beam,
        "test_sentences": len(evaluation.hypotheses),
        "test_by_length": [[b.label, b.sentences, b.bleu] for b in evaluation.by_length],
        "parameters": translator.parameters,
    }
