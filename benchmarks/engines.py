"""Decoding a trained run by every engine attnmt has: torch and onnxruntime, float32 and int8.

    python -m benchmarks.engines --checkpoint RUN_DIR [--repeats 5] [--threads 2] [--json OUT]

Each engine translates the run's whole test split (Multi30k test2016 for the README's model)
through `Translator.translate`, greedy and beam 5, with the run's decode settings: tokenization,
search and detokenization included, as a user sees it. Reported per engine and search: the
median generated tokens/s and sentences/s over `--repeats` passes (the engines alternating,
each warmed up first), sacreBLEU and the tokenized-lowercased BLEU of the outputs, how many
outputs are identical to torch float32's, and the size of the model's files on disk. The int8
variants are `attnmt translate --quantize int8` (torch) and `attnmt export --quantize int8`
(onnxruntime).
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console

from attnmt.evaluation import evaluate, split_examples
from attnmt.export import export_onnx
from attnmt.loading import ModelSpec, load
from attnmt.quantize import quantize_export
from attnmt.translate import Translator
from benchmarks.measure import combine_repeats, describe_machine, positive_int, rotated, write_results
from benchmarks.report import markdown_table

DEFAULT_JSON = Path("benchmarks/results/engines-cpu.json")
SEARCHES = {"greedy": 1, "beam 5": 5}


def _size_mib(paths: list[Path]) -> float:
    return sum(path.stat().st_size for path in paths) / 2**20


def load_engines(run_dir: Path, folder: Path, data_dir: str | None) -> dict[str, tuple[Translator, float]]:
    """Each engine's translator and the MiB of model files it reads."""
    float32_dir = export_onnx(run_dir, folder / "float32")
    int8_dir = quantize_export(float32_dir, folder / "int8")
    by_torch = load(ModelSpec(run_dir, device="cpu", data_dir=data_dir))
    weights = _size_mib([by_torch.checkpoint / "model.safetensors"])
    quantized = load(ModelSpec(run_dir, device="cpu", quantize="int8", data_dir=data_dir))
    saved = io.BytesIO()
    torch.save(quantized.model.state_dict(), saved)  # int8 weights live in packed parameters, not tensors
    return {
        "torch float32": (by_torch, weights),
        "torch int8": (quantized, saved.tell() / 2**20),
        "onnxruntime float32": (load(ModelSpec(float32_dir)), _size_mib(list(float32_dir.glob("*.onnx")))),
        "onnxruntime int8": (load(ModelSpec(int8_dir)), _size_mib(list(int8_dir.glob("*.onnx")))),
    }


def _translate(translator: Translator, sentences: list[str], beam: int) -> tuple[float, list]:
    options = translator.search_options(beam_size=beam)
    start = time.perf_counter()
    translations = translator.translate(sentences, options)
    return time.perf_counter() - start, translations


def benchmark(run_dir: Path, repeats: int, data_dir: str | None, console: Console) -> dict:
    with tempfile.TemporaryDirectory(prefix="attnmt-engines-") as folder:
        engines = load_engines(run_dir, Path(folder), data_dir)
        first = next(iter(engines.values()))[0]
        examples = split_examples(first.config.data, "test")
        sentences = [example.src for example in examples]
        variants = [(engine, search) for search in SEARCHES for engine in engines]
        for engine, search in variants:  # warm-up: allocator, onnxruntime's first runs
            _translate(engines[engine][0], sentences[:64], SEARCHES[search])
        runs: dict[tuple, list[dict]] = {variant: [] for variant in variants}
        outputs: dict[tuple, list] = {}
        for turn in range(repeats):
            for variant in rotated(variants, turn):
                engine, search = variant
                seconds, translations = _translate(engines[engine][0], sentences, SEARCHES[search])
                tokens = sum(len(t.tokens) for t in translations)
                runs[variant].append({"seconds": seconds, "tokens_per_s": tokens / seconds, "generated_tokens": tokens})
                outputs[variant] = translations
            console.print(f"repeat {turn + 1}/{repeats} done")
        rows = {}
        for variant, measured in runs.items():
            engine, search = variant
            translator, mib = engines[engine]
            row = combine_repeats(measured, ("seconds", "tokens_per_s"))
            row["sentences_per_s"] = len(sentences) / row["seconds"]
            scores = evaluate(translator, examples, translator.search_options(beam_size=SEARCHES[search]))
            row["bleu"], row["bleu_tok_lc"] = scores.bleu.score, scores.tokenized_bleu.score
            reference = outputs[("torch float32", search)]
            row["identical_to_torch_float32"] = sum(
                a.tokens == b.tokens for a, b in zip(outputs[variant], reference, strict=True)
            )
            row["model_mib"] = mib
            rows[f"{engine}, {search}"] = row
        return {
            "checkpoint": str(first.checkpoint.relative_to(run_dir.parent)),
            "sentences": len(sentences),
            "decode_batching": first.config.decode.model_dump(include={"batch_size", "batch_tokens"}),
            "bleu_signature": str(scores.bleu.signature),
            "modes": rows,
        }


def engine_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The Markdown table of an engines result: one row per engine and search."""
    header = ["engine", "search", "tokens/s (median)", "min-max", "sentences/s", "BLEU", "BLEU word-tok-lc",
              "identical to torch fp32", "model MiB"]  # fmt: skip
    body = []
    for name, row in results["modes"].items():
        engine, search = name.split(", ")
        spread = row["spread"]["tokens_per_s"]
        body.append(
            [
                engine,
                search,
                f"{row['tokens_per_s']:,.0f}",
                f"{spread['min']:,.0f}-{spread['max']:,.0f}",
                f"{row['sentences_per_s']:,.0f}",
                f"{row['bleu']:.2f}",
                f"{row['bleu_tok_lc']:.2f}",
                f"{row['identical_to_torch_float32']:,}/{results['sentences']:,}",
                f"{row['model_mib']:.1f}",
            ]
        )
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained attnmt run directory")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--threads", type=positive_int, default=torch.get_num_threads())
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    torch.set_num_threads(args.threads)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    decoding = benchmark(args.checkpoint, args.repeats, args.data_dir, console)
    results = {
        "started": started,
        "machine": describe_machine(torch.device("cpu")),
        "settings": {"repeats": args.repeats, "threads": args.threads},
        **decoding,
    }
    write_results(args.json, results, "benchmarks.engines", argv)
    print("\n".join(markdown_table(*engine_rows(results))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
