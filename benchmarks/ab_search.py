"""A/B of a change to the search: this checkout's `attnmt.search` against the one at a git revision.

    python -m benchmarks.ab_search --checkpoint RUN_DIR --against REV [--repeats 5] [--sentences 1000]
                                   [--json OUT]

Both versions decode the same test sources with the same trained model (its best checkpoint,
its own tokenizers), greedy and beam 5, in alternation (A B A B ...), so that the VM's drift
from minute to minute falls on both alike. Reported per mode: the median seconds of each
version, their ratio and whether the outputs (tokens of every best hypothesis) are identical.
The other module at REV is loaded from `git show REV:attnmt/search.py`; it must still fit
this checkout's model (the `StepModel` interface).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

from attnmt import search
from attnmt.translate import split_examples
from attnmt.utils import UserError
from benchmarks.decoding import load_trained
from benchmarks.measure import describe_machine, write_results


def search_at(revision: str) -> ModuleType:
    """`attnmt/search.py` as it was at `revision`, imported as a separate module. A revision
    git does not know (or no git at all) is a UserError."""
    try:
        shown = subprocess.run(["git", "show", f"{revision}:attnmt/search.py"], capture_output=True, text=True)
    except FileNotFoundError:
        raise UserError("git is not installed; --against needs a git checkout") from None
    if shown.returncode != 0:
        raise UserError(f"--against {revision}: {shown.stderr.strip().splitlines()[-1] if shown.stderr else 'unknown'}")
    with tempfile.TemporaryDirectory(prefix="ab_search_") as folder:
        path = Path(folder) / "search_at_revision.py"
        path.write_text(shown.stdout, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("search_at_revision", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up while being built
        spec.loader.exec_module(module)
    return module


def timed_decode(module: ModuleType, model, sources: list[list[int]], beam_size: int) -> tuple[float, list]:
    """Seconds to decode `sources` with the module's `decode_all` (length penalty 1, length limit
    1.5 S + 10), whichever way its version takes the search settings."""
    if hasattr(module, "SearchOptions"):
        call = functools.partial(module.decode_all, model, sources, module.SearchOptions(beam_size=beam_size))
    else:  # before SearchOptions: the settings were keyword arguments with the same defaults
        call = functools.partial(module.decode_all, model, sources, beam_size=beam_size)
    start = time.perf_counter()
    results = call(batch_size=64)
    return time.perf_counter() - start, [hypotheses[0].tokens for hypotheses in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained attnmt run")
    parser.add_argument("--against", required=True, help="the git revision to compare with (e.g. HEAD~1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=1000, help="test sources decoded per measurement")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    try:
        checkpoint, config, codec, model = load_trained(args.checkpoint)
        examples = split_examples(config.data, "test")[: args.sentences]
        versions = {"this checkout": search, args.against: search_at(args.against)}
    except UserError as error:
        print(f"benchmarks.ab_search: error: {error}", file=sys.stderr)
        return 2
    sources = [codec.encode_source(example.src) for example in examples]

    machine = describe_machine(torch.device("cpu"))
    cpu = f"{machine['cpu']}, {machine['cores']} cores"
    print(f"machine: {cpu}; torch {machine['torch']}, {machine['threads']} threads")
    print(f"model: {checkpoint}; {len(sources):,} test sources, batches of 64; {args.repeats} alternating repeats")
    results = {"machine": machine, "model": str(checkpoint), "sentences": len(sources), "modes": {}}
    with torch.inference_mode():
        for mode, beam_size in (("greedy", 1), (f"beam {args.beam}", args.beam)):
            seconds: dict[str, list[float]] = {name: [] for name in versions}
            outputs: dict[str, list] = {}
            for module in versions.values():  # one untimed pass each: caches, allocator
                timed_decode(module, model, sources[:64], beam_size)
            for _ in range(args.repeats):
                for name, module in versions.items():
                    elapsed, outputs[name] = timed_decode(module, model, sources, beam_size)
                    seconds[name].append(elapsed)
            new, old = (statistics.median(seconds[name]) for name in versions)
            same = outputs["this checkout"] == outputs[args.against]
            results["modes"][mode] = {"seconds": seconds, "speedup": old / new, "outputs_identical": same}
            print(
                f"{mode}: this checkout {new:.2f} s, {args.against} {old:.2f} s (medians): "
                f"{old / new:.2f}x; outputs identical: {same}"
            )
    if args.json:
        write_results(args.json, results, "benchmarks.ab_search", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
