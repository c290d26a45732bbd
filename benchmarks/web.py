"""The exported web page against Python: the same translations, and how fast the page is.

    python -m benchmarks.web --runs runs/multi30k-en-de runs/demo [--sentences 1000] [--repeats 3]
                             [--quantize int8 none] [--json docs/results/web.json]

Each run is exported as `attnmt export RUN --format web` does (int8 where it keeps its valid
BLEU; with `--quantize none` also, or only, as float32), the folder served by `python -m
http.server` and opened in headless Chromium (Debian's package, driven by Playwright). The page
translates the first `--sentences` sentences of the run's test split, one at a time through its
own script API (`attnmt.translate`), greedy and with beam 5; Python translates them over the
same graphs as `attnmt translate FOLDER/model --engine onnxruntime` does
(`Translator.translate`, one onnxruntime thread, the page's one thread too). Reported per run
and search: how many outputs are identical (and a few that are not), the page's generated
tokens/s (tokens before EOS; in-page time, tokenization and detokenization included) as the
median of `--repeats` passes with its range, and Python's beside it; the time from navigation to
the page's first translation (loading the engine and the graphs included), median of `--repeats`
fresh page loads; the folder's size, the engine's and the model's share."""

from __future__ import annotations

import argparse
import datetime
import json
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.web.export import DESCRIPTION, MODEL_FOLDER, RUNTIME_FOLDER, export_web
from benchmarks.chromium import open_browser
from benchmarks.measure import describe_machine, positive_int, spread, write_results

DEFAULT_JSON = Path("docs/results/web.json")
SEARCHES = {"greedy": 1, "beam 5": 5}
# The page's script API, over many sentences: outputs and in-page seconds
TRANSLATE_ALL = """async ([sentences, beam]) => {
  const outputs = [];
  const start = performance.now();
  for (const sentence of sentences) {
    const result = await attnmt.translate(sentence, beam);
    outputs.push({text: result.hypotheses[0].text, generated: result.hypotheses[0].tokens.length});
  }
  return {outputs, seconds: (performance.now() - start) / 1000};
}"""
FIRST_TRANSLATION = """async (sentence) => {
  await attnmt.ready;
  const loaded = attnmt.loadedAt;
  const result = await attnmt.translate(sentence);
  return {loaded_ms: loaded, first_translation_ms: performance.now(), text: result.hypotheses[0].text};
}"""


def _mib(folder: Path) -> float:
    return sum(file.stat().st_size for file in folder.rglob("*") if file.is_file()) / 2**20


@contextmanager
def static_server(folder: Path):
    """`python -m http.server -d FOLDER` on a free port, as a user serves the page; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(folder)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _python_pass(translator, sentences: list[str], beam: int) -> tuple[list[str], float, int]:
    options = translator.search_options(beam_size=beam, n_best=1)
    start = time.perf_counter()
    translations = translator.translate(sentences, options)
    seconds = time.perf_counter() - start
    return [t.text for t in translations], seconds, sum(len(t.tokens) for t in translations)


def measure_run(
    run_dir: Path,
    work: Path,
    browser,
    sentences: int,
    repeats: int,
    data_dir: str | None,
    examples: list[str],
    int8: bool = True,
) -> dict:
    site = work / f"{run_dir.name}-{'int8' if int8 else 'float32'}"
    made = export_web(run_dir, site, data_dir=data_dir, int8=int8)
    translator = load(ModelSpec(str(site / MODEL_FOLDER), engine="onnxruntime", threads=1, data_dir=data_dir))
    description = json.loads((site / DESCRIPTION).read_text(encoding="utf-8"))
    sources = [example.src for example in split_examples(translator.config.data, "test")[:sentences]]
    result = {
        "name": run_dir.name,
        "run": str(run_dir),
        "checkpoint": description["model"]["checkpoint"],
        "corpus": translator.config.data.corpus,
        "test_split": translator.config.data.test_split if translator.config.data.corpus == "multi30k" else "test",
        "sentences": len(sources),
        "asked": "int8" if int8 else "none",
        "quantization": "int8" if made.int8 is not None and made.int8.kept else "none",
        "int8_check": None if made.int8 is None else str(made.int8),
        "folder_mib": round(made.size / 2**20, 2),
        "engine_mib": round(_mib(site / RUNTIME_FOLDER), 2),
        "model_mib": round(_mib(site / MODEL_FOLDER), 2),
        "searches": {},
    }
    with static_server(site) as url:
        loads = []
        for _ in range(repeats):
            page = browser.new_page()
            page.goto(url)
            loads.append(page.evaluate(FIRST_TRANSLATION, sources[0]))
            page.close()
        result["loaded_ms"] = spread([load["loaded_ms"] for load in loads])
        result["first_translation_ms"] = spread([load["first_translation_ms"] for load in loads])
        page = browser.new_page()
        page.goto(url)
        page.evaluate("attnmt.ready")
        beam = translator.config.decode.beam_size  # the run's own search, as the page starts with
        in_page = page.evaluate(TRANSLATE_ALL, [examples, beam])["outputs"]
        in_python = translator.translate(examples, translator.search_options(beam_size=beam, n_best=1))
        result["examples"] = [
            {"source": source, "beam": beam, "page": mine["text"], "python": theirs.text}
            for source, mine, theirs in zip(examples, in_page, in_python, strict=True)
        ]
        for search, beam in SEARCHES.items():
            python_texts, python_seconds, generated = _python_pass(translator, sources, beam)
            passes = [page.evaluate(TRANSLATE_ALL, [sources, beam]) for _ in range(repeats)]
            texts = [output["text"] for output in passes[0]["outputs"]]
            page_generated = sum(output["generated"] for output in passes[0]["outputs"])
            differing = [
                {"source": source, "page": mine, "python": theirs}
                for source, mine, theirs in zip(sources, texts, python_texts, strict=True)
                if mine != theirs
            ]
            result["searches"][search] = {
                "identical": len(sources) - len(differing),
                "compared": len(sources),
                "differing_examples": differing[:5],
                "page_generated_tokens": page_generated,
                "page_tokens_per_s": spread([page_generated / p["seconds"] for p in passes]),
                "python_generated_tokens": generated,
                "python_tokens_per_s_one_pass": generated / python_seconds,
            }
        page.close()
    return result


def _median_range(spread: dict, digits: int, scale: float = 1.0) -> str:
    values = [value * scale for value in (spread["median"], spread["min"], spread["max"])]
    if len(spread["values"]) < 2:
        return f"{values[0]:,.{digits}f}"
    return f"{values[0]:,.{digits}f} ({values[1]:,.{digits}f}-{values[2]:,.{digits}f})"


def web_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The page against Python per run and search: identical outputs, the page's tokens/s
    (median and range), the time to its first translation, its folder's size."""
    header = ["run", "weights", "search", "identical to Python", "page tokens/s", "first translation s", "folder MiB"]
    body = []
    for run in results["runs"]:
        for search, measured in run["searches"].items():
            body.append(
                [
                    run["name"],
                    run["quantization"].replace("none", "float32"),
                    search,
                    f"{measured['identical']:,} of {measured['compared']:,}",
                    _median_range(measured["page_tokens_per_s"], 0),
                    _median_range(run["first_translation_ms"], 2, 1 / 1000),
                    f"{run['folder_mib']:.1f}",
                ]
            )
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", type=Path, required=True, help="trained run directories")
    parser.add_argument("--sentences", type=positive_int, default=1000, help="test sentences per run")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed passes and page loads")
    parser.add_argument("--data-dir", help="corpus folder (default: where attnmt finds it)")
    parser.add_argument(
        "--examples", nargs="*", default=["I'm home."], help="sentences also translated with the run's own search"
    )
    parser.add_argument(
        "--quantize",
        nargs="+",
        choices=("int8", "none"),
        default=["int8"],
        help="the exports measured: int8 (the default, float32 where int8 loses BLEU) and/or float32",
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="raw results file")
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="attnmt-web-") as work, open_browser() as browser:
        runs = []
        for run_dir in args.runs:
            for quantize in args.quantize:
                measured = measure_run(
                    run_dir,
                    Path(work),
                    browser,
                    args.sentences,
                    args.repeats,
                    args.data_dir,
                    args.examples,
                    int8=quantize == "int8",
                )
                runs.append(measured)
                print(measured, flush=True)
        chromium = browser.version
    results = {"started": started, "machine": describe_machine(), "chromium": chromium, "runs": runs}
    write_results(args.json, results, "benchmarks.web", argv)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
