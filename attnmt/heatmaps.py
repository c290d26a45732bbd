"""A translation's attention as pictures: one sentence's heatmap, several in one grid, one
file per sentence of a translated file (`attnmt translate --attention DIR`, `attnmt plot
attention`), and a transformer's every layer and head for one sentence (`--heads`). Source
tokens run along x, the output tokens and </s> along y; `plot` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from attnmt.plot import attention_grid, attention_heatmap
from attnmt.translation import Translation
from attnmt.utils import UserError

EOS_LABEL = "</s>"  # the label of the last output row: the attention that chose to stop


def _heatmap_item(translation: Translation) -> tuple[np.ndarray, list[str], list[str]]:
    if not translation.source_tokens:
        raise UserError("an empty sentence has no attention to draw")
    return translation.attention.numpy(), translation.source_tokens, [*translation.tokens, EOS_LABEL]


def heatmap(translation: Translation, path: str | Path, title: str = "") -> Path:
    """The attention of one translation: source tokens along x, output tokens and </s> along y."""
    return attention_heatmap(*_heatmap_item(translation), path, title=title)


def heatmap_grid(translations: Sequence[Translation], path: str | Path) -> Path:
    """Several translations' attention in one figure (empty sentences are left out)."""
    shown = [t for t in translations if t.source_tokens]
    if not shown:
        raise UserError("only empty sentences; no attention to draw")
    return attention_grid([_heatmap_item(t) for t in shown], path, titles=[t.text or "(empty)" for t in shown])


def write_heatmaps(translations: Sequence[Translation], out_dir: str | Path, first_index: int = 0) -> list[Translation]:
    """OUT_DIR/NNNN.png for each non-empty sentence, NNNN its 1-based position counted from
    `first_index` (so file names match input lines); returns the translations drawn."""
    drawn = []
    for offset, translation in enumerate(translations):
        if translation.source_tokens:
            path = Path(out_dir) / f"{first_index + offset + 1:04d}.png"
            try:
                heatmap(translation, path, title=translation.text)
            except OSError as exc:
                raise UserError(f"{out_dir}: cannot write heatmaps ({exc.strerror or exc})") from None
            drawn.append(translation)
    return drawn


def layer_head_heatmaps(
    cross: torch.Tensor, source: Sequence[str], outputs: Sequence[str], path: str | Path, alignment_layer: int
) -> Path:
    """One sentence's cross-attention (L, h, T + 1, S), every decoder layer and head: a row of the
    figure a layer, a column a head; the layer whose heads' mean is the translation's own
    attention is marked."""
    layers, heads = cross.shape[:2]
    items = [(cross[layer, head].numpy(), source, outputs) for layer in range(layers) for head in range(heads)]
    titles = [
        f"layer {layer}{' (alignments)' if layer == alignment_layer else ''}, head {head}"
        for layer in range(layers)
        for head in range(heads)
    ]
    try:
        return attention_grid(items, path, titles=titles, columns=heads)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the heads' heatmaps ({exc.strerror or exc})") from None
