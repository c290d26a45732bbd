"""A screen's raw result: sweep trials with their best checkpoints' beam scores on valid, by point.

    python -m tools.screen_results SCREEN_DIR [SCREEN_DIR ...] --study NAME [--study NAME ...]
        --json docs/results/NAME.json
    python -m tools.screen_results docs/results/NAME.json --study NAME --json docs/results/NAME.json

SCREEN_DIR is a folder `scripts/screen-on-gpu.sh` filled and packed (unpacked: it holds
runs/sweeps/STUDY/report/trials.json from `attnmt sweep report` and eval/STUDY--TRIAL/
evaluation.json from `attnmt evaluate TRIAL --split valid --beam 5`), or a raw result this tool
wrote earlier, whose trials are grouped again (their figures as recorded, the points computed by
this version: so a screen whose folder is gone gains the figures added since). The named
studies' trials are grouped into points (the same config but for the seed, so one point may span
two sweeps, one per seed) and each point gets the median and range of its seeds' figures: beam
BLEU (sacreBLEU's, and tokenized with a word model's <unk> one token), chrF and
hypothesis/reference length on the whole valid split, the in-training greedy validation BLEU at
the last step and its mean over the run's second half (learning per update, read over many
validations, since one swings by a point from the next; for a word model also on word tokens)
with the validation loss's mean there (per target token, without label smoothing), the
difference from the point named `baseline`, and, where the screen averaged each trial's last
checkpoints (AVERAGE_LAST), the average's beam BLEU. Every trial keeps what it recorded: its
command, machine, and the code's commit and dirty paths when it started and ended. The test
split is not read here; the decision is the valid split's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from attnmt.config import load_config
from attnmt.sweep.spec import SET_BY_SWEEP, flatten
from attnmt.utils import UserError, shared_machine
from benchmarks.measure import write_results
from benchmarks.report import markdown_table

SEED = "train.seed"
# Not part of what a trial tests: where it ran and the data folder it read.
NOT_THE_RECIPE = (*SET_BY_SWEEP, SEED, "train.device", "data.data_dir")


def _valid_scores(screen_dirs: list[Path], study: str, trial: str, suffix: str = "") -> dict | None:
    """The trial's `attnmt evaluate --split valid` figures, from whichever screen holds them;
    `suffix` "--averaged" for those of its last checkpoints averaged."""
    for folder in screen_dirs:
        for path in folder.rglob(f"eval/{study}--{trial}{suffix}/evaluation.json"):
            run = json.loads(path.read_text(encoding="utf-8"))["runs"][0]
            keys = ("checkpoint", "search", "sentences", "bleu", "length_ratio", "chrf", "tokenized_bleu")
            scores = {key: run[key] for key in keys} | {"signature": run["bleu_signature"]}
            if "tokenized_length_ratio" in run:  # evaluations before it was recorded lack it
                scores["tokenized_length_ratio"] = run["tokenized_length_ratio"]
            return scores
    return None


def _recorded_trials(path: Path) -> list[dict]:
    """The trials of a raw result this tool wrote."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))["trials"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{path}: not a screen's raw result with its trials ({error})") from None


def collect(screen_dirs: list[Path], studies: list[str]) -> list[dict]:
    """Every trial of the named studies, with its valid beam scores attached: from a raw result
    among `screen_dirs` that holds the study's trials, else from the screen folders."""
    given = ", ".join(map(str, screen_dirs))
    recorded = [trial for path in screen_dirs if path.is_file() for trial in _recorded_trials(path)]
    screen_dirs = [path for path in screen_dirs if not path.is_file()]
    trials = []
    for study in studies:
        kept = [trial for trial in recorded if trial.get("study") == study]
        if kept:
            trials += kept
            continue
        reports = [path for folder in screen_dirs for path in folder.rglob(f"sweeps/{study}/report/trials.json")]
        if not reports:
            raise UserError(f"no report of study {study!r} in {given}")
        for trial in json.loads(reports[0].read_text(encoding="utf-8"))["trials"]:
            if trial["state"] in ("running", "waiting"):
                continue  # no result yet, nor a record of the code it ran; or dropped from the study
            config = load_config(reports[0].parents[1] / trial["run_dir"] / "config.yaml")
            trial["config"] = {k: v for k, v in flatten(config).items() if k not in NOT_THE_RECIPE}
            trial["seed"] = config.train.seed
            trial["valid_beam"] = _valid_scores(screen_dirs, study, trial["name"])
            averaged = _valid_scores(screen_dirs, study, trial["name"], "--averaged")
            if averaged is not None:
                trial["valid_beam_averaged"] = averaged
            trials.append(trial)
    return trials


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def _tokenized_ratio(scored: list[dict]) -> dict:
    """The length ratio on the tokens tokenized BLEU reads (a word model's <unk> one token, not
    three as in the detokenized text), where every seed's evaluation recorded it."""
    ratios = [t["valid_beam"].get("tokenized_length_ratio") for t in scored]
    return {} if None in ratios else {"valid_beam_tokenized_length_ratio": _spread(ratios)}


def second_half_mean(validation: list[dict], key: str = "valid_bleu") -> float:
    """The mean of a validation figure over the validations past half the run's last one."""
    last = validation[-1]["step"]
    scores = [row[key] for row in validation if row["step"] > last / 2]
    return sum(scores) / len(scores)


def points(trials: list[dict]) -> list[dict]:
    """Trials with the same config but for the seed, as one point with its seeds' spread."""
    grouped: dict[str, list[dict]] = {}
    for trial in trials:
        grouped.setdefault(json.dumps(trial["config"], sort_keys=True), []).append(trial)
    rows = []
    for members in grouped.values():
        scored = [t for t in members if t["state"] == "complete" and t["valid_beam"]]
        if not scored:
            continue
        rows.append(
            {
                "point": "+".join(sorted({e for t in members for e in t["experiment"]})),
                "seeds": sorted(t["seed"] for t in scored),
                "steps": scored[0]["steps"],
                "valid_beam_bleu": _spread([t["valid_beam"]["bleu"] for t in scored]),
                "valid_beam_tokenized_bleu": _spread([t["valid_beam"]["tokenized_bleu"] for t in scored]),
                "valid_beam_chrf": _spread([t["valid_beam"]["chrf"] for t in scored]),
                "valid_beam_length_ratio": _spread([t["valid_beam"]["length_ratio"] for t in scored]),
                **_tokenized_ratio(scored),
                "valid_greedy_bleu_last": _spread([t["validation"][-1]["valid_bleu"] for t in scored]),
                "valid_greedy_bleu_second_half": _spread([second_half_mean(t["validation"]) for t in scored]),
                "valid_loss_second_half": _spread([second_half_mean(t["validation"], "valid_loss") for t in scored]),
            }
        )
        if all("valid_tokenized_bleu" in row for t in scored for row in t["validation"]):  # a word model's
            halves = [second_half_mean(t["validation"], "valid_tokenized_bleu") for t in scored]
            rows[-1]["valid_greedy_tokenized_bleu_second_half"] = _spread(halves)
        averaged = [t["valid_beam_averaged"]["bleu"] for t in scored if "valid_beam_averaged" in t]
        if len(averaged) == len(scored):
            rows[-1]["valid_beam_averaged_bleu"] = _spread(averaged)
    base = next((row for row in rows if row["point"] == "baseline"), None)
    for row in rows:
        row["delta_bleu"] = (
            None if base is None else row["valid_beam_bleu"]["median"] - base["valid_beam_bleu"]["median"]
        )
    return sorted(rows, key=lambda row: -row["valid_beam_bleu"]["median"])


def _cell(spread: dict, digits: int) -> str:
    low, high = spread["min"], spread["max"]
    middle = f"{spread['median']:.{digits}f}"
    return middle if len(spread["values"]) == 1 else f"{middle} ({low:.{digits}f}-{high:.{digits}f})"


def screen_table(rows: list[dict]) -> list[str]:
    headers = ["point", "seeds", "updates", "valid BLEU, beam", "vs baseline", "length ratio", "chrF"]
    averaged = any("valid_beam_averaged_bleu" in row for row in rows)
    tokenized = all("valid_beam_tokenized_length_ratio" in row for row in rows) and bool(rows)
    # screens written before the second half's mean was recorded lack it
    second_half = all("valid_greedy_bleu_second_half" in row for row in rows) and bool(rows)
    body = [
        [
            row["point"],
            ",".join(map(str, row["seeds"])),
            f"{row['steps']:,}",
            _cell(row["valid_beam_bleu"], 2),
            "-" if row["delta_bleu"] is None else f"{row['delta_bleu']:+.2f}",
            _cell(row["valid_beam_length_ratio"], 3),
            *([_cell(row["valid_beam_tokenized_length_ratio"], 3)] if tokenized else []),
            _cell(row["valid_beam_chrf"], 2),
            *([_cell(row["valid_greedy_bleu_second_half"], 2)] if second_half else []),
            *([_cell(row["valid_beam_averaged_bleu"], 2) if "valid_beam_averaged_bleu" in row else "-"] * averaged),
        ]
        for row in rows
    ]
    if tokenized:
        headers.insert(headers.index("length ratio") + 1, "length ratio, tokens")
    headers += ["greedy valid BLEU, second half's mean"] if second_half else []
    return markdown_table([*headers, *["last checkpoints averaged"] * averaged], body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.screen_results", description=__doc__.splitlines()[0])
    parser.add_argument("screens", nargs="+", type=Path, metavar="SCREEN_DIR")
    parser.add_argument("--study", action="append", required=True, help="a study to collect (repeatable)")
    parser.add_argument("--json", type=Path, help="write the raw result here")
    args = parser.parse_args(argv)
    try:
        trials = collect(args.screens, args.study)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = points(trials)
    print("\n".join(screen_table(rows)))
    if args.json:
        results = {
            "studies": args.study,
            "machine": shared_machine([trial["machine"] for trial in trials if trial.get("machine")]),
            "points": rows,
            "trials": trials,
        }
        arguments = [*map(str, argv if argv is not None else sys.argv[1:])]
        write_results(args.json, results, "tools.screen_results", arguments)
    return 0


if __name__ == "__main__":
    sys.exit(main())
