"""The peer benchmark's speed measurement, over every installed system: training throughput
(alternating systems, `repeats` fresh runs each, warm-up updates left out) and the decoding
speed, greedy and with the race's beam, of a model of each system trained for the same number
of updates (untimed, trained once and kept in the work folder).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from attnmt.utils import atomic_path
from benchmarks.measure import rotated, spread
from benchmarks.peers.arithmetic import arithmetic
from benchmarks.peers.harness import NEVER, Harness, training_speed
from benchmarks.peers.system import PeerError, PeerSystem


@dataclass(frozen=True)
class SpeedOptions:
    repeats: int = 5
    warmup: int = 10
    steps: int = 60
    decode_updates: int = 1000


def speed(harness: Harness, options: SpeedOptions) -> dict:
    results: dict[str, dict] = {system.name: _system_header(system) for system in harness.systems}
    for system in harness.systems:
        results[system.name]["arithmetic"] = arithmetic(system, harness.setup)
    # The decoding models first: their training is counted in updates, not timed, and is kept
    # for later invocations; everything timed then runs back to back.
    checkpoints = {}
    for system in list(harness.systems):
        try:
            checkpoints[system.name] = _decoding_model(harness, system, options.decode_updates)
        except PeerError as error:
            harness.drop(system, error)
    for turn in range(options.repeats):
        for system in rotated(harness.systems, turn):
            harness.say(f"{system.name}: training speed, repeat {turn + 1} of {options.repeats}")
            try:
                results[system.name]["training_repeats"].append(_time_training(harness, system, options))
            except PeerError as error:
                harness.drop(system, error)
    beams = sorted({1, harness.setup.beam_size})
    for turn in range(options.repeats):
        for system in rotated(harness.systems, turn):
            folder = harness.work / "speed" / system.name / "decode"
            for beam in beams:
                harness.say(
                    f"{system.name}: decoding test2016 with beam {beam}, repeat {turn + 1} of {options.repeats}"
                )
                try:
                    measured = harness.translate(system, folder, checkpoints[system.name], "test2016", beam)
                except PeerError as error:
                    harness.drop(system, error)
                    break
                results[system.name]["decoding_repeats"].setdefault(f"beam{beam}", []).append(measured)
    finished = {name: _summarised(result) for name, result in results.items() if name not in harness.errors}
    return {"options": options.__dict__, "systems": finished}


def _time_training(harness: Harness, system: PeerSystem, options: SpeedOptions) -> dict:
    """One fresh run of warm-up + timed updates; its tokens/s, parameters and peak memory."""
    folder = harness.work / "speed" / system.name / "train"
    finished, events = harness.train(
        system, folder, steps=options.warmup + options.steps, max_minutes=None, save_every=NEVER
    )
    measured = training_speed(events.steps, options.warmup)
    shutil.rmtree(folder)  # its checkpoint is of no further use
    return {**measured, "parameters": events.parameters, "peak_rss_mib": finished.peak_rss_mib}


def _system_header(system: PeerSystem) -> dict:
    return {
        "version": system.version,
        "architecture_notes": system.architecture_notes,
        "parameters": None,
        "training_repeats": [],
        "decoding_repeats": {},
    }


def _decoding_model(harness: Harness, system: PeerSystem, updates: int) -> Path:
    """A model of `system` trained for `updates` updates, trained once and kept in the work folder."""
    folder = harness.work / "speed" / system.name / f"model-{updates}"
    done = folder / "trained.json"
    if not harness.kept(system, done):
        harness.say(f"{system.name}: training the decoding model ({updates} updates, once)")
        finished, events = harness.train(system, folder, steps=updates, max_minutes=None, save_every=updates)
        record = {"updates": len(events.steps), "minutes": finished.seconds / 60}
        with atomic_path(done) as temporary:
            temporary.write_text(json.dumps(record) + "\n", encoding="utf-8")
    checkpoints = system.checkpoints(folder)
    return checkpoints[max(checkpoints)]


def _summarised(result: dict) -> dict:
    """Medians and ranges next to the per-repeat values."""
    repeats = result["training_repeats"]
    result["parameters"] = repeats[0]["parameters"]
    forward = result["arithmetic"]["forward_flops_per_target_token"]
    training_flops = result["arithmetic"]["training_flops_per_target_token"]
    result["training"] = {
        "tokens_per_s": spread([r["tokens_per_s"] for r in repeats]),
        # the throughput per unit of arithmetic: the model's useful FLOPs per second
        "gflops_per_s": spread([r["tokens_per_s"] * training_flops / 1e9 for r in repeats]),
        "peak_rss_mib": spread([r["peak_rss_mib"] for r in repeats]),
    }
    result["decoding"] = {
        beam: {
            "sentences_per_s": spread([r["sentences_per_s"] for r in runs]),
            "tokens_per_s": spread([r["tokens_per_s"] for r in runs]),
            # one hypothesis per generated token: beam search's K hypotheses are not multiplied in
            "gflops_per_s": spread([r["tokens_per_s"] * forward / 1e9 for r in runs]),
            "bleu_tok_lc": runs[0]["bleu_tok_lc"],
            "generated_tokens": runs[0]["generated_tokens"],
        }
        for beam, runs in result["decoding_repeats"].items()
    }
    return result
