"""The Multi30k results table, collected from the evaluations `scripts/multi30k-table.sh` writes.

    python -m tools.multi30k_table runs/table [--json docs/results/multi30k-table.json] [--update]

Reads every RUNS/evaluation/CONFIG-TEST-KIND/evaluation.json (TEST: test2016 or test2017; KIND:
single, which scores each run and its averaged checkpoint, or ensemble, ensemble-averaged) and
writes one file: per scored system the direction, decoder and score, test set, model (single,
averaged, ensemble), tokenized lowercased BLEU (BLEU moses-tok-lc, the papers' metric, where the
evaluation scored it, and BLEU word-tok-lc on attnmt's word tokens), sacreBLEU's BLEU with its
signature, chrF, the search, how long the scored weights were trained (and by which code, where
the checkpoints record it), and the command of the evaluation with the code it ran. The data
folder in paths ($ATTNMT_DATA, or the folder holding an evaluation's own multi30k test files) is
written as $ATTNMT_DATA, so the file names no machine's folders. With
--update, the evaluations found replace their own rows of the existing file (same config, test
set and kind) and its other rows are kept: a table whose directions were trained on different
machines, or at different times, is collected one folder at a time. The earlier file's
`annotations` are kept as they are: a note about rows that new evaluations replace is then
edited by hand (annotations are outside the content hash).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from attnmt.config import load_config
from attnmt.provenance import ANNOTATIONS
from attnmt.utils import UserError
from benchmarks.measure import write_results
from benchmarks.report import markdown_table
from tools.raw_results import annotation_problems

DEFAULT_JSON = Path("docs/results/multi30k-table.json")
ROOT = Path(__file__).resolve().parents[1]
KINDS = ("single", "ensemble", "ensemble-averaged")  # the order of a test set's rows
FOLDER = re.compile(rf"(?P<config>.+)-(?P<test>test2016|test2017)-(?P<kind>{'|'.join(KINDS)})")
TEST_SETS = {"test2016": "test2016 flickr", "test2017": "test2017 flickr"}
ROW_KEYS = {  # what an entry of an earlier table must hold to be kept by --update
    *("config", "direction", "decoder", "test_set", "model", "machine", "search", "training"),
    *("tokenized_bleu", "bleu", "chrf"),
}


def _portable(value, data_dirs: list[str]):
    """`value` with the data folder's paths replaced by $ATTNMT_DATA (strings, lists, mappings)."""
    if isinstance(value, str):
        for data_dir in data_dirs:
            value = value.replace(data_dir, "$ATTNMT_DATA")
        return value
    if isinstance(value, list):
        return [_portable(item, data_dirs) for item in value]
    if isinstance(value, dict):
        return {key: _portable(item, data_dirs) for key, item in value.items()}
    return value


def _model(record: dict) -> str:
    """What was scored: a single run (its seed), its averaged checkpoint, or an ensemble."""
    if record.get("members"):
        averaged = all(Path(member).name == "averaged" for member in record["members"])
        return f"ensemble of {len(record['members'])}" + (", averaged" if averaged else "")
    seed = re.search(r"-s(\d+)$", Path(record["checkpoint"]).parents[1].name)
    label = "averaged" if Path(record["checkpoint"]).name == "averaged" else "single"
    return f"{label}, seed {seed[1]}" if seed else label


def _read_json(path: Path, expected: str):
    """The JSON in `path`, or a UserError naming it, why it could not be read and what was expected."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: unreadable ({error}); {expected}") from None


def _read_evaluation(path: Path) -> dict:
    """An `attnmt evaluate --output-dir` file (its command, machine and scored runs), or a
    UserError naming it."""
    expected = "expected the evaluation.json of attnmt evaluate --output-dir"
    evaluation = _read_json(path, expected)
    if not (isinstance(evaluation, dict) and {"command", "machine", "runs"} <= evaluation.keys()):
        raise UserError(f"{path}: no command, machine and runs; {expected}")
    if not isinstance(evaluation["runs"], list):
        raise UserError(f"{path}: runs is not a list; {expected}")
    return evaluation


def _data_dir_of(evaluation: dict) -> list[str]:
    """The data folder that an evaluation's own test files (`--src`, `--ref`) were read from: the
    folder holding their `multi30k` folder, so that a table collected without $ATTNMT_DATA set
    names no machine's folder either."""
    files = [Path(file) for file in (evaluation.get("src"), *(evaluation.get("refs") or [])) if isinstance(file, str)]
    below_root = [file for file in files if file.is_absolute() and len(file.parts) > 3]  # never "/" itself
    return sorted({str(file.parents[1]) for file in below_root if file.parent.name == "multi30k"})


def collect(runs_dir: Path, data_dirs: list[str]) -> list[dict]:
    """One entry per scored system, by config and test set, singles before ensembles, then in the
    evaluation's order; `data_dirs`: the data folder as the commands may name it (as given,
    resolved), besides the one each evaluation's own test files name."""
    paths = (runs_dir / "evaluation").glob("*/evaluation.json")
    found = [(match, path) for path in paths if (match := FOLDER.fullmatch(path.parent.name))]
    found.sort(key=lambda item: (item[0]["config"], item[0]["test"], KINDS.index(item[0]["kind"])))
    entries = []
    for match, path in found:
        config_path = ROOT / "configs" / f"{match['config']}.yaml"
        if not config_path.is_file():
            name = match["config"]
            raise UserError(f"{path.parent}: the folder names config {name!r}; no {config_path.name} in configs/")
        config = load_config(config_path)
        data, model = config.data, config.model
        evaluation = _read_evaluation(path)
        portable = [*data_dirs, *_data_dir_of(evaluation)]
        for record in evaluation["runs"]:
            entries.append(
                {
                    "config": f"configs/{match['config']}.yaml",
                    "direction": f"{data.src_lang}-{data.tgt_lang}",
                    "decoder": f"{model.decoder.capitalize()}, {model.attention}",
                    "test_set": TEST_SETS[match["test"]],
                    "model": _model(record),
                    "command": _portable(evaluation["command"], portable),
                    "machine": evaluation["machine"],
                    **{key: evaluation[key] for key in ("code_at_start", "code_at_end") if key in evaluation},
                    **_portable({key: value for key, value in record.items() if key != "bleu_by_length"}, portable),
                }
            )
    return entries


def _group(entry: dict) -> tuple[str, str, int]:
    """The evaluation folder an entry came from: config, test set and kind (as its rank in KINDS)."""
    if not entry.get("members"):
        kind = "single"
    else:
        kind = "ensemble-averaged" if entry["model"].endswith("averaged") else "ensemble"
    return entry["config"], entry["test_set"], KINDS.index(kind)


def merge(previous: list[dict], found: list[dict]) -> list[dict]:
    """`previous` entries with the ones `found` replaces taken out and `found` added, in the order
    collect() gives: by config, test set and kind, in their own order within one evaluation."""
    replaced = {_group(entry) for entry in found}
    kept = [entry for entry in previous if _group(entry) not in replaced]
    return sorted(kept + found, key=_group)


def _previous_table(path: Path) -> tuple[list[dict], list[dict]]:
    """The entries and the annotations (notes made after the fact, about its rows) of an earlier
    table file, none when there is no file yet; a UserError naming it when it is not one."""
    if not path.exists():
        return [], []
    expected = "expected a table written by python -m tools.multi30k_table"
    results = _read_json(path, expected)
    entries = results.get("entries") if isinstance(results, dict) else None
    if not (isinstance(entries, list) and all(isinstance(e, dict) and e.keys() >= ROW_KEYS for e in entries)):
        raise UserError(f"{path}: no list of entries with {', '.join(sorted(ROW_KEYS))}; {expected}")
    annotations = results.get(ANNOTATIONS, [])
    problems = annotation_problems(annotations)
    if problems:
        raise UserError(f"{path}: {problems[0]}; {expected}")
    return entries, annotations


def table_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The Markdown table: one row per scored system; the papers' Moses-tokenized BLEU where every
    evaluation scored it (tables collected before it existed have the word-token figure only)."""
    papers = all("moses_bleu" in entry for entry in results["entries"])
    header = ["direction", "decoder", "test set", "model", *(["BLEU moses-tok-lc"] if papers else [])]
    header += ["BLEU word-tok-lc", "sacreBLEU", "chrF", "search", "trained"]
    body = []
    for entry in results["entries"]:
        search, training = entry["search"], entry["training"]
        beam = "greedy" if search["beam_size"] == 1 else f"beam {search['beam_size']}"
        trained = f"{training['run_steps']:,} updates, {training['run_minutes']:.0f} min"
        if entry["model"].startswith("single"):  # the checkpoint with the best validation BLEU
            trained = f"step {training['step']:,} of {trained}"
        elif entry.get("members"):
            trained = "the single models' runs"
        body.append(
            [
                entry["direction"],
                entry["decoder"],
                entry["test_set"],
                entry["model"],
                *([f"{entry['moses_bleu']:.2f}"] if papers else []),
                f"{entry['tokenized_bleu']:.2f}",
                f"{entry['bleu']:.2f}",
                f"{entry['chrf']:.2f}",
                f"{beam}, lp {search['length_penalty']:g}",
                trained,
            ]
        )
    return header, body


def _single_scores(scores: list[float]) -> str:
    """One seed's score, or the mean of several seeds with their range."""
    if len(scores) == 1:
        return f"{scores[0]:.2f}"
    return f"{sum(scores) / len(scores):.2f} ({min(scores):.2f}-{max(scores):.2f}, {len(scores)} seeds)"


def summary_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """A summary: one row per direction and decoder, tokenized-lowercased BLEU of the
    best-validation single models (mean and range over seeds) and of the ensemble of those runs
    (their best checkpoints, not averaged), on test2016 and test2017, with each run's training
    time; "-" where nothing was scored."""
    systems: dict[tuple[str, str], dict] = {}
    for entry in results["entries"]:
        system = systems.setdefault((entry["direction"], entry["decoder"]), {"scores": {}, "minutes": set()})
        if entry["model"].startswith("single"):
            kind = "single"
        elif entry.get("members") and not entry["model"].endswith("averaged"):
            kind = f"{len(entry['members'])} runs"
        else:
            continue
        system["scores"].setdefault((entry["test_set"], kind), []).append(entry["tokenized_bleu"])
        system["minutes"].add(round(entry["training"]["run_minutes"]))
    header = ["direction", "decoder"]
    for test_set in TEST_SETS.values():
        header += [f"{test_set.split()[0]} single", f"{test_set.split()[0]} ensemble"]
    header.append("training per run")
    body = []
    for (direction, decoder), system in systems.items():
        row = [direction, decoder]
        for test_set in TEST_SETS.values():
            singles = system["scores"].get((test_set, "single"))
            ensembles = [
                (kind, scores)
                for (test, kind), scores in system["scores"].items()
                if test == test_set and kind != "single"
            ]
            ensemble = f"{ensembles[0][1][0]:.2f} ({ensembles[0][0]})" if ensembles else "-"
            row += [_single_scores(singles) if singles else "-", ensemble]
        minutes = sorted(system["minutes"])
        row.append(f"{minutes[0]} min" if len(minutes) == 1 else f"{minutes[0]}-{minutes[-1]} min")
        body.append(row)
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.multi30k_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir", type=Path, help="the folder scripts/multi30k-table.sh trained and evaluated in")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument(
        "--update", action="store_true", help="keep the rows of the existing --json file no evaluation found replaces"
    )
    args = parser.parse_args(argv)
    data_dir = os.environ.get("ATTNMT_DATA")
    try:
        found = collect(args.runs_dir, [data_dir.rstrip("/"), str(Path(data_dir).resolve())] if data_dir else [])
        previous, annotations = _previous_table(args.json) if args.update else ([], [])
    except UserError as error:
        print(f"tools.multi30k_table: error: {error}", file=sys.stderr)
        return 2
    if not found:
        print(f"{args.runs_dir}/evaluation: no evaluation.json under CONFIG-TEST-KIND folders", file=sys.stderr)
        return 2
    entries = merge(previous, found)
    machines = {json.dumps(entry["machine"], sort_keys=True) for entry in entries}
    results = {"machine": entries[0]["machine"], "same_machine": len(machines) == 1, "entries": entries}
    if annotations:  # the notes on the rows kept stay with them
        results[ANNOTATIONS] = annotations
    write_results(args.json, results, "tools.multi30k_table", argv)
    print("\n".join(markdown_table(*table_rows(results))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
