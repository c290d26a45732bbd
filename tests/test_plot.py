"""Plots are written as real image files, atomically, and show what they were given: the
figure a function saves is captured and its cells, tick labels and lines are read back."""

import subprocess
import sys

import numpy as np
import pytest

from attnmt import plot
from attnmt.plot import attention_grid, attention_heatmap, curves, length_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def saved(monkeypatch) -> list:
    """The figures the plot functions save, in order (they are still written to their files)."""
    figures, real_save = [], plot._save

    def keep(figure, path):
        figures.append(figure)
        return real_save(figure, path)

    monkeypatch.setattr(plot, "_save", keep)
    return figures


def labels(ticks) -> list[str]:
    return [tick.get_text() for tick in ticks]


def test_a_heatmap_shows_each_weight_in_its_cell_under_its_tokens(tmp_path, saved):
    weights = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    attention_heatmap(weights, ["je", "suis", "."], ["i", "am"], tmp_path / "h.png", title="one")
    axes = saved[0].axes[0]
    assert np.array_equal(axes.images[0].get_array(), weights)  # row t = output token t, column j = source token j
    assert labels(axes.get_xticklabels()) == ["je", "suis", "."] and labels(axes.get_yticklabels()) == ["i", "am"]
    assert axes.get_title() == "one" and axes.images[0].get_clim() == (0.0, 1.0)


def test_a_grid_draws_each_sentence_in_its_own_panel_and_blanks_the_rest(tmp_path, saved):
    items = [(np.eye(2), ["a", "b"], ["c", "d"]), (np.ones((1, 3)) / 3, ["a", "b", "c"], ["d"])]
    attention_grid(items, tmp_path / "grid.png", titles=["one", "two"])
    panels = [axes for axes in saved[0].axes if axes.images]
    assert [axes.get_title() for axes in panels] == ["one", "two"]
    for axes, (weights, src_tokens, out_tokens) in zip(panels, items, strict=True):
        assert np.array_equal(axes.images[0].get_array(), weights)
        assert labels(axes.get_xticklabels()) == src_tokens and labels(axes.get_yticklabels()) == out_tokens


def test_curves_draw_every_run_in_every_panel_from_its_records(tmp_path, saved):
    runs = {
        "run-a": [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.0, "bleu": 10.0}],
        "run-b": [{"step": 1, "loss": 4.0}],
    }
    curves(runs, ["loss", "bleu"], tmp_path / "curves.png")
    loss, bleu = saved[0].axes
    assert [(line.get_label(), list(line.get_xdata()), list(line.get_ydata())) for line in loss.lines] == [
        ("run-a", [1, 2], [3.0, 2.0]),
        ("run-b", [1], [4.0]),
    ]
    assert [(line.get_label(), list(line.get_ydata())) for line in bleu.lines] == [("run-a", [10.0])]
    assert loss.get_ylabel() == "loss" and bleu.get_xlabel() == "step"


def test_length_plot_puts_each_bucket_at_its_label(tmp_path, saved):
    lengths = {"a": [("1-10", 30.0), ("11-20", 20.0)], "b": [("1-10", 25.0), ("11-20", 22.0)]}
    length_plot(lengths, tmp_path / "length.png")
    axes = saved[0].axes[0]
    assert [list(line.get_ydata()) for line in axes.lines] == [[30.0, 20.0], [25.0, 22.0]]
    assert labels(axes.get_xticklabels()) == ["1-10", "11-20"] and axes.get_ylabel() == "BLEU"


def test_heatmap_png_and_svg(tmp_path):
    weights = np.full((3, 4), 0.25)
    png = attention_heatmap(weights, ["go", ".", "<eos>", "x"], ["va", "!", "</s>"], tmp_path / "a.png")
    assert png.read_bytes().startswith(PNG_MAGIC)
    svg = attention_heatmap(weights, ["go", ".", "<eos>", "x"], ["va", "!", "</s>"], tmp_path / "a.svg")
    assert b"<svg" in svg.read_bytes()[:500]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "a.svg"]  # no temp files left


def test_heatmap_rejects_mismatched_tokens(tmp_path):
    with pytest.raises(ValueError, match="does not match"):
        attention_heatmap(np.zeros((2, 2)), ["a"], ["b", "c"], tmp_path / "x.png")


def test_grid_curves_and_length(tmp_path):
    items = [(np.eye(2), ["a", "b"], ["c", "d"]), (np.ones((1, 3)) / 3, ["a", "b", "c"], ["d"])]
    assert attention_grid(items, tmp_path / "grid.png", titles=["one", "two"]).stat().st_size > 0
    runs = {
        "run-a": [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.0, "bleu": 10.0}],
        "run-b": [{"step": 1, "loss": 4}],
    }
    assert curves(runs, ["loss", "bleu"], tmp_path / "curves.png").read_bytes().startswith(PNG_MAGIC)
    lengths = {"a": [("1-10", 30.0), ("11-20", 20.0)], "b": [("1-10", 25.0), ("11-20", 22.0)]}
    assert length_plot(lengths, tmp_path / "length.png").read_bytes().startswith(PNG_MAGIC)


def test_importing_plot_leaves_the_callers_backend_alone(tmp_path):
    """A notebook's `%matplotlib inline` (or any backend a user chose) survives `import attnmt.plot`."""
    script = (
        "import matplotlib; matplotlib.use('svg'); import attnmt.plot as p, numpy as n; "
        f"p.attention_heatmap(n.eye(2), ['a', 'b'], ['c', 'd'], {str(tmp_path / 'h.png')!r}); "
        "print(matplotlib.get_backend())"
    )
    backend = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert backend.strip() == "svg"
    assert (tmp_path / "h.png").read_bytes().startswith(PNG_MAGIC)
