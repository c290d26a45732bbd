"""Corpora of millions of pairs: preparing them, and training on them, as a user runs it.

    python -m benchmarks.scale [--sizes 100000 1000000 4000000 10000000] [--workers 1 2] [--steps 20]
        [--repeats 3] [--in-memory-up-to 4000000] [--work DIR] [--json benchmarks/results/scale-cpu.json]

The corpora are Multi30k's 29,000 English-German training pairs repeated and perturbed to each
size: copy 0 is the corpus as it is; in copy k >= 1 each sentence of each pair has two adjacent
words swapped and one word replaced by a word of the same side's training text, both chosen by
a random generator seeded by (k, line), so no pair repeats exactly while lengths and vocabulary
stay Multi30k's. Validation and test are Multi30k's own `val` and `test_2016_flickr`; the data
and model settings are configs/multi30k-en-de.yaml's (BPE 6,000, the README's model).

For each size, in processes of their own, one at a time:
- `attnmt data prepare CONFIG --workers W --force` for each W (a single run each): wall-clock
  seconds, of which SentencePiece's training (the first W trains it, later ones find it
  cached), peak resident memory of the command and its workers (sampled every 50 ms), and the
  prepared folder's size on disk;
- `attnmt train CONFIG` from the prepared data for --steps steps, --repeats times: seconds from
  the command's start to its first step and to its last (read from the metrics log as it
  grows), the peak anonymous memory of the process (RssAnon: the memory-mapped corpus's pages
  are file pages, RssFile, reported apart) and the median of its per-step training tokens/s
  after a warm-up of five steps;
- up to --in-memory-up-to pairs, the same training from data built in memory (`build_data`, the
  path training took before prepared data), once, for the comparison.
The results file is rewritten after every size, so an interrupted run keeps the sizes it finished.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import yaml

from attnmt.data.download import locate
from benchmarks.measure import CHECKOUT, describe_machine, positive_int, provenance, spread, write_results

DEFAULT_JSON = Path("benchmarks/results/scale-cpu.json")
DEFAULT_SIZES = (100_000, 1_000_000, 4_000_000, 10_000_000)
CONFIG = CHECKOUT / "configs" / "multi30k-en-de.yaml"
SAMPLE_SECONDS = 0.05
WARMUP_STEPS = 5
GIB = 2**30

# `attnmt train` before prepared data: the corpus built in memory, then the same training.
IN_MEMORY = """
import sys
from attnmt.config import load_config
from attnmt.data.batching import build_data
from attnmt.train import fit
config = load_config(sys.argv[1])
fit(config, bundle=build_data(config.data))
"""


def perturbed(sentence: str, vocabulary: list[str], rng: random.Random) -> str:
    """Two adjacent words swapped and one word replaced by one of `vocabulary`."""
    words = sentence.split()
    if len(words) >= 2:
        at = rng.randrange(len(words) - 1)
        words[at], words[at + 1] = words[at + 1], words[at]
    words[rng.randrange(len(words))] = rng.choice(vocabulary)
    return " ".join(words)


def write_corpus(pairs: list[tuple[str, str]], size: int, folder: Path) -> Path:
    """train.en / train.de of `size` pairs (plain text); the prefix."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = folder / "train"
    if (folder / "complete").is_file():
        return prefix
    vocabularies = [sorted({word for pair in pairs for word in pair[side].split()}) for side in (0, 1)]
    with open(f"{prefix}.en", "w", encoding="utf-8") as en, open(f"{prefix}.de", "w", encoding="utf-8") as de:
        for index in range(size):
            copy, line = divmod(index, len(pairs))
            src, tgt = pairs[line]
            if copy:
                rng = random.Random(copy * 1_000_003 + line)
                src, tgt = perturbed(src, vocabularies[0], rng), perturbed(tgt, vocabularies[1], rng)
            en.write(src + "\n")
            de.write(tgt + "\n")
    (folder / "complete").write_text("")
    return prefix


def write_config(prefix: Path, data_dir: Path, run_dir: Path, steps: int, path: Path) -> Path:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["data"].update(
        corpus="files",
        train=str(prefix),
        valid=str(data_dir / "multi30k" / "val"),
        test=str(data_dir / "multi30k" / "test_2016_flickr"),
    )
    config["train"].update(
        run_dir=str(run_dir), max_steps=steps, max_minutes=None, log_every=1, valid_every=10**9, threads=None
    )
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


class Sampler:
    """Peak memory of a process (and its children), sampled every 50 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = {"rss": 0, "anon": 0, "file": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = anon = file = 0
            for member in [self.process, *self._children()]:
                status = _status(member.pid)
                rss += status.get("VmRSS", 0)
                anon += status.get("RssAnon", 0)
                file += status.get("RssFile", 0)
            for key, value in (("rss", rss), ("anon", anon), ("file", file)):
                self.peak[key] = max(self.peak[key], value)
            time.sleep(SAMPLE_SECONDS)

    def _children(self) -> list[psutil.Process]:
        try:
            return self.process.children(recursive=True)
        except psutil.Error:
            return []

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {key: value / GIB for key, value in self.peak.items()}


def _status(pid: int) -> dict[str, int]:
    """/proc/PID/status's memory fields, in bytes ({} once the process is gone)."""
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[name] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return fields


def attnmt_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "ATTNMT_CACHE": str(cache), "PYTHONPATH": str(CHECKOUT)}


def prepare(config: Path, workers: int, cache: Path) -> dict:
    command = [sys.executable, "-m", "attnmt", "data", "prepare", str(config), "--workers", str(workers), "--force"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=attnmt_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = Sampler(process.pid)
    _, err = process.communicate()
    seconds = time.perf_counter() - started
    memory = sampler.stop()
    if process.returncode:
        raise RuntimeError(f"attnmt data prepare failed: {err.decode()[-2000:]}")
    folder = next(path for path in (cache / "prepared").iterdir() if path.is_dir())
    manifest = json.loads((folder / "manifest.json").read_text())
    return {
        "workers": workers,
        "seconds": seconds,
        "tokenizer_seconds": manifest["tokenizer_seconds"],
        "peak_rss_gib": memory["rss"],
        "disk_mib": sum(path.stat().st_size for path in folder.iterdir()) / 2**20,
        "train_pairs": manifest["train"]["src"]["sentences"],
        "tokens": manifest["train"]["src"]["tokens"] + manifest["train"]["tgt"]["tokens"],
    }


def train(config: Path, run_dir: Path, steps: int, cache: Path, in_memory: bool) -> dict:
    """One `attnmt train` (or the in-memory path), stopped once its last step is logged."""
    shutil.rmtree(run_dir, ignore_errors=True)
    if in_memory:
        command = [sys.executable, "-c", IN_MEMORY, str(config)]
    else:
        command = [sys.executable, "-m", "attnmt", "train", str(config)]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=attnmt_env(cache), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = Sampler(process.pid)
    metrics, first, last, records = run_dir / "metrics.jsonl", None, None, []
    while process.poll() is None and last is None:
        if metrics.is_file():
            records = [json.loads(line) for line in metrics.read_text().splitlines() if line.endswith("}")]
            steps_logged = [record["step"] for record in records if "train_loss" in record]
            if steps_logged and first is None:
                first = time.perf_counter() - started
            if steps_logged and steps_logged[-1] >= steps:
                last = time.perf_counter() - started
        time.sleep(SAMPLE_SECONDS)
    memory = sampler.stop()
    process.kill()
    _, err = process.communicate()
    if last is None:
        raise RuntimeError(f"training ended before step {steps}: {err.decode()[-2000:]}")
    speeds = [record["tokens_per_s"] for record in records if record.get("step", 0) > WARMUP_STEPS]
    return {
        "first_step_s": first,
        "last_step_s": last,
        "peak_anon_gib": memory["anon"],
        "peak_file_gib": memory["file"],
        "tokens_per_s": statistics.median(speeds),
    }


def run_size(size: int, pairs: list[tuple[str, str]], args: argparse.Namespace, data_dir: Path) -> dict:
    work = args.work / f"pairs-{size}"
    prefix = write_corpus(pairs, size, work / "corpus")
    config = write_config(prefix, data_dir, work / "run", args.steps, work / "config.yaml")
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)  # the first preparation trains SentencePiece afresh
    # Each size records its own code and machine: sizes may be measured in separate runs.
    result: dict = {"pairs": size, **provenance(), "machine": describe_machine()}
    result["prepare"] = [prepare(config, workers, cache) for workers in args.workers]
    runs = [train(config, work / "run", args.steps, cache, in_memory=False) for _ in range(args.repeats)]
    result["train"] = {key: spread([run[key] for run in runs]) for key in runs[0]}
    if size <= args.in_memory_up_to:
        result["in_memory"] = train(config, work / "run", args.steps, cache, in_memory=True)
    shutil.rmtree(work / "run", ignore_errors=True)
    return result


def _range(figure: dict, template: str) -> str:
    """A median with its range, or the one value of a single run."""
    if figure["min"] == figure["max"]:
        return template.format(figure["median"])
    return f"{template.format(figure['median'])} ({template.format(figure['min'])}-{template.format(figure['max'])})"


def scale_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The Markdown table of a scale result: one row per corpus size; preparation is one run per
    worker count, training the medians (ranges) of its repeats, the in-memory path one run."""
    header = [
        "pairs",
        "prepare, 2 / 1 workers (s)",
        "of which SentencePiece (s)",
        "on disk (MiB)",
        "train: first step (s)",
        "to step 20 (s)",
        "peak RssAnon (GiB)",
        "tokens/s",
        "in memory: to step 20 (s)",
        "in memory: peak RssAnon (GiB)",
    ]
    body = []
    for size in results["sizes"]:
        by_workers = {run["workers"]: run for run in size["prepare"]}
        train, memory = size["train"], size.get("in_memory")
        body.append(
            [
                f"{size['pairs']:,}",
                " / ".join(f"{by_workers[w]['seconds']:,.0f}" if w in by_workers else "-" for w in (2, 1)),
                " / ".join(f"{by_workers[w]['tokenizer_seconds']:,.0f}" if w in by_workers else "-" for w in (2, 1)),
                f"{size['prepare'][0]['disk_mib']:,.0f}",
                _range(train["first_step_s"], "{:.1f}"),
                _range(train["last_step_s"], "{:.1f}"),
                _range(train["peak_anon_gib"], "{:.2f}"),
                _range(train["tokens_per_s"], "{:,.0f}"),
                f"{memory['last_step_s']:,.1f}" if memory else "not run",
                f"{memory['peak_anon_gib']:.2f}" if memory else "not run",
            ]
        )
    return header, body


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--workers", type=positive_int, nargs="+", default=[2, 1])
    parser.add_argument("--steps", type=positive_int, default=20)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--in-memory-up-to", type=int, default=4_000_000, metavar="PAIRS")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "attnmt-scale")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    data_dir = locate("multi30k/train.en.gz").parent.parent
    with gzip.open(data_dir / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as en:
        sources = [line.strip() for line in en]
    with gzip.open(data_dir / "multi30k" / "train.de.gz", "rt", encoding="utf-8") as de:
        targets = [line.strip() for line in de]
    pairs = list(zip(sources, targets, strict=True))
    previous = json.loads(args.json.read_text()) if args.json.is_file() else {}
    sizes = {entry["pairs"]: entry for entry in previous.get("sizes", [])}
    for size in args.sizes:
        print(f"{size:,} pairs ...", file=sys.stderr, flush=True)
        sizes[size] = run_size(size, pairs, args, data_dir)
        results = {
            "machine": sizes[size]["machine"],  # the last run's; each size records its own
            "settings": {"config": "configs/multi30k-en-de.yaml", "steps": args.steps, "repeats": args.repeats},
            "sizes": [sizes[key] for key in sorted(sizes)],
        }
        # the command without --work: a scratch folder of this machine, which changes no figure
        recorded = sys.argv[1:] if argv is None else argv
        recorded = [a for i, a in enumerate(recorded) if a != "--work" and (i == 0 or recorded[i - 1] != "--work")]
        write_results(args.json, results, "benchmarks.scale", recorded)
        print(json.dumps(sizes[size], indent=1), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
