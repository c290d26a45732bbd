"""Typed configuration: YAML -> pydantic models, with every default in this one file.

A config has four sections, `data`, `model`, `train` and `decode`. Unknown or mistyped keys
are errors that name the file and the dotted path and list the valid keys; all problems
are reported at once. `--set section.key=value` overrides are applied before validation,
so they are checked the same way. Reading the file, applying the overrides and wording each
problem is `config_files`'s; what a config holds, its defaults and its cross-field rules, is here.

Leaf module: imports nothing from attnmt but `utils` and `config_files`, and no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer, model_validator

from attnmt.config_files import apply_override, config_error, read_yaml
from attnmt.utils import write_text_atomic

# The choices a command line and the library share, named once: a flag's `choices`, a config's
# type and the library's own check read these.
# When a beam search ends a sentence: once K hypotheses have finished (attnmt's rule), or as soon as
# the best-scored candidate of a step is a finished one (OpenNMT-py's, whose beam then also keeps
# only the unfinished among the step's top K).
Stopping = Literal["k_finished", "best_finished"]
STOPPING: tuple[str, ...] = get_args(Stopping)
CHECKPOINTS = ("best", "last")  # which checkpoint of a run is loaded (`loading.ModelSpec`)
ENGINES = ("auto", "torch", "onnxruntime")  # what runs a loaded model (`loading.ModelSpec`)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DataConfig(_Section):
    corpus: str = Field(
        "tatoeba-eng-fra",
        description="tatoeba-eng-fra, multi30k, files (train/valid/test are path prefixes, "
        "'.{lang}' or '.{lang}.gz' appended), tsv (paths to src<TAB>tgt files), or a synthetic "
        "task: reverse, copy, sort, dates",
    )
    src_lang: str = Field("en", description="source language code, as the corpus names its files (en, fr, de)")
    tgt_lang: str = Field("fr", description="target language code")
    data_dir: str | None = Field(None, description="local corpus folder; else $ATTNMT_DATA, the cache, then download")
    train: str | None = Field(
        None,
        description="files: the training path prefix; tsv: the training file; tatoeba-eng-fra, multi30k: a "
        "path prefix whose pairs replace the corpus's training pairs (a distilled corpus); valid and test stay",
    )
    valid: str | None = Field(None, description="files: the validation path prefix; tsv: the validation file")
    test: str | None = Field(None, description="files: the test path prefix; tsv: the test file")
    valid_split: str = Field("val", description="multi30k split used for validation")
    test_split: str = Field("test_2016_flickr", description="multi30k split used for testing")
    valid_size: int = Field(1000, ge=1, description="distinct sources held out for validation (unsplit corpora)")
    test_size: int = Field(1000, ge=1, description="distinct sources held out for testing (unsplit corpora)")
    split_seed: int = Field(1234, description="seed of the held-out split of corpora that have none (tatoeba-eng-fra)")
    subset: Literal["full", "short"] = Field(
        "full",
        description="short: English <= 8 word tokens, French <= 12, punctuation counted; "
        "other languages: 8 for the source, 12 for the target",
    )
    # Web-crawled corpora hold stray lines of thousands of tokens (a page without newlines): one
    # would cost a batch of its own, minutes and gigabytes. Dropped by default, counted in the
    # training log and `attnmt data stats`; null disables a limit.
    max_src_tokens: int | None = Field(250, ge=1, description="drop training pairs with longer sources (word tokens)")
    max_tgt_tokens: int | None = Field(250, ge=1, description="drop training pairs with longer targets (word tokens)")
    max_length_ratio: float | None = Field(
        9.0, gt=1.0, description="drop training pairs whose longer side has more than this many times the tokens"
    )
    tokenizer: Literal["word", "sentencepiece"] = Field(
        "word", description="word tokens, or SentencePiece subwords trained on the training pairs"
    )
    lowercase: bool = Field(False, description="lowercase the text before tokenizing (BLEU is then lowercased too)")
    spm_model_type: Literal["bpe", "unigram"] = Field("bpe", description="sentencepiece: the subword model")
    spm_vocab_size: int = Field(8000, ge=16, description="sentencepiece: pieces per language (or shared)")
    tokenizer_sample: int = Field(
        1_000_000,
        ge=1,
        description="SentencePiece trains on at most this many training pairs, drawn at random (seeded by "
        "split_seed) from larger corpora; the default is above every built-in corpus's size",
    )
    subword_sampling: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="sentencepiece only: each training sentence is segmented anew at random whenever it is "
        "batched (subword regularization): for bpe the probability of dropping a merge (BPE-dropout), for "
        "unigram the sampling smoothing alpha; the vocabularies then hold every piece of the model. 0: off",
    )
    mix_previous: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="with train.init_from: the share of training batches drawn from the starting run's own "
        "training data, encoded with this run's vocabularies, so that the continued model keeps what it "
        "learned there. 0: only this config's corpus",
    )
    min_freq: int = Field(
        1, ge=1, description="a type enters the vocabulary when seen this often in training; others are <unk>"
    )
    max_vocab_size: int | None = Field(
        None, ge=5, description="at most this many types, the most frequent (None: no cap)"
    )
    shared_vocab: bool = Field(False, description="one vocabulary (and piece model) for both languages")
    batch_tokens: int = Field(4096, ge=1, description="padded tokens per batch (longer side)")
    max_batch_sentences: int | None = Field(None, ge=1, description="at most this many pairs per batch (None: no cap)")
    bucket_pool_batches: int | None = Field(
        100,
        ge=1,
        description="batches per pool sorted by length before shuffling (null: one pool, the whole training set)",
    )
    fixed_batches: bool = Field(False, description="the same batches every epoch, reordered (OpenNMT-py's batching)")
    synthetic_size: int = Field(20000, ge=10, description="training examples for synthetic tasks")
    synthetic_max_len: int = Field(10, ge=2, description="maximum sequence length for synthetic tasks")


# The settings one family reads; every other setting of `model` applies to both.
RNN_SETTINGS = (
    "rnn",
    "embedding_size",
    "encoder_hidden",
    "bidirectional",
    "decoder_hidden",
    "attention",
    "attention_size",
    "decoder",
    "input_feeding",
    "bridge",
    "locked_dropout",
    "feed_dropout",
    "attentional_tanh",
    "attention_bias",
    "init",
    "init_scale",
)
TRANSFORMER_SETTINGS = ("d_model", "heads", "feed_forward", "attention_dropout", "norm", "alignment_layer")
FAMILY_SETTINGS = dict.fromkeys(RNN_SETTINGS, "rnn") | dict.fromkeys(TRANSFORMER_SETTINGS, "transformer")
# Where a transformer's default differs from the field's (the recurrent family's): the base
# model's depth and dropout (Vaswani et al. 2017).
TRANSFORMER_DEFAULTS: dict[str, Any] = {"encoder_layers": 6, "decoder_layers": 6, "dropout": 0.1}


class ModelConfig(_Section):
    family: Literal["rnn", "transformer"] = Field(
        "rnn",
        description="rnn: a recurrent encoder-decoder with attention; transformer: self-attention (Vaswani et al.)",
    )
    rnn: Literal["gru", "lstm"] = Field("gru", description="the recurrent cell of encoder and decoder")
    embedding_size: int = Field(256, ge=1, description="word embedding size, both sides")
    encoder_hidden: int = Field(256, ge=1, description="per direction")
    encoder_layers: int = Field(1, ge=1, description="stacked encoder layers (a transformer's default: 6)")
    bidirectional: bool = Field(True, description="the encoder reads both ways; each annotation is [forward; backward]")
    decoder_hidden: int = Field(512, ge=1, description="decoder RNN state size")
    decoder_layers: int = Field(1, ge=1, description="stacked decoder layers (a transformer's default: 6)")
    dropout: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="dropout on embeddings, between RNN layers and before the output layer; a transformer's on "
        "embeddings and every sublayer's output (its default: 0.1)",
    )
    attention: Literal["additive", "dot", "scaled_dot", "general", "none"] = Field(
        "additive",
        description="the score: additive (Bahdanau), dot, scaled_dot, general (Luong), or none (vanilla seq2seq)",
    )
    attention_size: int | None = Field(None, ge=1, description="additive attention size (default decoder_hidden)")
    decoder: Literal["bahdanau", "luong"] = Field(
        "bahdanau", description="bahdanau: attend with the previous state; luong: attend with the new one"
    )
    input_feeding: bool = Field(True, description="luong only: feed the previous attentional vector to the RNN")
    bridge: Literal["tanh", "copy", "zeros"] = Field(
        "tanh", description="decoder start: tanh(W h_final + b), h_final itself (needs equal sizes), or zeros"
    )
    tie_embeddings: bool = Field(False, description="the output layer shares the target embedding matrix")
    tie_source_embeddings: bool = Field(
        False,
        description="the encoder reads the decoder's embedding matrix (needs data.shared_vocab); with "
        "tie_embeddings, one matrix serves source, target and output (three-way tying)",
    )
    word_dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="in training, each source and target input token's whole embedding is zeroed with this "
        "probability (the rest scaled by 1/(1-p)), on top of dropout",
    )
    locked_dropout: bool = Field(
        False,
        description="variational dropout: the dropout on embeddings and on the output layer's input draws one "
        "mask a sentence, the same at every step (not between stacked RNN layers); needs teacher_forcing 1",
    )
    feed_dropout: bool = Field(
        False,
        description="luong with input feeding: the next step is fed the attentional vector after dropout "
        "(as OpenNMT-py does); false: before it",
    )
    attentional_tanh: bool = Field(True, description="luong: tanh(W_c [c_t; h_t]); false: no tanh (OpenNMT-py's mlp)")
    attention_bias: bool = Field(False, description="additive: v^T tanh(W_q s + b + W_k h_j) (OpenNMT-py's mlp)")
    # uniform: every decoder and score learned from it on Multi30k. Glorot (`xavier`) starts the
    # output layer at a range that shrinks with the vocabulary; from it the Luong decoder learned
    # next to nothing in 500 updates, its attention on the first source position with the dot
    # and general scores (docs/design.md, "Initialization").
    init: Literal["uniform", "xavier"] = Field(
        "uniform", description="uniform U(-init_scale, init_scale), or xavier (Glorot)"
    )
    init_scale: float = Field(0.1, gt=0.0, description="range of the uniform init")
    d_model: int = Field(256, ge=1, description="transformer: the size of every embedding and layer output")
    heads: int = Field(4, ge=1, description="transformer: attention heads per layer (they divide d_model)")
    feed_forward: int = Field(1024, ge=1, description="transformer: the feed-forward sublayer's inner size")
    attention_dropout: float = Field(
        0.1, ge=0.0, lt=1.0, description="transformer: dropout on the attention weights in training"
    )
    norm: Literal["pre", "post"] = Field(
        "pre",
        description="transformer: layer norm before each sublayer (pre, with a final norm; trains without "
        "warmup tricks) or after each residual sum (post, as Vaswani et al.)",
    )
    alignment_layer: int | None = Field(
        None,
        description="transformer: the decoder layer (0-based; negative counts from the top) whose "
        "cross-attention, averaged over its heads, is the model's attention for alignments, markup and "
        "heatmaps (None: the middle layer, decoder_layers // 2, which aligned best when measured)",
    )

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, raw: Any) -> Any:
        """A transformer's own defaults for the settings both families share, where not given."""
        if isinstance(raw, dict) and raw.get("family") == "transformer":
            return TRANSFORMER_DEFAULTS | raw
        return raw

    @model_validator(mode="after")
    def _settings_of_the_family(self) -> ModelConfig:
        foreign = sorted(self.model_fields_set & (FAMILY_SETTINGS.keys() - set(self.settings())))
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)} {'does' if len(foreign) == 1 else 'do'} not apply to family {self.family}; "
                f"remove {'it' if len(foreign) == 1 else 'them'} or set family: {FAMILY_SETTINGS[foreign[0]]}"
            )
        if self.family == "transformer" and self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        if self.family == "transformer" and self.d_model % 2:
            raise ValueError(f"d_model must be even (sine and cosine positions come in pairs), got {self.d_model}")
        if self.alignment_layer is not None and not -self.decoder_layers <= self.alignment_layer < self.decoder_layers:
            raise ValueError(
                f"alignment_layer {self.alignment_layer} is not a decoder layer: expected "
                f"{-self.decoder_layers} to {self.decoder_layers - 1}"
            )
        return self

    def settings(self) -> tuple[str, ...]:
        """The names of the settings that apply to this config's family, in field order."""
        return tuple(name for name in type(self).model_fields if FAMILY_SETTINGS.get(name, self.family) == self.family)

    @model_serializer(mode="wrap")
    def _applicable_only(self, handler) -> dict[str, Any]:
        # A resolved config holds only its family's settings, so that it validates again.
        return {name: value for name, value in handler(self).items() if name in self.settings()}

    @model_validator(mode="after")
    def _copy_bridge_fits(self) -> ModelConfig:
        keys = self.encoder_hidden * (2 if self.bidirectional else 1)
        if self.bridge == "copy" and keys != self.decoder_hidden:
            raise ValueError(
                f"bridge copy starts the decoder from the encoder's final state, so decoder_hidden must be "
                f"{keys} (encoder_hidden x directions), got {self.decoder_hidden}"
            )
        return self

    @model_validator(mode="after")
    def _feed_dropout_needs_feeding(self) -> ModelConfig:
        if self.feed_dropout and not (self.decoder == "luong" and self.input_feeding):
            raise ValueError("feed_dropout applies to the luong decoder with input_feeding: true only")
        if not self.attentional_tanh and self.decoder != "luong":
            raise ValueError("attentional_tanh: false applies to the luong decoder only")
        if self.attention_bias and self.attention != "additive":
            raise ValueError("attention_bias applies to additive attention only")
        if self.feed_dropout and self.locked_dropout:
            raise ValueError(
                "feed_dropout and locked_dropout cannot be combined: the fed vector is dropped step by step"
            )
        return self


class TrainConfig(_Section):
    run_dir: str = Field(
        "runs/default", description="where the run writes its config, vocabularies, metrics and checkpoints"
    )
    seed: int = Field(1, description="seeds the weights, dropout and batch order")
    device: str = Field("auto", description="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")
    precision: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32", description="fp32, or bf16/fp16 autocast (fp16 with a gradient scaler)"
    )
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None: torch's default)")
    optimizer: Literal["adam", "adamw"] = Field("adam", description="adam, or adamw (decoupled weight decay)")
    lr: float = Field(1e-3, gt=0.0, description="the peak learning rate")
    weight_decay: float = Field(0.0, ge=0.0, description="the optimizer's weight decay")
    betas: tuple[float, float] = Field((0.9, 0.999), description="Adam's moment decay rates")
    lr_schedule: Literal["constant", "plateau", "inverse_sqrt", "cosine"] = Field(
        "constant",
        description="after warmup: constant; plateau (scaled by plateau_factor when validation stalls); "
        "inverse_sqrt; cosine (down to min_lr at max_steps)",
    )
    warmup_steps: int = Field(0, ge=0, description="linear warmup from 0 to lr over this many steps")
    plateau_factor: float = Field(0.5, gt=0.0, lt=1.0, description="plateau: the factor the rate is scaled by")
    plateau_patience: int = Field(2, ge=0, description="plateau: validations without improvement before scaling")
    min_lr: float = Field(0.0, ge=0.0, description="the rate never goes below this")
    # Training stops at whichever of these limits comes first (None = no such limit).
    max_steps: int | None = Field(None, ge=1, description="stop after this many updates")
    max_epochs: int | None = Field(20, ge=1, description="stop after this many passes over the training data")
    max_minutes: float | None = Field(None, gt=0.0, description="stop after this much training time, with a checkpoint")
    clip_grad_norm: float | None = Field(
        1.0, gt=0.0, description="clip the gradient's global norm to this (None: no clipping)"
    )
    label_smoothing: float = Field(
        0.0, ge=0.0, lt=1.0, description="share of each target's probability spread over the vocabulary"
    )
    smooth_eos: bool = Field(
        True,
        description="label smoothing covers </s> too; false: a </s> target keeps its one-hot target and "
        "no other target's smoothing mass goes to </s>",
    )
    loss_normalization: Literal["tokens", "tokens_without_eos", "sentences"] = Field(
        "tokens",
        description="the summed loss of a batch is divided by its target tokens with </s> (tokens), "
        "without </s> (OpenNMT-py's count), or by its sentences",
    )
    teacher_forcing: float = Field(
        1.0, ge=0.0, le=1.0, description="share of decoder steps fed the reference word rather than the model's own"
    )
    teacher_forcing_schedule: Literal["constant", "linear", "inverse_sigmoid"] = Field(
        "constant", description="how the teacher-forcing ratio decays (scheduled sampling)"
    )
    teacher_forcing_min: float = Field(0.0, ge=0.0, le=1.0, description="the ratio a decaying schedule ends at")
    teacher_forcing_decay_steps: int = Field(10000, ge=1, description="the steps a decaying schedule takes")
    valid_every: int = Field(500, ge=1, description="validate and checkpoint every this many updates")
    valid_bleu_sentences: int = Field(
        500, ge=0, description="validation sources translated greedily for BLEU at each validation (0: loss only)"
    )
    early_stopping_metric: Literal["bleu", "loss"] = Field(
        "bleu", description="what picks the best checkpoint (and stops with patience)"
    )
    patience: int | None = Field(None, ge=1, description="validations without improvement before stopping")
    keep_checkpoints: int = Field(2, ge=1, description="the most recent checkpoints kept, besides the best")
    log_every: int = Field(50, ge=1, description="log the training loss and speed every this many updates")
    init_from: str | None = Field(
        None,
        description="continue from a trained model: a run directory (its best checkpoint) or a checkpoint folder; "
        "its weights, tokenizers and vocabularies start this run, with an optimizer and schedule of its own",
    )
    extend_vocab: bool = Field(
        False,
        description="init_from, word tokens: add the new corpus's words seen min_freq times to its vocabularies",
    )
    freeze: list[Literal["encoder", "embeddings"]] = Field(
        default_factory=list, description="with init_from: parts kept as they were (encoder, embeddings)"
    )
    # After SIGINT/SIGTERM the run saves at the end of the current step; if that step has not
    # ended this many seconds later (or a second signal comes), it exits at once (None: wait).
    stop_grace_seconds: float | None = Field(
        60.0, gt=0.0, description="after Ctrl-C or SIGTERM, wait this long for the step to end and save (None: wait)"
    )

    @model_validator(mode="after")
    def _needs_a_stop(self) -> TrainConfig:
        if self.max_steps is None and self.max_epochs is None and self.max_minutes is None:
            raise ValueError("set at least one of max_steps, max_epochs, max_minutes")
        if self.teacher_forcing_min > self.teacher_forcing:
            raise ValueError("teacher_forcing_min must not exceed teacher_forcing")
        if self.init_from is None and (self.extend_vocab or self.freeze):
            raise ValueError("extend_vocab and freeze concern a continued run: set init_from (attnmt train --from RUN)")
        if self.early_stopping_metric == "bleu" and self.valid_bleu_sentences == 0:
            raise ValueError(
                "early_stopping_metric is bleu but valid_bleu_sentences is 0 (no validation BLEU): "
                "set valid_bleu_sentences >= 1 or early_stopping_metric: loss"
            )
        return self


class DecodeConfig(_Section):
    beam_size: int = Field(5, ge=1, description="hypotheses kept per sentence (1: greedy search)")
    n_best: int = Field(1, ge=1, description="hypotheses `attnmt translate` prints a sentence (its --n-best default)")
    length_penalty: float = Field(1.0, ge=0.0, description="GNMT alpha; 0 = raw log-probability")
    stopping: Stopping = Field(
        "k_finished",
        description="when beam search ends a sentence: k_finished once beam_size hypotheses have ended; "
        "best_finished as soon as a step's best candidate ends, the beam keeping only the unfinished among "
        "the step's top beam_size (OpenNMT-py's rule)",
    )
    min_length: int = Field(
        0, ge=0, description="the fewest tokens an output has before </s> (0: no minimum); the length limit wins"
    )
    max_length_a: float = Field(1.5, ge=0.0, description="max output length = a * source length + b")
    max_length_b: int = Field(10, ge=1, description="see max_length_a")
    batch_size: int = Field(1024, ge=1, description="at most this many sentences per batch")
    batch_tokens: int | None = Field(
        8000, ge=1, description="at most this many padded source tokens per batch, each beam hypothesis counted"
    )
    cuda_graphs: bool = Field(
        True,
        description="on a CUDA device, search in fixed shapes and replay each step as a CUDA graph (the same "
        "outputs, fewer kernel launches; the rnn family, whose state keeps its shape); false: the search that "
        "drops finished sentences",
    )

    @model_validator(mode="after")
    def _n_best_within_the_beam(self) -> DecodeConfig:
        if self.n_best > self.beam_size:
            raise ValueError(f"n_best ({self.n_best}) cannot exceed beam_size ({self.beam_size})")
        return self


class Config(_Section):
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    decode: DecodeConfig = Field(default_factory=DecodeConfig)

    @model_validator(mode="after")
    def _tied_source_needs_one_vocabulary(self) -> Config:
        if self.model.locked_dropout and self.train.teacher_forcing < 1.0:
            raise ValueError(
                "model.locked_dropout needs train.teacher_forcing: 1.0 (its masks are drawn for the whole "
                "teacher-forced sentence; sampled feeding steps one token at a time)"
            )
        if self.model.family == "transformer" and self.train.teacher_forcing < 1.0:
            raise ValueError(
                "train.teacher_forcing below 1 (scheduled sampling) applies to family rnn only: a transformer "
                "is trained on every position at once"
            )
        if self.data.subword_sampling > 0 and self.data.tokenizer != "sentencepiece":
            raise ValueError("data.subword_sampling needs data.tokenizer: sentencepiece (word tokens have no pieces)")
        if self.data.mix_previous > 0 and self.train.init_from is None:
            raise ValueError("data.mix_previous mixes in a starting run's data: set train.init_from (--from RUN)")
        if self.data.mix_previous > 0 and self.data.subword_sampling > 0:
            raise ValueError("data.mix_previous and data.subword_sampling cannot be combined (one of them must be 0)")
        if self.model.tie_source_embeddings and not self.data.shared_vocab:
            raise ValueError(
                "model.tie_source_embeddings needs data.shared_vocab: true (one vocabulary for both languages)"
            )
        return self

    def with_data_dir(self, data_dir: str | None) -> Config:
        """This config reading the built-in corpora from `data_dir` (`--data-dir`, applied here
        once so that no data function takes a folder of its own); None keeps data.data_dir."""
        if data_dir is None:
            return self
        return self.model_copy(update={"data": self.data.model_copy(update={"data_dir": data_dir})})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def validate(raw: dict[str, Any], source: str) -> Config:
    """Turn a plain dict into a Config, or raise ConfigError listing every problem."""
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, Config, source) from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a YAML config (or start from defaults when `path` is None) and apply overrides."""
    raw = read_yaml(path) if path is not None else {}
    for assignment in overrides:
        apply_override(raw, assignment)
    source = str(path) if path is not None else "(defaults)"
    if overrides:
        source += " with --set"
    return validate(raw, source)


def save_config(config: Config, path: str | Path) -> None:
    """Write the resolved config (every default filled in) atomically."""
    write_text_atomic(path, config.to_yaml())
