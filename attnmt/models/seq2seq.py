"""`Seq2Seq`: encoder + decoder, `build_model` (the one reader of the model config), and `summary`.

The model's calls, all batch-first:

- `model(src, src_lengths, tgt_in, teacher_forcing_ratio=1.0, generator=None)`
  -> logits (B, T, V), attention weights (B, T, S): training and validation.
- `encode(src, src_lengths) -> EncoderOutput`, `init_state(encoder_output) -> DecoderState`,
  `next_log_probs(prev_tokens (B,), state, encoder_output) -> (log-probabilities (B, V), state,
  weights (B, S))`: the decoder's step, what greedy and beam search call (the step interface
  `search.StepModel`, which an ONNX export also provides); `decoder.step` gives its logits.
  Both `EncoderOutput` and `DecoderState` have `index_select(rows)` to repeat rows for K beams
  (B -> B*K) and to reorder hypotheses.
`EncoderOutput` (defined beside its reader, the decoder) travels whole through decoder and search.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from attnmt.config import ModelConfig
from attnmt.models.attention import AdditiveAttention, DotAttention, GeneralAttention, NoAttention
from attnmt.models.decoder import BahdanauDecoder, Bridge, DecoderState, EncoderOutput, LuongDecoder
from attnmt.models.encoder import Encoder
from attnmt.models.transformer import Transformer
from attnmt.vocab import PAD

# The scorers `build_model` chooses from. A decoder holds its one as an nn.Module: the layering
# keeps attention.py out of decoder.py, so only this module can say which classes they are.
Attention = AdditiveAttention | DotAttention | GeneralAttention | NoAttention


class Seq2Seq(nn.Module):
    """An encoder and a decoder (which holds the attention and the bridge)."""

    def __init__(self, *, encoder: Encoder, decoder: BahdanauDecoder | LuongDecoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> EncoderOutput:
        """src (B, S) long, src_lengths (B,) long (each >= 1) -> EncoderOutput."""
        memory, final_hidden = self.encoder(src, src_lengths)  # (B, S, H_enc), (L_enc, B, H_enc)
        positions = torch.arange(src.shape[1], device=src.device)
        mask = positions.unsqueeze(0) < src_lengths.to(src.device).unsqueeze(1)  # (B, S)
        projected_keys = cast(Attention, self.decoder.attention).project_keys(memory, mask)
        return EncoderOutput(memory, mask, projected_keys, final_hidden)

    def init_state(self, encoder_output: EncoderOutput) -> DecoderState:
        return self.decoder.init_state(encoder_output.final_hidden)

    def next_log_probs(
        self,
        prev_tokens: torch.Tensor,
        state: DecoderState,
        encoder_output: EncoderOutput,
        vocabulary: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """prev_tokens (B,) long -> (log-probabilities (B, V) float32, new state, attention (B, S));
        with `vocabulary` (V',) target ids, the distribution (B, V') over those only."""
        logits, state, weights = self.decoder.step(prev_tokens, state, encoder_output, vocabulary)
        return torch.log_softmax(logits.float(), dim=-1), state, weights

    def forward(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        teacher_forcing_ratio: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_lengths (B,), tgt_in (B, T) = BOS y_1 ... y_n PAD...

        Returns logits (B, T, V) and attention weights (B, T, S), all zeros for `none`.
        With `teacher_forcing_ratio` < 1 each sentence is fed its own argmax at each step with
        probability 1 - ratio, the coins drawn from `generator` or torch's global RNG.
        """
        assert tgt_in.dim() == 2 and tgt_in.shape[0] == src.shape[0], f"tgt_in {tuple(tgt_in.shape)}"
        assert 0.0 <= teacher_forcing_ratio <= 1.0, f"teacher_forcing_ratio {teacher_forcing_ratio}"
        encoder_output = self.encode(src, src_lengths)
        state = self.init_state(encoder_output)
        return self.decoder(
            tgt_in, state, encoder_output, teacher_forcing_ratio=teacher_forcing_ratio, generator=generator
        )


# A model of either family: both have the calls the module docstring lists.
Model = Seq2Seq | Transformer


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Model:
    """The model that `cfg` describes: a `Transformer` for family transformer, else a `Seq2Seq`."""
    if cfg.family == "transformer":
        return build_transformer(cfg, src_vocab_size, tgt_vocab_size)
    return build_recurrent(cfg, src_vocab_size, tgt_vocab_size)


def build_transformer(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
    """A transformer of `cfg`'s sizes, its attention for alignments the `alignment_layer`'s
    (the middle decoder layer's where the config names none)."""
    return Transformer(
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        model_size=cfg.d_model,
        heads=cfg.heads,
        feed_forward=cfg.feed_forward,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        word_dropout=cfg.word_dropout,
        pre_norm=cfg.norm == "pre",
        alignment_layer=cfg.alignment_layer,
        tie_embeddings=cfg.tie_embeddings,
        tie_source_embeddings=cfg.tie_source_embeddings,
    )


def build_recurrent(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """The recurrent model that `cfg` describes, initialized as `cfg.init` says.

    Sizes follow from the config alone: the attention's keys are the encoder's outputs
    (encoder_hidden x directions), its queries the decoder's top layer (decoder_hidden);
    additive attention's size defaults to decoder_hidden. `input_feeding` applies to the Luong
    decoder only; the Bahdanau decoder feeds the context it attends to by construction.
    `tie_source_embeddings` makes the encoder read the decoder's embedding matrix (one shared
    vocabulary); with `tie_embeddings` too, one matrix is source, target and output embedding.
    """
    encoder = Encoder(
        vocab_size=src_vocab_size,
        embedding_size=cfg.embedding_size,
        hidden_size=cfg.encoder_hidden,
        num_layers=cfg.encoder_layers,
        bidirectional=cfg.bidirectional,
        rnn=cfg.rnn,
        dropout=cfg.dropout,
        word_dropout=cfg.word_dropout,
        locked_dropout=cfg.locked_dropout,
        padding_idx=PAD,
    )
    sizes = {"query_size": cfg.decoder_hidden, "key_size": encoder.output_size}
    if cfg.attention == "additive":
        attention: Attention = AdditiveAttention(
            **sizes, attention_size=cfg.attention_size or cfg.decoder_hidden, bias=cfg.attention_bias
        )
    elif cfg.attention in ("dot", "scaled_dot"):
        attention = DotAttention(**sizes, scaled=cfg.attention == "scaled_dot")
    elif cfg.attention == "general":
        attention = GeneralAttention(**sizes)
    else:
        attention = NoAttention(**sizes)
    bridge = Bridge(
        encoder_size=encoder.output_size,
        decoder_size=cfg.decoder_hidden,
        decoder_layers=cfg.decoder_layers,
        kind=cfg.bridge,
    )
    common: dict[str, Any] = {  # the arguments both decoders take
        "vocab_size": tgt_vocab_size,
        "embedding_size": cfg.embedding_size,
        "hidden_size": cfg.decoder_hidden,
        "num_layers": cfg.decoder_layers,
        "rnn": cfg.rnn,
        "attention": attention,
        "bridge": bridge,
        "memory_size": encoder.output_size,
        "dropout": cfg.dropout,
        "word_dropout": cfg.word_dropout,
        "locked_dropout": cfg.locked_dropout,
        "tie_embeddings": cfg.tie_embeddings,
        "padding_idx": PAD,
    }
    if cfg.decoder == "bahdanau":
        decoder: BahdanauDecoder | LuongDecoder = BahdanauDecoder(**common)
    else:
        decoder = LuongDecoder(
            **common,
            input_feeding=cfg.input_feeding,
            feed_dropout=cfg.feed_dropout,
            attentional_tanh=cfg.attentional_tanh,
        )
    if cfg.tie_source_embeddings:
        if src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"tie_source_embeddings needs one vocabulary for both sides, got {src_vocab_size} source and "
                f"{tgt_vocab_size} target types"
            )
        encoder.embedding.weight = decoder.embedding.weight  # with tie_embeddings, the output layer's too
    model = Seq2Seq(encoder=encoder, decoder=decoder)
    initialize(model, scheme=cfg.init, scale=cfg.init_scale)
    return model


def initialize(model: nn.Module, *, scheme: str, scale: float = 0.1) -> None:
    """Initialize every parameter in place; embeddings' PAD rows end at zero.

    uniform: every parameter from U(-scale, scale) (Sutskever et al. 2014; Luong et al. 2015
    with scale 0.1). xavier: Glorot-uniform for each gate block of an input matrix and for every
    other matrix, orthogonal for each gate block of a recurrent matrix (Saxe et al. 2014, as in
    Bahdanau et al. 2015), zero biases except an LSTM's forget gate, which starts at 1
    (Jozefowicz et al. 2015) so the cell remembers by default.
    """
    if scheme not in ("uniform", "xavier"):
        raise ValueError(f"unknown init {scheme!r}; expected uniform or xavier")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if scheme == "uniform":
                parameter.uniform_(-scale, scale)
            elif parameter.dim() == 1:
                parameter.zero_()
            elif "weight_hh" in name:
                for block in parameter.split(parameter.shape[1]):  # one (H, H) block per gate
                    nn.init.orthogonal_(block)
            elif "weight_ih" in name:
                for block in parameter.split(_gate_size(model, name)):
                    nn.init.xavier_uniform_(block)
            else:
                nn.init.xavier_uniform_(parameter)
        for module in model.modules():
            if isinstance(module, nn.LSTM) and scheme == "xavier":
                for bias_name, bias in module.named_parameters():
                    if bias_name.startswith("bias_ih"):
                        bias[module.hidden_size : 2 * module.hidden_size] = 1.0  # gate order i, f, g, o
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                module.weight[module.padding_idx] = 0.0


def _gate_size(model: nn.Module, parameter_name: str) -> int:
    """The hidden size of the RNN owning `parameter_name`: one gate block's rows."""
    return cast(nn.RNNBase, model.get_submodule(parameter_name.rsplit(".", 1)[0])).hidden_size


def summary(model: nn.Module) -> str:
    """A table of parameter counts per part (encoder.rnn, decoder.attention, ...) and the total.

    A parameter shared by two parts (tied embeddings) is counted once, where it first appears.
    """
    rows = []
    seen: set[int] = set()  # ids of the parameters counted so far
    for top_name, top in model.named_children():
        for part_name, part in top.named_children():
            fresh = [p for p in part.parameters() if id(p) not in seen]
            shared = sum(1 for p in part.parameters() if id(p) in seen)
            seen.update(id(p) for p in fresh)
            note = " (+ tied weights counted above)" if shared else ""
            rows.append((f"{top_name}.{part_name}", sum(p.numel() for p in fresh), note))
        loose = [p for p in top.parameters(recurse=False) if id(p) not in seen]
        if loose:
            seen.update(id(p) for p in loose)
            rows.append((top_name, sum(p.numel() for p in loose), ""))
    total = sum(count for _, count, _ in rows)
    rows = [row for row in rows if row[1] or row[2]]  # parts without parameters (a tanh) are not listed
    width = max(len(name) for name, _, _ in [*rows, ("total", 0, "")])
    lines = [f"{'part':<{width}}  {'parameters':>12}"]
    lines += [f"{name:<{width}}  {count:>12,}{note}" for name, count, note in rows]
    lines.append(f"{'total':<{width}}  {total:>12,}")
    return "\n".join(lines)
