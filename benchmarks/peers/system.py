"""What every system in the peer benchmark is given, and what each must provide.

A `Setup` is identical for all systems: the same tokenized files, vocabulary threshold, model
shapes, batch size, optimizer settings and thread count. A `PeerSystem` turns it into its own
configuration and commands. Commands run in the system's own virtual environment (a peer may
pin a torch that attnmt does not use) through a *probe*: a small script in `probes/` that
runs the system's own training or translation in-process and records, the same way for every
system, what the benchmark measures:

- training: one JSON line per optimizer step, `{"step", "time", "target_tokens"}`, time in
  seconds (time.perf_counter) and the batch's non-pad target tokens including EOS; a first
  line `{"parameters": N}`; training stops by itself after `--max-minutes` of training with a
  checkpoint of the last step written;
- translation: the model loaded untimed, then the whole file translated under one timer; the
  output is one line of space-separated target tokens per input line, and a JSON result file
  `{"seconds", "sentences", "generated_tokens"}`.

The harness measures a command's peak resident memory from outside (`os.wait4`), so the probes
do not.
"""

from __future__ import annotations

import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attnmt.config import ModelConfig

PROBES = Path(__file__).parent / "probes"
# The decode batchings tried before decoding speed is timed (`PeerSystem.decode_batchings`), beside
# the Setup's 64 sentences: more sentences, and batches cut by tokens, which each toolkit counts
# its own way (attnmt: padded source tokens times the beam; OpenNMT-py: its `batch_type tokens`).
BATCH_SENTENCES = (128, 256)
BATCH_TOKENS = (2000, 4000, 8000)


class PeerError(Exception):
    """A system could not be installed or run: one line naming the system and what failed."""


@dataclass(frozen=True)
class Setup:
    """The experiment every system runs: Multi30k en->de, lowercased word tokens.

    data_dir holds train/valid/test2016 .en/.de files, one sentence per line, tokens separated
    by single spaces (attnmt's word tokenizer, so every system reads the very same tokens).
    """

    data_dir: Path
    src_lang: str = "en"
    tgt_lang: str = "de"
    min_freq: int = 2  # vocabulary: types seen at least twice in train, per language
    embedding_size: int = 256
    encoder_hidden: int = 256  # per direction, bidirectional GRU, one layer
    decoder_hidden: int = 512  # GRU, one layer, additive (Bahdanau/MLP) attention
    dropout: float = 0.3
    batch_sentences: int = 64
    lr: float = 1e-3  # Adam, constant
    clip_grad_norm: float = 1.0
    label_smoothing: float = 0.1
    decode_batch_sentences: int = 64
    beam_size: int = 5
    max_output_length: int = 100  # tokens; Multi30k's longest test target has 40 or so
    seed: int = 1
    threads: int = 2

    def file(self, split: str, lang: str) -> Path:
        """split: train, valid or test2016; lang: src_lang or tgt_lang."""
        return self.data_dir / f"{split}.{lang}"

    def describe(self) -> dict:
        return {key: str(value) if isinstance(value, Path) else value for key, value in asdict(self).items()}


@dataclass
class Command:
    """A probe invocation: argv run with cwd `cwd` and extra environment `env`."""

    argv: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)


class PeerSystem(ABC):
    """One translation toolkit as the benchmark drives it."""

    name: str  # as on the command line: attnmt, opennmt-py, joeynmt
    version: str
    # What differs from the Setup in this system's architecture where shapes cannot match.
    architecture_notes: str = ""
    source_extra_tokens: int = 0  # tokens the system adds to every source sentence (JoeyNMT: </s>)
    # Whether its probe can report where the attention goes (`translate_command`'s attention_focus).
    measures_attention: bool = False
    # Whether it trains its own recipe (its own sizes, optimizer, schedule and batches) instead of
    # the Setup's: such systems race each other, never the Setup's systems (`quality.quality`).
    own_recipe: bool = False
    # The updates its learning-rate schedule decays over, where it decays to a floor at a set
    # update (None: a schedule that does not depend on the run's length). A quality race fits it
    # to its minutes on the machine it runs on (`quality.schedule_for`) and records what it fitted;
    # the architecture notes name it, so that a run of another fit is not reused.
    schedule_updates: int | None = None

    def fit_schedule(self, updates: int) -> None:
        """Lay the learning-rate schedule out over `updates` updates (a system with `schedule_updates` only)."""
        self.schedule_updates = updates

    def tuning_search(self, alpha: float) -> dict | None:
        """The beam search whose length penalty `stopping.stopping` chooses on valid, at `alpha`, as
        `translate_command`'s search options; None where the adapter takes no search options."""
        return None

    def stopping_searches(self, alpha: float) -> dict[str, dict]:
        """The beam searches `stopping.stopping` compares, by name, as `translate_command`'s search
        options (each system's own stopping rules and penalties); `alpha`: the one chosen on valid."""
        return {}

    def decode_batchings(self, setup: Setup) -> dict[str, dict]:
        """The ways to batch a decode that `same_weights` tries before it times one, by
        name, as `translate_command`'s options; the Setup's batch of sentences (no options) first."""
        return {f"{setup.decode_batch_sentences} sentences": {}}

    def environment(self) -> str:
        """The folder name of its virtual environment: one per installed package version."""
        return f"{self.name}-{self.version}"

    @abstractmethod
    def arithmetic_shapes(self, setup: Setup) -> ModelConfig:
        """This system's model as the attnmt ModelConfig with the same matrix products, so that
        `benchmarks.flops` counts its arithmetic with the one formula (`arithmetic.py`)."""

    @abstractmethod
    def install(self, env_dir: Path) -> Path:
        """Make sure the system is installed in the virtual environment `env_dir` (create it on
        first use; a marker file makes later calls instant); returns its python. Raises
        PeerError naming the system and pip's error."""

    @abstractmethod
    def prepare(self, setup: Setup, work: Path, python: Path) -> None:
        """Untimed set-up in the folder `work`: configuration files, vocabularies."""

    @abstractmethod
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
        """Train from scratch into `work` for `steps` updates or `max_minutes` of training,
        whichever comes first, saving a checkpoint every `save_every` updates and at the end;
        events written to `events` (see the module docstring)."""

    @abstractmethod
    def checkpoints(self, work: Path) -> dict[int, Path]:
        """The checkpoints training left in `work`, by update step."""

    @abstractmethod
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
        **search: object,
    ) -> Command:
        """Translate the tokenized `source` file with `checkpoint` (beam_size 1: greedy) into
        `output`, timing written to `result` (see the module docstring); with `attention_focus`
        (only where `measures_attention`), also the share of attention on source position 0 as
        `tools.attention_focus` measures it, as JSON. `search`: options of the system's own search
        beyond the Setup's, where its adapter takes them (OpenNMT-py: length_penalty, alpha;
        attnmt: stopping, alpha)."""


def run_pip(system: str, python: Path, args: list[str]) -> None:
    """pip install in a system's environment; a failure is a PeerError with pip's last error line."""
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()] or lines or ["(no output)"]
        raise PeerError(f"{system}: pip install {' '.join(args)} failed: {errors[-1].strip()}")


def make_venv(system: str, env_dir: Path) -> Path:
    """Create the virtual environment `env_dir` if it does not exist; returns its python."""
    python = env_dir / "bin" / "python"
    if not python.exists():
        done = subprocess.run([sys.executable, "-m", "venv", str(env_dir)], capture_output=True, text=True)
        if done.returncode != 0:
            raise PeerError(f"{system}: cannot create a virtual environment in {env_dir}: {done.stderr.strip()}")
    return python
