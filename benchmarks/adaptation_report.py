"""The domain adaptation study's report, read from its raw result alone (what `python -m
benchmarks.adaptation score` writes, its settings included): each arm's BLEU at each mark over
its seeds and whether the study's targets hold, the table the docs quote, and the plot of BLEU
against training minutes.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks.measure import spread

TITLES = {"multi30k-test2016": "Multi30k test2016 (the new domain)", "tatoeba-test": "Tatoeba test (the old domain)"}


def start_of(results: dict, run: dict) -> dict | None:
    """The starting model `run` continued from, by the hash of its weights (None from nothing)."""
    if run["started_from"] is None:
        return None
    digest = run["started_from"]["weights_sha256"]
    return next(start for start in results["starts"] if start["weights_sha256"] == digest)


def summary(results: dict) -> dict:
    """Per arm and mark, the median and range over seeds of tokenized BLEU on each test set, and
    whether the targets hold: every continued seed above the better scratch seed on Multi30k at
    each mark up to 20 minutes, and the mixed arm at most 2 Tatoeba BLEU below its start."""
    table: dict[str, dict[str, dict]] = {}
    for run in results["runs"]:
        for mark in run["marks"]:
            cell = table.setdefault(run["arm"], {}).setdefault(str(mark["minutes"]), {})
            for test_set, scores in mark["scores"].items():
                cell.setdefault(test_set, []).append(scores["tokenized_bleu"])
    arms = {
        arm: {minutes: {name: spread(values) for name, values in cell.items()} for minutes, cell in marks.items()}
        for arm, marks in table.items()
    }
    targets = {}
    scratch = arms.get("scratch", {})
    for arm in ("continued", "mixed", "extended"):
        if arm not in arms or not scratch:
            continue
        margins = [
            arms[arm][m]["multi30k-test2016"]["min"] - scratch[m]["multi30k-test2016"]["max"]
            for m in arms[arm]
            if int(m) <= 20 and m in scratch
        ]
        targets[arm] = {"margin_over_best_scratch_up_to_20_min": min(margins), "holds": min(margins) > 0}
    drops = [
        start_of(results, run)["scores"]["tatoeba-test"]["tokenized_bleu"]
        - min(mark["scores"]["tatoeba-test"]["tokenized_bleu"] for mark in run["marks"])
        for run in results["runs"]
        if run["arm"] == "mixed"
    ]
    if drops:
        targets["mixed_old_domain"] = {"largest_drop": max(drops), "holds": max(drops) <= 2.0}
    return {"arms": arms, "targets": targets}


def adaptation_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One line per arm and mark (and one per starting model at minute 0): the seeds, tokenized
    BLEU on each test set as median (range)."""

    def cell(values: list[float]) -> str:
        if len(values) == 1:
            return f"{values[0]:.2f}"
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    header = ["arm", "minutes", "updates", "seeds", "Multi30k test2016", "Tatoeba test"]
    lines = []
    for start in results["starts"]:
        name, scores = start["name"], start["scores"]
        lines.append(
            [
                f"{name} (Tatoeba, weights {start['weights_sha256'][:8]})",
                "0",
                f"{start['step']:,}",
                "-",
                cell([scores["multi30k-test2016"]["tokenized_bleu"]]),
                cell([scores["tatoeba-test"]["tokenized_bleu"]]),
            ]
        )
    for arm in results["settings"]["arms"]:
        runs = [r for r in results["runs"] if r["arm"] == arm]
        for index, minutes in enumerate(results["settings"]["minutes"]):
            marks = [r["marks"][index] for r in runs]
            if not marks:
                continue
            lines.append(
                [
                    arm,
                    str(minutes),
                    f"{marks[0]['step']:,}",
                    ",".join(str(r["seed"]) for r in runs),
                    cell([m["scores"]["multi30k-test2016"]["tokenized_bleu"] for m in marks]),
                    cell([m["scores"]["tatoeba-test"]["tokenized_bleu"] for m in marks]),
                ]
            )
    return header, lines


def plot(results: dict, png: Path) -> Path:
    """BLEU against training minutes on each test set: a line per arm through its seeds' median,
    each seed a dot; a continued arm's line starts at its starting model (minute 0)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from attnmt.utils import atomic_path

    arms, marks = results["settings"]["arms"], results["settings"]["minutes"]
    figure = Figure(figsize=(10, 4))
    axes = figure.subplots(1, 2, sharex=True)
    for ax, test_set in zip(axes, TITLES, strict=True):
        for colour, arm in zip(("C0", "C1", "C2", "C3"), arms, strict=True):
            runs = [r for r in results["runs"] if r["arm"] == arm]
            if not runs:
                continue
            xs, ys = [], []
            starts = [start_of(results, run) for run in runs]
            if None not in starts:
                xs.append(0)
                ys.append(statistics.median(s["scores"][test_set]["tokenized_bleu"] for s in starts))
            for index, minutes in enumerate(marks):
                values = [r["marks"][index]["scores"][test_set]["tokenized_bleu"] for r in runs]
                ax.scatter([minutes] * len(values), values, color=colour, s=12)
                xs.append(minutes)
                ys.append(statistics.median(values))
            ax.plot(xs, ys, color=colour, label=f"{arm} ({len(runs)} seed{'s' if len(runs) > 1 else ''})")
        ax.set_title(TITLES[test_set])
        ax.set_xlabel("minutes of training (at each arm's rate alone on the machine)")
        ax.set_xticks([0, *marks])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("BLEU (tokenized, lowercased)")
    axes[0].legend()
    figure.tight_layout()
    with atomic_path(png) as temporary:
        figure.savefig(temporary, format="png", dpi=120)
    return png
