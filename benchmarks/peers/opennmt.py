"""OpenNMT-py 3.5.1 as a peer: `opennmt-py`, its RNN encoder-decoder with Bahdanau (MLP) attention
at the Setup's sizes and optimizer, and what every OpenNMT-py system shares: its installation,
the options files it is driven through, its vocabulary tool, trainer and translator. Its own
recipes, `opennmt-py-recipe` and `opennmt-py-adam-recipe`, are in `opennmt_recipes`.

OpenNMT-py 3.5.1 declares torch<2.3, but its RNN path runs unchanged on torch 2.13.0, which the
benchmark pins for every system so that speed compares toolkits, not torch builds: it is
installed with `--no-deps` next to torch 2.13.0, followed by the packages it imports when
training and translating (pinned below). The one incompatibility, torch.load's
weights_only=True default since torch 2.6, is handled in the probe (see
`probes/opennmt_probe.py`).

Files in `work`: `build_vocab.yaml` and `vocab.<lang>` (token counts from
`onmt_build_vocab` over the whole training corpus; the Setup's frequency threshold is applied
when training builds the vocabularies), `train.yaml` (all model, optimizer and data options),
and `checkpoints/model_step_N.pt`.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from attnmt.config import ModelConfig
from benchmarks.peers.arithmetic import input_feeding_mlp_shapes
from benchmarks.peers.system import (
    BATCH_SENTENCES,
    BATCH_TOKENS,
    PROBES,
    Command,
    PeerError,
    PeerSystem,
    Setup,
    make_venv,
    run_pip,
)

TORCH = "torch==2.13.0"
OPENNMT = "OpenNMT-py==3.5.1"
# What `import onmt.bin.train` and the translator import. OpenNMT imports every transform
# module at start-up (spacy, fasttext, rapidfuzz, ahocorasick, regex for transforms we do not
# use) and every scorer (sacrebleu). Left out of its declared requirements: ctranslate2, flask,
# waitress and tensorboard (server, LM-prior and logging options we do not use).
DEPENDENCIES = [
    "numpy==2.4.6",
    "configargparse==1.9.0",
    "pyyaml==6.0.3",
    "pyonmttok==1.38.1",
    "regex==2026.11.15",
    "rapidfuzz==3.14.6",
    "pyahocorasick==2.3.1",
    "fasttext-wheel==0.9.2",
    "spacy==3.8.18",
    "sacrebleu==2.6.0",
]
MARKER = "attnmt-peer-installed.json"
PROBE = PROBES / "opennmt_probe.py"
CHECKPOINT = re.compile(r"model_step_(\d+)\.pt")
UNLIMITED_STEPS = 1_000_000_000  # OpenNMT needs a number; the time budget ends such a run


class OpenNMT(PeerSystem):
    """OpenNMT-py driven through its own config files, vocabulary tool, trainer and translator."""

    name = "opennmt-py"
    version = "3.5.1"
    architecture_notes = (
        "OpenNMT-py 3.5.1 (declares torch<2.3; run on torch 2.13.0). "
        "Encoder: encoder_type brnn, GRU, hidden_size 512 = 256 per direction, 1 layer, packed "
        "sequences. Decoder: InputFeedRNNDecoder, one GRUCell of 512 whose input is [embedding 256; "
        "previous attentional vector 512]. No bridge (OpenNMT's default): the decoder starts from "
        "the concatenated final forward/backward encoder states, with no parameters. Attention: "
        "global_attention mlp, score v^T tanh(W_q h_t + b + U h_j) with "
        "the decoder state h_t after this step's GRU update (Luong's order, not Bahdanau's "
        "previous-state query); attentional vector W_out [c_t; h_t] + b, with no tanh (OpenNMT-py "
        "applies one for dot and general attention only), feeds the generator "
        "Linear(512, V) and the next step. Dropout 0.3 on source and target embeddings and on the "
        "attentional vector. Parameters initialised uniform(-0.1, 0.1) (param_init 0.1). "
        "Vocabularies: tokens seen >= 2 times in train plus <unk> <blank> <s> </s>, no padding to "
        "a multiple (vocab_size_multiple 1). Loss: summed cross-entropy with label smoothing 0.1 "
        "divided by the batch's target tokens NOT counting EOS (normalization tokens; attnmt "
        "counts EOS), so gradients are about 8% larger before clipping at global norm 1.0. Adam "
        "(0.9, 0.999, eps 1e-8), lr 1e-3 constant (learning_rate_decay 1.0, decay_method none). "
        "Batches: OpenNMT's dynamic iterator with one epoch per bucket (bucket_size = training "
        "lines), sorted by (source, target) length, cut into 64 sentences and shuffled, so batches "
        "have little padding; within one batch a repeated source sentence is skipped (OpenNMT's "
        "de-duplication). No in-training validation (no valid corpus). Decoding: OpenNMT's "
        "translator in-process, batches of 64 sentences sorted by source length, BeamSearch with "
        "its defaults (beam 1 is greedy; a sentence ends when its best hypothesis ends; n_best 1), "
        "length_penalty none (OpenNMT's default is avg), max_length 100 without OpenNMT's default "
        "cap of 1.25 x source length + 5 (max_length_ratio 0)."
    )

    def install(self, env_dir: Path) -> Path:
        python = make_venv(self.name, env_dir)
        marker = env_dir / MARKER
        wanted = [TORCH, OPENNMT, *DEPENDENCIES]
        if marker.exists() and json.loads(marker.read_text(encoding="utf-8")) == wanted:
            return python
        run_pip(self.name, python, [TORCH])  # first, so that nothing below can pull another torch
        run_pip(self.name, python, ["--no-deps", OPENNMT])
        run_pip(self.name, python, DEPENDENCIES)
        marker.write_text(json.dumps(wanted) + "\n", encoding="utf-8")
        return python

    def arithmetic_shapes(self, setup: Setup) -> ModelConfig:
        # its mlp attention: a bias in the score, no tanh on the attentional vector; in training its
        # decoder feeds the next step the attentional vector after dropout, the one its output layer reads
        shapes = input_feeding_mlp_shapes(setup, bridge="copy")
        return shapes.model_copy(update={"attention_bias": True, "attentional_tanh": False, "feed_dropout": True})

    def train_options(self, setup: Setup, work: Path) -> dict:
        """Everything but train_steps and save_checkpoint_steps, which the probe gets per run."""
        model = model_options(self.arithmetic_shapes(setup))
        return {**data_options(setup, work), **model, **_setup_training_options(setup)}

    def prepare(self, setup: Setup, work: Path, python: Path) -> None:
        if not self.own_recipe and 2 * setup.encoder_hidden != setup.decoder_hidden:
            # One hidden_size: brnn halves it per direction, and the attention needs both equal.
            raise PeerError(
                f"{self.name}: needs decoder_hidden = 2 x encoder_hidden, got {setup.decoder_hidden} "
                f"and {setup.encoder_hidden}"
            )
        work = work.resolve()
        work.mkdir(parents=True, exist_ok=True)
        _write_yaml(work / "build_vocab.yaml", _vocab_options(setup, work))
        _build_vocab(python, work)
        _write_yaml(work / "train.yaml", self.train_options(setup, work))

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
        argv = [
            str(python.absolute()),  # not resolve(): the venv's python is a symlink out of the venv
            str(PROBE),
            "train",
            "--config",
            str((work / "train.yaml").resolve()),
            "--events",
            str(events.resolve()),
            "--threads",
            str(setup.threads),
            "--steps",
            str(UNLIMITED_STEPS if steps is None else steps),
            "--save-every",
            str(save_every),
        ]
        if max_minutes is not None:
            argv += ["--max-minutes", str(max_minutes)]
        return Command(argv=argv, cwd=work.resolve(), env=_thread_env(setup))

    def checkpoints(self, work: Path) -> dict[int, Path]:
        found = {}
        for path in (work / "checkpoints").glob("model_step_*.pt"):
            match = CHECKPOINT.fullmatch(path.name)
            if match:
                found[int(match.group(1))] = path
        return dict(sorted(found.items()))

    def tuning_search(self, alpha: float) -> dict:
        return {"length_penalty": "wu", "alpha": alpha}

    def stopping_searches(self, alpha: float) -> dict[str, dict]:
        return {
            "best_finished, no penalty": {"length_penalty": "none", "alpha": 0.0},  # the race's setting
            "best_finished, avg": {"length_penalty": "avg", "alpha": 0.0},  # OpenNMT-py 3.x's default penalty
            "best_finished, wu tuned": self.tuning_search(alpha),
        }

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
        length_penalty: str = "none",
        alpha: float = 0.0,
        batch_size: int | None = None,
        batch_type: str = "sents",
    ) -> Command:
        """`length_penalty` (none, avg or wu with `alpha`): the probe's ranking of hypotheses;
        `batch_size` (the Setup's sentences if not given) counts `batch_type`, sents or tokens."""
        argv = [
            str(python.absolute()),
            str(PROBE),
            "translate",
            "--model",
            str(checkpoint.resolve()),
            "--source",
            str(source.resolve()),
            "--output",
            str(output.resolve()),
            "--result",
            str(result.resolve()),
            "--threads",
            str(setup.threads),
            "--beam-size",
            str(beam_size),
            "--batch-size",
            str(batch_size or setup.decode_batch_sentences),
            "--batch-type",
            batch_type,
            "--max-length",
            str(setup.max_output_length),
            "--length-penalty",
            length_penalty,
            "--alpha",
            str(alpha),
        ]
        return Command(argv=argv, cwd=work.resolve(), env=_thread_env(setup))

    def decode_batchings(self, setup: Setup) -> dict[str, dict]:
        return {
            **super().decode_batchings(setup),
            **{f"{n} sentences": {"batch_size": n} for n in BATCH_SENTENCES},
            **{f"{n:,} tokens": {"batch_size": n, "batch_type": "tokens"} for n in BATCH_TOKENS},
        }

    def convert_command(self, python: Path, weights: Path, output: Path) -> Command:
        """The probe's `convert`: the weights `same_weights.write_for_opennmt` wrote, as an
        OpenNMT-py checkpoint at `output`."""
        argv = [str(python.absolute()), str(PROBE), "convert", "--weights", str(weights.resolve())]
        return Command(argv=[*argv, "--output", str(output.resolve())], cwd=output.parent.resolve())


def _corpus(setup: Setup) -> dict:
    """The training corpus as OpenNMT's `data` option: no transforms, the tokens as they are."""
    return {
        "corpus_1": {
            "path_src": str(setup.file("train", setup.src_lang).resolve()),
            "path_tgt": str(setup.file("train", setup.tgt_lang).resolve()),
            "transforms": [],
        }
    }


def _vocab_options(setup: Setup, work: Path) -> dict:
    """onmt_build_vocab counts every token of the whole corpus (n_sample -1; its default is 5000 lines)."""
    return {
        "data": _corpus(setup),
        "save_data": str(work / "vocab"),
        "src_vocab": str(work / f"vocab.{setup.src_lang}"),
        "tgt_vocab": str(work / f"vocab.{setup.tgt_lang}"),
        "n_sample": -1,
        "overwrite": True,
    }


def data_options(setup: Setup, work: Path) -> dict:
    """The corpus, vocabularies, checkpoints, seed and batching every OpenNMT-py system shares."""
    training_lines = _count_lines(setup.file("train", setup.src_lang))
    return {
        "data": _corpus(setup),  # no `valid` corpus: no in-training validation
        "src_vocab": str(work / f"vocab.{setup.src_lang}"),
        "tgt_vocab": str(work / f"vocab.{setup.tgt_lang}"),
        "src_words_min_frequency": setup.min_freq,
        "tgt_words_min_frequency": setup.min_freq,
        "src_vocab_size": 0,  # 0: no cap (the default caps at 32768)
        "tgt_vocab_size": 0,
        "vocab_size_multiple": 1,  # the default pads vocabularies to a multiple of 8
        "save_model": str(work / "checkpoints" / "model"),
        "keep_checkpoint": -1,
        "seed": setup.seed,
        "bucket_size": training_lines,  # one epoch per bucket (the default is 262,144 examples)
        "num_workers": 0,  # batches made in the training process: no loader processes
        "report_every": 50,
    }


def model_options(model: ModelConfig) -> dict:
    """The `onmt_train` options that build the OpenNMT-py twin of `model`: a bidirectional GRU
    encoder and an input-feeding GRU decoder with MLP attention (`brnn` splits hidden_size,
    the decoder's, in two directions)."""
    return {
        "encoder_type": "brnn",
        "decoder_type": "rnn",
        "rnn_type": "GRU",
        "enc_layers": model.encoder_layers,
        "dec_layers": model.decoder_layers,
        "hidden_size": model.decoder_hidden,
        "word_vec_size": model.embedding_size,
        "global_attention": "mlp",
        "input_feed": 1,
        "dropout": [model.dropout],
    }


def _setup_training_options(setup: Setup) -> dict:
    """The Setup's optimizer and batches in OpenNMT-py's options."""
    return {
        "optim": "adam",
        "learning_rate": setup.lr,
        "decay_method": "none",
        "learning_rate_decay": 1.0,  # the default halves lr every 10,000 steps from step 50,000
        "max_grad_norm": setup.clip_grad_norm,
        "label_smoothing": setup.label_smoothing,
        "normalization": "tokens",  # per-token loss like the other systems (default: per sentence)
        "accum_count": [1],
        "batch_type": "sents",
        "batch_size": setup.batch_sentences,
    }


def _count_lines(path: Path) -> int:
    with open(path, "rb") as file:
        return sum(1 for _ in file)


def _write_yaml(path: Path, options: dict) -> None:
    """One `key: value` line per option; JSON values are valid YAML, and need no YAML package here."""
    path.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in options.items()), encoding="utf-8")


def _build_vocab(python: Path, work: Path) -> None:
    done = subprocess.run(
        [str(python.absolute()), "-m", "onmt.bin.build_vocab", "-config", str(work / "build_vocab.yaml")],
        cwd=work,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["(no output)"]
        raise PeerError(f"opennmt-py: onmt_build_vocab failed: {lines[-1].strip()}")


def _thread_env(setup: Setup) -> dict[str, str]:
    return {"OMP_NUM_THREADS": str(setup.threads), "MKL_NUM_THREADS": str(setup.threads)}
