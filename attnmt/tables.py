"""Rich tables of the figures the commands print (plain data in, `rich.table.Table` out).

Kept apart from `cli` so that argument parsing and presentation stay short and separate.
Imports nothing from attnmt: the evaluation results are read by attribute only.
"""

from __future__ import annotations

from rich.table import Table


def stats_table(figures: dict) -> Table:
    table = Table(title=f"{figures['corpus']} {figures['direction']}", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("pairs read (before filtering and splitting)", f"{figures['raw_pairs']:,}")
    dropped = figures.get("dropped_by_length", {})
    table.add_row(
        "train pairs dropped by the length filters",
        ", ".join(f"{count:,} (data.{setting})" for setting, count in dropped.items()) or "0",
    )
    for split in ("train", "valid", "test"):
        sources = figures["sources"].get(split)
        detail = f" ({sources:,} sources)" if sources is not None else ""
        table.add_row(f"{split} pairs", f"{figures['pairs'][split]:,}{detail}")
    for side in ("train_src", "train_tgt"):
        lengths = figures["lengths"][side]
        table.add_row(
            f"{side} tokens mean / p50 / p90 / p99 / max",
            f"{lengths['mean']:.1f} / {lengths['p50']} / {lengths['p90']} / {lengths['p99']} / {lengths['max']}",
        )
    table.add_row("vocabulary src / tgt", f"{figures['vocab']['src']:,} / {figures['vocab']['tgt']:,}")
    oov = figures["oov_rate"]
    table.add_row("OOV rate valid src / tgt", f"{oov['valid_src']:.2%} / {oov['valid_tgt']:.2%}")
    table.add_row("OOV rate test src / tgt", f"{oov['test_src']:.2%} / {oov['test_tgt']:.2%}")
    batching = figures["batching"]
    table.add_row("train batches (mean sentences each)", f"{batching['batches']:,} ({batching['mean_sentences']:.1f})")
    table.add_row("train pairs longer than data.batch_tokens alone (left out)", f"{batching['over_budget']:,}")
    table.add_row(
        "padding: bucketed / random batches",
        f"{batching['padding_bucketed']:.1%} / {batching['padding_random']:.1%}",
    )
    return table


def scores_table(results: list, title: str) -> Table:
    """`results`: RunEvaluations (name, evaluation, bootstrap)."""
    table = Table(title=title)
    table.add_column("run", overflow="fold")
    compared = any(result.bootstrap is not None for result in results)
    papers = all(result.evaluation.moses_bleu is not None for result in results)  # the corpus ships tokenized refs
    columns = ["sentences", "BLEU", "chrF2", *(["BLEU moses-tok-lc"] if papers else []), "BLEU word-tok-lc"]
    columns += ["BLEU 95% CI", "p vs first"] if compared else []
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for result in results:
        evaluation = result.evaluation
        papers_bleu = [evaluation.moses_bleu] if papers and evaluation.moses_bleu else []
        scores = [evaluation.bleu, evaluation.chrf, *papers_bleu, evaluation.tokenized_bleu]
        row = [result.name, f"{len(evaluation.hypotheses):,}", *(f"{score.score:.2f}" for score in scores)]
        if compared:
            bootstrap = result.bootstrap
            p_value = "baseline" if bootstrap.p_value is None else f"{bootstrap.p_value:.4f}"
            row += [f"{bootstrap.mean:.2f} ± {bootstrap.ci:.2f}", p_value]
        table.add_row(*row)
    return table


def length_table(results: list) -> Table:
    table = Table(title="BLEU by source length (word tokens)")
    table.add_column("source length")
    labels: dict[str, None] = {}
    for result in results:
        table.add_column(f"{result.name} BLEU (sentences)", justify="right")
        labels.update(dict.fromkeys(bucket.label for bucket in result.evaluation.by_length))
    for label in labels:
        cells = []
        for result in results:
            bucket = next((b for b in result.evaluation.by_length if b.label == label), None)
            cells.append(f"{bucket.bleu:.2f} ({bucket.sentences:,})" if bucket else "-")
        table.add_row(label, *cells)
    return table
