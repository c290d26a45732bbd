"""A/B of a change to decoding: this checkout's attnmt against the whole package at a git revision.

    python -m benchmarks.ab_search --checkpoint RUN_DIR --against REV [--repeats 5] [--sentences 1000]
                                   [--beam 5] [--batch-tokens N] [--json OUT]

The package as it was at REV is exported with `git archive` into a temporary folder. Each
measurement runs in a process of its own whose `attnmt` is one of the two versions: it loads
the run's best checkpoint with that version's code (model, decoder and search alike) and
decodes the same test sources (token ids made once, by this checkout) with `decode_all`,
in batches of 64 sentences (or, with --batch-tokens, of at most that many padded source tokens
per hypothesis, for versions that have token budgets), after one untimed batch; only the
decoding is timed. The versions alternate (A B A B ...), so that the machine's drift from minute
to minute falls on both alike. Reported per mode (greedy, beam): the median seconds of each
version, their ratio, and whether the outputs (tokens of every best hypothesis) are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

from attnmt.checkpoint import resolve_checkpoint
from attnmt.config import DecodeConfig
from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.utils import UserError
from benchmarks.measure import describe_machine, positive_int, rotated, write_results

CHECKOUT = Path(__file__).resolve().parent.parent

# Runs inside each measuring process, with PYTHONPATH at one version of the package. It uses only
# what every version has: a loaded model (`loading.load`, earlier `Translator.from_checkpoint`) and
# decode_all, from the search package or the search module before it (whose settings were keyword
# arguments before SearchOptions, with the same defaults).
# A run trained by this checkout may carry config keys an older version rejects (every key is
# written, defaults included): the worker loads it through a staged copy of the run directory
# (in the work folder) whose config.yaml keeps only the keys its own version knows, the rest
# linked unchanged.
WORKER = r"""
import json, os, sys, tempfile, time
from pathlib import Path
import torch
import yaml
from attnmt.config import Config
try:  # the search package
    from attnmt.search.decode import decode_all
    from attnmt.search.options import SearchOptions
except ImportError:  # a version with one search module
    from attnmt.search import decode_all
    try:
        from attnmt.search import SearchOptions
    except ImportError:  # a version from before SearchOptions
        SearchOptions = None

def known(raw, section):
    kept = {}
    for key, value in raw.items():
        if key in section.model_fields:
            inner = section.model_fields[key].annotation
            nested = isinstance(value, dict) and isinstance(inner, type) and hasattr(inner, "model_fields")
            kept[key] = known(value, inner) if nested else value
    return kept

request = json.loads(open(sys.argv[1], encoding="utf-8").read())
torch.set_num_threads(request["threads"])
checkpoint = Path(request["checkpoint"])
run = checkpoint.parent.parent
staged = Path(tempfile.mkdtemp(prefix="run-", dir=Path(sys.argv[1]).parent)) / run.name
staged.mkdir()
for entry in run.iterdir():
    if entry.name != "config.yaml":
        os.symlink(entry.resolve(), staged / entry.name)
raw = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
(staged / "config.yaml").write_text(yaml.safe_dump(known(raw, Config)), encoding="utf-8")
staged_checkpoint = staged / checkpoint.parent.name / checkpoint.name
try:
    from attnmt.loading import ModelSpec, load
    model = load(ModelSpec(staged_checkpoint, device="cpu")).model
except ImportError:  # a version from before `loading`
    from attnmt.translate import Translator
    model = Translator.from_checkpoint(staged_checkpoint, device="cpu").model
sources, beam = request["sources"], request["beam"]
if SearchOptions is not None:
    options = SearchOptions(beam_size=beam)
    batching = {"batch_size": request["batch_size"]}
    if request["batch_tokens"] is not None:
        batching["batch_tokens"] = request["batch_tokens"]
    decode = lambda ids: decode_all(model, ids, options, **batching)
else:
    decode = lambda ids: decode_all(model, ids, batch_size=64, beam_size=beam)
with torch.inference_mode():
    decode(sources[:64])
    start = time.perf_counter()
    results = decode(sources)
    seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "tokens": [hypotheses[0].tokens for hypotheses in results]}))
"""


def package_at(revision: str, folder: Path) -> Path:
    """The `attnmt` package as it was at `revision`, exported under `folder`; the folder to put
    on PYTHONPATH. A revision git does not know (or no git at all) is a UserError."""
    archive = folder / "attnmt.tar"
    try:
        exported = subprocess.run(
            ["git", "-C", str(CHECKOUT), "archive", "--output", str(archive), revision, "attnmt"],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        raise UserError("git is not installed; --against needs a git checkout") from None
    if exported.returncode != 0:
        reason = exported.stderr.strip().splitlines()[-1] if exported.stderr.strip() else "unknown revision"
        raise UserError(f"--against {revision}: {reason}")
    root = folder / "revision"
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root


def measure(root: Path, request: Path) -> dict:
    """One decoding by the package under `root`: {"seconds", "tokens"}."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    worker = request.parent / "worker.py"
    done = subprocess.run([sys.executable, str(worker), str(request)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
        raise UserError(f"decoding with the package in {root} failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(
    checkpoint: Path,
    sources: list[list[int]],
    roots: dict[str, Path],
    beam: int,
    repeats: int,
    work: Path,
    batch_tokens: int | None = None,
):
    """Alternating measurements of each version; (seconds per version, tokens per version)."""
    request = work / f"request-beam{beam}.json"
    threads = torch.get_num_threads()
    payload = {"checkpoint": str(checkpoint), "sources": sources, "beam": beam, "threads": threads}
    # a token budget lets batches grow past 64 sentences, up to the default cap of decode.batch_size
    payload |= {"batch_size": 64 if batch_tokens is None else DecodeConfig().batch_size, "batch_tokens": batch_tokens}
    request.write_text(json.dumps(payload), encoding="utf-8")
    seconds: dict[str, list[float]] = {name: [] for name in roots}
    tokens: dict[str, list] = {}
    for turn in range(repeats):
        for name in rotated(list(roots), turn):
            measured = measure(roots[name], request)
            seconds[name].append(measured["seconds"])
            tokens[name] = measured["tokens"]
    return seconds, tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained attnmt run")
    parser.add_argument("--against", required=True, help="the git revision to compare with (e.g. HEAD~1)")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--sentences", type=positive_int, default=1000, help="test sources decoded per measurement")
    parser.add_argument("--beam", type=positive_int, default=5)
    parser.add_argument("--batch-tokens", type=positive_int, default=None, help="decode in token-budget batches")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ab_search_") as folder:
        work = Path(folder)
        try:
            checkpoint = resolve_checkpoint(args.checkpoint, "best")
            translator = load(ModelSpec(args.checkpoint, device="cpu"))
            examples = split_examples(translator.config.data, "test")[: args.sentences]
            roots = {"this checkout": CHECKOUT, args.against: package_at(args.against, work)}
            (work / "worker.py").write_text(WORKER, encoding="utf-8")
            sources = [translator.codec.encode_source(example.src) for example in examples]
            machine = describe_machine(torch.device("cpu"))
            cpu = f"{machine['cpu']}, {machine['cores']} cores"
            print(f"machine: {cpu}; torch {machine['torch']}, {machine['threads']} threads")
            shape = "64 sentences" if args.batch_tokens is None else f"at most {args.batch_tokens:,} tokens"
            batches = f"{len(sources):,} test sources, batches of {shape}; {args.repeats} alternating repeats"
            print(f"model: {checkpoint}; {batches}")
            results = {
                "machine": machine,
                "model": f"{checkpoint.parent.parent.name}/{checkpoint.name}",  # no machine's paths
                "sentences": len(sources),
                "batch_tokens": args.batch_tokens,
            }
            results["modes"] = {}
            for mode, beam in (("greedy", 1), (f"beam {args.beam}", args.beam)):
                seconds, tokens = compare(checkpoint, sources, roots, beam, args.repeats, work, args.batch_tokens)
                new, old = (statistics.median(seconds[name]) for name in roots)
                same = tokens["this checkout"] == tokens[args.against]
                results["modes"][mode] = {"seconds": seconds, "speedup": old / new, "outputs_identical": same}
                print(
                    f"{mode}: this checkout {new:.2f} s, {args.against} {old:.2f} s (medians): "
                    f"{old / new:.2f}x; outputs identical: {same}"
                )
        except UserError as error:
            print(f"benchmarks.ab_search: error: {error}", file=sys.stderr)
            return 2
    if args.json:
        write_results(args.json, results, "benchmarks.ab_search", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
