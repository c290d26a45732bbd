"""Runs the systems of the peer benchmark and measures them the same way.

Every command runs as a child process; its peak resident memory comes from `os.wait4`, its
per-step times and target tokens from the probe's events, its decoding time from the probe's
result (model loading excluded). Work lives under one folder (`work`): the shared data, one
virtual environment per peer, and one folder per (mode, system, repeat). The steps the
measurements share live here too: training and translating a system, and tuning its length
penalty on valid (`tune_length_penalty`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from benchmarks.peers.system import Command, PeerError, PeerSystem, Setup

LOG_TAIL = 5  # lines of a failed command's log quoted in its error
NEVER = 10**9  # a save interval no run reaches: a run that saves only at its end
ALPHAS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0)  # the length penalties a beam search is tuned over on valid


@dataclass
class Finished:
    """A command that ran to its end: seconds of wall time, peak RSS in MiB, its log file."""

    seconds: float
    peak_rss_mib: float
    log: Path


ARCHITECTURE = "architecture.txt"  # in a run folder: the notes of the system that trained it


def run_command(system: str, what: str, command: Command, log: Path) -> Finished:
    """Run `command`, its output into `log`; a failure is a PeerError quoting the log's end."""
    env = {**os.environ, **command.env}
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command.argv, cwd=command.cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            process.wait()
            raise
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
    if process.returncode != 0:
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        last = lines[-1].strip() if lines else "(no output)"
        raise PeerError(f"{system}: {what} failed (exit {process.returncode}; log {log}): {last}")
    return Finished(seconds, usage.ru_maxrss / 1024, log)


@dataclass
class Events:
    """What a training probe recorded: when it started, the parameter count, one dict per step."""

    started: float
    parameters: int | None
    steps: list[dict]

    def minutes_at(self, step: int) -> float:
        """Minutes from the probe's start (data, vocabularies and model building included) to the end of `step`."""
        return (self.steps[step - 1]["time"] - self.started) / 60


def read_events(path: Path) -> Events:
    events = Events(0.0, None, [])
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "started" in record:
            events.started = record["started"]
        elif "parameters" in record:
            events.parameters = record["parameters"]
        else:
            events.steps.append(record)
    return events


def training_speed(steps: list[dict], warmup: int) -> dict:
    """Target tokens/s over the steps after `warmup` (>= 1): the tokens of steps warmup+1..N over
    the time from the end of step `warmup` to the end of step N, data loading between steps included."""
    if warmup < 1 or len(steps) <= warmup:
        raise PeerError(f"{len(steps)} optimizer steps recorded; need more than the {warmup} warm-up steps (>= 1)")
    timed = steps[warmup:]
    seconds = timed[-1]["time"] - steps[warmup - 1]["time"]
    tokens = sum(step["target_tokens"] for step in timed)
    return {"steps": len(timed), "target_tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def scores(hypotheses: Path, reference: Path) -> dict:
    """Tokenized, lowercased BLEU on the shared word tokens (the metric of the papers), with the
    hypothesis/reference length ratio and the brevity penalty it cost, and chrF."""
    hyps = hypotheses.read_text(encoding="utf-8").splitlines()
    refs = reference.read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(refs):
        raise PeerError(f"{hypotheses}: {len(hyps)} lines for {len(refs)} references")
    scored = BLEU(tokenize="none", lowercase=True, force=True).corpus_score(hyps, [refs])
    return {
        "bleu_tok_lc": scored.score,
        "length_ratio": scored.sys_len / scored.ref_len,
        "brevity_penalty": scored.bp,
        "chrf": CHRF().corpus_score(hyps, [refs]).score,
    }


class Harness:
    """The systems, the shared Setup and the work folder, with the two things done to a system."""

    def __init__(self, setup: Setup, systems: list[PeerSystem], work: Path, say=print):
        self.setup, self.systems, self.work, self.say = setup, systems, work, say
        self.pythons: dict[str, Path] = {}
        self.errors: dict[str, str] = {}  # system -> the one line saying why it was left out

    def drop(self, system: PeerSystem, error: PeerError) -> None:
        """Leave out a system that failed; the others go on."""
        self.say(f"[red]{error}[/red]")
        self.errors[system.name] = str(error)
        self.systems.remove(system)

    def install(self) -> None:
        """Install every system (once: later calls find the marker); those that fail are dropped."""
        for system in list(self.systems):
            self.say(f"{system.name} {system.version}: installing (once)")
            try:
                self.pythons[system.name] = system.install(self.work / "envs" / system.environment())
            except PeerError as error:
                self.drop(system, error)

    def kept(self, system: PeerSystem, record: Path) -> bool:
        """Whether `record`, what a finished run wrote into its folder, is there and the run was
        trained by `system` as it is now (the architecture notes `train` wrote beside it): a run
        of another architecture under the same system name is not reused."""
        notes = record.parent / ARCHITECTURE
        return record.exists() and notes.exists() and notes.read_text(encoding="utf-8") == system.architecture_notes

    def train(
        self,
        system: PeerSystem,
        folder: Path,
        *,
        steps: int | None,
        max_minutes: float | None,
        save_every: int,
        seed: int | None = None,
    ) -> tuple[Finished, Events]:
        """Train `system` from scratch in `folder` (emptied first), with `seed` instead of the Setup's if given."""
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / ARCHITECTURE).write_text(system.architecture_notes, encoding="utf-8")
        python = self.pythons[system.name]
        setup = self.setup if seed is None else dataclasses.replace(self.setup, seed=seed)
        system.prepare(setup, folder, python)
        events = folder / "events.jsonl"
        command = system.train_command(
            setup, folder, python, steps=steps, max_minutes=max_minutes, save_every=save_every, events=events
        )
        finished = run_command(system.name, "training", command, folder / "train.log")
        return finished, read_events(events)

    def translate(
        self,
        system: PeerSystem,
        folder: Path,
        checkpoint: Path,
        split: str,
        beam_size: int,
        *,
        focus: bool = False,
        search: dict | None = None,
    ) -> dict:
        """Translate `split`'s source with `checkpoint`: timing, tokens, BLEU and the length ratio
        with its brevity penalty; with `focus`, and where the system's probe measures it, where the
        attention goes (`attention_focus`); `search`: the system's own search options
        (`PeerSystem.translate_command`), named in the output files."""
        search = search or {}
        name = "-".join([f"{split}-beam{beam_size}", *(str(value) for value in search.values())])
        folder.mkdir(parents=True, exist_ok=True)
        output, result = folder / f"{name}.txt", folder / f"{name}.json"
        attention = folder / f"{name}-attention.json" if focus and system.measures_attention else None
        python = self.pythons[system.name]
        command = system.translate_command(
            self.setup,
            folder,
            python,
            checkpoint=checkpoint,
            source=self.setup.file(split, self.setup.src_lang),
            output=output,
            beam_size=beam_size,
            result=result,
            attention_focus=attention,
            **search,
        )
        finished = run_command(system.name, f"translating {split} (beam {beam_size})", command, folder / f"{name}.log")
        timing = json.loads(result.read_text(encoding="utf-8"))
        measured = {
            **timing,
            "output": str(output),
            "sentences_per_s": timing["sentences"] / timing["seconds"],
            "tokens_per_s": timing["generated_tokens"] / timing["seconds"],
            **scores(output, self.setup.file(split, self.setup.tgt_lang)),
            "peak_rss_mib": finished.peak_rss_mib,
        }
        if attention is not None:
            measured["attention_focus"] = json.loads(attention.read_text(encoding="utf-8"))
        return measured


def tune_length_penalty(
    harness: Harness,
    system: PeerSystem,
    folder: Path,
    checkpoint: Path,
    alphas: tuple[float, ...],
    row: Callable[[dict, dict], dict],
) -> tuple[list[dict], float]:
    """Beam search on valid with the system's length penalty at each of `alphas`: `row(search,
    scored)` of each decode, and the alpha of the best tokenized BLEU (the first of equals)."""
    beam, rows, scores = harness.setup.beam_size, [], []
    for alpha in alphas:
        harness.say(f"{system.name}: valid, beam {beam}, length penalty {alpha:g}")
        search = system.tuning_search(alpha)
        scored = harness.translate(system, folder, checkpoint, "valid", beam, search=search)
        rows.append(row(search, scored))
        scores.append(scored["bleu_tok_lc"])
    return rows, alphas[scores.index(max(scores))]
