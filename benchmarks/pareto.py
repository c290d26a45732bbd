"""Speed against quality: decoding configurations of trained runs on their test splits, measured in
one invocation, with the Pareto front drawn.

    python -m benchmarks.pareto --system NAME=RUN[+RUN...][,beam=K][,int8][,shortlist][,fast] ...
                                [--splits test_2016_flickr,test_2017_flickr] [--repeats 5]
                                [--json OUT] [--plot OUT.png]

A system is one run or an ensemble of runs (`+`), searched with a beam of K (default: the first
run's decode.beam_size; 1 is greedy), with int8 weights and the run's vocabulary shortlist where
asked, or with `fast` as the fast preset chooses them (`attnmt translate --fast`: chosen once on
the validation split and stored in the run's fast.json). For each system and test split
(default: each run's own): sacreBLEU and the tokenized lowercased BLEU of older papers, and the
generated tokens per second (EOS counted), the median
and range of `--repeats` timed passes over the whole split after one untimed batch; the systems
take turns pass by pass (A B C A B C ...), so the machine's drift falls on all alike. The plot
puts each system at its tokens/s (log scale) and tokenized BLEU on the first split, and joins
the Pareto front: the systems no other beats on both.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from attnmt.evaluation import split_examples
from attnmt.fast import fast_spec
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu, tokenized_bleu
from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError, describe_machine
from benchmarks.measure import positive_int, rotated, spread, write_results

WARMUP_SENTENCES = 64


@dataclass(frozen=True)
class System:
    """One decoding configuration: NAME=RUN[+RUN...][,beam=K][,int8][,shortlist][,fast]."""

    name: str
    runs: tuple[str, ...]
    beam: int | None = None
    int8: bool = False
    shortlist: bool = False
    fast: bool = False

    @classmethod
    def parse(cls, text: str) -> System:
        name, separator, rest = text.partition("=")
        if not separator or not name or not rest:
            raise argparse.ArgumentTypeError(
                f"expected NAME=RUN[+RUN...][,beam=K][,int8][,shortlist][,fast], got {text!r}"
            )
        runs, *settings = rest.split(",")
        system = cls(name, tuple(runs.split("+")))
        for setting in settings:
            key, _, value = setting.partition("=")
            if key == "beam" and value.isdigit() and int(value) >= 1:
                system = replace(system, beam=int(value))
            elif key in ("int8", "shortlist", "fast") and not value:
                system = replace(system, **{key: True})
            else:
                raise argparse.ArgumentTypeError(
                    f"{text!r}: unknown setting {setting!r}; expected beam=K, int8, shortlist, fast"
                )
        if system.fast and (system.beam is not None or system.int8 or system.shortlist):
            raise argparse.ArgumentTypeError(f"{text!r}: fast chooses the beam, int8 and the shortlist itself")
        return system

    def spec(self) -> ModelSpec:
        if self.fast:
            return fast_spec(ModelSpec(self.runs, device="cpu"))
        return ModelSpec(self.runs, device="cpu", quantize="int8" if self.int8 else "none", shortlist=self.shortlist)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the (speed, quality) points no other point beats on both (ties count as not beaten),
    fastest first."""
    front = [
        i
        for i, (speed, quality) in enumerate(points)
        if not any(s >= speed and q >= quality and (s, q) != (speed, quality) for s, q in points)
    ]
    return sorted(front, key=lambda i: -points[i][0])


def _scores(translator, examples, translations) -> dict:
    data = translator.config.data
    hypotheses = [translation.text for translation in translations]
    references = [tuple(example.refs) for example in examples]
    words = WordTokenizer(data.tgt_lang, lowercase=True)
    return {
        "bleu": bleu(hypotheses, references, lowercase=data.lowercase).score,
        "tokenized_bleu": tokenized_bleu(
            [words.tokenize(h) for h in hypotheses], [[words.tokenize(r) for r in refs] for refs in references]
        ).score,
        "generated_tokens": sum(len(translation.tokens) + 1 for translation in translations),
    }


def measure(systems: list[System], splits: list[str] | None, repeats: int) -> list[dict]:
    """Each system's scores and speed on each split (module docstring)."""
    specs = {system.name: system.spec() for system in systems}  # the fast preset's, as it chose them
    loaded = {name: load(spec) for name, spec in specs.items()}
    work = []  # (system, split, translator, examples, options): one timed pass each, per turn
    results = {  # runs by their folder's name: a raw result names no machine's paths
        system.name: {"system": system.name, "runs": [Path(run).name for run in system.runs], "splits": {}}
        for system in systems
    }
    for system in systems:
        translator = loaded[system.name]
        data = translator.config.data
        spec = specs[system.name]
        results[system.name] |= {"beam": system.beam or translator.config.decode.beam_size, "fast": system.fast}
        results[system.name] |= {"int8": spec.quantize == "int8", "shortlist": spec.shortlist}
        results[system.name] |= {"parameters": translator.parameters}
        multi30k = data.corpus == "multi30k"  # the only corpus with several test splits
        for split in splits or [data.test_split if multi30k else "test"]:
            config = data.model_copy(update={"test_split": split}) if multi30k else data
            examples = split_examples(config, "test")
            options = translator.search_options(beam_size=system.beam, n_best=1)
            sources = [example.src for example in examples]
            translations = translator.translate(sources, options, say=lambda line: None)  # scored, and warms up
            results[system.name]["splits"][split] = _scores(translator, examples, translations) | {"seconds": []}
            work.append((system.name, split, translator, sources, options))
    for turn in range(repeats):
        for name, split, translator, sources, options in rotated(work, turn):
            translator.translate(sources[:WARMUP_SENTENCES], options, say=lambda line: None)
            start = time.perf_counter()
            translator.translate(sources, options, say=lambda line: None)
            results[name]["splits"][split]["seconds"].append(time.perf_counter() - start)
    for result in results.values():
        for figures in result["splits"].values():
            seconds = figures.pop("seconds")
            figures["tokens_per_s"] = spread([figures["generated_tokens"] / s for s in seconds])
    return list(results.values())


def plot(results: list[dict], split: str, path: Path) -> Path:
    """Tokenized BLEU against generated tokens/s on `split`, the Pareto front joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(r["splits"][split]["tokens_per_s"]["median"], r["splits"][split]["tokenized_bleu"]) for r in results]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for result, (speed, quality) in zip(results, points, strict=True):
        axes.scatter(speed, quality, color="#1f5fa8")
        axes.annotate(result["system"], (speed, quality), textcoords="offset points", xytext=(4, 4), fontsize=8)
    front = pareto_front(points)
    axes.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#c2410c", linewidth=1, zorder=0)
    axes.set_xscale("log")
    axes.set_xlabel("generated tokens/s (log scale)")
    axes.set_ylabel(f"BLEU, tokenized lowercased ({split})")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pareto", description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", type=System.parse, action="append", required=True, metavar="NAME=RUN[,...]")
    parser.add_argument("--splits", type=lambda text: text.split(","), default=None, help="test splits (multi30k)")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the measurements here")
    parser.add_argument("--plot", type=Path, default=None, help="draw BLEU against speed here")
    args = parser.parse_args(argv)
    names = [system.name for system in args.system]
    if len(set(names)) != len(names):
        parser.error(f"system names must differ, got {names}")
    try:
        results = measure(args.system, args.splits, args.repeats)
    except UserError as error:
        print(f"benchmarks.pareto: error: {error}", file=sys.stderr)
        return 2
    for result in results:
        for split, figures in result["splits"].items():
            rate = figures["tokens_per_s"]
            print(
                f"{result['system']} ({split}): BLEU {figures['bleu']:.2f}, tokenized {figures['tokenized_bleu']:.2f}, "
                f"{rate['median']:,.0f} tokens/s ({rate['min']:,.0f}-{rate['max']:,.0f})"
            )
    first_split = next(iter(results[0]["splits"]))
    if args.plot:
        plot(results, first_split, args.plot)
    if args.json:
        machine = describe_machine(torch.device("cpu"))
        write_results(
            args.json, {"machine": machine, "repeats": args.repeats, "systems": results}, "benchmarks.pareto", argv
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
