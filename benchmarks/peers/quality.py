"""The peer benchmark's quality race, over every installed system: each system trained for the
same wall-clock budget, one at a time, once per seed; validation BLEU of every checkpoint
against the minutes it took, and test2016 and test2017 BLEU of the best one: greedy, with the
race's beam search, and with the beam search at its best (the length penalty chosen on valid),
with chrF and the length ratio; the systems of each seed are compared by a paired bootstrap
(`significance`). A system whose schedule is laid out over the race's updates has them measured
on the race's machine first (`schedule_for`).

Runs finished earlier (in the results file being extended, or in the work folder) are not
trained again, so an interrupted race resumes with the next run (an interrupted run starts
over: a budget of wall-clock time cannot be split across processes fairly). Each finished run
is handed to `on_run` at once, so the results file can be written after every run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from attnmt.pace import pace_probe
from attnmt.utils import atomic_path
from benchmarks.measure import describe_machine, provenance, spread
from benchmarks.peers.arithmetic import arithmetic
from benchmarks.peers.harness import ALPHAS, NEVER, Harness, training_speed, tune_length_penalty
from benchmarks.peers.significance import paired_bootstrap, sentence_stats
from benchmarks.peers.system import PeerError, PeerSystem

TESTS = ("test2016", "test2017")
TUNED = "_tuned"  # a test decode's key: beam5_tuned is beam 5 with the length penalty chosen on valid
COMPARED = ("greedy", "tuned")  # the searches the bootstrap compares: greedy, and each beam at its best


@dataclass(frozen=True)
class QualityOptions:
    minutes: float = 50.0
    save_every: int = 250
    seeds: tuple[int, ...] = (1,)
    alphas: tuple[float, ...] = ALPHAS


def quality(
    harness: Harness,
    options: QualityOptions,
    finished: dict | None = None,
    on_run: Callable[[dict], None] = lambda results: None,
) -> dict:
    """Every system once per seed (seed by seed, so a partial race holds every system), skipping
    the (system, seed) runs already in `finished` (a results dict of this mode); `on_run` gets the
    results after each new run."""
    systems: dict[str, dict] = {}
    for name, system in (finished or {}).items():
        systems[name] = {**system, "runs": list(system["runs"])}
    results = {"options": {**options.__dict__, "seeds": list(options.seeds), "alphas": list(options.alphas)}}
    results["systems"] = systems
    schedules = {name: system["schedule"] for name, system in systems.items() if "schedule" in system}
    for system in list(harness.systems):
        if system.schedule_updates is None:
            continue
        if system.name not in schedules:  # fitted once per race: every seed's schedule is the first one's
            try:
                schedules[system.name] = schedule_for(harness, system, options.minutes)
            except PeerError as error:
                harness.drop(system, error)
                continue
        system.fit_schedule(schedules[system.name]["updates"])
    for seed in options.seeds:
        for system in list(harness.systems):
            header = {"version": system.version, "architecture_notes": system.architecture_notes, "parameters": None}
            entry = systems.setdefault(system.name, {**header, "runs": []})
            if system.name in schedules:
                entry["schedule"] = schedules[system.name]
            entry["arithmetic"] = arithmetic(system, harness.setup)
            if any(run["seed"] == seed for run in entry["runs"]):
                harness.say(f"{system.name}: seed {seed} already raced; kept")
                continue
            folder = harness.work / "quality" / system.name / f"seed-{seed}"
            done = folder / "result.json"
            if harness.kept(system, done):
                harness.say(f"{system.name}: seed {seed} already trained for the budget; reusing {done}")
            else:
                try:
                    _train_for_budget(harness, system, folder, options, seed)
                except PeerError as error:
                    harness.drop(system, error)
                    continue
            run = json.loads(done.read_text(encoding="utf-8"))
            entry["parameters"] = run["parameters"]
            entry["runs"] = sorted([*entry["runs"], run], key=lambda r: r["seed"])
            entry["summary"] = _race_summary(entry["runs"])
            results["comparisons"] = _comparisons(systems)
            on_run(results)
    return results


SCHEDULE_PROBE_UPDATES = 200  # the untimed run that measures a system's pace on the race's machine
SCHEDULE_PROBE_WARMUP = 20  # its first updates, slower (allocations, caches), left out of the pace


def schedule_for(harness: Harness, system: PeerSystem, minutes: float) -> dict:
    """The updates `system` makes in a race of `minutes` on this machine, for its schedule to be
    laid out over: an untimed run of SCHEDULE_PROBE_UPDATES measures the time to the end of its
    warm-up (start-up included: data, vocabularies, model) and its seconds per update after it,
    and the rest of the minutes is filled at that pace. Batches are drawn in the race's order, so
    the pace is of the race's mix of lengths. Recorded with the measurements, so that a reader can
    check the fit and a resumed race lays every seed's schedule out over the same updates."""
    harness.say(f"{system.name}: measuring its pace for a {minutes:g}-minute schedule")
    folder = harness.work / "quality" / system.name / "schedule-probe"
    _, events = harness.train(system, folder, steps=SCHEDULE_PROBE_UPDATES, max_minutes=None, save_every=NEVER)
    shutil.rmtree(folder)  # its checkpoint is of no further use
    pace = schedule_pace(events.steps, events.started, SCHEDULE_PROBE_WARMUP)
    updates = SCHEDULE_PROBE_WARMUP + int((minutes * 60 - pace["warmup_seconds"]) / pace["seconds_per_update"])
    if updates < 10 * SCHEDULE_PROBE_WARMUP:
        raise PeerError(f"{system.name}: only {updates} updates fit {minutes:g} minutes; too few to lay a schedule out")
    return {"updates": updates, "probe": {**pace, "provenance": provenance()}}


def schedule_pace(steps: list[dict], started: float, warmup: int) -> dict:
    """Seconds from the run's start to the end of update `warmup`, and seconds per update after it."""
    after = training_speed(steps, warmup)  # the same updates the speed mode times
    return {
        "updates": len(steps),
        "warmup_updates": warmup,
        "warmup_seconds": steps[warmup - 1]["time"] - started,
        "seconds_per_update": after["seconds"] / after["steps"],
    }


def _comparisons(systems: dict[str, dict]) -> list[dict]:
    """The first system against each other one, seed by seed, on each test set: a paired bootstrap
    (`significance`) of greedy against greedy, and of each beam search at its best against the
    other's; runs without their sentences' statistics (earlier races) are left out."""
    names = list(systems)
    compared = []
    for other in names[1:]:
        runs = {name: {run["seed"]: run for run in systems[name]["runs"]} for name in (names[0], other)}
        for seed in sorted(set(runs[names[0]]) & set(runs[other])):
            for split in TESTS:
                for kind in COMPARED:
                    keys = [_search_key(runs[name][seed].get(split, {}), kind) for name in (names[0], other)]
                    if None in keys:
                        continue
                    rows = [runs[name][seed][split][key] for name, key in zip((names[0], other), keys, strict=True)]
                    found = paired_bootstrap(rows[0]["sentence_stats"], rows[1]["sentence_stats"])
                    compared.append(
                        {"systems": [names[0], other], "seed": seed, "split": split, "searches": keys, **found}
                    )
    return compared


def _search_key(decodes: dict[str, dict], kind: str) -> str | None:
    """The key of a run's test decode of `kind` (greedy, or the beam search tuned on valid) that
    kept its sentences' statistics; None if it has none."""
    for key, row in decodes.items():
        wanted = key == "beam1" if kind == "greedy" else key.endswith(TUNED)
        if wanted and "sentence_stats" in row:
            return key
    return None


def _race_summary(runs: list[dict]) -> dict:
    """Medians and ranges over the seeds: updates, best validation BLEU, and test BLEU of each
    search every run decoded each test set with."""
    summary = {
        "seeds": [run["seed"] for run in runs],
        "updates": spread([run["updates"] for run in runs]),
        "best_valid_bleu_tok_lc": spread([run["best"]["valid_bleu_tok_lc"] for run in runs]),
    }
    for split in TESTS:
        searches = [key for key in runs[0].get(split, {}) if all(key in run.get(split, {}) for run in runs)]
        if searches:
            summary[split] = {key: spread([run[split][key]["bleu_tok_lc"] for run in runs]) for key in searches}
    return summary


def _train_for_budget(harness: Harness, system: PeerSystem, folder: Path, options: QualityOptions, seed: int) -> None:
    harness.say(f"{system.name}: training for {options.minutes:g} minutes, seed {seed}")
    torch.set_num_threads(harness.setup.threads)  # the machine's pace in the threads the run trains in
    pace, started, at_start = pace_probe(), datetime.now(timezone.utc).isoformat(timespec="seconds"), provenance()
    finished, events = harness.train(
        system, folder, steps=None, max_minutes=options.minutes, save_every=options.save_every, seed=seed
    )
    scoring = folder / "scoring"
    curve = []
    for step, checkpoint in sorted(system.checkpoints(folder).items()):
        harness.say(f"{system.name}: validation BLEU of step {step}")
        scored = harness.translate(system, scoring / f"step-{step}", checkpoint, "valid", 1, focus=True)
        point = {"step": step, "minutes": events.minutes_at(step), "valid_bleu_tok_lc": scored["bleu_tok_lc"]}
        if "attention_focus" in scored:  # where the attention goes, at every checkpoint
            point["attention_focus"] = scored["attention_focus"]
        curve.append(point)
    best = max(curve, key=lambda point: point["valid_bleu_tok_lc"])
    decodes = _test_decodes(harness, system, scoring, system.checkpoints(folder)[best["step"]], options.alphas)
    result = {
        "seed": seed,
        "parameters": events.parameters,
        "updates": len(events.steps),
        "training_minutes": finished.seconds / 60,
        "peak_rss_mib": finished.peak_rss_mib,
        "target_tokens": sum(step["target_tokens"] for step in events.steps),
        "curve": curve,
        "best": best,
        **decodes,
        # a race may span sessions and commits: each run records what it ran on, when it started, and
        # the code and load average when its training started and when its scoring ended
        "machine": describe_machine(torch.device("cpu")),
        "pace": pace,
        "started": started,
        "provenance_at_start": at_start,
        "provenance": provenance(),
    }
    with atomic_path(folder / "result.json") as temporary:
        temporary.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def _test_decodes(harness: Harness, system: PeerSystem, scoring: Path, checkpoint: Path, alphas) -> dict:
    """The best checkpoint on each test set greedily (beam1), with the race's beam search (beam5)
    and, where the system's search takes a length penalty, with the one of `alphas` that scores
    best on valid (beam5_tuned; the tuning decodes are kept as `tuning`). Greedy and tuned decodes
    keep their sentences' statistics for the paired bootstrap."""
    beam = harness.setup.beam_size
    searches: dict[str, tuple[int, dict]] = {"beam1": (1, {}), f"beam{beam}": (beam, {})}
    found: dict = {}
    if system.tuning_search(0.0) is not None:

        def tuning_row(search: dict, scored: dict) -> dict:
            return {
                "alpha": search["alpha"],
                "bleu_tok_lc": scored["bleu_tok_lc"],
                "length_ratio": scored["length_ratio"],
            }

        found["tuning"], chosen = tune_length_penalty(
            harness, system, scoring / "tuning", checkpoint, alphas, tuning_row
        )
        searches[f"beam{beam}{TUNED}"] = (beam, system.tuning_search(chosen))
    for split in TESTS:
        found[split] = {}
        for name, (beam_size, search) in searches.items():
            harness.say(f"{system.name}: {split} with the best checkpoint, {name}")
            scored = harness.translate(system, scoring / "test", checkpoint, split, beam_size, search=search)
            keys = ("bleu_tok_lc", "chrf", "length_ratio", "brevity_penalty", "sentences_per_s")
            row = {**search, **{key: scored[key] for key in keys}}
            if name == "beam1" or name.endswith(TUNED):
                hypotheses = Path(scored["output"]).read_text(encoding="utf-8").splitlines()
                references = harness.setup.file(split, harness.setup.tgt_lang).read_text(encoding="utf-8")
                row["sentence_stats"] = sentence_stats(hypotheses, references.splitlines())
            found[split][name] = row
    return found
