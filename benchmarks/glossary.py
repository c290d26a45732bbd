"""A glossary on a trained run's test split: term accuracy, BLEU and time, with it and without.

    python -m benchmarks.glossary RUN_DIR [--terms 300] [--beam 5] [--data-dir DIR] [--json OUT]

The glossary comes from the run's training pairs only. Both sides are split into words as the
glossary matches them (`tokenize.WordTokenizer` with the run's lowercasing); each pair counts
each word once. For every source word seen in at least MIN_PAIRS pairs and outside the
FUNCTION_WORDS most frequent words of its side, the target word with the highest Dice
coefficient 2 c(s, t) / (c(s) + c(t)) over the pairs is its candidate translation, kept if that
coefficient is at least MIN_DICE and the target is outside its side's FUNCTION_WORDS most
frequent words; the `--terms` pairs with the highest coefficients form the glossary. Nothing of
the valid or test splits is read to build it.

On the test split, a term "should apply" where its source occurs in the sentence (as the
glossary matches) and its target in the reference: term accuracy is the share of those
occurrences whose output contains the target as whole words, decoded without the glossary and
with it. Also sacreBLEU and tokenized-lowercased BLEU of the whole split both ways, the number
of sentences the glossary changed, and the decoding time of each (one run each, the same beam,
run alone for the times to mean anything).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

from attnmt.evaluation import split_examples
from attnmt.jobs.glossary import Glossary, glossary_of
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu, tokenized_bleu
from attnmt.tokenize import WordTokenizer
from benchmarks.measure import describe_machine, measured, positive_int, run_parser, write_results

MIN_PAIRS, MIN_DICE, FUNCTION_WORDS = 20, 0.5, 100
DEFAULT_JSON = Path("benchmarks/results/glossary.json")


def word_sets(texts, tokenizer: WordTokenizer) -> list[set[str]]:
    """Each text's distinct words (only letters: numbers and punctuation make no terms)."""
    return [{word for word in tokenizer.tokenize(text) if word.isalpha()} for text in texts]


def dice_terms(pairs, source: WordTokenizer, target: WordTokenizer, count: int) -> list[tuple[str, str, float]]:
    """The `count` (source word, target word, Dice) pairs of the module docstring, best first."""
    sources, targets = word_sets([s for s, _ in pairs], source), word_sets([t for _, t in pairs], target)
    source_counts, target_counts = Counter(), Counter()
    together: Counter[tuple[str, str]] = Counter()
    for words, translations in zip(sources, targets, strict=True):
        source_counts.update(words)
        target_counts.update(translations)
        together.update((s, t) for s in words for t in translations)
    common_source = {word for word, _ in source_counts.most_common(FUNCTION_WORDS)}
    common_target = {word for word, _ in target_counts.most_common(FUNCTION_WORDS)}
    best: dict[str, tuple[float, str]] = {}
    for (s, t), joint in together.items():
        if source_counts[s] < MIN_PAIRS or s in common_source or t in common_target:
            continue
        dice = 2 * joint / (source_counts[s] + target_counts[t])
        if dice > best.get(s, (0.0, ""))[0]:
            best[s] = (dice, t)
    chosen = sorted(((dice, s, t) for s, (dice, t) in best.items() if dice >= MIN_DICE), reverse=True)[:count]
    return [(s, t, dice) for dice, s, t in chosen]


def contains(words: list[str], phrase: tuple[str, ...]) -> bool:
    return any(tuple(words[k : k + len(phrase)]) == phrase for k in range(len(words) - len(phrase) + 1))


def term_accuracy(glossary: Glossary, examples, outputs: list[str], target: WordTokenizer) -> dict:
    """Of the (sentence, term) occurrences whose target is in a reference, how many outputs have it."""
    should = right = 0
    for example, output in zip(examples, outputs, strict=True):
        written = target.tokenize(output)
        references = [target.tokenize(reference) for reference in example.refs]
        for term in glossary.match(example.src):
            phrase = tuple(target.tokenize(term.target))
            if any(contains(reference, phrase) for reference in references):
                should += 1
                right += contains(written, phrase)
    return {"occurrences": should, "right": right, "accuracy": right / should if should else None}


def measure(run_dir: str, terms: int, beam: int, data_dir: str | None) -> dict:
    translator = load(ModelSpec(run_dir, device="cpu", data_dir=data_dir))
    data = translator.config.data
    source, target = (WordTokenizer(lang, lowercase=data.lowercase) for lang in (data.src_lang, data.tgt_lang))
    chosen = dice_terms(split_examples(data, "train"), source, target, terms)
    entries = [(f"dice {dice:.2f}", s, t) for s, t, dice in chosen]
    glossary = glossary_of(entries, data.src_lang, data.lowercase, translator.codec.encode_target)
    examples = split_examples(data, "test")
    sources = [example.src for example in examples]
    references = [list(example.refs) for example in examples]
    options = translator.search_options(beam_size=beam)
    results = {}
    for name, required_phrases in (("without", None), ("with", [list(glossary.required_phrases(s)) for s in sources])):
        started = time.perf_counter()
        translations = translator.translate(sources, options, required_phrases=required_phrases, say=lambda _line: None)
        seconds = time.perf_counter() - started
        outputs = [t.text for t in translations]
        results[name] = {
            "seconds": seconds,
            "bleu": bleu(outputs, references, lowercase=data.lowercase).score,
            "tokenized_bleu": tokenized_bleu(
                [target.tokenize(o) for o in outputs], [[target.tokenize(r) for r in refs] for refs in references]
            ).score,
            "terms": term_accuracy(glossary, examples, outputs, target),
            "outputs": outputs,
            "left_out": sum(len(t.missing_required_phrases) for t in translations),
        }
    changed = sum(a != b for a, b in zip(results["without"]["outputs"], results["with"]["outputs"], strict=True))
    return {
        "machine": describe_machine("cpu"),
        "run": str(run_dir),
        "settings": {"terms": terms, "beam": beam, "min_pairs": MIN_PAIRS, "min_dice": MIN_DICE},
        "glossary": [[s, t, round(dice, 4)] for s, t, dice in chosen],
        "test_sentences": len(examples),
        "sentences_with_terms": sum(bool(glossary.match(s)) for s in sources),
        "sentences_changed": changed,
        "searches": {name: {k: v for k, v in r.items() if k != "outputs"} for name, r in results.items()},
        "time_ratio": results["with"]["seconds"] / results["without"]["seconds"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = run_parser("benchmarks.glossary", __doc__, DEFAULT_JSON)
    parser.add_argument("--terms", type=positive_int, default=300, help="glossary size (default 300)")
    args = parser.parse_args(argv)
    results = measured("benchmarks.glossary", measure, args.run_dir, args.terms, args.beam, args.data_dir)
    if results is None:  # a run or corpus that is not there, a glossary the model cannot write
        return 2
    for name, search in results["searches"].items():
        terms = search["terms"]
        print(
            f"{name:>7} glossary: term accuracy {terms['right']}/{terms['occurrences']}, BLEU {search['bleu']:.2f}, "
            f"word-tok-lc BLEU {search['tokenized_bleu']:.2f}, {search['seconds']:.1f} s"
        )
    write_results(args.json, results, "benchmarks.glossary", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
