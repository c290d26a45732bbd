"""Load test of `attnmt serve`: concurrent clients on loopback, with and without dynamic batching.

    python -m benchmarks.serving [--run runs/multi30k-en-de] [--clients 1,8,32] [--repeats 3]

Starts two servers on 127.0.0.1 (`attnmt serve RUN`, and the same with `--no-batching`) and
sends the run's test sentences (Multi30k test2016 for the README's model), one sentence per
request, greedy (`beam_size: 1`), from N concurrent clients that each send their next request
as soon as the last is answered. One client against the server without batching is
one-request-at-a-time decoding: the baseline. Every run sends the whole test set (or stops at
--max-seconds); configurations alternate within each repeat, and figures are medians over
repeats with their range. Throughput counts answered sentences and the tokens generated before
EOS; latency is per request, from sending to the whole answer.

The clients run in this process, on the same cores as the server: what the figures include.
Writes docs/results/serving.json (the raw result docs/serving.md quotes).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from attnmt.utils import UserError
from benchmarks.measure import combine_repeats, positive_int, rotated, write_results
from benchmarks.report import markdown_table

RESULTS = Path("docs/results/serving.json")
FIGURES = ("sentences_per_s", "tokens_per_s", "p50_ms", "p95_ms", "p99_ms")


class ServerError(RuntimeError):
    """`attnmt serve` did not start, or did not stop cleanly."""


@contextmanager
def running_server(runs: list[str], *options: str):
    """`attnmt serve RUNS --port 0 OPTIONS` in a process of its own; yields its base URL (read
    from the start-up line), stops it afterwards (SIGTERM) and checks that it stopped cleanly.
    Its later stderr is drained in a thread, so that a chatty server never blocks on a full pipe;
    the last lines are kept for the error message."""
    command = [sys.executable, "-m", "attnmt", "serve", *runs, "--port", "0", *options]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    line = process.stderr.readline()  # "attnmt: serving NAMES at http://127.0.0.1:PORT (...)"
    match = re.search(r" at (http://\S+) ", line)
    if not match:
        process.wait(timeout=30)
        raise ServerError(f"attnmt serve did not start: {line}{process.stderr.read()}".strip())
    tail: collections.deque[str] = collections.deque(maxlen=20)
    drain = threading.Thread(target=lambda: tail.extend(process.stderr), daemon=True)
    drain.start()
    try:
        yield match.group(1)
    finally:
        process.terminate()
        status = process.wait(timeout=30)
        drain.join(timeout=5)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells it
    if status not in (0, -signal.SIGTERM):
        raise ServerError(f"attnmt serve ended with status {status}: {''.join(tail).strip()}")


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (no interpolation: a value that was measured)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


async def load(url: str, sentences: list[str], clients: int, max_seconds: float) -> dict:
    """`clients` concurrent clients send `sentences` one per request until all are answered
    (or `max_seconds` pass); throughput and latency."""
    queue = list(reversed(sentences))
    latencies: list[float] = []
    tokens = errors = 0
    started = time.perf_counter()
    deadline = started + max_seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal tokens, errors
        while queue and time.perf_counter() < deadline:
            sentence = queue.pop()
            sent = time.perf_counter()
            response = await http.post("/v1/translate", json={"sentences": [sentence], "beam_size": 1})
            latencies.append(time.perf_counter() - sent)
            if response.status_code == 200:
                tokens += len(response.json()["translations"][0]["hypotheses"][0]["tokens"])
            else:
                errors += 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    seconds = time.perf_counter() - started
    return {
        "sentences": len(latencies),
        "errors": errors,
        "seconds": seconds,
        "sentences_per_s": len(latencies) / seconds,
        "tokens_per_s": tokens / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "p99_ms": 1000 * percentile(latencies, 0.99),
    }


def test_set_sources(run: str) -> list[str]:
    from attnmt.config import load_config
    from attnmt.evaluation import split_examples

    config = load_config(Path(run) / "config.yaml")
    return [example.src for example in split_examples(config.data, "test")]


def measure(args: argparse.Namespace) -> dict:
    from attnmt.utils import describe_machine

    sentences = test_set_sources(args.run)[: args.sentences]
    configs = [(1, False)] + [
        (clients, batching) for clients in args.clients if clients > 1 for batching in (False, True)
    ]
    runs: dict[tuple[int, bool], list[dict]] = {config: [] for config in configs}
    with ExitStack() as stack:
        bound = ["--max-queue", str(4 * max(args.clients))]
        urls = {
            batching: stack.enter_context(running_server([args.run], *bound, *([] if batching else ["--no-batching"])))
            for batching in (False, True)
        }
        model = httpx.get(f"{urls[True]}/v1/models").json()["models"][0]
        for url in urls.values():  # warm up: first calls allocate and fill caches
            asyncio.run(load(url, sentences[:64], 8, args.max_seconds))
        for repeat in range(args.repeats):
            for clients, batching in rotated(configs, repeat):
                result = asyncio.run(load(urls[batching], sentences, clients, args.max_seconds))
                print(
                    f"repeat {repeat + 1}: {clients:>3} clients, batching {'on ' if batching else 'off'}: "
                    f"{result['sentences_per_s']:7.1f} sentences/s, p99 {result['p99_ms']:7.1f} ms",
                    flush=True,
                )
                runs[(clients, batching)].append(result)
    table = [
        {"clients": clients, "batching": batching, **combine_repeats(runs[(clients, batching)], FIGURES)}
        for clients, batching in configs
    ]
    baseline = table[0]["sentences_per_s"]
    for row in table:
        row["speedup"] = row["sentences_per_s"] / baseline
    return {
        "mode": "serving",
        "machine": describe_machine(),
        "model": {
            key: model[key] for key in ("name", "source_language", "target_language", "architecture", "training")
        },
        "settings": {"sentences": len(sentences), "beam_size": 1, "repeats": args.repeats, "batch_wait_ms": 5.0},
        "configurations": table,
    }


def serving_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The load test as a table: throughput and latency per configuration, medians (min-max)."""

    def cell(row: dict, key: str, digits: int) -> str:
        spread = row["spread"][key]
        if len(spread["values"]) < 2:
            return f"{spread['median']:,.{digits}f}"
        return f"{spread['median']:,.{digits}f} ({spread['min']:,.{digits}f}-{spread['max']:,.{digits}f})"

    header = ["clients", "batching", "sentences/s", "tokens/s", "p50 ms", "p95 ms", "p99 ms", "vs one at a time"]
    body = [
        [
            str(row["clients"]),
            "dynamic" if row["batching"] else "off",
            cell(row, "sentences_per_s", 1),
            cell(row, "tokens_per_s", 0),
            cell(row, "p50_ms", 0),
            cell(row, "p95_ms", 0),
            cell(row, "p99_ms", 0),
            f"{row['speedup']:.2f}x",
        ]
        for row in results["configurations"]
    ]
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="runs/multi30k-en-de", help="a trained run directory")
    parser.add_argument("--clients", default="1,8,32", help="comma-separated numbers of concurrent clients")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--sentences", type=positive_int, default=None, help="send only the first N test sentences")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="a run stops after this long")
    parser.add_argument("--json", type=Path, default=RESULTS, help="results file")
    args = parser.parse_args(argv)
    try:
        args.clients = sorted({int(part) for part in args.clients.split(",")})
    except ValueError:
        parser.error(f"--clients: expected numbers like 1,8,32, got {args.clients!r}")
    if not (Path(args.run) / "config.yaml").is_file():
        parser.error(f"--run {args.run}: not a trained run (train it: attnmt train configs/multi30k-en-de.yaml)")
    try:
        results = measure(args)
    except (ServerError, UserError) as error:  # a run without its test set, a server that failed
        print(f"benchmarks.serving: error: {error}", file=sys.stderr)
        return 2
    write_results(args.json, results, "benchmarks.serving", argv)
    machine = results["machine"]
    print(f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; torch {machine['torch']}")
    print("\n".join(markdown_table(*serving_rows(results))))
    print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
