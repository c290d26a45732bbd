"""The peer benchmark's stopping measurement: each system whose adapter takes search options
(attnmt, OpenNMT-py), trained for a number of updates (untimed, once per seed), its best
checkpoint by greedy validation BLEU (as in the race) decoded on valid and test2016 greedily
and with the beam under each of its stopping rules and length penalties
(`PeerSystem.stopping_searches`), one of them chosen on valid: how its output length and BLEU
depend on the search, every system scored by the one metric of the harness.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import torch

from attnmt.utils import atomic_path
from benchmarks.measure import describe_machine, provenance
from benchmarks.peers.harness import ALPHAS, Harness, tune_length_penalty
from benchmarks.peers.system import PeerError, PeerSystem


@dataclass(frozen=True)
class StoppingOptions:
    updates: int = 4600  # what attnmt's model of the race trains (configs/multi30k-en-de-race.yaml)
    save_every: int = 500  # as that config validates
    seeds: tuple[int, ...] = (1,)
    alphas: tuple[float, ...] = ALPHAS


def stopping(harness: Harness, options: StoppingOptions, on_run: Callable[[dict], None] = lambda results: None) -> dict:
    """Every system once per seed (module docstring); `on_run` gets the results after each run.
    A trained model in the work folder is reused, so a rerun only decodes."""
    systems: dict[str, dict] = {}
    results = {"options": {**options.__dict__, "seeds": list(options.seeds), "alphas": list(options.alphas)}}
    for seed in options.seeds:
        for system in list(harness.systems):
            if system.tuning_search(0.0) is None:
                why = "its adapter takes no search options: it ranks hypotheses one way only"
                harness.drop(system, PeerError(f"{system.name}: {why}"))
                continue
            entry = systems.setdefault(
                system.name, {"version": system.version, "architecture_notes": system.architecture_notes, "runs": []}
            )
            try:
                entry["runs"].append(_stopping_run(harness, system, options, seed))
            except PeerError as error:
                harness.drop(system, error)
                continue
            on_run({**results, "systems": systems})
    return {**results, "systems": systems}


def _stopping_run(harness: Harness, system: PeerSystem, options: StoppingOptions, seed: int) -> dict:
    folder = harness.work / "stopping" / system.name / f"seed-{seed}"
    trained = folder / "trained.json"
    if not harness.kept(system, trained):
        harness.say(f"{system.name}: training {options.updates} updates, seed {seed} (untimed)")
        started, at_start = datetime.now(timezone.utc).isoformat(timespec="seconds"), provenance()
        finished, events = harness.train(
            system, folder, steps=options.updates, max_minutes=None, save_every=options.save_every, seed=seed
        )
        record = {
            "parameters": events.parameters,
            "updates": len(events.steps),
            "training_minutes": finished.seconds / 60,
            "started": started,
            "provenance_at_start": at_start,
        }
        with atomic_path(trained) as temporary:
            temporary.write_text(json.dumps(record) + "\n", encoding="utf-8")
    run = {"seed": seed, **json.loads(trained.read_text(encoding="utf-8"))}
    scoring, checkpoints = folder / "scoring", system.checkpoints(folder)
    curve = []
    for step, checkpoint in checkpoints.items():
        harness.say(f"{system.name}: validation BLEU of step {step}")
        scored = harness.translate(system, scoring / f"step-{step}", checkpoint, "valid", 1)
        curve.append({"step": step, "valid_bleu_tok_lc": scored["bleu_tok_lc"]})
    best = max(curve, key=lambda point: point["valid_bleu_tok_lc"])
    checkpoint, beam = checkpoints[best["step"]], harness.setup.beam_size

    def row(name: str, split: str, beam_size: int, search: dict, scored: dict) -> dict:
        keys = ("bleu_tok_lc", "chrf", "length_ratio", "brevity_penalty", "sentences_per_s")
        return {"search": name, "split": split, "beam_size": beam_size, **search, **{k: scored[k] for k in keys}}

    def decode(name: str, split: str, beam_size: int, search: dict) -> dict:
        harness.say(f"{system.name}: {split}, {name}")
        scored = harness.translate(system, scoring / "searches", checkpoint, split, beam_size, search=search)
        return row(name, split, beam_size, search, scored)

    def tuning_row(search: dict, scored: dict) -> dict:
        return row("tuning", "valid", beam, search, scored)

    tuning, alpha = tune_length_penalty(harness, system, scoring / "searches", checkpoint, options.alphas, tuning_row)
    searches = {"greedy": (1, {}), **{name: (beam, search) for name, search in system.stopping_searches(alpha).items()}}
    rows = [decode(name, split, *search) for split in ("valid", "test2016") for name, search in searches.items()]
    return {
        **run,
        "curve": curve,
        "best": best,
        "tuning": tuning,
        "rows": rows,
        "machine": describe_machine(torch.device("cpu")),
        "provenance": provenance(),
    }
