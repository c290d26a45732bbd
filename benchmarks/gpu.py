"""attnmt on a CUDA GPU: training by batch size and precision, and decoding with and without CUDA graphs.

    python -m benchmarks.gpu --checkpoint RUN_DIR [--repeats 3] [--steps 20] [--compile] [--json OUT]

Training: the `joey` shape of `benchmarks.speed` (bidirectional GRU 256 per direction, GRU
decoder 512, additive attention, embeddings 256) on Multi30k en->de word tokens, in
length-bucketed batches of 4,096, 16,384 and 32,768 padded tokens (attnmt's TokenBatchSampler),
each in float32 and under bf16 autocast (the trainer's `precision: bf16`), and each with the
batches collated in line before every step or made ahead by a background thread into pinned
memory (`feeding.Prefetched`, what the trainer does on a GPU). Target tokens are non-pad
tokens including EOS. With `--compile`, the decoder's step (`_recur`) is also run through
torch.compile for the largest batches in bf16 (the compile time reported apart).

Decoding: the trained run's test2016 (1,000 sentences) greedy and beam 5, float32 and bf16
autocast, batches of 64 and of 500 sentences, by attnmt's search (finished sentences dropped,
one host read a step) and by its fixed-shape search replayed as CUDA graphs
(`decode_all(fixed_shapes=True)`, `graphed`): generated tokens/s, tokenized-lowercased BLEU,
and how many outputs equal float32's and the search's.

Every timing is the median of `--repeats` runs, the variants alternating.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import torch
from rich.console import Console

from attnmt.data.batching import DataBundle, TokenBatchSampler, build_data, collate
from attnmt.data.splits import Example
from attnmt.feeding import feed
from attnmt.metrics import tokenized_bleu
from attnmt.models.seq2seq import build_model
from attnmt.precision import autocast
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions
from attnmt.tokenize import WordTokenizer
from benchmarks.decoding import load_trained
from benchmarks.flops import synchronize
from benchmarks.measure import combine_repeats, describe_machine, peak_memory, positive_int, rotated, write_results
from benchmarks.speed import _attnmt_loss
from benchmarks.speed_models import DATA, model_config

PRECISIONS = ("fp32", "bf16")
BUDGETS = (4096, 16384, 32768)
PIPELINES = ("in line", "prefetched")
SEARCHES = ("search", "cuda graphs")
DEFAULT_JSON = Path("benchmarks/results/gpu.json")


# --- training ------------------------------------------------------------------------------------


def token_batches(bundle: DataBundle, budget: int, count: int, seed: int = 1) -> list[list[int]]:
    """The first `count` batches of at most `budget` padded tokens, in the trainer's order (epochs in turn)."""
    train = bundle.train
    sampler = TokenBatchSampler(train.src_lengths.tolist(), train.tgt_lengths.tolist(), batch_tokens=budget, seed=seed)
    batches, epoch = [], 0
    while len(batches) < count:
        batches += sampler.batches(epoch=epoch)
        epoch += 1
    return batches[:count]


def time_steps(model, batches: list[list[int]], bundle: DataBundle, device, *, warmup: int, precision: str, ahead: int):
    """Train on `batches` (the first `warmup` untimed) as the trainer steps: collate (in line,
    or `ahead` batches in advance into pinned memory), copy, forward under the precision's
    autocast, per-token loss, backward, clip to norm 1, fused Adam."""
    src_ids, tgt_ids = bundle.train.src_ids, bundle.train.tgt_ids
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    model.train()

    def make(indices: list[int]):
        batch = collate(indices, src_ids, tgt_ids)
        return batch.pin_memory() if ahead else batch

    def run(chunk: list[list[int]]) -> torch.Tensor:
        loss = torch.zeros(())
        fed = feed(iter(chunk), make, ahead)
        try:
            for indices, batch in fed:
                batch = batch.to(device, non_blocking=True)
                with autocast(device, precision):
                    loss = _attnmt_loss(model, batch, sum(len(tgt_ids[i]) + 1 for i in indices))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        finally:
            fed.close()
        return loss.detach()

    with peak_memory(device) as peak:
        run(batches[:warmup])
        synchronize(device)
        start = time.perf_counter()
        last_loss = run(batches[warmup:])
        synchronize(device)
        seconds = time.perf_counter() - start
    timed = batches[warmup:]
    tokens = sum(len(tgt_ids[i]) + 1 for batch in timed for i in batch)
    padded = sum(len(batch) * max(len(tgt_ids[i]) + 1 for i in batch) for batch in timed)
    return {
        "steps": len(timed),
        "sentences": sum(len(batch) for batch in timed),
        "target_tokens": tokens,
        "padding": 1 - tokens / padded,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "last_loss": float(last_loss),
        "peak_memory_mib": peak.mib,
        "memory_method": peak.method,
    }


def _fresh_model(bundle: DataBundle, device):
    torch.manual_seed(1)
    return build_model(model_config("joey", dropout=0.1), len(bundle.src_vocab), len(bundle.tgt_vocab)).to(device)


def benchmark_training(bundle: DataBundle, device: torch.device, *, warmup: int, steps: int, repeats: int) -> dict:
    batches = {budget: token_batches(bundle, budget, warmup + steps) for budget in BUDGETS}
    variants = [(budget, p, pipeline) for budget in BUDGETS for p in PRECISIONS for pipeline in PIPELINES]
    runs: dict[tuple, list[dict]] = {variant: [] for variant in variants}
    for turn in range(repeats):
        for budget, precision, pipeline in rotated(variants, turn):
            model = _fresh_model(bundle, device)
            ahead = 2 if pipeline == "prefetched" else 0
            measured = time_steps(
                model, batches[budget], bundle, device, warmup=warmup, precision=precision, ahead=ahead
            )
            runs[(budget, precision, pipeline)].append(measured)
    return {
        f"{budget} tokens, {precision}, {pipeline}": combine_repeats(
            measured, ("seconds", "tokens_per_s", "peak_memory_mib")
        )
        for (budget, precision, pipeline), measured in runs.items()
    }


def benchmark_compiled(bundle: DataBundle, device: torch.device, *, warmup: int, steps: int, repeats: int) -> dict:
    """The largest batches with the decoder's per-step recurrence through torch.compile
    (dynamic shapes), bf16, prefetched: the first call's compile timed apart."""
    budget = BUDGETS[-1]
    batches = token_batches(bundle, budget, warmup + steps)
    results = {}
    for precision in ("bf16",):
        model = _fresh_model(bundle, device)
        model.decoder._recur = torch.compile(model.decoder._recur, dynamic=True)
        synchronize(device)
        start = time.perf_counter()
        time_steps(model, batches[:2], bundle, device, warmup=1, precision=precision, ahead=2)
        compile_seconds = time.perf_counter() - start
        measured = [
            time_steps(model, batches, bundle, device, warmup=warmup, precision=precision, ahead=2)
            for _ in range(repeats)
        ]
        row = combine_repeats(measured, ("seconds", "tokens_per_s", "peak_memory_mib"))
        row["compile_seconds"] = compile_seconds
        results[f"{budget} tokens, {precision}, prefetched, compiled step"] = row
    return results


# --- decoding ------------------------------------------------------------------------------------


def _bleu(codec, hypotheses: list[list[int]], examples: list[Example], tgt_lang: str) -> float:
    words = WordTokenizer(tgt_lang, lowercase=True)
    texts = [codec.decode_target(ids) for ids in hypotheses]
    references = [[words.tokenize(ref) for ref in example.refs] for example in examples]
    return tokenized_bleu([words.tokenize(text) for text in texts], references).score


def _decode(model, sources, beam: int, batch: int, precision: str, search: str, device):
    graphs = search == "cuda graphs"
    synchronize(device)
    start = time.perf_counter()
    # Autocast's cache of cast weights would be captured into a graph and freed after it: off for graphs.
    cast = (
        autocast(device, precision)
        if not graphs or precision == "fp32"
        else torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)
    )
    with torch.inference_mode(), cast:
        options = SearchOptions(beam_size=beam)
        results = decode_all(model, sources, options, batch_size=batch, device=device, fixed_shapes=graphs)
    synchronize(device)
    return time.perf_counter() - start, [hypotheses[0].tokens for hypotheses in results]


def benchmark_decoding(run_dir: Path, bundle: DataBundle, device: torch.device, repeats: int) -> dict:
    checkpoint, config, codec, model = load_trained(run_dir)
    model = model.to(device).eval()
    examples = bundle.splits.test
    sources = [codec.encode_source(example.src) for example in examples]
    variants = [
        (mode, beam, batch, precision, search)
        for mode, beam in (("greedy", 1), ("beam 5", 5))
        for batch in (64, 500)
        for precision in PRECISIONS
        for search in SEARCHES
    ]
    failed: dict[tuple, str] = {}
    for variant in variants:  # warm-up: kernels, cuDNN and autocast caches; a search that fails is left out
        _, beam, batch, precision, search = variant
        try:
            _decode(model, sources[:batch], beam, batch, precision, search, device)
        except RuntimeError as error:
            failed[variant] = f"{type(error).__name__}: {error}"[:500]
    timed = [variant for variant in variants if variant not in failed]
    runs: dict[tuple, list[dict]] = {variant: [] for variant in timed}
    outputs: dict[tuple, list[list[int]]] = {}
    for turn in range(repeats):
        for variant in rotated(timed, turn):
            _, beam, batch, precision, search = variant
            seconds, hypotheses = _decode(model, sources, beam, batch, precision, search, device)
            tokens = sum(len(ids) for ids in hypotheses)
            outputs[variant] = hypotheses
            runs[variant].append({"seconds": seconds, "generated_tokens": tokens, "tokens_per_s": tokens / seconds})
    results = {}
    for variant, measured in runs.items():
        mode, beam, batch, precision, search = variant
        row = combine_repeats(measured, ("seconds", "tokens_per_s"))
        row["sentences_per_s"] = len(sources) / row["seconds"]
        row["bleu_tok_lc"] = _bleu(codec, outputs[variant], examples, config.data.tgt_lang)
        for name, other in (
            ("fp32", (mode, beam, batch, "fp32", search)),
            ("search", (mode, beam, batch, precision, "search")),
        ):
            if other in outputs:
                row[f"identical_to_{name}"] = sum(a == b for a, b in zip(outputs[variant], outputs[other], strict=True))
        results[f"{mode}, batch {batch}, {precision}, {search}"] = row
    for (mode, _, batch, precision, search), error in failed.items():
        results[f"{mode}, batch {batch}, {precision}, {search}"] = {"error": error}
    return {"checkpoint": str(checkpoint.relative_to(run_dir.parent)), "sentences": len(sources), "modes": results}


# --- report ---------------------------------------------------------------------------------------


def _range(row: dict, key: str = "tokens_per_s") -> str:
    spread = row["spread"][key]
    return f"{row[key]:,.0f} ({spread['min']:,.0f}-{spread['max']:,.0f})"


def gpu_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per measurement, training then decoding; tok/s as median (min-max)."""
    header = ["what", "batches", "precision", "how", "tok/s", "BLEU (tok, lc)", "equal to fp32", "equal to the search"]
    body = []
    for name, row in {**results["training"], **results.get("compiled", {})}.items():
        budget, precision, how = name.split(", ", 2)
        if "error" in row:
            body.append(["training (target tok/s)", budget, precision, how, "failed", "", "", ""])
            continue
        body.append(["training (target tok/s)", budget, precision, how, _range(row), "", "", ""])
    decoding = results["decoding"]
    total = decoding["sentences"]
    for name, row in decoding["modes"].items():
        mode, batch, precision, search = name.split(", ")
        what = [f"decoding {mode} (generated tok/s)", batch.replace("batch ", "") + " sentences", precision, search]
        if "error" in row:
            body.append([*what, "failed", "", "", ""])
            continue
        equal = [f"{row[key]} / {total}" if key in row else "" for key in ("identical_to_fp32", "identical_to_search")]
        body.append([*what, _range(row), f"{row['bleu_tok_lc']:.2f}", *equal])
    return header, body


def print_summary(results: dict) -> None:
    from benchmarks.report import markdown_table

    machine = results["machine"]
    print(f"{machine['gpu']} ({machine['cpu']}), torch {machine['torch']}")
    print("\n".join(markdown_table(*gpu_rows(results))))
    for name, row in results.get("compiled", {}).items():
        print(f"{name}: " + (row["error"] if "error" in row else f"compiled in {row['compile_seconds']:.1f} s"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained Multi30k en->de attnmt run")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--steps", type=positive_int, default=20, help="timed training steps per run")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="also time the decoder step through torch.compile")
    parser.add_argument("--skip-training", action="store_true", help="decoding only")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    if not torch.cuda.is_available():
        console.print("benchmarks.gpu: no CUDA device")
        return 2
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 here
    data = DATA.model_copy(update={"data_dir": args.data_dir}) if args.data_dir else DATA
    bundle = build_data(data)
    results = {
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": describe_machine(device),
        "settings": {"repeats": args.repeats, "steps": args.steps, "warmup": args.warmup, "tf32": False},
        "training": {},
    }
    if not args.skip_training:
        console.print("training")
        results["training"] = benchmark_training(
            bundle, device, warmup=args.warmup, steps=args.steps, repeats=args.repeats
        )
        write_results(args.json, results, "benchmarks.gpu", argv)
    console.print("decoding")
    results["decoding"] = benchmark_decoding(args.checkpoint, bundle, device, args.repeats)
    write_results(args.json, results, "benchmarks.gpu", argv)
    if args.compile:
        console.print("torch.compile")
        try:
            results["compiled"] = benchmark_compiled(
                bundle, device, warmup=args.warmup, steps=args.steps, repeats=args.repeats
            )
        except Exception as error:  # compilation depends on the toolchain there: keep the other figures
            results["compiled"] = {
                f"{BUDGETS[-1]} tokens, bf16, compiled step": {"error": f"{type(error).__name__}: {error}"[:800]}
            }
        write_results(args.json, results, "benchmarks.gpu", argv)
    print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
