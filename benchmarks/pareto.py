"""Speed against quality: decoding configurations of trained runs on their test splits, measured in
one invocation, with the Pareto front drawn.

    python -m benchmarks.pareto --system NAME=RUN[+RUN...][,beam=K][,int8][,shortlist][,fast] ...
                                [--splits test_2016_flickr,test_2017_flickr] [--repeats 5]
                                [--peer opennmt-py [--peer-seeds 1,2]] [--json OUT] [--plot OUT.png]

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

`--peer opennmt-py` adds OpenNMT-py's best model of the peer benchmark (`benchmarks.peers
quality`, the same model as attnmt's identical-work row: the seed with the best validation
BLEU, at its best checkpoint, from the work folder; a seed whose race is missing there is
trained first, 50 minutes each; `--peer-seeds` names the seeds to choose from, 1 and 2 as the
peer benchmark races them by default), greedy and with beam 5, in the same turns. It reads the peer
benchmark's lowercased word tokens and is scored on test2016 only (the one test split that
benchmark prepares): tokenized BLEU on those words, sacreBLEU on them and on the references'
words detokenized by attnmt's word tokenizer. Its timing is of the decoding alone (its
probe's), and its generated tokens are words where attnmt's runs generate their own tokens
(BPE pieces, say), so every row also carries sentences per second, the unit that compares
across tokenizations, and the plot uses it when a peer is in.

Each row also counts its models' arithmetic: forward FLOPs per sentence for the outputs it
made (`benchmarks.flops`; one hypothesis over the full vocabulary, every ensemble member
counted), the unit that compares models across tokenizations, the peer's included.

`--device cuda` decodes attnmt's systems on a GPU (with the search the device gets by default:
CUDA graphs where the batch allows them); int8 weights and the peer decode on the CPU only, so
those are refused there.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from attnmt.checkpoint import run_dir_of
from attnmt.config import load_config
from attnmt.evaluation import split_examples
from attnmt.export import is_export
from attnmt.fast import fast_spec
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu, tokenized_bleu
from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError, describe_machine
from attnmt.vocab import Vocab
from benchmarks.flops import flop_rates
from benchmarks.measure import positive_int, rotated, spread, write_results
from benchmarks.peers.report import format_spread

WARMUP_SENTENCES = 64
PEER_SPLIT = "test_2016_flickr"  # the peer benchmark's test2016, under the corpus's own split name


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

    def spec(self, device: str = "cpu") -> ModelSpec:
        if self.fast:
            return fast_spec(ModelSpec(self.runs, device=device))
        return ModelSpec(self.runs, device=device, quantize="int8" if self.int8 else "none", shortlist=self.shortlist)


def seed_list(text: str) -> tuple[int, ...]:
    """`--peer-seeds`: "1,2" -> (1, 2), each seed once, in the order given."""
    return tuple(dict.fromkeys(positive_int(seed) for seed in text.split(",")))


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the (speed, quality) points no other point beats on both (ties count as not beaten),
    fastest first."""
    front = [
        i
        for i, (speed, quality) in enumerate(points)
        if not any(s >= speed and q >= quality and (s, q) != (speed, quality) for s, q in points)
    ]
    return sorted(front, key=lambda i: -points[i][0])


def forward_flops_per_sentence(translator, sources: list[str], translations) -> float:
    """The models' forward FLOPs per sentence for these outputs (`benchmarks.flops`): one
    hypothesis each over the full target vocabulary, every ensemble member counted, so the
    arithmetic of the models apart from the search (a beam of K runs up to K hypotheses a step)
    and from a shortlist's smaller output layer."""
    src_lengths = [len(translator.codec.encode_source(source)) for source in sources]
    tgt_lengths = [len(translation.tokens) + 1 for translation in translations]  # + EOS
    total = 0
    for checkpoint in translator.members:  # a checkpoint folder, or an export holding its config and vocabularies
        folder = checkpoint if is_export(checkpoint) else run_dir_of(checkpoint)
        rates = flop_rates(load_config(folder / "config.yaml").model, len(Vocab.load(folder / "tgt.vocab.json")))
        total += rates.forward(src_lengths, tgt_lengths)
    return total / len(sources)


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
        "sentences": len(translations),
        "forward_flops_per_sentence": forward_flops_per_sentence(
            translator, [example.src for example in examples], translations
        ),
    }


@dataclass
class PeerRow:
    """A peer's model decoded through the peer benchmark's harness (`--peer`)."""

    name: str
    harness: object  # benchmarks.peers.harness.Harness
    system: object  # its PeerSystem
    checkpoint: Path
    beam: int
    parameters: int
    folder: Path

    def decode(self) -> dict:
        """One pass over test2016: the harness's measurements (decoding seconds, generated
        words, tokenized BLEU) and the output lines."""
        measured = self.harness.translate(self.system, self.folder, self.checkpoint, "test2016", self.beam)
        lines = (self.folder / f"test2016-beam{self.beam}.txt").read_text(encoding="utf-8").splitlines()
        return measured | {"lines": lines}


def peer_rows(name: str, seeds: tuple[int, ...] = (1, 2), beams: tuple[int, ...] = (1, 5)) -> list[PeerRow]:
    """The peer's best model of the quality race in the peer benchmark's work folder (racing the
    seeds missing there first), one row per beam."""
    from attnmt.utils import cache_root
    from benchmarks.peers.__main__ import build_system
    from benchmarks.peers.data import prepare_data
    from benchmarks.peers.harness import Harness
    from benchmarks.peers.quality import QualityOptions, quality
    from benchmarks.peers.system import Setup

    work = (cache_root() / "peers").resolve()
    setup = Setup(data_dir=prepare_data(work / "data"))
    system = build_system(name, None)
    harness = Harness(setup, [system], work, say=lambda line: print(line, file=sys.stderr))
    harness.install()
    if harness.errors:
        raise UserError(f"--peer {name}: {harness.errors[name]}")
    runs = quality(harness, QualityOptions(seeds=seeds))["systems"][name]["runs"]
    best = max(runs, key=lambda run: run["best"]["valid_bleu_tok_lc"])
    checkpoint = system.checkpoints(work / "quality" / name / f"seed-{best['seed']}")[best["best"]["step"]]
    return [
        PeerRow(
            f"{name} {'greedy' if beam == 1 else f'beam {beam}'}",
            harness,
            system,
            checkpoint,
            beam,
            best["parameters"],
            work / "pareto" / f"{name}-beam{beam}",
        )
        for beam in beams
    ]


def _peer_scores(row: PeerRow, first: dict) -> dict:
    """A peer row's scores from its first pass, as `_scores` gives attnmt's: sacreBLEU on its
    words and on the references' words, both detokenized by attnmt's word tokenizer, and its
    model's forward FLOPs per sentence for its outputs, counted as attnmt's
    (`benchmarks.peers.arithmetic`'s shapes and vocabulary)."""
    from benchmarks.peers.arithmetic import target_vocabulary_size, token_lengths

    setup = row.harness.setup
    words = WordTokenizer(setup.tgt_lang, lowercase=True)
    references = setup.file("test2016", setup.tgt_lang).read_text(encoding="utf-8").splitlines()
    sources = setup.file("test2016", setup.src_lang).read_text(encoding="utf-8").splitlines()
    rates = flop_rates(row.system.arithmetic_shapes(setup), target_vocabulary_size(setup))
    forward = rates.forward(*token_lengths(row.system, sources, first["lines"]))
    return {
        "bleu": bleu(
            [words.detokenize(line.split()) for line in first["lines"]],
            [(words.detokenize(line.split()),) for line in references],
            lowercase=True,
        ).score,
        "tokenized_bleu": first["bleu_tok_lc"],
        "generated_tokens": first["generated_tokens"],
        "sentences": first["sentences"],
        "forward_flops_per_sentence": forward / first["sentences"],
    }


def measure(
    systems: list[System],
    splits: list[str] | None,
    repeats: int,
    peers: list[PeerRow] | None = None,
    device: str = "cpu",
) -> list[dict]:
    """Each system's scores and speed on each split (module docstring), decoded on `device`."""
    specs = {system.name: system.spec(device) for system in systems}  # the fast preset's, as it chose them
    loaded = {name: load(spec) for name, spec in specs.items()}
    passes: list[tuple[str, str, Callable[[], float]]] = []  # (row, split, one timed pass -> seconds)
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
            passes.append((system.name, split, functools.partial(_timed_pass, translator, sources, options)))
    for row in peers or []:
        first = row.decode()  # scored, and warms the page cache of its model
        results[row.name] = {"system": row.name, "runs": [row.checkpoint.parent.parent.name, row.checkpoint.name]}
        results[row.name] |= {"beam": row.beam, "fast": False, "int8": False, "shortlist": False}
        results[row.name] |= {"parameters": row.parameters, "peer": row.system.name}
        results[row.name]["splits"] = {PEER_SPLIT: _peer_scores(row, first) | {"seconds": []}}
        passes.append((row.name, PEER_SPLIT, lambda row=row: row.decode()["seconds"]))
    for turn in range(repeats):
        for name, split, timed_pass in rotated(passes, turn):
            results[name]["splits"][split]["seconds"].append(timed_pass())
    for result in results.values():
        for figures in result["splits"].values():
            seconds = figures.pop("seconds")
            figures["tokens_per_s"] = spread([figures["generated_tokens"] / s for s in seconds])
            figures["sentences_per_s"] = spread([figures["sentences"] / s for s in seconds])
    return list(results.values())


def _timed_pass(translator, sources: list[str], options) -> float:
    """Seconds of one pass over `sources`, after an untimed batch."""
    translator.translate(sources[:WARMUP_SENTENCES], options, say=lambda line: None)
    start = time.perf_counter()
    translator.translate(sources, options, say=lambda line: None)
    return time.perf_counter() - start


def plot(results: list[dict], split: str, path: Path) -> Path:
    """Tokenized BLEU against speed on `split`, the Pareto front joined: generated tokens/s, or
    sentences/s where a peer's row counts its tokens in other units (words)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [result for result in results if split in result["splits"]]
    unit = "sentences_per_s" if any("peer" in result for result in shown) else "tokens_per_s"
    points = [(r["splits"][split][unit]["median"], r["splits"][split]["tokenized_bleu"]) for r in shown]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for result, (speed, quality) in zip(shown, points, strict=True):
        axes.scatter(speed, quality, color="#c2410c" if "peer" in result else "#1f5fa8")
        axes.annotate(result["system"], (speed, quality), textcoords="offset points", xytext=(4, 4), fontsize=8)
    front = pareto_front(points)
    axes.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#c2410c", linewidth=1, zorder=0)
    axes.set_xscale("log")
    axes.set_xlabel(f"{'sentences' if unit == 'sentences_per_s' else 'generated tokens'}/s (log scale)")
    axes.set_ylabel(f"BLEU, tokenized lowercased ({split})")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def pareto_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """The Markdown table of a results file: one row per system, its search and weights, then per
    split tokenized lowercased BLEU (sacreBLEU beside it on the first split) and the median (range)
    of generated tokens/s and sentences/s; "-" where a row has no such split (a peer's test2017).
    The models' forward MFLOP per sentence on the first split follows the parameters, where the
    results hold it."""
    splits = list(dict.fromkeys(split for result in results["systems"] for split in result["splits"]))
    arithmetic = all("forward_flops_per_sentence" in next(iter(r["splits"].values())) for r in results["systems"])
    header = ["system", "params"] + ["MFLOP/sent"] * arithmetic + ["search"]
    for index, split in enumerate(splits):
        name = split.removesuffix("_flickr").replace("_", "")
        header += [f"{name} BLEU word-tok-lc"] + (["sacreBLEU"] if index == 0 else []) + [f"{name} tok/s", "sent/s"]
    body = []
    for result in results["systems"]:
        search = "greedy" if result["beam"] == 1 else f"beam {result['beam']}"
        search += ", int8" * result["int8"] + ", shortlist" * result["shortlist"]
        search += " (words)" if "peer" in result else ""
        row = [result["system"], f"{result['parameters'] / 1e6:.1f}M"]
        if arithmetic:
            row.append(f"{next(iter(result['splits'].values()))['forward_flops_per_sentence'] / 1e6:,.0f}")
        row.append(search)
        for index, split in enumerate(splits):
            figures = result["splits"].get(split)
            width = 4 if index == 0 else 3
            if figures is None:
                row += ["-"] * width
                continue
            row.append(f"{figures['tokenized_bleu']:.2f}")
            row += [f"{figures['bleu']:.2f}"] if index == 0 else []
            row += [format_spread(figures["tokens_per_s"]), format_spread(figures["sentences_per_s"])]
        body.append(row)
    return header, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pareto", description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", type=System.parse, action="append", default=[], metavar="NAME=RUN[,...]")
    parser.add_argument("--splits", type=lambda text: text.split(","), default=None, help="test splits (multi30k)")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument(
        "--peer",
        choices=["opennmt-py"],
        action="append",
        default=[],
        help="add a peer's best model of the peer benchmark, greedy and beam 5 (test2016)",
    )
    parser.add_argument(
        "--peer-seeds",
        type=seed_list,
        default=(1, 2),
        metavar="1,2",
        help="the peer's seeds to choose its best model from (default: the peer benchmark's 1,2); "
        "a seed missing from its work folder is trained, 50 minutes",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="decode attnmt's systems here: cpu (default) or cuda[:N] (int8 runs on the CPU only)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the measurements here")
    parser.add_argument("--plot", type=Path, default=None, help="draw BLEU against speed here")
    args = parser.parse_args(argv)
    if args.peer and args.device != "cpu":
        parser.error(f"--peer decodes on the CPU (the peer benchmark's harness): use --device cpu, not {args.device!r}")
    names = [system.name for system in args.system]
    if len(set(names)) != len(names):
        parser.error(f"system names must differ, got {names}")
    if not args.system and not args.peer:
        parser.error("give at least one --system or --peer")
    try:
        peers = [row for name in args.peer for row in peer_rows(name, args.peer_seeds)]
        results = measure(args.system, args.splits, args.repeats, peers, args.device)
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
    if args.json:  # before the plot: a tracked plot rewritten first would mark the code dirty
        machine = describe_machine(torch.device(args.device))
        write_results(
            args.json, {"machine": machine, "repeats": args.repeats, "systems": results}, "benchmarks.pareto", argv
        )
    if args.plot:
        plot(results, next(iter(results[0]["splits"])), args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
