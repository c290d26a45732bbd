"""Training and decoding speed of attnmt against the textbook references, per model config.

    python -m benchmarks.speed [--config all] [--device auto] [--steps 20] [--repeats 5]
                               [--threads N] [--decode-sentences 1000] [--checkpoint RUN_DIR]
                               [--json OUT]

Data (`speed_models`, with the three model configs): Multi30k en->de train (29,000 pairs), word
tokens, lowercased, vocabularies of types seen at least twice. attnmt trains on length-bucketed
batches of 64 sentences (pools of 100 batches sorted by length, as its trainer does); the
references (`benchmarks.references`: d2l.ai's code and bentrevett's tutorial, each given
attnmt's weights) train on the SAME sentences in random batches of 64, padded to their longest
sentence (a shuffled DataLoader).
Each step includes the data pipeline (collate + to(device)), the loss, backward, gradient
clipping at 1.0 and Adam. After `--warmup` steps, `--steps` steps are timed.

Every measurement is repeated `--repeats` times, the implementations alternating, and
reported as the median with its range. Reported per config and implementation: target
tokens/s (non-pad, EOS included), the fraction of the machine's float32 matmul ceiling spent
on useful FLOPs (`flops.py`), peak memory (`measure.py`), and greedy / beam-5 decoding of
Multi30k test2016 in sentences/s and generated tokens/s (tokens before EOS). Decoding uses
each config's freshly initialized model unless `--checkpoint` names a trained attnmt run:
that run's own tokenizers and model are then decoded as well, the references given its weights.
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from rich.console import Console
from torch.profiler import record_function
from torch.utils.flop_counter import FlopCounterMode

from attnmt.config import ModelConfig
from attnmt.data.batching import DataBundle, build_data, collate
from attnmt.models.seq2seq import Seq2Seq
from attnmt.train import token_loss
from attnmt.utils import UserError
from benchmarks.decoding import benchmark_decoding, load_trained
from benchmarks.flops import flop_rates, matmul_ceiling, synchronize
from benchmarks.measure import (
    combine_repeats,
    describe_machine,
    peak_memory,
    positive_int,
    release_memory,
    rotated,
    write_results,
)
from benchmarks.references import REFERENCES, references_for
from benchmarks.report import print_report
from benchmarks.speed_models import CONFIGS, CORPUS, DATA, build_models, model_config

DEFAULT_JSON = Path("benchmarks/results/speed.json")


@dataclass
class Options:
    steps: int = 20
    warmup: int = 3
    batch_sentences: int = 64
    pool_batches: int = 100
    dropout: float = 0.1
    lr: float = 1e-3
    decode_sentences: int = 1000
    decode_batch: int = 64
    beam_size: int = 5
    reference_beam_sentences: int = 100
    repeats: int = 5
    untrained_decoding: bool = True  # also decode with each config's untrained model
    seed: int = 1
    ceiling_size: int | None = None  # square matmul side for the ceiling; None: 2,048 (CPU) or 8,192 (GPU)


def bucketed_batches(lengths: list[tuple[int, int]], options: Options, rng: random.Random) -> list[list[int]]:
    """Shuffle, sort pools of `pool_batches` batches by (source, target) length, cut batches of
    `batch_sentences`, shuffle the batches. Only full batches are kept."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    size, pool = options.batch_sentences, options.batch_sentences * options.pool_batches
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda index: lengths[index])
        batches += [chunk[i : i + size] for i in range(0, len(chunk) - size + 1, size)]
    rng.shuffle(batches)
    return batches


def random_batches(indices: list[int], size: int, rng: random.Random) -> list[list[int]]:
    """The textbook way: the same sentences shuffled into batches of `size`."""
    indices = list(indices)
    rng.shuffle(indices)
    return [indices[i : i + size] for i in range(0, len(indices), size)]


def _flat(batches: list[list[int]]) -> list[int]:
    return [index for batch in batches for index in batch]


def training_batches(bundle: DataBundle, options: Options) -> dict[str, tuple[list, list]]:
    """(warm-up, timed) batches: "attnmt" bucketed, "reference" random; both hold exactly the same sentences."""
    rng = random.Random(options.seed)
    lengths = [(len(s), len(t)) for s, t in zip(bundle.train.src_ids, bundle.train.tgt_ids, strict=True)]
    bucketed = bucketed_batches(lengths, options, rng)[: options.warmup + options.steps]
    warmup, timed = bucketed[: options.warmup], bucketed[options.warmup :]
    size = options.batch_sentences
    return {
        "attnmt": (warmup, timed),
        "reference": (random_batches(_flat(warmup), size, rng), random_batches(_flat(timed), size, rng)),
    }


def _attnmt_loss(model: Seq2Seq, batch, target_tokens: int) -> torch.Tensor:
    logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    return token_loss(logits, batch.tgt_out) / target_tokens  # as attnmt's Trainer.train_step


def loss_function(name: str):
    """The training loss of implementation `name` as f(model, batch, target_tokens)."""
    if name == "attnmt":
        return _attnmt_loss
    module = REFERENCES[name]
    return lambda model, batch, _: module.loss(model, batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out)


def training_step(model, loss_fn, bundle: DataBundle, device, lr: float):
    """A function doing one step on a list of example indices: collate + to(device), forward and
    loss, backward, clip_grad_norm 1.0, Adam. Each phase is labelled for torch.profiler.
    attnmt's step uses the fused Adam its trainer uses; the references torch's default, as the
    tutorials do."""
    src_ids, tgt_ids = bundle.train.src_ids, bundle.train.tgt_ids
    fused = loss_fn is _attnmt_loss and next(model.parameters()).device.type in ("cpu", "cuda")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=fused)
    model.train()

    def step(indices: list[int]) -> torch.Tensor:
        with record_function("data"):
            batch = collate(indices, src_ids, tgt_ids).to(device, non_blocking=True)
        with record_function("forward"):
            loss = loss_fn(model, batch, sum(len(tgt_ids[i]) + 1 for i in indices))
        optimizer.zero_grad(set_to_none=True)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        return loss.detach()

    return step


def time_training(model, loss_fn, batches: tuple[list, list], bundle: DataBundle, device, lr: float) -> dict:
    """Warm up, then time the steps; the peak memory covers Adam's state, gradients and activations."""
    src_ids, tgt_ids = bundle.train.src_ids, bundle.train.tgt_ids
    warmup, timed = batches
    with peak_memory(device) as peak:
        step = training_step(model, loss_fn, bundle, device, lr)
        for indices in warmup:
            step(indices)
        synchronize(device)
        start = time.perf_counter()
        losses = [step(indices) for indices in timed]
        synchronize(device)
        seconds = time.perf_counter() - start
    src_lengths = [len(src_ids[i]) for batch in timed for i in batch]
    tgt_lengths = [len(tgt_ids[i]) + 1 for batch in timed for i in batch]  # + EOS
    tokens = sum(tgt_lengths)
    return {
        "steps": len(timed),
        "sentences": len(src_lengths),
        "target_tokens": tokens,
        "padding": 1 - tokens / sum(len(b) * max(len(tgt_ids[i]) + 1 for i in b) for b in timed),
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "last_loss": float(losses[-1]),
        "peak_memory_mib": peak.mib,
        "memory_method": peak.method,
        "_lengths": (src_lengths, tgt_lengths),
    }


def executed_per_useful(model, loss_fn, batches: list[list[int]], bundle: DataBundle, rates) -> float:
    """Forward FLOPs the model runs (torch's FlopCounterMode) per useful FLOP, over
    the first timed batch: padding and recomputation both show up here."""
    indices = batches[0]
    src_ids, tgt_ids = bundle.train.src_ids, bundle.train.tgt_ids
    device = next(model.parameters()).device
    batch = collate(indices, src_ids, tgt_ids).to(device)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        loss_fn(model, batch, sum(len(tgt_ids[i]) + 1 for i in indices))
    useful = rates.forward([len(src_ids[i]) for i in indices], [len(tgt_ids[i]) + 1 for i in indices])
    return counter.get_total_flops() / useful


TRAINING_RATES = ("seconds", "tokens_per_s", "useful_gflops_per_s", "useful_flop_fraction", "peak_memory_mib")


def benchmark_training(cfg: ModelConfig, models: dict, bundle: DataBundle, options: Options, device, ceiling) -> dict:
    """Train every implementation on the same sentences, `options.repeats` times alternating;
    medians of tokens/s, useful-FLOP fraction and memory, and attnmt's speed-up over each reference."""
    batches = training_batches(bundle, options)
    rates = flop_rates(cfg, len(bundle.tgt_vocab))
    runs: dict[str, list[dict]] = {name: [] for name in models}
    for turn in range(options.repeats):
        for name in rotated(list(models), turn):
            kind = "attnmt" if name == "attnmt" else "reference"
            result = time_training(models[name], loss_function(name), batches[kind], bundle, device, options.lr)
            useful = rates.training(*result.pop("_lengths"))
            result["useful_gflop"] = useful / 1e9
            result["useful_gflops_per_s"] = useful / 1e9 / result["seconds"]
            result["useful_flop_fraction"] = result["useful_gflops_per_s"] / ceiling
            runs[name].append(result)
            release_memory()
    results = {}
    for name, measured in runs.items():
        kind = "attnmt" if name == "attnmt" else "reference"
        results[name] = combine_repeats(measured, TRAINING_RATES)
        results[name]["executed_per_useful_flop"] = executed_per_useful(
            models[name], loss_function(name), batches[kind][1], bundle, rates
        )
    ours = results["attnmt"]["tokens_per_s"]
    speedups = {name: ours / results[name]["tokens_per_s"] for name in models if name != "attnmt"}
    return {"implementations": results, "speedup": speedups}


def _decoding_options(options: Options) -> dict:
    return {
        "beam_size": options.beam_size,
        "batch_size": options.decode_batch,
        "reference_beam_sentences": options.reference_beam_sentences,
        "repeats": options.repeats,
    }


def benchmark_config(
    cfg: ModelConfig, bundle: DataBundle, options: Options, device, ceiling: float, *, say, label: str
) -> dict:
    models = build_models(cfg, len(bundle.src_vocab), len(bundle.tgt_vocab), device, options.seed)
    test_sources = bundle.test.src_ids[: options.decode_sentences]
    decoding = None
    if options.untrained_decoding:
        say(f"{label}: decoding (untrained weights)")
        decoding = benchmark_decoding(models, test_sources, **_decoding_options(options), device=device)
    say(f"{label}: training")
    training = benchmark_training(cfg, models, bundle, options, device, ceiling)
    rates = flop_rates(cfg, len(bundle.tgt_vocab))
    return {
        "model": cfg.model_dump(),
        "parameters": sum(p.numel() for p in models["attnmt"].parameters()),
        "forward_flops": asdict(rates),
        "training": training,
        "decoding": None if decoding is None else {"weights": "untrained (initialization)", **decoding},
    }


def benchmark_checkpoint(run_dir: Path, bundle: DataBundle, options: Options, device) -> dict:
    """Decode test2016 with a trained run (its own tokenizers and vocabularies) and the references given its weights."""
    checkpoint, config, codec, model = load_trained(run_dir)
    references = references_for(config.model, model, len(codec.src_vocab), len(codec.tgt_vocab))
    models = {name: module.to(device) for name, module in {"attnmt": model, **references}.items()}
    sources = [codec.encode_source(example.src) for example in bundle.splits.test[: options.decode_sentences]]
    decoding = benchmark_decoding(models, sources, **_decoding_options(options), device=device)
    return {
        "run_dir": str(run_dir),
        "checkpoint": str(checkpoint),
        "tokenizer": f"{config.data.tokenizer} ({len(codec.src_vocab):,} / {len(codec.tgt_vocab):,} types)",
        "model": config.model.model_dump(),
        "decoding": {"weights": f"trained ({checkpoint})", **decoding},
    }


def run(
    options: Options,
    bundle: DataBundle,
    configs: dict[str, ModelConfig],
    device: torch.device,
    *,
    checkpoint: Path | None = None,
    corpus: str = CORPUS,
    say=lambda message: None,
) -> dict:
    """Every measurement, as one JSON-ready dict."""
    started = time.perf_counter()
    say("measuring the matmul ceiling")
    ceiling = matmul_ceiling(device, options.ceiling_size)
    results = {
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": describe_machine(device),
        "ceiling_gflops": ceiling,
        "settings": {**asdict(options), "optimizer": "Adam, clip_grad_norm 1.0"},
        "data": {
            "corpus": corpus,
            "train_pairs": len(bundle.train),
            "test_sentences": min(options.decode_sentences, len(bundle.test.src_ids)),
            "src_vocab": len(bundle.src_vocab),
            "tgt_vocab": len(bundle.tgt_vocab),
        },
        "configs": {},
        "trained": None,
    }
    for name, cfg in configs.items():
        results["configs"][name] = benchmark_config(cfg, bundle, options, device, ceiling, say=say, label=name)
    if checkpoint is not None:
        say(f"decoding with {checkpoint}")
        results["trained"] = benchmark_checkpoint(checkpoint, bundle, options, device)
    ceiling_after = matmul_ceiling(device, options.ceiling_size)
    results["ceiling_gflops_after"] = ceiling_after
    results["seconds"] = time.perf_counter() - started
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=[*CONFIGS, "all"], default="all")
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    parser.add_argument("--steps", type=positive_int, default=Options.steps, help="timed training steps per model")
    parser.add_argument("--warmup", type=int, default=Options.warmup, help="untimed training steps first")
    parser.add_argument("--decode-sentences", type=int, default=Options.decode_sentences)
    parser.add_argument(
        "--reference-beam-sentences",
        type=int,
        default=Options.reference_beam_sentences,
        help="sentences decoded by a reference's slow per-sentence beam search",
    )
    parser.add_argument("--repeats", type=positive_int, default=Options.repeats, help="repeats of every measurement")
    parser.add_argument(
        "--no-untrained-decoding",
        action="store_true",
        help="decode only with the --checkpoint model, not with each config's untrained one",
    )
    parser.add_argument("--dropout", type=float, default=Options.dropout)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--data-dir", default=None, help="corpus folder (default: $ATTNMT_DATA, then the cache)")
    parser.add_argument("--ceiling-size", type=int, default=None, help="matmul side for the ceiling")
    parser.add_argument("--checkpoint", type=Path, default=None, help="a trained attnmt run to decode with")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"results file (default {DEFAULT_JSON})")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables as Markdown here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("benchmarks.speed: error: --device cuda, but CUDA is not available", file=sys.stderr)
        return 2
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    console = Console(stderr=True)
    options = Options(
        steps=args.steps,
        warmup=args.warmup,
        decode_sentences=args.decode_sentences,
        reference_beam_sentences=args.reference_beam_sentences,
        repeats=args.repeats,
        untrained_decoding=not args.no_untrained_decoding,
        ceiling_size=args.ceiling_size,
        dropout=args.dropout,
    )
    names = list(CONFIGS) if args.config == "all" else [args.config]
    console.log("building Multi30k en-de word data")
    try:
        bundle = build_data(DATA.model_copy(update={"data_dir": args.data_dir}))
        configs = {name: model_config(name, options.dropout) for name in names}
        results = run(options, bundle, configs, device, checkpoint=args.checkpoint, say=console.log)
    except UserError as error:
        print(f"benchmarks.speed: error: {error}", file=sys.stderr)
        return 2
    write_results(args.json, results, "benchmarks.speed", argv)
    print_report(results, Console(width=180), markdown=args.markdown)
    console.log(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
