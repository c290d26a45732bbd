"""Steering a trained run on its test split: required phrases drawn from the references, and prefixes.

    python -m benchmarks.steering RUN_DIR [--sentences N] [--beam 5] [--seed 1] [--repeats 3] [--json OUT]

Required phrases are drawn as Post and Vilar (2018) draw them: from each sentence's first
reference, phrases of one to three consecutive words at random places that do not overlap, one
phrase per sentence in one setting and three in another (fewer where the reference is too
short). For each setting: the share of outputs that contain every phrase, of all outputs and of
those whose length limit left room for them (attnmt's promise is 100% of the latter), sacreBLEU
against the references beside the search's without them, and the decoding seconds of both.
Prefixes are the first half of each reference's words (whole words, then the next word's first
half as an unfinished word, in a second setting): the share of outputs that begin with their
prefix, and sacreBLEU of the completed outputs. Every setting decodes the same sentences with
the run's own beam (or --beam) and length penalty: once untimed (the outputs scored, and a
warm-up), then `--repeats` timed passes with the settings taking turns; the seconds are their
median and range.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu
from attnmt.utils import UserError, describe_machine
from benchmarks.measure import positive_int, rotated, spread, write_results


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


def steering_settings(first_references: list[str], seed: int) -> dict[str, dict]:
    """Each setting's name -> what `translate` is asked besides the sentences: nothing, one or
    three required phrases a sentence (drawn with `seed`), or a prefix of half the words."""
    rng = random.Random(seed)
    required = {count: [draw_phrases(reference, count, rng) for reference in first_references] for count in (1, 3)}
    prefixes = {
        "half the words": [prefix_of(reference, False) for reference in first_references],
        "half the words, then half a word": [prefix_of(reference, True) for reference in first_references],
    }
    return {
        "unconstrained": {},
        **{f"{count} per sentence": {"required_phrases": phrases} for count, phrases in required.items()},
        **{name: {"prefixes": texts} for name, texts in prefixes.items()},
    }


def decoded_in_turns(translate: Callable[[str], list], names: list[str], repeats: int) -> tuple[dict, dict]:
    """Every setting decoded once untimed (its outputs, and a warm-up), then `repeats` timed passes
    with the settings taking turns, so that the machine's drift falls on all alike: (outputs,
    seconds) by setting name."""
    outputs = {name: translate(name) for name in names}
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(repeats):
        for name in rotated(names, turn):
            start = time.perf_counter()
            translate(name)
            seconds[name].append(time.perf_counter() - start)
    return outputs, seconds


def phrase_figures(outputs: list, phrases: list[list[str]], rooms: list[int], codec) -> dict:
    """How often every required phrase is in the output, of all sentences and of those whose
    length limit leaves room (`rooms`: tokens before EOS) for their phrases' target tokens."""
    complete = [not t.missing_required_phrases for t in outputs]
    lengths = [sum(len(codec.encode_target(phrase)) for phrase in each) for each in phrases]
    fits = [length <= room for length, room in zip(lengths, rooms, strict=True)]
    return {
        "phrases": sum(map(len, phrases)),
        "all_met": sum(complete) / len(complete),
        "sentences_with_room": sum(fits),
        "all_met_with_room": sum(c for c, f in zip(complete, fits, strict=True) if f) / max(1, sum(fits)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steering", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a trained attnmt run")
    parser.add_argument("--sentences", type=positive_int, default=None, help="the first N test sentences (all)")
    parser.add_argument("--beam", type=positive_int, default=None, help="beam size (default: the run's)")
    parser.add_argument("--seed", type=int, default=1, help="for drawing the phrases")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed passes of each setting")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    try:
        translator = load(ModelSpec(args.run_dir, device="cpu"))
        examples = split_examples(translator.config.data, "test")[: args.sentences]
    except UserError as error:
        print(f"benchmarks.steering: error: {error}", file=sys.stderr)
        return 2
    lowercase, options = translator.config.data.lowercase, translator.search_options(beam_size=args.beam)
    sources, references = [example.src for example in examples], [tuple(example.refs) for example in examples]
    settings = steering_settings([example.refs[0] for example in examples], args.seed)

    def translate(name: str) -> list:
        return translator.translate(sources, options, say=lambda line: None, **settings[name])

    outputs, seconds = decoded_in_turns(translate, list(settings), args.repeats)

    def scored(name: str) -> dict:
        text = [t.text for t in outputs[name]]
        return {"bleu": bleu(text, references, lowercase=lowercase).score, "seconds": spread(seconds[name])}

    free = scored("unconstrained")
    results = {
        "machine": describe_machine(torch.device("cpu")),
        "run": args.run_dir.name,
        "split": "test",
        "sentences": len(sources),
        "beam_size": options.beam_size,
        "length_penalty": options.length_penalty,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "unconstrained": free,
        "constraints": {},  # the required phrases' figures: the key the committed raw results and docs use
        "prefixes": {},
    }
    print(
        f"{len(sources):,} sentences, beam {options.beam_size}: unconstrained BLEU {free['bleu']:.2f}, "
        f"{free['seconds']['median']:.1f} s"
    )
    # the tokens each sentence's length limit leaves before its EOS
    source_lengths = torch.tensor([len(translator.codec.source_tokens(source)) for source in sources])
    rooms = [int(limit) - 1 for limit in options.length_limits(source_lengths)]
    fold = str.lower if lowercase else str
    for name, asked in settings.items():
        if "required_phrases" in asked:
            figures = scored(name) | phrase_figures(outputs[name], asked["required_phrases"], rooms, translator.codec)
            figures["slowdown"] = figures["seconds"]["median"] / free["seconds"]["median"]
            results["constraints"][name] = figures
            print(
                f"{name}: every phrase in {100 * figures['all_met']:.2f}% of outputs "
                f"({100 * figures['all_met_with_room']:.2f}% of the {figures['sentences_with_room']:,} with room), "
                f"BLEU {figures['bleu']:.2f}, {figures['seconds']['median']:.1f} s ({figures['slowdown']:.2f}x)"
            )
        elif "prefixes" in asked:
            pairs = zip(outputs[name], asked["prefixes"], strict=True)
            begins = [fold(t.text).startswith(fold(prefix.strip())) for t, prefix in pairs]
            figures = scored(name) | {"begins_with_prefix": sum(begins) / len(begins)}
            results["prefixes"][name] = figures
            print(
                f"prefix of {name}: {100 * figures['begins_with_prefix']:.2f}% begin with it, "
                f"BLEU {figures['bleu']:.2f}, {figures['seconds']['median']:.1f} s"
            )
    if args.json:
        write_results(args.json, results, "benchmarks.steering", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
