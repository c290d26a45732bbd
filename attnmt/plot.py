"""Pictures of what the model does: attention heatmaps, training curves, BLEU by length.

matplotlib + numpy only; every function writes one file (PNG, SVG or PDF by the suffix)
atomically and returns its path. Figures are built with matplotlib's object API (`Figure`, not
pyplot), so no display is needed and importing this module leaves the caller's backend alone
(a notebook's `%matplotlib inline` keeps working).
Leaf module: imports nothing from attnmt but utils, and no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attnmt.utils import atomic_path


def _figure(rows: int = 1, columns: int = 1, *, figsize: tuple[float, float], squeeze: bool = True):
    """(figure, axes) like `pyplot.subplots`, without pyplot's global figure registry."""
    figure = Figure(figsize=figsize)
    return figure, figure.subplots(rows, columns, squeeze=squeeze)


def _save(figure: Figure, path: str | Path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format=path.suffix.lstrip(".") or "png", bbox_inches="tight", dpi=150)
    return path


def _draw_heatmap(axes: Axes, weights: np.ndarray, src_tokens: Sequence[str], out_tokens: Sequence[str]) -> None:
    """Source tokens along x, output tokens along y; row t is the attention at output step t."""
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(len(src_tokens)), src_tokens, rotation=60, ha="right", fontsize=8)
    axes.set_yticks(range(len(out_tokens)), out_tokens, fontsize=8)
    axes.set_xlabel("source")
    axes.set_ylabel("output")
    axes.figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)


def _check_heatmap(weights: np.ndarray, src_tokens: Sequence[str], out_tokens: Sequence[str]) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    expected = (len(out_tokens), len(src_tokens))
    if weights.shape != expected:
        raise ValueError(f"attention shape {weights.shape} does not match (output, source) tokens {expected}")
    return weights


def attention_heatmap(
    weights: np.ndarray, src_tokens: Sequence[str], out_tokens: Sequence[str], path: str | Path, title: str = ""
) -> Path:
    """One sentence: weights (T, S), rows = output tokens, columns = source tokens."""
    weights = _check_heatmap(weights, src_tokens, out_tokens)
    figure, axes = _figure(figsize=(1.0 + 0.45 * len(src_tokens), 1.0 + 0.4 * len(out_tokens)))
    _draw_heatmap(axes, weights, src_tokens, out_tokens)
    if title:
        axes.set_title(title, fontsize=9)
    return _save(figure, path)


def attention_grid(
    items: Sequence[tuple[np.ndarray, Sequence[str], Sequence[str]]],
    path: str | Path,
    titles: Sequence[str] = (),
    columns: int = 3,
) -> Path:
    """Several maps in one figure, `columns` a row: items of (weights (T, S), source tokens,
    output tokens)."""
    if not items:
        raise ValueError("no sentences to plot")
    columns = min(columns, len(items))
    rows = math.ceil(len(items) / columns)
    figure, axes_grid = _figure(rows, columns, figsize=(4.5 * columns, 4.0 * rows), squeeze=False)
    for index, axes in enumerate(axes_grid.flat):
        if index >= len(items):
            axes.axis("off")
            continue
        weights, src_tokens, out_tokens = items[index]
        _draw_heatmap(axes, _check_heatmap(weights, src_tokens, out_tokens), src_tokens, out_tokens)
        if index < len(titles):
            axes.set_title(titles[index], fontsize=9)
    figure.tight_layout()
    return _save(figure, path)


def curves(
    runs: Mapping[str, Sequence[Mapping[str, float]]], metrics: Sequence[str], path: str | Path, x_key: str = "step"
) -> Path:
    """Metric curves of several runs: `runs` maps a run name to its metrics records
    (dicts with `x_key` and metric values, as in metrics.jsonl); one panel per metric."""
    figure, axes_list = _figure(1, len(metrics), figsize=(5.0 * len(metrics), 3.6), squeeze=False)
    for axes, metric in zip(axes_list[0], metrics, strict=True):
        for name, records in runs.items():
            points = [(r[x_key], r[metric]) for r in records if metric in r and x_key in r and r[metric] is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                axes.plot(xs, ys, label=name, marker="." if len(points) < 30 else None)
        axes.set_xlabel(x_key)
        axes.set_ylabel(metric)
        axes.grid(alpha=0.3)
    return _save_with_shared_legend(figure, axes_list[0][0], path, columns=4, top=1.08)


def _save_with_shared_legend(figure, axes, path: str | Path, *, columns: int, top: float) -> Path:
    """One legend above all panels, taken from `axes` (every panel draws the same runs)."""
    handles, labels = axes.get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="upper center", ncol=min(columns, len(labels)), bbox_to_anchor=(0.5, top))
    figure.tight_layout()
    return _save(figure, path)


def length_plot(runs: Mapping[str, Sequence[tuple[str, float]]], path: str | Path) -> Path:
    """BLEU by source-length bucket for several runs: `runs` maps a name to (bucket label, BLEU)."""
    figure, axes = _figure(figsize=(6.0, 3.8))
    for name, points in runs.items():
        labels = [label for label, _ in points]
        axes.plot(range(len(points)), [score for _, score in points], marker="o", label=name)
        axes.set_xticks(range(len(points)), labels)
    axes.set_xlabel("source length (tokens)")
    axes.set_ylabel("BLEU")
    axes.grid(alpha=0.3)
    axes.legend()
    return _save(figure, path)


def grouped_curves(
    groups: Mapping[str, Sequence[Sequence[Mapping[str, float]]]], metrics: Sequence[str], path: str | Path
) -> Path:
    """Curves of groups of runs (e.g. the seeds of one sweep point): `groups` maps a label to
    the metrics records of each of its runs; one colour per group, one panel per metric."""
    figure, axes_list = _figure(1, len(metrics), figsize=(5.0 * len(metrics), 3.6), squeeze=False)
    for axes, metric in zip(axes_list[0], metrics, strict=True):
        for index, (label, runs) in enumerate(groups.items()):
            for run_number, records in enumerate(runs):
                points = [(r["step"], r[metric]) for r in records if r.get(metric) is not None and "step" in r]
                if points:
                    xs, ys = zip(*points, strict=True)
                    axes.plot(xs, ys, color=f"C{index % 10}", alpha=0.8, label=label if run_number == 0 else None)
        axes.set_xlabel("step")
        axes.set_ylabel(metric)
        axes.grid(alpha=0.3)
    return _save_with_shared_legend(figure, axes_list[0][0], path, columns=5, top=1.1)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def scores_by_value(
    panels: Mapping[str, Mapping[str, Mapping[object, Sequence[float]]]], path: str | Path, *, xlabel: str
) -> Path:
    """Scores against a parameter: `panels` maps a panel title (e.g. "test BLEU") to series,
    each mapping a parameter value to its scores (one per seed). Each score is a dot, each
    series' means a line. Numeric values get a numeric axis (logarithmic when they span 20x or
    more); anything else is placed in first-seen order."""
    values = [x for series in panels.values() for points in series.values() for x in points]
    numeric = bool(values) and all(_is_number(x) for x in values)
    numbers = cast("list[float]", values)  # used only when `numeric`: then each is an int or float
    log_x = numeric and min(numbers) > 0 and max(numbers) / min(numbers) >= 20
    order = {x: i for i, x in enumerate(dict.fromkeys(values))}

    def position(x: object) -> float:
        return cast(float, x) if numeric else order[x]

    figure, axes_list = _figure(1, len(panels), figsize=(5.0 * len(panels), 3.6), squeeze=False)
    for axes, (title, series) in zip(axes_list[0], panels.items(), strict=True):
        for index, (label, points) in enumerate(series.items()):
            xs = sorted(points, key=position)
            for x in xs:
                axes.scatter([position(x)] * len(points[x]), points[x], color=f"C{index % 10}", s=14, alpha=0.6)
            means = [float(np.mean(points[x])) for x in xs]
            axes.plot([position(x) for x in xs], means, color=f"C{index % 10}", marker="o", label=label or None)
        if not numeric:
            axes.set_xticks(range(len(order)), [str(x) for x in order], rotation=30, ha="right")
        if log_x:
            axes.set_xscale("log")
        axes.set_xlabel(xlabel)
        axes.set_title(title)
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[1]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    return _save(figure, path)
