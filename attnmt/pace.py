"""The pace probe: how fast this machine trains, as one number a timed result records at its start.

Minutes depend on the machine: the processors this project's results ran on differ by up to 1.6x
in training pace, so "within 50 minutes" is checkable only beside the machine and its pace.
`pace_probe` times `updates` training updates (after `warmup` untimed ones, which let the
allocator and the kernels settle) of one fixed reference model on fixed synthetic batches, in the
calling process's torch threads, and returns the median seconds per update with its range and
what was timed. The reference is the identical-model race's recurrent model (an LSTM Luong
decoder with input feeding and additive attention, embeddings 256, encoder 256 a direction,
decoder 512; about 13M parameters with these vocabularies) on batches of Multi30k's shape (64 sentences of 13 source and
14 target tokens, vocabularies of 8,000): a machine's pace on it carries over to the recurrent
recipes it times. The probe forks torch's random state, so the run after it draws what it would
have drawn without it.

    python -m attnmt.pace                                  # print this machine's probe as JSON
    python -m attnmt.pace --threads 1 --json RUN/pace.json # before training RUN: its evaluations report it

Imports config, loss and model; nothing imports it but the code that times runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch

from attnmt.config import ModelConfig
from attnmt.loss import token_loss
from attnmt.models.seq2seq import build_model
from attnmt.utils import UserError, cpu_model, write_text_atomic


@dataclass(frozen=True)
class ProbeModel:
    """What the probe trains: the model's shapes and the batch it is fed every update."""

    rnn: str = "lstm"
    embedding_size: int = 256
    encoder_hidden: int = 256
    decoder_hidden: int = 512
    vocabulary: int = 8000  # source and target each
    sentences: int = 64
    source_tokens: int = 13
    target_tokens: int = 14

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            rnn=self.rnn,
            embedding_size=self.embedding_size,
            encoder_hidden=self.encoder_hidden,
            decoder_hidden=self.decoder_hidden,
            decoder="luong",
            input_feeding=True,
            attention="additive",
            bridge="copy",
            dropout=0.3,
        )


REFERENCE = ProbeModel()
PROBE_UPDATES = 10
PROBE_WARMUP = 2


def pace_probe(updates: int = PROBE_UPDATES, warmup: int = PROBE_WARMUP, reference: ProbeModel | None = None) -> dict:
    """Seconds per training update of `reference` (default REFERENCE) on this machine's CPU in
    torch's current threads: {"seconds_per_update": median, "min", "max", "updates", "warmup",
    "threads", "cpu", "torch", "parameters", "reference": the shapes}."""
    if updates < 1 or warmup < 0:
        raise ValueError(f"a probe needs at least one timed update and no negative warmup, got {updates}, {warmup}")
    reference = reference or REFERENCE
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model(reference.model_config(), reference.vocabulary, reference.vocabulary)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        shape = reference.sentences
        src = torch.randint(4, reference.vocabulary, (shape, reference.source_tokens))  # (B, S), no specials
        tgt = torch.randint(4, reference.vocabulary, (shape, reference.target_tokens + 1))  # (B, T + 1)
        src_lengths = torch.full((shape,), reference.source_tokens)
        seconds = []
        model.train()
        for update in range(warmup + updates):
            began = time.perf_counter()
            logits, _ = model(src, src_lengths, tgt[:, :-1])  # (B, T, V)
            loss = token_loss(logits, tgt[:, 1:], label_smoothing=0.1) / tgt[:, 1:].numel()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if update >= warmup:
                seconds.append(time.perf_counter() - began)
        parameters = sum(p.numel() for p in model.parameters())
    return {
        "seconds_per_update": statistics.median(seconds),
        "min": min(seconds),
        "max": max(seconds),
        "updates": updates,
        "warmup": warmup,
        "threads": torch.get_num_threads(),
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "parameters": parameters,
        "reference": asdict(reference),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnmt.pace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, help="torch threads to time in (default: torch's own count)")
    parser.add_argument("--json", help="write the probe here (atomically) instead of printing it")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads: expected at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    text = json.dumps(pace_probe(), indent=2) + "\n"
    if not args.json:
        print(text, end="")
        return 0
    try:
        write_text_atomic(args.json, text)
    except (OSError, UserError) as error:
        print(f"python -m attnmt.pace: {args.json}: cannot write the probe ({error})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
