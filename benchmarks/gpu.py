"""attnmt on a CUDA GPU: training and decoding in float32 and bf16, and CUDA graphs for the decoder step.

    python -m benchmarks.gpu --checkpoint RUN_DIR [--repeats 5] [--steps 40] [--json OUT]

Training: the `joey` shape of `benchmarks.speed` (bidirectional GRU 256 per direction, GRU
decoder 512, additive attention, embeddings 256) on Multi30k en->de word tokens, in batches of
64 sentences (length-bucketed, as `benchmarks.speed`) and in batches of 4,096 padded tokens
(attnmt's TokenBatchSampler), each in float32 and under bf16 autocast (the trainer's
`precision: bf16`). Target tokens are non-pad tokens including EOS.

Decoding: the trained run's test2016 (1,000 sentences) greedy and beam 5, float32 and bf16
autocast, batches of 64 and of 500 sentences: generated tokens/s and tokenized-lowercased BLEU,
and how many bf16 outputs equal float32's.

CUDA graphs: the greedy decoder step (next_log_probs, argmax, state update) captured once per
batch shape and replayed, against the same fixed-length loop run eagerly and against attnmt's
greedy search (which drops finished sentences, at a host synchronisation per step).

Every timing is the median of `--repeats` runs, the variants alternating.
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import time
from pathlib import Path

import torch
from rich.console import Console

from attnmt.corpora import Example
from attnmt.data import PAD, DataBundle, TokenBatchSampler, build_data, pad_sequences
from attnmt.decoder import DecoderState
from attnmt.metrics import tokenized_bleu
from attnmt.model import build_model
from attnmt.search import BOS, EOS, SearchOptions, decode_all
from attnmt.tokenize import WordTokenizer
from attnmt.train import autocast
from benchmarks.decoding import load_trained
from benchmarks.flops import synchronize
from benchmarks.measure import combine_repeats, describe_machine, positive_int, rotated, write_results
from benchmarks.speed import DATA, Options, _attnmt_loss, bucketed_batches, model_config, time_training

PRECISIONS = ("fp32", "bf16")
DEFAULT_JSON = Path("benchmarks/results/gpu.json")


# --- training ------------------------------------------------------------------------------------


def training_batches(bundle: DataBundle, count: int, seed: int) -> dict[str, list[list[int]]]:
    """`count` batches of each kind: 64 sentences bucketed by length, and 4,096 padded tokens."""
    lengths = [(len(s), len(t)) for s, t in zip(bundle.train.src_ids, bundle.train.tgt_ids, strict=True)]
    sentences = bucketed_batches(lengths, Options(batch_sentences=64), random.Random(seed))
    sampler = TokenBatchSampler(
        [len(s) for s in bundle.train.src_ids], [len(t) for t in bundle.train.tgt_ids], batch_tokens=4096, seed=seed
    )
    return {"64 sentences": sentences[:count], "4096 tokens": sampler.batches(epoch=0)[:count]}


def benchmark_training(bundle: DataBundle, device: torch.device, *, warmup: int, steps: int, repeats: int) -> dict:
    cfg = model_config("joey", dropout=0.1)
    batches = training_batches(bundle, warmup + steps, seed=1)
    variants = [(kind, precision) for kind in batches for precision in PRECISIONS]
    runs: dict[tuple, list[dict]] = {variant: [] for variant in variants}
    for turn in range(repeats):
        for kind, precision in rotated(variants, turn):
            torch.manual_seed(1)
            model = build_model(cfg, len(bundle.src_vocab), len(bundle.tgt_vocab)).to(device)

            def loss(model, batch, tokens, precision=precision):
                with autocast(device, precision):
                    return _attnmt_loss(model, batch, tokens)

            chosen = batches[kind]
            result = time_training(model, loss, (chosen[:warmup], chosen[warmup:]), bundle, device, 1e-3)
            result.pop("_lengths")
            runs[(kind, precision)].append(result)
    return {
        f"{kind}, {precision}": combine_repeats(measured, ("seconds", "tokens_per_s", "peak_memory_mib"))
        for (kind, precision), measured in runs.items()
    }


# --- decoding ------------------------------------------------------------------------------------


def _bleu(codec, hypotheses: list[list[int]], examples: list[Example], tgt_lang: str) -> float:
    words = WordTokenizer(tgt_lang, lowercase=True)
    texts = [codec.decode_target(ids) for ids in hypotheses]
    references = [[words.tokenize(ref) for ref in example.refs] for example in examples]
    return tokenized_bleu([words.tokenize(text) for text in texts], references).score


def _decode(model, sources, beam: int, batch: int, precision: str, device) -> tuple[float, list[list[int]]]:
    synchronize(device)
    start = time.perf_counter()
    with torch.inference_mode(), autocast(device, precision):
        results = decode_all(model, sources, SearchOptions(beam_size=beam), batch_size=batch, device=device)
    synchronize(device)
    return time.perf_counter() - start, [hypotheses[0].tokens for hypotheses in results]


def benchmark_decoding(run_dir: Path, bundle: DataBundle, device: torch.device, repeats: int) -> dict:
    checkpoint, config, codec, model = load_trained(run_dir)
    model = model.to(device).eval()
    examples = bundle.splits.test
    sources = [codec.encode_source(example.src) for example in examples]
    variants = [
        (mode, beam, batch, p)
        for mode, beam in (("greedy", 1), ("beam 5", 5))
        for batch in (64, 500)
        for p in PRECISIONS
    ]
    for _, beam, batch, precision in variants:  # warm-up: kernels, cuDNN and autocast caches
        _decode(model, sources[:batch], beam, batch, precision, device)
    runs: dict[tuple, list[dict]] = {variant: [] for variant in variants}
    outputs: dict[tuple, list[list[int]]] = {}
    for turn in range(repeats):
        for variant in rotated(variants, turn):
            _, beam, batch, precision = variant
            seconds, hypotheses = _decode(model, sources, beam, batch, precision, device)
            tokens = sum(len(ids) for ids in hypotheses)
            outputs[variant] = hypotheses
            runs[variant].append({"seconds": seconds, "generated_tokens": tokens, "tokens_per_s": tokens / seconds})
    results = {}
    for variant, measured in runs.items():
        mode, beam, batch, precision = variant
        row = combine_repeats(measured, ("seconds", "tokens_per_s"))
        row["sentences_per_s"] = len(sources) / row["seconds"]
        row["bleu_tok_lc"] = _bleu(codec, outputs[variant], examples, config.data.tgt_lang)
        float32 = outputs[(mode, beam, batch, "fp32")]
        row["identical_to_fp32"] = sum(a == b for a, b in zip(outputs[variant], float32, strict=True))
        results[f"{mode}, batch {batch}, {precision}"] = row
    return {"checkpoint": str(checkpoint.relative_to(run_dir.parent)), "sentences": len(sources), "modes": results}


# --- CUDA graphs for the greedy step ------------------------------------------------------------------


class GraphedGreedy:
    """Fixed-length greedy decoding of one batch shape whose step is a replayed CUDA graph.

    The graph reads and writes static buffers only: the previous tokens, the decoder state and a
    step counter go in; the argmax is written into a token matrix at the counter's column, so a
    whole decode needs no host synchronisation until the tokens are read back.
    """

    def __init__(self, model, encoder_output, state: DecoderState, steps: int):
        batch = encoder_output.memory.size(0)
        device = encoder_output.memory.device
        self.model, self.encoder_output, self.steps = model, encoder_output, steps
        self.initial = state
        self.state = DecoderState(*(None if part is None else part.clone() for part in state))
        self.prev = torch.full((batch,), BOS, dtype=torch.long, device=device)
        self.column = torch.zeros(1, dtype=torch.long, device=device)
        self.tokens = torch.full((batch, steps), PAD, dtype=torch.long, device=device)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside the capture, as CUDA graphs require
                self._step()
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def _step(self) -> None:
        log_probs, state, _ = self.model.next_log_probs(self.prev, self.state, self.encoder_output)
        best = log_probs.argmax(dim=-1)  # (B,)
        self.tokens.index_copy_(1, self.column, best.unsqueeze(1))
        self.prev.copy_(best)
        for static, new in zip(self.state, state, strict=True):
            if static is not None:
                static.copy_(new)
        self.column.add_(1)

    def run(self) -> torch.Tensor:
        self.prev.fill_(BOS)
        self.column.zero_()
        for static, start in zip(self.state, self.initial, strict=True):
            if static is not None:
                static.copy_(start)
        for _ in range(self.steps):
            self.graph.replay()
        return self.tokens


def eager_fixed_greedy(model, encoder_output, state: DecoderState, steps: int) -> torch.Tensor:
    """The graph's loop run eagerly: every row steps `steps` times, no early exit."""
    batch = encoder_output.memory.size(0)
    prev = torch.full((batch,), BOS, dtype=torch.long, device=encoder_output.memory.device)
    columns = []
    for _ in range(steps):
        log_probs, state, _ = model.next_log_probs(prev, state, encoder_output)
        prev = log_probs.argmax(dim=-1)
        columns.append(prev)
    return torch.stack(columns, dim=1)


def _until_eos(row: list[int]) -> list[int]:
    return row[: row.index(EOS)] if EOS in row else row


def benchmark_graphs(run_dir: Path, bundle: DataBundle, device: torch.device, repeats: int, batch: int = 64) -> dict:
    """Greedy decoding of test2016 in length-sorted batches: attnmt's search, the fixed-length
    loop eagerly, and the same loop as CUDA graphs (capture timed separately from replay)."""
    _, _, codec, model = load_trained(run_dir)
    model = model.to(device).eval()
    sources = sorted((codec.encode_source(example.src) for example in bundle.splits.test), key=len)
    batches = [sources[i : i + batch] for i in range(0, len(sources), batch)]
    prepared = []
    with torch.inference_mode():
        for chunk in batches:
            src, lengths = pad_sequences(chunk)
            src, lengths = src.to(device), lengths.to(device)
            encoder_output = model.encode(src, lengths)
            steps = int(1.5 * src.size(1) + 10)  # attnmt's default length limit, 1.5 S + 10
            prepared.append((src, lengths, encoder_output, model.init_state(encoder_output), steps))
    timings: dict[str, list[float]] = {"attnmt greedy": [], "fixed-length eager": [], "fixed-length graph replay": []}
    with torch.inference_mode():
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        graphs = [GraphedGreedy(model, enc, state, steps) for _, _, enc, state, steps in prepared]
        torch.cuda.synchronize(device)
        capture_seconds = time.perf_counter() - start
        eager_tokens, graph_tokens = [], []
        for turn in range(repeats):
            for name in rotated(list(timings), turn):
                torch.cuda.synchronize(device)
                start = time.perf_counter()
                if name == "attnmt greedy":
                    decode_all(model, sources, SearchOptions(beam_size=1), batch_size=batch, device=device)
                elif name == "fixed-length eager":
                    eager_tokens = [
                        eager_fixed_greedy(model, enc, state, steps) for _, _, enc, state, steps in prepared
                    ]
                else:
                    graph_tokens = [graphed.run().clone() for graphed in graphs]
                torch.cuda.synchronize(device)
                timings[name].append(time.perf_counter() - start)
    eager_rows = [_until_eos(row) for tokens in eager_tokens for row in tokens.tolist()]
    graph_rows = [_until_eos(row) for tokens in graph_tokens for row in tokens.tolist()]
    medians = {name: sorted(values)[len(values) // 2] for name, values in timings.items()}
    return {
        "batch": batch,
        "batches": len(batches),
        "capture_seconds": capture_seconds,
        "seconds": {name: {"median": medians[name], "values": values} for name, values in timings.items()},
        "graph_outputs_equal_eager": sum(a == b for a, b in zip(graph_rows, eager_rows, strict=True)),
        "sentences": len(sources),
        "replay_speedup_over_eager": medians["fixed-length eager"] / medians["fixed-length graph replay"],
        "replay_speedup_over_attnmt_greedy": medians["attnmt greedy"] / medians["fixed-length graph replay"],
    }


# --- report ---------------------------------------------------------------------------------------


def _range(row: dict, key: str = "tokens_per_s") -> str:
    spread = row["spread"][key]
    return f"{row[key]:,.0f} ({spread['min']:,.0f}-{spread['max']:,.0f})"


def gpu_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """One row per measurement: training, decoding (with BLEU and agreement) and the CUDA-graph
    greedy step; tok/s as median (min-max)."""
    header = ["what", "batches", "precision", "tok/s", "BLEU (tok, lc)", "outputs equal to fp32"]
    body = []
    for name, row in results["training"].items():
        batches, precision = name.split(", ")
        body.append(["training (target tok/s)", batches, precision, _range(row), "", ""])
    decoding = results["decoding"]
    for name, row in decoding["modes"].items():
        mode, batch, precision = name.split(", ")
        body.append(
            [
                f"decoding {mode} (generated tok/s)",
                batch.replace("batch ", "") + " sentences",
                precision,
                _range(row),
                f"{row['bleu_tok_lc']:.2f}",
                f"{row['identical_to_fp32']} / {decoding['sentences']}",
            ]
        )
    graphs = results["graphs"]
    if "error" not in graphs:
        for name, timing in graphs["seconds"].items():
            equal = (
                f"{graphs['graph_outputs_equal_eager']} / {graphs['sentences']} (vs eager)" if "graph" in name else ""
            )
            body.append(
                [
                    f"greedy step: {name} (s for test2016)",
                    f"{graphs['batch']} sentences",
                    "fp32",
                    f"{timing['median']:.3f} s ({min(timing['values']):.3f}-{max(timing['values']):.3f})",
                    "",
                    equal,
                ]
            )
    return header, body


def print_summary(results: dict) -> None:
    from benchmarks.report import markdown_table

    machine = results["machine"]
    print(f"{machine['gpu']} ({machine['cpu']}), torch {machine['torch']}")
    print("\n".join(markdown_table(*gpu_rows(results))))
    graphs = results["graphs"]
    if "error" in graphs:
        print(f"greedy step as CUDA graphs failed: {graphs['error']}")
    else:
        print(
            f"CUDA graphs: capture {graphs['capture_seconds']:.2f} s for {graphs['batches']} batch shapes; "
            f"replay {graphs['replay_speedup_over_eager']:.2f}x the eager loop, "
            f"{graphs['replay_speedup_over_attnmt_greedy']:.2f}x attnmt greedy"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained Multi30k en->de attnmt run")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--steps", type=positive_int, default=40, help="timed training steps per run")
    parser.add_argument("--warmup", type=int, default=5)
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
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    console.print("training")
    training = benchmark_training(bundle, device, warmup=args.warmup, steps=args.steps, repeats=args.repeats)
    console.print("decoding")
    decoding = benchmark_decoding(args.checkpoint, bundle, device, args.repeats)
    console.print("CUDA graphs")
    try:
        graphs = benchmark_graphs(args.checkpoint, bundle, device, args.repeats)
    except RuntimeError as error:  # capture is fragile across torch versions: keep the other figures
        graphs = {"error": f"{type(error).__name__}: {error}"}
    results = {
        "started": started,
        "machine": describe_machine(device),
        "settings": {"repeats": args.repeats, "steps": args.steps, "warmup": args.warmup, "tf32": False},
        "training": training,
        "decoding": decoding,
        "graphs": graphs,
    }
    write_results(args.json, results, "benchmarks.gpu", argv)
    print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
