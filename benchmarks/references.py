"""The textbook references attnmt is timed against, by name.

Each is a module with the same calls: `supports(cfg)`, `Seq2Seq(cfg, src_vocab, tgt_vocab)`
(forward: src (B, S), src_lengths (B,), tgt_in (B, T) -> logits (B, T, V)),
`load_attnmt_weights(reference, model)`, `loss(model, src, src_lengths, tgt_in, tgt_out)`,
`greedy(model, src, src_lengths, steps)` and `beam_search(model, src_ids, beam_size=...)`
(None where the tutorial has no beam search). Given attnmt's weights each computes attnmt's
function, so the speed of the code is the only difference.
"""

from __future__ import annotations

from types import ModuleType

from torch import nn

from attnmt.config import ModelConfig
from benchmarks import bentrevett, d2l

REFERENCES: dict[str, ModuleType] = {"d2l": d2l, "bentrevett": bentrevett}


def references_for(cfg: ModelConfig, model: nn.Module, src_vocab_size: int, tgt_vocab_size: int) -> dict:
    """{name: reference model holding `model`'s weights} for every reference that can express `cfg`."""
    return {
        name: module.load_attnmt_weights(module.Seq2Seq(cfg, src_vocab_size, tgt_vocab_size), model)
        for name, module in REFERENCES.items()
        if module.supports(cfg)
    }
