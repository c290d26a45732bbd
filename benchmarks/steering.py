"""Steering a trained run on its test split: required terms drawn from the references, and prefixes.

    python -m benchmarks.steering RUN_DIR [--sentences N] [--beam 5] [--seed 1] [--json OUT]

Required terms are drawn as Post and Vilar (2018) draw them: from each sentence's first
reference, phrases of one to three consecutive words at random places that do not overlap, one
phrase per sentence in one setting and three in another (fewer where the reference is too
short). For each setting: the share of outputs that contain every phrase, of all outputs and of
those whose length limit left room for them (attnmt's promise is 100% of the latter), sacreBLEU
against the references beside the unconstrained search's, and the decoding seconds of both.
Prefixes are the first half of each reference's words (whole words, then the next word's first
half as an unfinished word, in a second setting): the share of outputs that begin with their
prefix, and sacreBLEU of the completed outputs. Every setting decodes the same sentences with
the run's own beam (or --beam) and length penalty, once each (one run, not a median).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu
from attnmt.utils import UserError, describe_machine
from benchmarks.measure import positive_int, write_results


def draw_phrases(reference: str, count: int, rng: random.Random) -> list[str]:
    """Up to `count` non-overlapping phrases of one to three consecutive words of `reference`."""
    words = reference.split()
    phrases, taken = [], set()
    for _ in range(count * 10):  # a few tries for each phrase in a short reference
        if len(phrases) == count:
            break
        length = rng.randint(1, 3)
        if length > len(words):
            continue
        start = rng.randrange(len(words) - length + 1)
        span = set(range(start, start + length))
        if span & taken:
            continue
        taken |= span
        phrases.append(" ".join(words[start : start + length]))
    return phrases


def prefix_of(reference: str, unfinished: bool) -> str:
    """The first half of the reference's words, and with `unfinished` the next word's first half."""
    words = reference.split()
    half = len(words) // 2
    prefix = " ".join(words[:half])
    if not unfinished:
        return prefix + " " if prefix else ""
    if half >= len(words):
        return prefix
    next_word = words[half]
    cut = next_word[: max(1, len(next_word) // 2)]
    return f"{prefix} {cut}" if prefix else cut


def timed(work):
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steering", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a trained attnmt run")
    parser.add_argument("--sentences", type=positive_int, default=None, help="the first N test sentences (all)")
    parser.add_argument("--beam", type=positive_int, default=None, help="beam size (default: the run's)")
    parser.add_argument("--seed", type=int, default=1, help="for drawing the phrases")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    try:
        translator = load(ModelSpec(args.run_dir, device="cpu"))
        examples = split_examples(translator.config.data, "test")[: args.sentences]
    except UserError as error:
        print(f"benchmarks.steering: error: {error}", file=sys.stderr)
        return 2
    lowercase = translator.config.data.lowercase
    options = translator.search_options(beam_size=args.beam)
    sources = [example.src for example in examples]
    references = [tuple(example.refs) for example in examples]
    first_references = [example.refs[0] for example in examples]
    free, free_seconds = timed(lambda: translator.translate(sources, options, say=lambda line: None))
    free_bleu = bleu([t.text for t in free], references, lowercase=lowercase).score
    search = f"{len(sources):,} sentences, beam {options.beam_size}"
    print(f"{search}: unconstrained BLEU {free_bleu:.2f}, {free_seconds:.1f} s")
    results = {
        "machine": describe_machine(torch.device("cpu")),
        "run": args.run_dir.name,
        "split": "test",
        "sentences": len(sources),
        "beam_size": options.beam_size,
        "length_penalty": options.length_penalty,
        "threads": torch.get_num_threads(),
        "unconstrained": {"bleu": free_bleu, "seconds": free_seconds},
        "constraints": {},
        "prefixes": {},
    }
    # the tokens each sentence's length limit leaves before its EOS, and a phrase's tokens
    source_lengths = torch.tensor([len(translator.codec.source_tokens(source)) for source in sources])
    rooms = [int(limit) - 1 for limit in options.length_limits(source_lengths)]

    def phrase_tokens(required: list[list[str]]) -> list[list[list[int]]]:
        return [[translator.codec.encode_target(phrase) for phrase in phrases] for phrases in required]

    rng = random.Random(args.seed)
    for count in (1, 3):
        required = [draw_phrases(reference, count, rng) for reference in first_references]
        steered, seconds = timed(
            lambda required=required: translator.translate(sources, options, required=required, say=lambda line: None)
        )
        complete = [not t.missing for t in steered]
        fits = [sum(map(len, phrases)) <= room for phrases, room in zip(phrase_tokens(required), rooms, strict=True)]
        figures = {
            "phrases": sum(map(len, required)),
            "all_met": sum(complete) / len(complete),
            "sentences_with_room": sum(fits),
            "all_met_with_room": sum(c for c, f in zip(complete, fits, strict=True) if f) / max(1, sum(fits)),
            "bleu": bleu([t.text for t in steered], references, lowercase=lowercase).score,
            "seconds": seconds,
            "slowdown": seconds / free_seconds,
        }
        results["constraints"][f"{count} per sentence"] = figures
        print(
            f"{count} phrase(s) a sentence: every phrase in {100 * figures['all_met']:.2f}% of outputs "
            f"({100 * figures['all_met_with_room']:.2f}% of the {sum(fits):,} with room), "
            f"BLEU {figures['bleu']:.2f}, {seconds:.1f} s ({figures['slowdown']:.2f}x)"
        )
    for unfinished in (False, True):
        prefixes = [prefix_of(reference, unfinished) for reference in first_references]
        steered, seconds = timed(
            lambda prefixes=prefixes: translator.translate(sources, options, prefixes=prefixes, say=lambda line: None)
        )
        name = "half the words, then half a word" if unfinished else "half the words"
        fold = str.lower if lowercase else str
        begins = [fold(t.text).startswith(fold(prefix.strip())) for t, prefix in zip(steered, prefixes, strict=True)]
        figures = {
            "begins_with_prefix": sum(begins) / len(begins),
            "bleu": bleu([t.text for t in steered], references, lowercase=lowercase).score,
            "seconds": seconds,
        }
        results["prefixes"][name] = figures
        print(
            f"prefix of {name}: {100 * figures['begins_with_prefix']:.2f}% begin with it, BLEU {figures['bleu']:.2f}, "
            f"{seconds:.1f} s"
        )
    if args.json:
        write_results(args.json, results, "benchmarks.steering", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
