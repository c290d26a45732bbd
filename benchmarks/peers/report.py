"""The peer benchmark's results as terminal tables, and the quality curves as a picture."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from rich.console import Console
from rich.markup import escape

from attnmt.utils import atomic_path
from benchmarks.report import to_rich


def format_spread(summary: dict, digits: int = 0) -> str:
    """'median (min-max)' of a summary of repeats."""
    fmt = f"{{:,.{digits}f}}"
    low, high = fmt.format(summary["min"]), fmt.format(summary["max"])
    return f"{fmt.format(summary['median'])} ({low}-{high})"


def machine_line(results: dict) -> str:
    machine = results["machine"]
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; torch {machine['torch']}, "
        f"{machine['threads']} threads per system; {results['started']}"
    )


def speed_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    header = ["system", "params", "train tok/s", "peak RSS MiB"]
    beams = sorted({beam for system in results["systems"].values() for beam in system["decoding"]})
    for beam in beams:
        label = "greedy" if beam == "beam1" else beam.replace("beam", "beam ")
        header += [f"{label} sent/s", f"{label} tok/s", f"{label} BLEU"]
    rows = []
    for name, system in results["systems"].items():
        training = system["training"]
        row = [
            f"{name} {system['version']}",
            f"{system['parameters'] / 1e6:.2f}M",
            format_spread(training["tokens_per_s"]),
            format_spread(training["peak_rss_mib"]),
        ]
        for beam in beams:
            decoding = system["decoding"].get(beam)
            if decoding is None:
                row += ["-", "-", "-"]
                continue
            row += [
                format_spread(decoding["sentences_per_s"], 1),
                format_spread(decoding["tokens_per_s"]),
                f"{decoding['bleu_tok_lc']:.2f}",
            ]
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


def quality_rows(results: dict) -> tuple[list[str], list[list[str]]]:
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
    console.print(to_rich((f"{minutes:g} minutes of training each; tokenized lowercased BLEU", header, rows)))


def quality_curves(results: dict) -> Figure:
    """Validation BLEU against minutes of training, one line per system."""
    figure = Figure(figsize=(6.4, 3.8), layout="constrained")
    axes = figure.add_subplot()
    for name, system in results["systems"].items():
        minutes = [point["minutes"] for point in system["curve"]]
        scores = [point["valid_bleu_tok_lc"] for point in system["curve"]]
        axes.plot(minutes, scores, marker="o", markersize=3, label=f"{name} {system['version']}")
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
