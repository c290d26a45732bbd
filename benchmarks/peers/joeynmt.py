"""JoeyNMT 2.3.0 in the peer benchmark: its recurrent model, trained and decoded by its own code.

JoeyNMT is driven through its YAML configuration and, inside the probe, its own Python API
(`prediction.prepare`, `training.TrainManager`, `prediction.predict`). Two things the benchmark
needs are not JoeyNMT options and live in the probe instead: a checkpoint every `save_every`
steps without validating (JoeyNMT saves only when it validates), and stopping after a time
budget. The number of updates is JoeyNMT's own `training.updates`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from attnmt.config import ModelConfig
from benchmarks.peers.arithmetic import input_feeding_mlp_shapes
from benchmarks.peers.system import PROBES, Command, PeerSystem, Setup, make_venv, run_pip

PROBE = PROBES / "joeynmt_probe.py"
# The torch pin comes with joeynmt in one pip call: joeynmt 2.3.0 asks only for torch>=1.12, and
# a pinned torch is what keeps pip on this machine's local CPU wheel.
PACKAGES = ["torch==2.13.0", "joeynmt==2.3.0", "importlib_metadata"]  # joeynmt imports the last without declaring it
INSTALLED = "joeynmt-2.3.0.installed"
CONFIG = "config.yaml"
MODEL_DIR = "model"
NEVER = 10**9  # epochs: training ends by `updates` or the time budget, never by running out of epochs


class JoeyNMT(PeerSystem):
    name = "joeynmt"
    version = "2.3.0"
    architecture_notes = (
        "JoeyNMT's recurrent model: bidirectional GRU encoder over the source words plus an appended </s>; "
        "GRU decoder started by a bridge, tanh(W [final forward; final backward encoder state]); a "
        "Luong-style decoder step with Bahdanau (MLP) scoring: the GRU reads [previous target embedding; "
        "previous attentional vector] (input feeding), its new state is the attention query, the attentional "
        "vector is tanh(W [state; context]) (decoder size) and the output layer is a bias-free projection of it "
        "(no maxout, no embedding in the output). Dropout (Setup.dropout) on the encoder embeddings, on the "
        "decoder GRU input and on [state; context] before the attentional layer. Initialization as in JoeyNMT's "
        "Luong-style example (configs/iwslt_envi_luong.yaml): weights, embeddings and biases from U(-0.1, 0.1), "
        "no orthogonal RNN init. An earlier run of this benchmark with Glorot-uniform weights and embeddings "
        "kept JoeyNMT's validation BLEU between 1.3 and 2.5 for its first 32 minutes. The probe seeds torch "
        "before the model is built, which JoeyNMT 2.3.0 does only afterwards. Vocabularies: "
        "train types seen at least min_freq times per language, plus JoeyNMT's four specials. Loss: summed "
        "over target tokens and divided by their number (normalization: tokens; JoeyNMT's default divides by "
        "sentences), with JoeyNMT's label smoothing (KL divergence to 1-eps on the reference and eps/(V-2) on "
        "every other non-pad type). Constant lr through an exponential schedule with factor 1.0 (JoeyNMT 2.3.0 "
        "rejects no schedule). Batches: Setup.batch_sentences sentences drawn in a shuffled order without "
        "length bucketing; each epoch ends with a smaller batch of the left-over sentences. Checkpoints hold "
        "the optimizer state too (JoeyNMT's format). Decoding: JoeyNMT's greedy and beam search, batches of "
        "Setup.decode_batch_sentences sentences in input order, max_output_length counting </s>, beam_alpha "
        "-1 (no length penalty: hypotheses ranked by summed log-probability; a sentence's search ends when all "
        "its beam candidates have finished), min_output_length 1 (</s> is not allowed first), <unk> kept in "
        "the output."
    )

    def install(self, env_dir: Path) -> Path:
        python = env_dir / "bin" / "python"
        if (env_dir / INSTALLED).exists():
            return python
        python = make_venv(self.name, env_dir)
        run_pip(self.name, python, PACKAGES)
        (env_dir / INSTALLED).write_text(" ".join(PACKAGES) + "\n", encoding="utf-8")
        return python

    source_extra_tokens = 1  # the </s> JoeyNMT appends to every source
    measures_attention = True

    def arithmetic_shapes(self, setup: Setup) -> ModelConfig:
        return input_feeding_mlp_shapes(setup, bridge="tanh")

    def prepare(self, setup: Setup, work: Path, python: Path) -> None:
        work = work.resolve()  # the config's paths must not depend on the probe's working folder
        work.mkdir(parents=True, exist_ok=True)
        vocabularies = {}
        for lang in (setup.src_lang, setup.tgt_lang):
            vocabularies[lang] = work / f"vocab.{lang}"
            write_vocabulary(setup.file("train", lang), setup.min_freq, vocabularies[lang])
        config = joeynmt_config(setup, work / MODEL_DIR, vocabularies)
        (work / CONFIG).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    def train_command(
        self,
        setup: Setup,
        work: Path,
        python: Path,
        *,
        steps: int | None,
        max_minutes: float | None,
        save_every: int,
        events: Path,
    ) -> Command:
        argv = [str(python.absolute()), str(PROBE), "train", "--config", _absolute(work / CONFIG)]
        argv += ["--events", _absolute(events), "--save-every", str(save_every), "--threads", str(setup.threads)]
        if steps is not None:
            argv += ["--steps", str(steps)]
        if max_minutes is not None:
            argv += ["--max-minutes", str(max_minutes)]
        return Command(argv=argv, cwd=work, env=thread_env(setup))

    def checkpoints(self, work: Path) -> dict[int, Path]:
        """JoeyNMT names checkpoints `<step>.ckpt`; latest.ckpt and best.ckpt are symlinks to them."""
        found = (path for path in (work / MODEL_DIR).glob("*.ckpt") if path.stem.isdigit() and not path.is_symlink())
        return {int(path.stem): path for path in sorted(found, key=lambda path: int(path.stem))}

    def translate_command(
        self,
        setup: Setup,
        work: Path,
        python: Path,
        *,
        checkpoint: Path,
        source: Path,
        output: Path,
        beam_size: int,
        result: Path,
        attention_focus: Path | None = None,
    ) -> Command:
        # `work` is the decoding folder, not the training one: the probe finds the configuration and
        # vocabularies in the checkpoint's model directory, where the training probe left them.
        argv = [str(python.absolute()), str(PROBE), "translate", "--checkpoint", _absolute(checkpoint)]
        argv += ["--source", _absolute(source), "--output", _absolute(output), "--result", _absolute(result)]
        argv += ["--beam-size", str(beam_size), "--batch-size", str(setup.decode_batch_sentences)]
        argv += ["--max-output-length", str(setup.max_output_length), "--threads", str(setup.threads)]
        if attention_focus is not None:
            argv += ["--attention-focus", _absolute(attention_focus)]
        return Command(argv=argv, cwd=work, env=thread_env(setup))


def _absolute(path: Path) -> str:
    """Paths in a command are absolute: it runs in `work`, wherever the harness is."""
    return str(path.resolve())


def thread_env(setup: Setup) -> dict[str, str]:
    """OpenMP reads its thread count when it starts, before the probe's set_threads can run."""
    return {"OMP_NUM_THREADS": str(setup.threads)}


def write_vocabulary(corpus: Path, min_freq: int, target: Path) -> None:
    """JoeyNMT's own rule (vocabulary.sort_and_cut), written once here instead of at every training
    start: types seen at least `min_freq` times, most frequent first, ties alphabetical. JoeyNMT
    splits word-level lines at single spaces and puts <unk> <pad> <s> </s> in front on loading."""
    counts: Counter[str] = Counter()
    for line in corpus.read_text(encoding="utf-8").splitlines():
        if line:  # JoeyNMT drops empty lines
            counts.update(line.split(" "))
    kept = sorted((token for token, count in counts.items() if count >= min_freq), key=lambda t: (-counts[t], t))
    target.write_text("".join(token + "\n" for token in kept), encoding="utf-8")


def joeynmt_config(setup: Setup, model_dir: Path, vocabularies: dict[str, Path]) -> dict:
    """The YAML configuration; the probe adds the run's updates, checkpoint interval and, for
    decoding, the checkpoint and beam size."""
    return {
        "name": "peers-multi30k",
        "joeynmt_version": "2.3.0",
        "model_dir": str(model_dir),
        "use_cuda": False,
        "fp16": False,
        "random_seed": setup.seed,
        "data": data_section(setup, vocabularies),
        "training": training_section(setup),
        "testing": testing_section(setup),
        "model": model_section(setup),
    }


def data_section(setup: Setup, vocabularies: dict[str, Path]) -> dict:
    def side(lang: str) -> dict:
        return {
            "lang": lang,
            "level": "word",
            "lowercase": False,  # the files are lowercased already
            "normalize": False,
            "max_length": -1,  # no length filter: every training pair is kept
            "min_length": -1,
            "voc_min_freq": setup.min_freq,
            "voc_file": str(vocabularies[lang]),
            "tokenizer_cfg": {"pretokenizer": "none"},
        }

    prefix = setup.data_dir.resolve()
    return {
        "train": str(prefix / "train"),
        # JoeyNMT's training loop needs a dev set object; the probe never validates on it.
        "dev": str(prefix / "valid"),
        "dataset_type": "plain",
        "src": side(setup.src_lang),
        "trg": side(setup.tgt_lang),
    }


def training_section(setup: Setup) -> dict:
    return {
        "optimizer": "adam",
        "adam_betas": [0.9, 0.999],
        "learning_rate": setup.lr,
        "learning_rate_min": 0.0,  # JoeyNMT stops once the lr falls below this; it never should
        # A constant lr: JoeyNMT 2.3.0 rejects `scheduling: null` ("Invalid scheduler") and its
        # plateau scheduler passes `verbose`, which torch 2.13 no longer takes; an exponential
        # decay by a factor of 1.0 per epoch keeps the lr where it is.
        "scheduling": "exponential",
        "decrease_factor": 1.0,
        "weight_decay": 0.0,
        "clip_grad_norm": setup.clip_grad_norm,
        "loss": "crossentropy",
        "label_smoothing": setup.label_smoothing,
        "normalization": "tokens",
        "batch_size": setup.batch_sentences,
        "batch_type": "sentence",
        "batch_multiplier": 1,
        "shuffle": True,
        "epochs": NEVER,
        "keep_best_ckpts": -1,  # keep every checkpoint
        "overwrite": True,
        "print_valid_sents": [],
        # Placeholders: the probe sets updates, validation_freq (= save_every) and logging_freq.
        "validation_freq": NEVER,
        "logging_freq": 100,
    }


def testing_section(setup: Setup) -> dict:
    return {
        "batch_size": setup.decode_batch_sentences,
        "batch_type": "sentence",
        "beam_size": setup.beam_size,
        "beam_alpha": -1,  # JoeyNMT's default: no length penalty
        "max_output_length": setup.max_output_length,
        "min_output_length": 1,  # JoeyNMT's default
        "n_best": 1,
        "eval_metrics": [],
    }


def model_section(setup: Setup) -> dict:
    # JoeyNMT's own initialization for its Luong-style RNN (configs/iwslt_envi_luong.yaml): every
    # weight, embedding and bias from U(-0.1, 0.1). Its default (Glorot weights, N(0, 0.01)
    # embeddings) starts the output layer at a range that shrinks with the vocabulary, the
    # initialization under which this decoder step (the new state queries the attention) put
    # its attention on the first source position in attnmt (docs/design.md, "Initialization");
    # from Glorot weights and embeddings JoeyNMT's validation BLEU stayed below 3 for 32 minutes.
    return {
        "initializer": "uniform",
        "init_weight": 0.1,
        "embed_initializer": "uniform",
        "embed_init_weight": 0.1,
        "bias_initializer": "uniform",
        "bias_init_weight": 0.1,
        "init_rnn_orthogonal": False,
        "tied_embeddings": False,
        "tied_softmax": False,
        "encoder": {
            "type": "recurrent",
            "rnn_type": "gru",
            "embeddings": {"embedding_dim": setup.embedding_size, "scale": False},
            "hidden_size": setup.encoder_hidden,
            "bidirectional": True,
            "num_layers": 1,
            "dropout": setup.dropout,  # with one layer: the embeddings' dropout only
        },
        "decoder": {
            "type": "recurrent",
            "rnn_type": "gru",
            "embeddings": {"embedding_dim": setup.embedding_size, "scale": False},
            "hidden_size": setup.decoder_hidden,
            "num_layers": 1,
            "attention": "bahdanau",
            "input_feeding": True,
            "init_hidden": "bridge",
            "dropout": setup.dropout,  # the GRU input: [embedding; fed attentional vector]
            "hidden_dropout": setup.dropout,  # [state; context] before the attentional layer
        },
    }
