"""Document mode on paragraphs built from a run's test split: BLEU against reading each paragraph as one line.

    python -m benchmarks.documents RUN_DIR [--beam 5] [--seed 0] [--data-dir DIR] [--json OUT]

The paragraphs: the test split's sentences in their order, taken in groups of SIZES[0]..SIZES[1]
consecutive sentences (group sizes drawn with `--seed`), each group's sources joined with one
space into a paragraph and its references joined the same way. Every sentence is kept as the
corpus has it: Multi30k's English sentences mostly end in a full stop, and those that do not
give the splitter no boundary to find, which the result counts (`paragraphs_split_as_built`).

Three ways to translate the same paragraphs, each scored against the joined references with
sacreBLEU, the tokenized-lowercased BLEU of older papers and chrF, with the hypothesis/reference
length ratio:

    document     `attnmt translate --document`'s path (`attnmt.jobs.documents`): cut by the splitter,
                 translated as sentences, put back with the paragraph's spacing
    line         each paragraph translated as one line, as without --document
    sentences    the corpus's own sentences translated one by one and joined: what the
                 document mode would give with a perfect splitter

Quality only: nothing is timed, and it may run beside other work.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from attnmt.evaluation import split_examples
from attnmt.jobs.documents import Documents
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu, chrf, tokenized_bleu
from attnmt.tokenize import WordTokenizer
from attnmt.translate import MAX_SOURCE_TOKENS
from attnmt.utils import UserError
from benchmarks.measure import describe_machine, measured, run_parser, write_results

SIZES = (2, 5)  # sentences per paragraph, both ends included
DEFAULT_JSON = Path("benchmarks/results/documents.json")


def paragraphs(count: int, seed: int) -> list[range]:
    """Consecutive groups of SIZES sentences covering 0..count-1 (the last group may be shorter)."""
    rng, groups, start = random.Random(seed), [], 0
    while start < count:
        size = rng.randint(*SIZES)
        groups.append(range(start, min(start + size, count)))
        start += size
    return groups


def measure(run_dir: str, beam: int, seed: int, data_dir: str | None) -> dict:
    translator = load(ModelSpec(run_dir, device="cpu", data_dir=data_dir))
    data = translator.config.data
    examples = split_examples(data, "test")
    if any(len(example.refs) != 1 for example in examples):
        raise UserError(f"{run_dir}: its test split has several references a sentence; joining needs one")
    groups = paragraphs(len(examples), seed)
    sources = [" ".join(examples[i].src for i in group) for group in groups]
    references = [[" ".join(examples[i].refs[0] for i in group)] for group in groups]
    options = translator.search_options(beam_size=beam)

    def translated(texts: list[str]) -> list[str]:
        return [t.text for t in translator.translate(texts, options, say=lambda _line: None)]

    def count_tokens(text: str) -> int:
        return len(translator.codec.source_tokens(text))

    documents = Documents(data.src_lang, count_tokens, MAX_SOURCE_TOKENS, lambda _line: None)
    cut = list(documents.sentences(sources))
    joined = list(documents.joined([translated(cut)]))
    alone = translated([example.src for example in examples])
    outputs = {
        "document": [paragraph.join(done) for paragraph, done in joined],
        "line": translated(sources),
        "sentences": [" ".join(alone[i] for i in group) for group in groups],
    }
    target = WordTokenizer(data.tgt_lang, lowercase=data.lowercase)
    ways = {}
    for name, hypotheses in outputs.items():
        scored = bleu(hypotheses, references, lowercase=data.lowercase)
        ways[name] = {
            "bleu": scored.score,
            "length_ratio": scored.length_ratio,
            "tokenized_bleu": tokenized_bleu(
                [target.tokenize(h) for h in hypotheses], [[target.tokenize(r) for r in refs] for refs in references]
            ).score,
            "chrf": chrf(hypotheses, references, lowercase=data.lowercase).score,
        }
    found = [len(paragraph.sentences) for paragraph, _ in joined]
    return {
        "machine": describe_machine("cpu"),
        "run": str(run_dir),
        "settings": {"beam": beam, "seed": seed, "sentences_per_paragraph": list(SIZES)},
        "test_sentences": len(examples),
        "paragraphs": len(groups),
        "sentences_found": sum(found),
        "paragraphs_split_as_built": sum(n == len(group) for n, group in zip(found, groups, strict=True)),
        "sources_ending_in_punctuation": sum(example.src.rstrip()[-1:] in ".!?" for example in examples),
        "ways": ways,
    }


def main(argv: list[str] | None = None) -> int:
    parser = run_parser("benchmarks.documents", __doc__, DEFAULT_JSON)
    parser.add_argument("--seed", type=int, default=0, help="of the paragraph sizes")
    args = parser.parse_args(argv)
    results = measured("benchmarks.documents", measure, args.run_dir, args.beam, args.seed, args.data_dir)
    if results is None:
        return 2
    print(
        f"{results['paragraphs']} paragraphs of {results['test_sentences']} sentences; the splitter found "
        f"{results['sentences_found']} sentences, {results['paragraphs_split_as_built']} paragraphs as built"
    )
    for name, way in results["ways"].items():
        print(
            f"{name:>9}: BLEU {way['bleu']:.2f}, word-tok-lc BLEU {way['tokenized_bleu']:.2f}, chrF {way['chrf']:.2f}"
        )
    write_results(args.json, results, "benchmarks.documents", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
