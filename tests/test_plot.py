"""Plots are written as real image files, atomically, with shapes checked."""

import subprocess
import sys

import numpy as np
import pytest

from attnmt.plot import attention_grid, attention_heatmap, curves, length_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
