"""The benchmark's results as tables: rich on the terminal, Markdown for docs/performance.md.

Rows are built once as strings (`training_table`, `decoding_table`) and rendered either way.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

Rows = tuple[str, list[str], list[list[str]]]  # title, header, rows


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def machine_line(results: dict) -> str:
    machine = results["machine"]
    gpu = f", GPU {machine['gpu']}" if machine.get("gpu") else ""
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB{gpu}; torch {machine['torch']}, "
        f"{machine['threads']} threads, device {machine['device']}; float32 matmul ceiling "
        f"{results['ceiling_gflops']:,.0f} GFLOP/s (after the run: {results.get('ceiling_gflops_after', 0):,.0f})"
    )


def data_line(results: dict) -> str:
    data, settings = results["data"], results["settings"]
    return (
        f"{data['corpus']}: {data['train_pairs']:,} pairs, vocabularies {data['src_vocab']:,} / "
        f"{data['tgt_vocab']:,}; batches of {settings['batch_sentences']} sentences, dropout {settings['dropout']}, "
        f"{settings['warmup']} warm-up + {settings['steps']} timed steps per model; "
        f"decoding {data['test_sentences']:,} test sentences in batches of {settings['decode_batch']}"
    )


def with_range(measurement: dict, key: str, digits: int | None = None) -> str:
    """'median (min-max)' of a repeated measurement's `key`; the plain value when not repeated."""
    spread = measurement.get("spread", {}).get(key)
    value = measurement[key]
    fmt = _rate if digits is None else (lambda number: f"{number:,.{digits}f}")
    if not spread or len(spread["values"]) < 2:
        return fmt(value)
    return f"{fmt(spread['median'])} ({fmt(spread['min'])}-{fmt(spread['max'])})"


def _percent(measurement: dict, key: str) -> str:
    spread = measurement.get("spread", {}).get(key)
    if not spread or len(spread["values"]) < 2:
        return f"{measurement[key]:.1%}"
    return f"{spread['median']:.1%} ({spread['min']:.1%}-{spread['max']:.1%})"


def training_table(results: dict) -> Rows:
    header = [
        "config",
        "implementation",
        "params",
        "target tok/s",
        "attnmt speed-up",
        "useful FLOP share",
        "peak MiB",
        "FLOPs run / useful",
    ]
    rows = []
    for name, config in results["configs"].items():
        training = config["training"]
        for implementation, measured in training["implementations"].items():
            speedup = training["speedup"].get(implementation)
            rows.append(
                [
                    name,
                    implementation,
                    f"{config['parameters'] / 1e6:.1f}M",
                    with_range(measured, "tokens_per_s"),
                    "" if speedup is None else f"{speedup:.2f}x",
                    _percent(measured, "useful_flop_fraction"),
                    f"{measured['peak_memory_mib']:,.0f}",
                    f"{measured['executed_per_useful_flop']:.2f}",
                ]
            )
    repeats = results["settings"].get("repeats", 1)
    title = (
        f"Training: target tokens/s (incl. EOS), median (min-max) of {repeats} alternating repeats; useful FLOP/s "
        "over the matmul ceiling; peak memory; forward FLOPs run per useful FLOP (first timed batch)"
    )
    return title, header, rows


def _per_sentence(rates: dict) -> float:
    return rates["generated_tokens"] / max(1, rates["sentences"])


def _decoding_rows(label: str, decoding: dict) -> list[list[str]]:
    rows = []
    for implementation, measured in decoding["implementations"].items():
        speedup = decoding["speedup_tokens"].get(implementation)
        rows.append(
            [
                label,
                implementation,
                with_range(measured, "sentences_per_s"),
                with_range(measured, "tokens_per_s"),
                "" if speedup is None else f"{speedup:.2f}x",
                f"{_per_sentence(measured):.1f}",
                measured["algorithm"],
            ]
        )
    return rows


def decoding_table(results: dict, mode: str) -> Rows:
    header = ["model", "implementation", "sent/s", "generated tok/s", "attnmt speed-up", "tokens/sentence", "how"]
    rows = []
    for name, config in results["configs"].items():
        if config["decoding"] is not None:
            rows += _decoding_rows(f"{name} (untrained)", config["decoding"][mode])
    trained = results.get("trained")
    if trained:
        label = f"trained {Path(trained['run_dir']).name} ({trained['tokenizer']})"
        rows += _decoding_rows(label, trained["decoding"][mode])
    repeats = results["settings"].get("repeats", 1)
    title = f"Decoding, {mode}: median (min-max) of {repeats} alternating repeats"
    return title, header, rows


def to_rich(rows: Rows) -> Table:
    title, header, body = rows
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in body:
        table.add_row(*row)
    return table


def markdown_table(header: list[str], body: list[list[str]]) -> list[str]:
    """The lines of a Markdown table; README and docs quote these, and a test holds them to the results."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in body]


def to_markdown(rows: Rows) -> str:
    title, header, body = rows
    return "\n".join([f"**{title}**", "", *markdown_table(header, body)])


def _against_fastest(speedups: dict[str, float]) -> str:
    if not speedups:
        return "no reference"
    name = min(speedups, key=speedups.get)  # the smallest speed-up is over the fastest reference
    return f"{speedups[name]:.2f}x {name}"


def headlines(results: dict) -> list[str]:
    """attnmt's speed-up over the faster reference, per config and measurement: the figure to quote."""
    lines = []
    entries = [(name, config) for name, config in results["configs"].items()]
    if results.get("trained"):
        entries.append((f"trained {Path(results['trained']['run_dir']).name}", results["trained"]))
    for name, entry in entries:
        parts = []
        if "training" in entry:
            parts.append(f"training {_against_fastest(entry['training']['speedup'])}")
        for mode in ("greedy", "beam"):
            if entry["decoding"] is not None:
                parts.append(f"{mode} {_against_fastest(entry['decoding'][mode]['speedup_tokens'])}")
        lines.append(f"{name}: attnmt over the faster reference: {', '.join(parts)}")
    return lines


def tables(results: dict) -> list[Rows]:
    return [training_table(results), decoding_table(results, "greedy"), decoding_table(results, "beam")]


def print_report(results: dict, console: Console, markdown: Path | None = None) -> None:
    """Print the machine, the data and the three tables; optionally write them as Markdown."""
    console.print(f"machine: {machine_line(results)}")
    console.print(f"data: {data_line(results)}")
    if results.get("trained"):
        trained = results["trained"]
        console.print(f"trained model: {trained['checkpoint']} ({trained['tokenizer']})")
    for rows in tables(results):
        console.print(to_rich(rows))
    for line in headlines(results):
        console.print(line)
    if markdown is not None:
        parts = [f"Machine: {machine_line(results)}", f"Data: {data_line(results)}"]
        parts += [to_markdown(rows) for rows in tables(results)]
        parts.append("\n".join(f"- {line}" for line in headlines(results)))
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def rows_by_search(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """{search: {split: row}} of result rows that each name their `search` and `split`, in order."""
    grouped: dict[str, dict[str, dict]] = {}
    for row in rows:
        grouped.setdefault(row["search"], {})[row["split"]] = row
    return grouped
