"""`attnmt sweep report SWEEP.yaml|SWEEP_DIR`: a sweep's trials as tables and plots.

Everything comes from the stored study: the trials' user attributes and the layout the sweep
stored with its grid study (experiments, points, seeds), plus each trial's metrics.jsonl for
the validation curves. Written to SWEEP_DIR/report/ (or --output-dir):

- trials.md: one table of every trial (swept parameters, best validation BLEU, test BLEU,
  validation loss, training minutes, tokens/s, parameters), then per grid experiment a table
  of the mean and standard deviation over seeds of each point (with the training loss at the
  end, to set against validation) and the mean validation BLEU at every validation step (how
  fast each point converges);
- trials.csv (one row per trial, every figure) and length.csv (test BLEU by source length);
- curves-EXPERIMENT.png: validation BLEU/loss and training loss against steps, one colour per
  point (its seeds overlaid);
- bleu-EXPERIMENT-KEY.png: validation and test BLEU against each swept key (dots per seed, a line
  through the means); length-EXPERIMENT.png: test BLEU by source length, one line per point.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path
from typing import Any

from rich.table import Table

from attnmt.plot import grouped_curves, length_plot, scores_by_value
from attnmt.provenance import code_state, with_content_hash
from attnmt.runlog import read_metrics
from attnmt.sweep.spec import load_plan, trial_axes
from attnmt.sweep.store import Store, default_url, shown_url
from attnmt.utils import UserError, shared_machine, write_text_atomic

# Which trial stands for a config when several did (retries, duplicates): the first state found.
PREFERENCE = ("COMPLETE", "RUNNING", "WAITING", "PRUNED", "FAIL")
FIGURES = (
    "valid_bleu",
    "test_bleu",
    "test_chrf",
    "test_length_ratio",
    "valid_loss",
    "train_seconds",
    "wall_seconds",
    "tokens_per_s",
)


def _locate(target: str, storage: str | None) -> tuple[Path, str, str]:
    """(sweep folder, study name, storage URL) from a sweep file or a sweep folder."""
    path = Path(target)
    if path.is_dir():
        info_path = path / "study.json"
        if not info_path.is_file():
            raise UserError(f"{target}: not a sweep folder (no study.json); give the sweep file or its output folder")
        info = json.loads(info_path.read_text(encoding="utf-8"))
        sweep_dir, name = path, info["name"]
    else:
        plan = load_plan(path)
        sweep_dir, name = plan.sweep_dir, plan.name
    if storage is None and not (sweep_dir / "study.db").is_file():
        raise UserError(f"{sweep_dir}/study.db: no study yet; run `attnmt sweep {target}` (or give --storage URL)")
    return sweep_dir, name, storage or default_url(sweep_dir)


def _row(study_name: str, trial) -> dict[str, Any]:
    attrs = trial.user_attrs
    row = {"study": study_name, "number": trial.number, "state": trial.state.name.lower()}
    row.update({key: attrs.get(key) for key in ("key", "name", "run_dir", "experiment", "config", "error")})
    extra = ("parameters", "steps", "test_by_length", "command", "machine", "pace", "code_at_start", "code_at_end")
    row.update({key: attrs.get(key) for key in (*FIGURES, *extra)})
    return row


def collect(store: Store, name: str, layout: dict) -> list[dict[str, Any]]:
    """One row per config (the trial that stands for it), grid trials first, in trial order."""
    rows = []
    studies = [name] + [e["study"] for e in layout["experiments"].values() if e["kind"] == "search"]
    for study_name in studies:
        by_key: dict[str, list] = {}
        for trial in store.load(study_name).get_trials(deepcopy=False):
            if "key" in trial.user_attrs and "duplicate_of" not in trial.user_attrs:
                by_key.setdefault(trial.user_attrs["key"], []).append(trial)
        for twins in by_key.values():
            best = min(twins, key=lambda t: (PREFERENCE.index(t.state.name), t.user_attrs.get("interrupted", False)))
            rows.append(_row(study_name, best))
    return rows


def _number(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _columns(axes: list[str], *, experiments: bool = True) -> list[tuple[str, Any]]:
    """(header, row -> cell text) of the trial table."""
    leaves = [key.split(".")[1] for key in axes]
    columns: list[tuple[str, Any]] = [("trial", lambda r: r["name"]), ("state", lambda r: r["state"])]
    if experiments:
        columns.append(("experiments", lambda r: ", ".join(r["experiment"] or [])))
    for key, leaf in zip(axes, leaves, strict=True):
        header = leaf if leaves.count(leaf) == 1 else key
        columns.append((header, lambda r, key=key: str((r["config"] or {}).get(key, "-"))))
    columns += [
        ("valid BLEU", lambda r: _number(r["valid_bleu"])),
        ("test BLEU", lambda r: _number(r["test_bleu"])),
        ("valid loss", lambda r: _number(r["valid_loss"], 3)),
        ("train min", lambda r: _number(None if r["train_seconds"] is None else r["train_seconds"] / 60, 1)),
        ("tok/s", lambda r: _number(r["tokens_per_s"], 0)),
        ("params (M)", lambda r: _number(None if r["parameters"] is None else r["parameters"] / 1e6, 2)),
    ]
    return columns


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def _members(rows: list[dict], layout: dict, experiment: str) -> dict[int, list[dict]]:
    """point index -> the rows of that point of a grid experiment (one per seed)."""
    by_point: dict[int, list[dict]] = {}
    for row in rows:
        for name, point in layout["members"].get(row["key"], []):
            if name == experiment:
                by_point.setdefault(point, []).append(row)
    return by_point


# The training loss "at the end" is the mean of this many last logged windows (log_every steps
# each): one window is noisy, and under teacher forcing < 1 it depends on the coins drawn.
END_WINDOWS = 5


def end_train_loss(records: list[dict]) -> float | None:
    """Mean training loss of the last END_WINDOWS logged windows of a run's metrics."""
    losses = [r["train_loss"] for r in records if r.get("train_loss") is not None]
    return statistics.mean(losses[-END_WINDOWS:]) if losses else None


def experiment_summary(rows: list[dict], layout: dict, experiment: str) -> list[list[str]]:
    """Per point: label, finished seeds, valid BLEU, test BLEU (mean ± sd), valid loss, the
    training loss at the end, minutes."""
    table = []
    points = layout["experiments"][experiment]["points"]
    for index, members in sorted(_members(rows, layout, experiment).items()):
        done = [row for row in members if row["state"] == "complete"]
        end_losses = [end_train_loss(row["metrics"]) for row in done]
        table.append(
            [
                points[index]["label"],
                f"{len(done)}/{len(members)}",
                _mean_sd([row["valid_bleu"] for row in done]),
                _mean_sd([row["test_bleu"] for row in done]),
                _mean_sd([row["valid_loss"] for row in done]),
                _mean_sd([loss for loss in end_losses if loss is not None]),
                _mean_sd([row["train_seconds"] / 60 for row in done]),
            ]
        )
    return table


SUMMARY_HEADERS = ["point", "seeds done", "valid BLEU", "test BLEU", "valid loss", "train loss (end)", "train min"]


def convergence(rows: list[dict], layout: dict, experiment: str) -> tuple[list[str], list[list[str]]]:
    """(headers, body): per point, the validation BLEU at each validation step, mean over the
    finished seeds that reached that step."""
    points = layout["experiments"][experiment]["points"]
    curves: dict[str, dict[int, list[float]]] = {}
    for index, members in sorted(_members(rows, layout, experiment).items()):
        by_step = curves.setdefault(points[index]["label"], {})
        for row in members:
            if row["state"] == "complete":
                for record in row["metrics"]:
                    if record.get("valid_bleu") is not None:
                        by_step.setdefault(record["step"], []).append(record["valid_bleu"])
    steps = sorted({step for by_step in curves.values() for step in by_step})
    body = [
        [label, *(f"{statistics.mean(by_step[step]):.2f}" if step in by_step else "-" for step in steps)]
        for label, by_step in curves.items()
    ]
    return ["point", *(f"{step:,}" for step in steps)], body


def by_length(rows: list[dict], layout: dict, experiment: str) -> dict[str, list[tuple[str, float]]]:
    """Per point of a grid experiment: (source-length bucket, test BLEU averaged over the
    finished seeds), the Bahdanau paper's Figure 2 as numbers. Empty when no trial has them."""
    points = layout["experiments"][experiment]["points"]
    done = [row for row in rows if row["state"] == "complete" and row["test_by_length"]]
    lengths = {}
    for index, members in sorted(_members(done, layout, experiment).items()):
        buckets: dict[str, list[float]] = {}
        for row in members:
            for label, _, score in row["test_by_length"]:
                buckets.setdefault(label, []).append(score)
        lengths[points[index]["label"]] = [(bucket, statistics.mean(scores)) for bucket, scores in buckets.items()]
    return lengths


def _markdown(headers: list[str], body: list[list[str]]) -> str:
    def line(cells):
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |\n"

    return line(headers) + line(["---"] * len(headers)) + "".join(line(cells) for cells in body)


def _rich(title: str, headers: list[str], body: list[list[str]]) -> Table:
    table = Table(title=title)
    for index, header in enumerate(headers):
        widest = max((len(cells[index]) for cells in body), default=1)
        if index == 0:
            table.add_column(header, overflow="fold", min_width=min(widest, 24))
        else:  # figures never break; headers may wrap between words
            table.add_column(header, justify="right", min_width=widest)
    for cells in body:
        table.add_row(*cells)
    return table


def _csv(rows: list[dict], axes: list[str]) -> tuple[str, str]:
    trials, lengths = io.StringIO(), io.StringIO()
    fields = ["study", "number", "name", "state", "experiment", *axes, *FIGURES, "parameters", "steps"]
    writer = csv.writer(trials, lineterminator="\n")
    writer.writerow([*fields, "run_dir", "error"])
    length_writer = csv.writer(lengths, lineterminator="\n")
    length_writer.writerow(["name", "bucket", "sentences", "test_bleu"])
    for row in rows:
        values = {**row, **{key: (row["config"] or {}).get(key) for key in axes}}
        values["experiment"] = " ".join(row["experiment"] or [])
        writer.writerow([values.get(field) for field in fields] + [row["run_dir"], row["error"] or ""])
        for label, sentences, score in row["test_by_length"] or []:
            length_writer.writerow([row["name"], label, sentences, score])
    return trials.getvalue(), lengths.getvalue()


def _read_metrics(sweep_dir: Path, row: dict) -> list[dict]:
    """The records of a row's metrics.jsonl; none when its run folder is not here (a sweep
    shared by machines keeps each run where it ran)."""
    try:
        return read_metrics(sweep_dir / row["run_dir"])
    except (UserError, TypeError):
        return []


# What a trial's validation curve keeps of each validation (the tokenized figures where the run
# recorded them).
VALIDATION_KEYS = (
    "step",
    "valid_loss",
    "valid_bleu",
    "valid_length_ratio",
    "valid_tokenized_bleu",
    "valid_tokenized_length_ratio",
)


def _raw_results(name: str, rows: list[dict], command: str | None) -> dict[str, Any]:
    """Every trial's figures and validation curve, the commands that made them and the machines
    they ran on: the raw results behind the tables and plots, small enough to keep."""
    trials = []
    for row in rows:
        trial = {key: value for key, value in row.items() if key not in ("metrics", "config")}
        trial["validation"] = [
            {key: record[key] for key in VALIDATION_KEYS if key in record}
            for record in row["metrics"]
            if "valid_loss" in record
        ]
        trials.append(trial)
    machines = [row["machine"] for row in rows if row.get("machine")]
    sweep_commands = sorted({row["command"] for row in rows if row.get("command")})
    return {
        "study": name,
        "command": " && ".join([*sweep_commands, *([command] if command else [])]),
        # the trials' machines as one record, each difference listed; each trial names its own
        "machine": shared_machine(machines),
        # the code of the report itself; each trial records the code that trained it
        "code_at_report": code_state(),
        "trials": trials,
    }


def _curves(rows: list[dict]) -> list[list[dict]]:
    return [row["metrics"] for row in rows if row["metrics"]]


def _series(row: dict, layout: dict, experiment: str, axis: str | None) -> str:
    """Which line of a BLEU-against-`axis` plot a row belongs to: the other axes' values for
    grid points, the label for extra points."""
    info = layout["experiments"][experiment]
    for name, index in layout["members"].get(row["key"], []):
        if name == experiment:
            point = info["points"][index]
            if point["kind"] == "point":
                return point["label"]
            return ", ".join(f"{k.split('.')[1]}={v}" for k, v in point["values"].items() if k != axis)
    return ""


def _plots(out: Path, rows: list[dict], layout: dict) -> list[Path]:
    written = []
    for experiment, info in layout["experiments"].items():
        if info["kind"] == "search":  # each trial its own curve, all on one line against each parameter
            mine = [row for row in rows if experiment in (row["experiment"] or [])]
            groups = {row["name"]: _curves([row]) for row in mine}
        else:  # a curve colour per point (its seeds overlaid)
            by_point = _members(rows, layout, experiment)
            mine = [row for members in by_point.values() for row in members]
            groups = {info["points"][i]["label"]: _curves(by_point[i]) for i in sorted(by_point)}
        if not mine:
            continue
        if any(groups.values()):
            metrics = ["valid_bleu", "valid_loss", "train_loss"]
            written.append(grouped_curves(groups, metrics, out / f"curves-{experiment}.png"))
        done = [row for row in mine if row["state"] == "complete"]
        for axis in info["axes"] or [None]:
            panels: dict[str, dict] = {"valid BLEU": {}, "test BLEU": {}}
            for row in done:
                grid = info["kind"] == "grid" and axis is not None
                series = _series(row, layout, experiment, axis) if grid else ""
                x = row["config"].get(axis) if axis else _series(row, layout, experiment, None)
                for title, figure in (("valid BLEU", "valid_bleu"), ("test BLEU", "test_bleu")):
                    panels[title].setdefault(series, {}).setdefault(x, []).append(row[figure])
            if done:
                leaf = axis.split(".")[1] if axis else "point"
                written.append(scores_by_value(panels, out / f"bleu-{experiment}-{leaf}.png", xlabel=axis or "point"))
        if info["kind"] == "grid" and (lengths := by_length(rows, layout, experiment)):
            written.append(length_plot(lengths, out / f"length-{experiment}.png"))
    return written


def report(
    target: str, *, storage: str | None = None, output_dir: str | None = None, console=None, command: str | None = None
) -> Path:
    """Tables, plots and trials.json of a sweep; returns the folder they were written to.
    `command` is the report's own command line, recorded in trials.json."""
    sweep_dir, name, url = _locate(target, storage)
    store = Store(url)
    layout = store.load(name).user_attrs.get("layout")
    if layout is None:
        raise UserError(f"{shown_url(url)}: study {name!r} was not written by attnmt sweep")
    rows = collect(store, name, layout)
    for row in rows:
        row["metrics"] = _read_metrics(sweep_dir, row)
    axes = trial_axes(layout)
    columns = _columns(axes)
    headers, body = [h for h, _ in columns], [[cell(row) for _, cell in columns] for row in rows]
    markdown = f"# Sweep {name}\n\n{len(rows)} trials, objective {layout['metric']}.\n\n" + _markdown(headers, body)
    stopped = [f"- {row['name']} ({row['state']}): {row['error'].splitlines()[0]}\n" for row in rows if row["error"]]
    markdown += "\n" + "".join(stopped) if stopped else ""
    # A terminal is narrower than a file: there the trial's name (what differs from the base) stands
    # for its parameters.
    columns = _columns([], experiments=False)
    shown = [[cell(row) for _, cell in columns] for row in rows]
    tables = [_rich(f"sweep {name}: {len(rows)} trials", [h for h, _ in columns], shown)]
    for experiment, info in layout["experiments"].items():
        if info["kind"] == "grid":
            summary = experiment_summary(rows, layout, experiment)
            seeds = f" (seeds {', '.join(map(str, info['seeds']))})" if info["seeds"] else ""
            markdown += f"\n## {experiment}{seeds}\n\n" + _markdown(SUMMARY_HEADERS, summary)
            tables.append(_rich(f"{experiment}{seeds}", SUMMARY_HEADERS, summary))
            steps, by_step = convergence(rows, layout, experiment)
            if by_step:
                markdown += "\nValidation BLEU by step (mean over seeds):\n\n" + _markdown(steps, by_step)
            if lengths := by_length(rows, layout, experiment):
                buckets = [bucket for bucket, _ in next(iter(lengths.values()))]
                body = [[label, *(f"{score:.2f}" for _, score in scores)] for label, scores in lengths.items()]
                markdown += "\nTest BLEU by source length (mean over seeds):\n\n" + _markdown(["point", *buckets], body)
    out = Path(output_dir) if output_dir else sweep_dir / "report"
    try:
        write_text_atomic(out / "trials.md", markdown)
        trials_csv, length_csv = _csv(rows, axes)
        write_text_atomic(out / "trials.csv", trials_csv)
        write_text_atomic(out / "length.csv", length_csv)
        raw = with_content_hash(_raw_results(name, rows, command))
        write_text_atomic(out / "trials.json", json.dumps(raw, indent=1) + "\n")
        plots = _plots(out, rows, layout)
    except OSError as exc:
        raise UserError(f"{out}: cannot write the report ({exc.strerror or exc})") from None
    if console is not None:
        for table in tables:
            console.print(table)
        written = f"trials.md, trials.csv, length.csv, trials.json and {len(plots)} plots"
        console.print(f"wrote {out}/{written}", markup=False)
    return out
