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


def training_table(results: dict) -> Rows:
    header = [
        "config",
        "params",
        "attnmt tok/s",
        "naive tok/s",
        "speedup",
        "attnmt useful FLOP",
        "naive useful FLOP",
        "attnmt peak MiB",
        "naive peak MiB",
        "FLOPs run / useful",
    ]
    rows = []
    for name, config in results["configs"].items():
        training = config["training"]
        ours, reference = training["attnmt"], training["naive"]
        rows.append(
            [
                name,
                f"{config['parameters'] / 1e6:.1f}M",
                _rate(ours["tokens_per_s"]),
                _rate(reference["tokens_per_s"]),
                f"{training['speedup']:.2f}x",
                f"{ours['useful_flop_fraction']:.1%}",
                f"{reference['useful_flop_fraction']:.1%}",
                f"{ours['peak_memory_mib']:,.0f}",
                f"{reference['peak_memory_mib']:,.0f}",
                f"{ours['executed_per_useful_flop']:.2f} / {reference['executed_per_useful_flop']:.2f}",
            ]
        )
    title = (
        "Training: target tokens/s (incl. EOS), useful FLOP/s / matmul ceiling, peak memory, "
        "forward FLOPs run per useful FLOP (attnmt / naive, first timed batch)"
    )
    return title, header, rows


def _per_sentence(rates: dict) -> float:
    return rates["generated_tokens"] / max(1, rates["sentences"])


def _decoding_rows(label: str, decoding: dict, mode: str) -> list[str]:
    ours, reference = decoding[mode]["attnmt"], decoding[mode]["naive"]
    return [
        label,
        _rate(ours["sentences_per_s"]),
        _rate(reference["sentences_per_s"]),
        f"{decoding[mode]['speedup_sentences']:.2f}x",
        _rate(ours["tokens_per_s"]),
        _rate(reference["tokens_per_s"]),
        f"{decoding[mode]['speedup_tokens']:.2f}x",
        f"{_per_sentence(ours):.1f} / {_per_sentence(reference):.1f}",
    ]


def decoding_table(results: dict, mode: str) -> Rows:
    header = [
        "model",
        "attnmt sent/s",
        "naive sent/s",
        "speedup",
        "attnmt tok/s",
        "naive tok/s",
        "speedup",
        "tokens/sentence",
    ]
    rows = [_decoding_rows(f"{name} (untrained)", c["decoding"], mode) for name, c in results["configs"].items()]
    trained = results.get("trained")
    if trained:
        label = f"trained {Path(trained['run_dir']).name} ({trained['tokenizer']})"
        rows.append(_decoding_rows(label, trained["decoding"], mode))
    first = next(iter(results["configs"].values()), None) or trained
    algorithms = first["decoding"][mode]
    title = (
        f"Decoding, {mode}: attnmt = {algorithms['attnmt']['algorithm']}; naive = {algorithms['naive']['algorithm']}"
    )
    return title, header, rows


def to_rich(rows: Rows) -> Table:
    title, header, body = rows
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in body:
        table.add_row(*row)
    return table


def to_markdown(rows: Rows) -> str:
    title, header, body = rows
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


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
    if markdown is not None:
        parts = [f"Machine: {machine_line(results)}", f"Data: {data_line(results)}"]
        parts += [to_markdown(rows) for rows in tables(results)]
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
