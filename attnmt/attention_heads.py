"""Every layer's and head's attention of a translation, for a model made of layers of heads (the
Transformer family): what the explorer's layer and head picker and `attnmt translate --attention
DIR --heads` show.

A translation carries one attention map (`Translation.attention`): the alignment layer's
cross-attention averaged over its heads, which alignments and markup read. The maps here are
all of them, recomputed by feeding the translation's own tokens back in one teacher-forced pass;
the model attends as it did while searching, so the alignment layer's mean is that same map.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnmt.models.transformer import Transformer
from attnmt.translate import Translator
from attnmt.translation import Translation
from attnmt.utils import UserError
from attnmt.vocab import BOS

EOS_LABEL, BOS_LABEL = "</s>", "<s>"


@dataclass
class HeadAttention:
    """One translation's attention, head by head (L layers, h heads; S source tokens; T output
    tokens, then </s>).

    cross:   (L_dec, h, T + 1, S) each output step over the source: rows `outputs`, columns `source`.
    encoder: (L_enc, h, S, S) each source position over the source.
    decoder: (L_dec, h, T + 1, T + 1) each output step over the inputs fed so far, `inputs`
             (<s> and the output tokens): zero above the diagonal.
    alignment_layer: the decoder layer whose heads' mean is the translation's own attention.
    """

    source: list[str]
    outputs: list[str]
    inputs: list[str]
    cross: torch.Tensor
    encoder: torch.Tensor
    decoder: torch.Tensor
    alignment_layer: int


def head_attention(translator: Translator, translation: Translation) -> HeadAttention:
    """Every layer's and head's attention while `translator`'s model puts out `translation` (of
    one of its sentences). A model that is not a transformer (one attention map a step) is a
    UserError, as is an ensemble (whose members each have their own)."""
    model = check_heads(translator)
    if not translation.source_tokens:
        raise UserError("an empty sentence has no attention to show", field="source")
    codec = translator.codec
    src = torch.tensor([codec.src_vocab.encode(translation.source_tokens)], device=translator.device)
    targets = codec.tgt_vocab.encode(translation.tokens)
    tgt_in = torch.tensor([[BOS, *targets]], device=translator.device)  # (1, T + 1): what each step is fed
    maps = model.attention_maps(src, torch.tensor([src.shape[1]], device=translator.device), tgt_in)
    assert maps.cross.shape[3] == len(translation.tokens) + 1  # a row per output token and one for </s>
    return HeadAttention(
        source=list(translation.source_tokens),
        outputs=[*translation.tokens, EOS_LABEL],
        inputs=[BOS_LABEL, *translation.tokens],
        cross=maps.cross[0].float().cpu(),
        encoder=maps.encoder[0].float().cpu(),
        decoder=maps.decoder[0].float().cpu(),
        alignment_layer=model.alignment_layer,
    )


def check_heads(translator: Translator) -> Transformer:
    """`translator`'s model when it has layers of heads to show; else a UserError saying why."""
    if not isinstance(translator.model, Transformer):
        family = "an ensemble" if len(translator.members) > 1 else f"a {translator.config.model.family} model"
        raise UserError(
            f"{family} has no layers of attention heads to show; they are the transformer family's", field="heads"
        )
    return translator.model
