"""attnmt in the peer benchmark, as three systems: `attnmt`, OpenNMT-py's architecture (the
comparison on identical work), `attnmt-bahdanau`, attnmt's cheaper Bahdanau model, and
`attnmt-recipe`, attnmt's own recipe for Multi30k (the model and schedule of
configs/multi30k-en-de-luong.yaml) on the benchmark's word tokens.

Both go through the same Setup and probe contract as the peers. attnmt runs in the environment
the benchmark itself runs in (nothing to install). It reads Multi30k through its own word
tokenizer, lowercased, which is what wrote the shared token files, so its tokens and
vocabularies are those of the peers. Validation runs at each
checkpoint (loss only: the harness scores checkpoints itself), which attnmt needs to save;
it is a cost the peers, whose validation is switched off, do not pay.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

import attnmt
from attnmt.config import ModelConfig
from benchmarks.peers.system import BATCH_SENTENCES, BATCH_TOKENS, PROBES, Command, PeerSystem, Setup


def _version() -> str:
    """The package version, with the git commit when run from a checkout (the code being measured)."""
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    )
    return f"{attnmt.__version__}+{done.stdout.strip()}" if done.returncode == 0 else attnmt.__version__


# The model section of each attnmt system, beside the Setup's shared sizes and dropout.
ARCHITECTURES = {
    # OpenNMT-py's model (benchmarks/peers/opennmt.py) in attnmt: the comparison on identical work.
    "attnmt": {
        "decoder": "luong",
        "input_feeding": True,
        "attention": "additive",
        "attention_bias": True,
        "attentional_tanh": False,
        "feed_dropout": True,
        "bridge": "copy",
        "init": "uniform",
    },
    # What `attnmt` was until its training fed the next step as OpenNMT-py's does: the attentional
    # vector before dropout, where OpenNMT-py feeds the dropped one its output layer reads. The
    # second identical-model race ran it.
    "attnmt-feed-before-dropout": {
        "decoder": "luong",
        "input_feeding": True,
        "attention": "additive",
        "attention_bias": True,
        "attentional_tanh": False,
        "bridge": "copy",
        "init": "uniform",
    },
    # What `attnmt` was until the two toolkits' models were compared on one set of weights:
    # Luong's tanh on the attentional vector and no bias in the score, where OpenNMT-py's mlp
    # attention has a bias and no tanh. The committed identical-model races ran it.
    "attnmt-tanh": {
        "decoder": "luong",
        "input_feeding": True,
        "attention": "additive",
        "bridge": "copy",
        "init": "uniform",
    },
    # attnmt's cheaper Bahdanau model (a 256-wide maxout readout feeds the output layer), from
    # Glorot as configs/multi30k-en-de.yaml has it.
    "attnmt-bahdanau": {"decoder": "bahdanau", "attention": "additive", "init": "xavier"},
}
# attnmt's own recipe: the config docs/results.md arrived at, read from the file so the two
# cannot drift apart. Only its tokenizer is not taken: every system reads the same word tokens.
RECIPE_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "multi30k-en-de-luong.yaml"
RECIPE_TRAIN_KEYS = ("lr", "lr_schedule", "warmup_steps", "min_lr", "label_smoothing")
# The cosine decays to the run's last update, so the recipe names one (the config's own count is
# for BPE). Until a race fits it to its machine: an estimate of the updates that fit a 50-minute
# race on 2 CPU cores with these word tokens. The recipe's GRU made 4,927 there; its LSTM makes
# 4,400 updates where the GRU made 5,200 on BPE (configs/multi30k-en-de-luong-gru.yaml), so about
# 4,170, on a slower machine than the race's since.
RECIPE_UPDATES = 4200
NOTES = {
    "attnmt": (
        "OpenNMT-py's architecture and function: Luong decoder step with input feeding (the GRU reads "
        "[E y_{t-1}; previous attentional vector h~_{t-1}]), its new state h_t queries additive (MLP) attention "
        "of size 512 with a bias in its score, v^T tanh(W_q h_t + b + U h_j); h~_t = W_c [c_t; h_t] of 512, "
        "with no tanh, after dropout in training, feeds Linear(512, V) and the next step (OpenNMT-py's decoder "
        "feeds the dropped vector too); the decoder starts from the concatenated final forward and backward "
        "encoder states (bridge copy, OpenNMT-py's default); weights from U(-0.1, 0.1) "
        "(OpenNMT-py's param_init 0.1). OpenNMT-py's h~_t has a bias too (512 parameters more there), which "
        "the next layers' biases absorb but for dropout: its converted weights decode identically"
    ),
    "attnmt-feed-before-dropout": (
        "OpenNMT-py's model and function, trained as `attnmt` but feeding the next step h~_t before "
        "dropout, where OpenNMT-py feeds the dropped h~_t its output layer reads; the same function at "
        "inference, another in training (the second identical-model race ran it as `attnmt`)"
    ),
    "attnmt-tanh": (
        "OpenNMT-py's shapes with Luong's attentional vector: as `attnmt`, but h~_t = tanh(W_c [c_t; h_t]) "
        "and no bias in the attention's score, so not the same function as OpenNMT-py's model (the "
        "identical-model races committed before the two were compared on one set of weights ran it as `attnmt`)"
    ),
    "attnmt-bahdanau": (
        "Bahdanau decoder as in the paper: attends with s_{t-1}, GRU input [E y_{t-1}; c_t], maxout deep "
        "output [s_t; c_t; E y_{t-1}] -> 2x256 -> 256 -> vocabulary (no input feeding: Bahdanau's decoder "
        "has none); tanh bridge from the encoder's final states; Glorot initialization. Less arithmetic per "
        "target token than the other systems: its output layer reads 256 values, theirs 512"
    ),
    "attnmt-recipe": (
        "attnmt's own recipe for Multi30k, the model and schedule of configs/multi30k-en-de-luong.yaml: "
        "bidirectional LSTM encoder, Luong LSTM decoder with input feeding, general attention, the "
        "512-wide attentional vector projected to 256 and read by the output layer tied to the target "
        "embeddings, U(-0.1, 0.1), dropout 0.3; Adam lr 2e-3, 200 warmup updates then a cosine decay to "
        "5e-5 at the run's last update, label smoothing 0.1, batches of at most 1,000 padded tokens. "
        "On the benchmark's lowercased word tokens (the config's BPE is not "
        "used: every system reads the same tokens)"
    ),
}


def recipe() -> dict:
    """configs/multi30k-en-de-luong.yaml's model section, its schedule, and its batch size."""
    config = yaml.safe_load(RECIPE_CONFIG.read_text(encoding="utf-8"))
    return {
        "model": config["model"],
        "train": {key: config["train"][key] for key in RECIPE_TRAIN_KEYS},
        "batch_tokens": config["data"]["batch_tokens"],
    }


class Attnmt(PeerSystem):
    """attnmt with one of the ARCHITECTURES, or its own recipe; `name` is the system's key."""

    measures_attention = True

    def __init__(self, data_dir: str | None = None, name: str = "attnmt"):
        if name not in NOTES:
            raise ValueError(f"unknown attnmt system {name!r}; expected one of {', '.join(NOTES)}")
        self.name = name
        self.own_recipe = name == "attnmt-recipe"
        self.architecture_notes = NOTES[name]
        if self.own_recipe:
            self.fit_schedule(RECIPE_UPDATES)
        self.data_dir = data_dir  # the raw corpus folder, when not $ATTNMT_DATA or the cache
        self.version = _version()

    def fit_schedule(self, updates: int) -> None:
        super().fit_schedule(updates)
        # what the config says now, and where the cosine ends: a race run before either changed is not reused
        self.architecture_notes = (
            f"{NOTES[self.name]} The cosine ends at update {updates:,}. "
            f"Read from the config: {json.dumps(recipe(), sort_keys=True)}"
        )

    def model_section(self, setup: Setup) -> dict:
        if self.own_recipe:
            return recipe()["model"]
        return {
            "rnn": "gru",
            "embedding_size": setup.embedding_size,
            "encoder_hidden": setup.encoder_hidden,
            "bidirectional": True,
            "decoder_hidden": setup.decoder_hidden,
            "dropout": setup.dropout,
            **ARCHITECTURES[self.name],
        }

    def arithmetic_shapes(self, setup: Setup) -> ModelConfig:
        return ModelConfig(**self.model_section(setup))

    def install(self, env_dir: Path) -> Path:
        return Path(sys.executable)

    def config(self, setup: Setup, work: Path, *, steps: int | None, max_minutes: float | None, save_every: int):
        config = self._setup_config(setup, work, steps=steps, max_minutes=max_minutes, save_every=save_every)
        if self.own_recipe:
            own = recipe()
            config["data"].update(batch_tokens=own["batch_tokens"], max_batch_sentences=None)
            config["train"].update(own["train"], max_steps=steps or self.schedule_updates)
        return config

    def _setup_config(self, setup: Setup, work: Path, *, steps, max_minutes, save_every) -> dict:
        return {
            "data": {
                "corpus": "multi30k",
                "src_lang": setup.src_lang,
                "tgt_lang": setup.tgt_lang,
                "data_dir": self.data_dir,
                "valid_split": "val",
                "test_split": "test_2016_flickr",
                "tokenizer": "word",
                "lowercase": True,
                "min_freq": setup.min_freq,
                "batch_tokens": 1_000_000,  # batches are cut by sentence count alone
                "max_batch_sentences": setup.batch_sentences,
                "bucket_pool_batches": None,  # the whole corpus sorted, as OpenNMT-py's one bucket per epoch
            },
            "model": self.model_section(setup),
            "train": {
                "run_dir": str(work / "run"),
                "seed": setup.seed,
                "device": "cpu",
                "threads": setup.threads,
                "lr": setup.lr,
                "lr_schedule": "constant",
                "max_steps": steps,
                "max_epochs": None,
                "max_minutes": max_minutes,
                "clip_grad_norm": setup.clip_grad_norm,
                "label_smoothing": setup.label_smoothing,
                "valid_every": save_every,
                "valid_bleu_sentences": 0,
                "early_stopping_metric": "loss",
                "keep_checkpoints": 100_000,
            },
            "decode": {"batch_size": setup.decode_batch_sentences, "beam_size": setup.beam_size},
        }

    def prepare(self, setup: Setup, work: Path, python: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)

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
        config = self.config(setup, work, steps=steps, max_minutes=max_minutes, save_every=save_every)
        path = work / "config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        argv = [str(python), str(PROBES / "attnmt_probe.py"), "train", "--config", str(path), "--events", str(events)]
        if max_minutes is not None:
            argv += ["--max-minutes", str(max_minutes)]
        return Command(argv, work)

    def tuning_search(self, alpha: float) -> dict:
        return {"stopping": "k_finished", "alpha": alpha}

    def stopping_searches(self, alpha: float) -> dict[str, dict]:
        return {
            "best_finished, no penalty": {"stopping": "best_finished", "alpha": 0.0},  # OpenNMT-py's rule
            "k_finished, alpha 1": {"stopping": "k_finished", "alpha": 1.0},  # attnmt's default search
            "k_finished, tuned": self.tuning_search(alpha),
        }

    def decode_batchings(self, setup: Setup) -> dict[str, dict]:
        return {
            **super().decode_batchings(setup),
            **{f"{n} sentences": {"batch_sentences": n} for n in BATCH_SENTENCES},
            **{f"{n:,} tokens": {"batch_sentences": 10**6, "batch_tokens": n} for n in BATCH_TOKENS},
        }

    def checkpoints(self, work: Path) -> dict[int, Path]:
        folder = work / "run" / "checkpoints"
        return {int(path.name.split("-")[1]): path for path in folder.glob("step-*") if path.is_dir()}

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
        stopping: str | None = None,
        alpha: float | None = None,
        batch_sentences: int | None = None,
        batch_tokens: int | None = None,
    ) -> Command:
        """`stopping` (k_finished or best_finished) and `alpha` (GNMT's length penalty): the beam
        search's rule and ranking, the run's decode settings where not given; `batch_sentences`
        (the Setup's if not given) and `batch_tokens`: at most that many sentences and padded
        source tokens times the beam in a batch."""
        argv = [str(python), str(PROBES / "attnmt_probe.py"), "translate", "--checkpoint", str(checkpoint)]
        argv += ["--source", str(source), "--output", str(output), "--result", str(result)]
        argv += ["--beam", str(beam_size), "--batch", str(batch_sentences or setup.decode_batch_sentences)]
        if batch_tokens is not None:
            argv += ["--batch-tokens", str(batch_tokens)]
        argv += ["--max-length", str(setup.max_output_length), "--threads", str(setup.threads)]
        if attention_focus is not None:
            argv += ["--attention-focus", str(attention_focus)]
        if stopping is not None:
            argv += ["--stopping", stopping]
        if alpha is not None:
            argv += ["--alpha", str(alpha)]
        return Command(argv, work)
