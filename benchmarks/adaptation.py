"""Domain adaptation: a trained model continued on a new corpus, against one trained there from nothing.

A Tatoeba English->French model (the old domain: short everyday sentences) is continued on
Multi30k English->French (the new domain: image captions) and compared, two seeds each, with a
model trained on Multi30k from nothing. Every arm trains for the updates 40 minutes of training
make alone on the machine's cores, at a constant rate after warmup, and keeps a checkpoint every
CHECK updates; the checkpoints at 5, 10, 20 and 40 minutes are scored on Multi30k test2016 (the
new domain) and on Tatoeba's test split (the old one).

    scratch     configs/multi30k-en-fr.yaml from nothing: its own 6,000 BPE pieces, its peak rate
    continued   --from the SentencePiece Tatoeba model (its 8,000 pieces), at half that model's
                peak rate (continued training's default) after a warmup of 100 updates
    mixed       continued, with data.mix_previous MIX: that share of the batches from Tatoeba
    extended    --from a word-level Tatoeba model with --extend-vocab: Multi30k's words seen
                data.min_freq times join its vocabularies

The starting models are configs/tatoeba-eng-fra.yaml (and its word-token variant) with a cosine
schedule over START_STEPS updates; minute 0 of a continued arm is its starting model.

Minutes are minutes of training steps, validations left out, at each arm's own rate: `probe`
trains each arm alone on all the machine's threads for a few minutes with no validation and
records its updates a minute. The arms themselves need not run alone (`train` gives each one
thread, so two run side by side): their checkpoints are read by updates, not by clock. A mark's
checkpoint is the one nearest its updates, CHECK / 2 updates at most away.

    python -m benchmarks.adaptation train WORK --seed 1 --arm scratch     # resumable; one per lane
    python -m benchmarks.adaptation probe WORK --json benchmarks/results/adaptation-rates.json
    python -m benchmarks.adaptation score WORK --rates benchmarks/results/adaptation-rates.json \\
        --json docs/results/adaptation.json                              # adds to what is there
    python -m benchmarks.adaptation plot docs/results/adaptation.json --png docs/results/adaptation.png

`train` before `probe` is fine: a run trains to its rate's updates when the probe exists and to
DEFAULT_STEPS otherwise, and a later `train` with the rates resumes it to its full length (the
rate is constant, so a run made longer is the run it would have been). What `score` and `plot`
report, the summary, table and plot, is read from the raw result alone (`adaptation_report`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console

from attnmt.config import DataConfig, load_config
from attnmt.continued import RECORD, find_start
from attnmt.evaluation import evaluate, split_examples
from attnmt.loading import ModelSpec, load
from attnmt.utils import UserError
from benchmarks.adaptation_report import adaptation_rows, plot, summary
from benchmarks.measure import describe_machine, write_results
from benchmarks.report import markdown_table

ROOT = Path(__file__).resolve().parent.parent
NEW_DOMAIN = ROOT / "configs/multi30k-en-fr.yaml"
OLD_DOMAIN = ROOT / "configs/tatoeba-eng-fra.yaml"
MINUTES = (5, 10, 20, 40)
CHECK = 200  # updates between checkpoints: a mark is at most CHECK / 2 updates from its own
DEFAULT_STEPS = 6400  # a 40-minute run of the scratch arm at 160 updates a minute
START_STEPS = 2500
MIX = 0.2
CONTINUED_LR = 0.001  # half the starting models' peak rate of 0.002
PROBE_MINUTES = 2.0
TEST_SETS = {"multi30k-test2016": NEW_DOMAIN, "tatoeba-test": OLD_DOMAIN}


@dataclass(frozen=True)
class Arm:
    """One way to get a Multi30k model: the starting run it continues (None: from nothing) and its
    settings over configs/multi30k-en-fr.yaml."""

    start: str | None
    settings: tuple[str, ...]


STARTS = {
    "start-sp": (),
    "start-word": ("data.tokenizer=word", "data.min_freq=2"),
}
_CONTINUED = (f"train.lr={CONTINUED_LR}", "train.warmup_steps=100", "data.spm_vocab_size=8000")
ARMS = {
    "scratch": Arm(None, ()),
    "continued": Arm("start-sp", _CONTINUED),
    "mixed": Arm("start-sp", (*_CONTINUED, f"data.mix_previous={MIX}")),
    "extended": Arm("start-word", (*_CONTINUED, "data.tokenizer=word", "data.min_freq=2", "train.extend_vocab=true")),
}


def start_command(work: Path, name: str) -> list[str]:
    """`attnmt train` of one starting model, cosine over START_STEPS, one thread."""
    settings = [
        f"train.run_dir={work / name}",
        f"train.max_steps={START_STEPS}",
        "train.valid_every=500",
        "train.keep_checkpoints=1",
        "train.threads=1",
        *STARTS[name],
    ]
    return ["attnmt", "train", str(OLD_DOMAIN), *(item for s in settings for item in ("--set", s))]


def arm_settings(work: Path, arm: str, seed: int, steps: int, threads: int | None) -> list[str]:
    """The settings over configs/multi30k-en-fr.yaml that make `arm`'s run for `seed`."""
    spec = ARMS[arm]
    settings = [
        f"train.run_dir={work / f'seed-{seed}' / arm}",
        f"train.seed={seed}",
        "train.lr_schedule=constant",
        f"train.max_steps={steps}",
        "train.max_minutes=null",
        f"train.valid_every={CHECK}",
        "train.valid_bleu_sentences=200",  # validation only picks a best checkpoint, which no mark reads
        "train.keep_checkpoints=1000",
        *spec.settings,
    ]
    if threads is not None:
        settings.append(f"train.threads={threads}")
    if spec.start is not None:
        settings.append(f"train.init_from={work / spec.start}")
    return settings


def budget_steps(rate: float | None) -> int:
    """Updates of a 40-minute run at `rate` updates a minute, up to the next checkpoint."""
    if rate is None:
        return DEFAULT_STEPS
    return CHECK * math.ceil(rate * MINUTES[-1] / CHECK)


def mark_step(rate: float, minutes: float) -> int:
    """The checkpoint (a multiple of CHECK, at least CHECK) nearest `minutes` of training at `rate`."""
    return max(CHECK, CHECK * round(rate * minutes / CHECK))


def _attnmt(arguments: list[str], log: Path) -> None:
    command = [str(Path(sys.executable).with_name("attnmt")), *arguments[1:]]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=True)


def _last_step(run_dir: Path) -> int:
    steps = [int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*")]
    return max(steps, default=0)


def _rates(path: Path | None) -> dict[str, float]:
    if path is None or not path.exists():
        return {}
    return {arm: probe["updates_per_minute"] for arm, probe in json.loads(path.read_text())["probes"].items()}


def train(work: Path, seed: int, arm: str, rates_path: Path | None, say) -> Path:
    """The arm's starting model if it is missing, then the arm's run, to its rate's updates
    (resumed where a run stopped short of them)."""
    spec = ARMS[arm]
    if spec.start is not None and _last_step(work / spec.start) < START_STEPS:
        start_log = work / "logs" / f"{spec.start}.log"
        if _last_step(work / spec.start):  # stopped short of its schedule: finish it, never continue from it
            say(f"resuming the starting model {spec.start}")
            _attnmt(["attnmt", "train", "--resume", str(work / spec.start)], start_log)
        else:
            say(f"training the starting model {spec.start}")
            shutil.rmtree(work / spec.start, ignore_errors=True)
            _attnmt(start_command(work, spec.start), start_log)
    steps = budget_steps(_rates(rates_path).get(arm))
    run_dir = work / f"seed-{seed}" / arm
    log = work / "logs" / f"seed-{seed}-{arm}.log"
    done = _last_step(run_dir)
    if done >= steps:
        say(f"{run_dir}: already at {done} updates")
    elif done:
        say(f"{run_dir}: resuming from {done} to {steps} updates")
        _attnmt(["attnmt", "train", "--resume", str(run_dir), "--set", f"train.max_steps={steps}"], log)
    else:
        shutil.rmtree(run_dir, ignore_errors=True)  # a run killed before its first checkpoint
        settings = arm_settings(work, arm, seed, steps, threads=1)
        _attnmt(["attnmt", "train", str(NEW_DOMAIN), *(item for s in settings for item in ("--set", s))], log)
    return run_dir


def probe(work: Path, arms: list[str], minutes: float, previous: dict | None, say) -> dict:
    """Each of `arms` alone on all threads for `minutes`, no validation: its updates a minute, read from
    the training log after its first logged window (which holds the start-up)."""
    probes = dict((previous or {}).get("probes", {}))
    for arm in arms:
        run_dir = work / "probe" / arm
        shutil.rmtree(run_dir, ignore_errors=True)
        settings = arm_settings(work, arm, 1, 10**7, threads=None)
        settings = [s for s in settings if not s.startswith(("train.run_dir=", "train.valid_every="))]
        settings += [f"train.run_dir={run_dir}", f"train.max_minutes={minutes}", "train.valid_every=10000000"]
        _attnmt(["attnmt", "train", str(NEW_DOMAIN), *(i for s in settings for i in ("--set", s))], run_dir / "log")
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        window = [r for r in records if "train_loss" in r]
        first, last = window[0], window[-1]
        rate = 60.0 * (last["step"] - first["step"]) / (last["elapsed"] - first["elapsed"])
        probes[arm] = {
            "updates_per_minute": rate,
            "steps": last["step"],
            "seconds": last["elapsed"],
            "threads": torch.get_num_threads(),
            "machine": describe_machine(torch.device("cpu")),  # probes added later may run elsewhere
        }
        say(f"{arm}: {rate:.1f} updates a minute")
        shutil.rmtree(run_dir)
    return {"machine": describe_machine(torch.device("cpu")), "probes": probes}


def _checkpoint(run_dir: Path, step: int) -> Path:
    path = run_dir / "checkpoints" / f"step-{step:07d}"
    if not path.exists():
        raise UserError(f"{run_dir}: no checkpoint at update {step} (train it to its full length first)")
    return path


def _scores(checkpoint: Path, data_dir: str | None, cache: dict) -> dict:
    """The checkpoint's beam search (its config's decode settings) on both test sets."""
    translator = load(ModelSpec((str(checkpoint),), device="cpu", data_dir=data_dir))
    scores = {}
    for name, config_path in TEST_SETS.items():
        data: DataConfig = load_config(config_path).data
        if data_dir is not None:
            data = data.model_copy(update={"data_dir": data_dir})
        scored = evaluate(translator, split_examples(data, "test", cache=cache))
        scores[name] = {
            "tokenized_bleu": scored.tokenized_bleu.score,
            "bleu": scored.bleu.score,
            "chrf": scored.chrf.score,
            "length_ratio": scored.bleu.length_ratio,
            "sentences": len(scored.hypotheses),
        }
    return scores


def score(work: Path, rates: dict[str, float], previous: dict | None, data_dir: str | None, say) -> dict:
    """Every finished arm run under `work` at each mark, and each starting model (minute 0),
    added to `previous`: a run already there is kept as it was scored, and a starting model is
    one entry per weights (a session that trains it again on another processor may get others,
    and each run names the weights it started from). The raw result."""
    cache: dict = {}
    runs = {(r["seed"], r["arm"]): r for r in (previous or {}).get("runs", [])}
    starts = {start["weights_sha256"]: start for start in (previous or {}).get("starts", [])}
    for name in STARTS:
        if (work / name / "checkpoints").exists():
            start = find_start(work / name)
            if start.weights_sha256 not in starts:
                starts[start.weights_sha256] = {
                    "name": name,
                    **start.record(),
                    "scores": _scores(start.checkpoint, data_dir, cache),
                }
                say(f"{name}: {starts[start.weights_sha256]['scores']}")
    for run_dir in sorted(work.glob("seed-*/*")):
        seed, arm = int(run_dir.parent.name.split("-")[1]), run_dir.name
        if arm not in rates or _last_step(run_dir) < budget_steps(rates[arm]) or (seed, arm) in runs:
            continue
        marks = []
        for minutes in MINUTES:
            step = mark_step(rates[arm], minutes)
            marks.append(
                {"minutes": minutes, "step": step, "scores": _scores(_checkpoint(run_dir, step), data_dir, cache)}
            )
            say(f"seed {seed} {arm} at {minutes} min (update {step}): {marks[-1]['scores']}")
        record = run_dir / RECORD  # the starting checkpoint and its weights' hash
        started = json.loads(record.read_text()) if record.exists() else None
        runs[(seed, arm)] = {
            "seed": seed,
            "arm": arm,
            "start": ARMS[arm].start,
            "started_from": started,
            "marks": marks,
        }
    return {
        "machine": describe_machine(torch.device("cpu")),
        "settings": {
            "minutes": list(MINUTES),
            "check_every": CHECK,
            "start_steps": START_STEPS,
            "mix_previous": MIX,
            "continued_lr": CONTINUED_LR,
            "updates_per_minute": rates,
            "arms": {name: {"start": arm.start, "settings": list(arm.settings)} for name, arm in ARMS.items()},
        },
        "starts": list(starts.values()),
        "runs": [runs[key] for key in sorted(runs)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adaptation", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("train", "probe", "score"):
        sub = commands.add_parser(name)
        sub.add_argument("work", type=Path, metavar="WORK", help="the study's folder of runs")
        sub.add_argument("--data-dir", default=os.environ.get("ATTNMT_DATA"))
        if name == "train":
            sub.add_argument("--seed", type=int, required=True)
            sub.add_argument("--arm", choices=list(ARMS), required=True)
            sub.add_argument("--rates", type=Path, help="the probe's raw result (default: DEFAULT_STEPS)")
        if name == "probe":
            sub.add_argument("--arms", type=lambda text: text.split(","), default=list(ARMS))
            sub.add_argument("--minutes", type=float, default=PROBE_MINUTES)
            sub.add_argument("--json", type=Path, required=True, help="the raw result, added to when it exists")
        if name == "score":
            sub.add_argument("--rates", type=Path, required=True)
            sub.add_argument("--json", type=Path, required=True, help="the raw result, added to when it exists")
    plotting = commands.add_parser("plot")
    plotting.add_argument("results", type=Path)
    plotting.add_argument("--png", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        _run(args, argv)
    except subprocess.CalledProcessError as failed:
        command = " ".join(failed.cmd[:3])
        print(f"error: {command} ... exited with {failed.returncode}; logs in {args.work / 'logs'}", file=sys.stderr)
        return 2
    except (UserError, OSError, ValueError, KeyError) as error:  # a missing file or run, a result of another shape
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _run(args: argparse.Namespace, argv: list[str] | None) -> None:
    say = Console(stderr=True).log
    if args.command == "train":
        train(args.work, args.seed, args.arm, args.rates, say)
    elif args.command == "probe":
        previous = json.loads(args.json.read_text()) if args.json.exists() else None
        write_results(
            args.json, probe(args.work, args.arms, args.minutes, previous, say), "benchmarks.adaptation", argv
        )
    elif args.command == "score":
        if not args.rates.is_file():
            raise UserError(f"{args.rates}: no probe result (python -m benchmarks.adaptation probe WORK --json FILE)")
        previous = json.loads(args.json.read_text()) if args.json.exists() else None
        results = score(args.work, _rates(args.rates), previous, args.data_dir, say)
        results["summary"] = summary(results)
        write_results(args.json, results, "benchmarks.adaptation", argv)
        print("\n".join(markdown_table(*adaptation_rows(results))))
    else:
        plot(json.loads(args.results.read_text()), args.png)


if __name__ == "__main__":
    sys.exit(main())
