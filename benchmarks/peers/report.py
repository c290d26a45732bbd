"""The peer benchmark's results as terminal tables, and the quality curves as a picture."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from rich.console import Console
from rich.markup import escape

from attnmt.utils import atomic_path
from benchmarks.report import rows_by_search, to_rich


def format_spread(summary: dict, digits: int = 0) -> str:
    """'median (min-max)' of a summary of repeats."""
    fmt = f"{{:,.{digits}f}}"
    low, high = fmt.format(summary["min"]), fmt.format(summary["max"])
    return f"{fmt.format(summary['median'])} ({low}-{high})"


def system_label(name: str, system: dict, runs: list[dict] | None = None) -> str:
    """'name version'. attnmt's version names the commit it was measured at (0.1.0+349a784), the
    first run's; a race whose seeds ran at other commits names each of the `runs` given (default
    all) in seed order, so a row or a curve never credits one commit with another's run."""
    version = system["version"]
    base, plus, first = version.partition("+")
    runs = system.get("runs", []) if runs is None else runs
    commits = [run["provenance"]["git_commit"][:7] for run in runs if "provenance" in run]
    if plus and commits and commits != [first[:7]] * len(commits):
        version = f"{base}+{'/'.join(dict.fromkeys(commits))}"
    return f"{name} {version}"


def machine_line(results: dict) -> str:
    machine = results["machine"]
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; torch {machine['torch']}, "
        f"{machine['threads']} threads per system; {results['started']}"
    )


def speed_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per system. Arithmetic columns (MFLOP per target token, GFLOP/s) appear when the
    results have them: a forward pass per token, and the throughput times the arithmetic."""
    systems = results["systems"].values()
    counted = all("arithmetic" in system for system in systems)
    header = ["system", "params"] + (["fwd MFLOP/tok"] if counted else []) + ["train tok/s"]
    header += (["train GFLOP/s"] if counted else []) + ["peak RSS MiB"]
    beams = sorted({beam for system in systems for beam in system["decoding"]})
    decoding_columns = ["sent/s", "tok/s"] + (["GFLOP/s"] if counted else []) + ["BLEU"]
    for beam in beams:
        label = "greedy" if beam == "beam1" else beam.replace("beam", "beam ")
        header += [f"{label} {column}" for column in decoding_columns]
    rows = []
    for name, system in results["systems"].items():
        training = system["training"]
        row = [f"{name} {system['version']}", f"{system['parameters'] / 1e6:.2f}M"]
        if counted:
            row.append(f"{system['arithmetic']['forward_flops_per_target_token'] / 1e6:.1f}")
        row.append(format_spread(training["tokens_per_s"]))
        if counted:
            row.append(format_spread(training["gflops_per_s"], 1))
        row.append(format_spread(training["peak_rss_mib"]))
        for beam in beams:
            decoding = system["decoding"].get(beam)
            if decoding is None:
                row += ["-"] * len(decoding_columns)
                continue
            row += [format_spread(decoding["sentences_per_s"], 1), format_spread(decoding["tokens_per_s"])]
            if counted:
                row.append(format_spread(decoding["gflops_per_s"], 1))
            row.append(f"{decoding['bleu_tok_lc']:.2f}")
        rows.append(row)
    return header, rows


def print_speed(results: dict, console: Console) -> None:
    options = results.get("options", {})
    console.print(f"[bold]Peers, speed[/bold]: {machine_line(results)}")
    if not results["systems"]:
        console.print("no system was measured")
        return
    header, rows = speed_rows(results)
    title = (
        f"median (min-max) of {options.get('repeats')} repeats; training {options.get('steps')} updates after "
        f"{options.get('warmup')}; decoding test2016 with models trained {options.get('decode_updates')} updates"
    )
    console.print(to_rich((title, header, rows)))
    for name, system in results["systems"].items():
        if system.get("architecture_notes"):
            console.print(f"[dim]{name}: {escape(system['architecture_notes'])}[/dim]")


def _plain_beam(searches: dict) -> str:
    """The key of the race's own beam search among a run's test decodes (beam5, not beam5_tuned)."""
    return max((key for key in searches if key.removeprefix("beam").isdigit()), key=lambda key: int(key[4:]))


def race_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per system of a race with seeds: median (min-max) over its runs; races that decoded
    with the beam tuned on valid and on test2017 have columns for them."""
    raced = {name: system for name, system in results["systems"].items() if system.get("runs")}
    summaries = [system["summary"] for system in raced.values()]
    tuned = [key for key in summaries[0]["test2016"] if key.endswith("_tuned")] if summaries else []
    later = all("test2017" in summary for summary in summaries) and bool(summaries)
    header = ["system", "params", "fwd MFLOP/tok", "seeds", "updates", "best valid BLEU", "test2016 greedy"]
    header.append("test2016 beam 5")
    header += ["test2016 beam 5, tuned"] if tuned else []
    header += ["test2017 greedy", "test2017 beam 5, tuned" if tuned else "test2017 beam 5"] if later else []
    rows = []
    for name, system in raced.items():
        summary = system["summary"]
        beam = _plain_beam(summary["test2016"])
        row = [
            system_label(name, system),
            f"{system['parameters'] / 1e6:.2f}M",
            f"{system['arithmetic']['forward_flops_per_target_token'] / 1e6:.1f}",
            ", ".join(str(seed) for seed in summary["seeds"]),
            format_spread(summary["updates"]),
            format_spread(summary["best_valid_bleu_tok_lc"], 2),
            format_spread(summary["test2016"]["beam1"], 2),
            format_spread(summary["test2016"][beam], 2),
        ]
        best = f"{beam}_tuned" if tuned else beam
        row += [_spread_or_dash(summary["test2016"], best)] if tuned else []
        row += (
            [format_spread(summary["test2017"]["beam1"], 2), _spread_or_dash(summary["test2017"], best)]
            if later
            else []
        )
        rows.append(row)
    return header, rows


def _spread_or_dash(searches: dict, key: str) -> str:
    """A system whose search takes no length penalty has no tuned beam: a dash."""
    return format_spread(searches[key], 2) if key in searches else "-"


def bootstrap_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The race's paired bootstraps: one row per seed, test set and compared pair of searches."""
    header = ["seed", "test set", "searches", "BLEU", "difference (95% interval)", "first higher in"]
    rows = []
    for found in results.get("comparisons", []):
        first, second = found["systems"]
        low, high = found["interval95"]
        rows.append(
            [
                str(found["seed"]),
                found["split"],
                f"{first} {found['searches'][0]} / {second} {found['searches'][1]}",
                f"{found['bleu'][0]:.2f} / {found['bleu'][1]:.2f}",
                f"{found['delta']:+.2f} ({low:+.2f} to {high:+.2f})",
                f"{100 * found['first_better_share']:.1f}% of {found['samples']:,} samples",
            ]
        )
    return header, rows


def equal_updates_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """A race's validation curves at equal updates: one row per system and seed, with the mean
    greedy validation BLEU over the checkpoints of the second half of the updates every run
    reached (the steps all curves share, above half the last of them), their lowest and highest,
    and the mean over the run's checkpoints past that range: what its extra updates bought."""
    runs = [(name, run) for name, system in results["systems"].items() for run in system.get("runs", [])]
    shared = set.intersection(*({point["step"] for point in run["curve"]} for _, run in runs)) if runs else set()
    last = max(shared, default=0)
    window = [step for step in sorted(shared) if step > last / 2]
    span = f"{window[0]:,}-{last:,}" if window else "-"
    header = ["system", "seed", f"mean valid BLEU, updates {span}", "lowest-highest there", "updates past it"]
    header.append("mean valid BLEU past it")
    rows = []
    for name, run in runs:
        at = {point["step"]: point["valid_bleu_tok_lc"] for point in run["curve"]}
        inside = [at[step] for step in window]
        past = [score for step, score in at.items() if step > last]
        row = [system_label(name, results["systems"][name], [run]), str(run["seed"])]
        row += [f"{sum(inside) / len(inside):.2f}", f"{min(inside):.2f}-{max(inside):.2f}"] if inside else ["-", "-"]
        row += [f"{run['updates'] - last:,}", f"{sum(past) / len(past):.2f}" if past else "-"]
        rows.append(row)
    return header, rows


def quality_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The quality table: a race with seeds (`race_rows`), or one run per system as earlier
    versions of the benchmark wrote it."""
    if any("runs" in system for system in results["systems"].values()):
        return race_rows(results)
    header = ["system", "updates", "best step", "at minute", "valid BLEU", "test2016 greedy", "test2016 beam 5"]
    rows = []
    for name, system in results["systems"].items():
        best, test = system["best"], system["test2016"]
        beam = max(test, key=lambda key: int(key.removeprefix("beam")))
        rows.append(
            [
                f"{name} {system['version']}",
                f"{system['updates']:,}",
                f"{best['step']:,}",
                f"{best['minutes']:.1f}",
                f"{best['valid_bleu_tok_lc']:.2f}",
                f"{test['beam1']['bleu_tok_lc']:.2f}",
                f"{test[beam]['bleu_tok_lc']:.2f}",
            ]
        )
    return header, rows


def print_quality(results: dict, console: Console) -> None:
    console.print(f"[bold]Peers, quality per budget[/bold]: {machine_line(results)}")
    if not results["systems"]:
        console.print("no system was measured")
        return
    header, rows = quality_rows(results)
    minutes = results.get("options", {}).get("minutes")
    console.print(
        to_rich((f"{minutes:g} minutes of training each; BLEU word-tok-lc (attnmt's word tokens)", header, rows))
    )


def quality_curves(results: dict) -> Figure:
    """Validation BLEU against minutes of training, one line per system and seed."""
    figure = Figure(figsize=(6.4, 3.8), layout="constrained")
    axes = figure.add_subplot()
    for name, system in results["systems"].items():
        for run in system.get("runs", [system]):  # a race: one line per seed
            minutes = [point["minutes"] for point in run["curve"]]
            scores = [point["valid_bleu_tok_lc"] for point in run["curve"]]
            seed = f", seed {run['seed']}" if "seed" in run else ""
            axes.plot(minutes, scores, marker="o", markersize=3, label=f"{system_label(name, system, [run])}{seed}")
    axes.set_xlabel("minutes of training (2 CPU threads)")
    axes.set_ylabel("validation BLEU (tok, lc), greedy")
    axes.set_title("Multi30k en-de: quality per CPU minute")
    axes.grid(alpha=0.3)
    axes.legend()
    return figure


def save_figure(figure: Figure, path: Path) -> Path:
    """Write the figure as PNG atomically (a kill leaves the previous picture, never half of one)."""
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png", dpi=110)
    return path


def stopping_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One line per system, seed and search: valid and test2016 BLEU with their length ratios."""
    header = ["system", "seed", "search", "valid BLEU", "valid ratio", "test BLEU", "test ratio", "test BP"]
    lines = []
    for name, system in results["systems"].items():
        for run in system["runs"]:
            for search, splits in rows_by_search(run["rows"]).items():
                valid, test = splits["valid"], splits["test2016"]
                if search.endswith("tuned"):
                    search += f" (alpha {valid['alpha']:g})"
                figures = [f"{valid['bleu_tok_lc']:.2f}", f"{valid['length_ratio']:.3f}", f"{test['bleu_tok_lc']:.2f}"]
                figures += [f"{test['length_ratio']:.3f}", f"{test['brevity_penalty']:.3f}"]
                lines.append([name, str(run["seed"]), search, *figures])
    return header, lines


def same_weights_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One line per seed and search: how many test2016 outputs the two toolkits share on one set
    of weights, each one's BLEU, and each one's decoding speed (median and range of the repeats)
    batched its fastest way."""
    header = ["seed", "updates", "search", "identical outputs", "BLEU attnmt", "BLEU OpenNMT-py"]
    header += ["attnmt sent/s", "OpenNMT-py sent/s", "speed ratio", "batched by (attnmt / OpenNMT-py)"]
    lines = []
    for run in results["runs"]:
        for row in run["rows"]:
            ours, theirs = row["systems"]["attnmt"], row["systems"]["opennmt-py"]
            ratio = ours["sentences_per_s"]["median"] / theirs["sentences_per_s"]["median"]
            figures = [
                f"{100 * row['identical_outputs']:.1f}%",
                f"{ours['bleu_tok_lc']:.2f}",
                f"{theirs['bleu_tok_lc']:.2f}",
            ]
            figures += [format_spread(ours["sentences_per_s"], 1), format_spread(theirs["sentences_per_s"], 1)]
            batched = f"{ours['batching']['chosen']} / {theirs['batching']['chosen']}"
            lines.append([str(run["seed"]), f"{run['updates']:,}", row["search"], *figures, f"{ratio:.2f}x", batched])
    return header, lines
