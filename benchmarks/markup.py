"""Inline markup on a run's test split: tags put on source spans, carried to the translation through
its attention, checked against a statistical aligner's alignment (needs `pip install eflomal`).

    python -m benchmarks.markup RUN_DIR [--beam 5] [--seed 0] [--data-dir DIR] [--json OUT]

The tagged test set: in each test sentence one span of SPAN_WORDS[0]..SPAN_WORDS[1] consecutive
source words (whitespace-separated, as `attnmt.jobs.markup` counts them), drawn with `--seed` among the
spans that eflomal (Östling and Tiedemann 2016, a Bayesian IBM-model aligner) aligns to a
consistent target phrase of the reference (every link from the span lands in one contiguous run of
reference words that links nowhere else), is wrapped in `<b>...</b>`; a sentence without such a
span is left untagged and not counted. eflomal aligns the training pairs with the test pairs, both
directions, and keeps the links both directions agree on (intersection: few and sure).

The model under test translates the tagged sentences with the markup path of `attnmt translate
--markup html`. Measured: the share of outputs that read back as well-formed markup with every
tag of their input; where the tag landed against where eflomal's alignment of the source to the
model's own output puts it (the same intersection, over the training pairs plus the (source,
output) pairs): the share of sentences where the two spans are the same words, and the word-level
F1 of the words each puts inside the tag, over the tagged sentences where eflomal links the span to
at least one output word; and BLEU of the outputs with their tags taken out against the untagged
test split's translation.

Quality only: nothing is timed, and it may run beside other work.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

from attnmt.evaluation import split_examples
from attnmt.jobs.markup import Element, MarkupError, read_markup, tagged
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu
from attnmt.utils import UserError
from benchmarks.measure import describe_machine, measured, run_parser, write_results

SPAN_WORDS = (1, 3)
DEFAULT_JSON = Path("benchmarks/results/markup.json")
PUNCTUATION = ".,;:!?\"'()"


def aligner_words(text: str) -> str:
    """A sentence as eflomal reads it: its whitespace-separated words (so that word k is the
    markup's word k), lowercased, punctuation at their ends taken off (a word of punctuation only
    kept as it is)."""
    return " ".join(word.lower().strip(PUNCTUATION) or word for word in text.split())


def intersected_links(sources: list[str], targets: list[str]) -> list[set[tuple[int, int]]]:
    """eflomal's links (source word, target word) of each pair that both directions agree on."""
    import eflomal

    with tempfile.TemporaryDirectory(prefix="attnmt-markup-") as folder:
        paths = {name: Path(folder) / name for name in ("src", "trg", "fwd", "rev")}
        paths["src"].write_text("".join(aligner_words(s) + "\n" for s in sources), encoding="utf-8")
        paths["trg"].write_text("".join(aligner_words(t) + "\n" for t in targets), encoding="utf-8")
        with open(paths["src"], encoding="utf-8") as src, open(paths["trg"], encoding="utf-8") as trg:
            links = {"links_filename_fwd": str(paths["fwd"]), "links_filename_rev": str(paths["rev"])}
            eflomal.Aligner().align(src, trg, **links)
        directions = [paths[name].read_text(encoding="utf-8").splitlines() for name in ("fwd", "rev")]
    return [_pairs(forward) & _pairs(reverse) for forward, reverse in zip(*directions, strict=True)]


def _pairs(line: str) -> set[tuple[int, int]]:
    return {tuple(int(k) for k in link.split("-")) for link in line.split()}  # type: ignore[misc]


def consistent_spans(links: set[tuple[int, int]], words: int) -> list[tuple[int, int, int, int]]:
    """(first, last) source spans of SPAN_WORDS words whose links land in one contiguous run of
    target words (first, last) that links to no source word outside the span."""
    spans = []
    for length in range(SPAN_WORDS[0], SPAN_WORDS[1] + 1):
        for first in range(words - length + 1):
            last = first + length - 1
            targets = {t for s, t in links if first <= s <= last}
            if not targets:
                continue
            low, high = min(targets), max(targets)
            if all(first <= s <= last for s, t in links if low <= t <= high):
                spans.append((first, last, low, high))
    return spans


def wrap(sentence: str, first: int, last: int) -> str:
    """`sentence` with words first..last (whitespace-separated, from 0) inside <b>...</b>."""
    words = sentence.split()
    return " ".join([*words[:first], "<b>" + " ".join(words[first : last + 1]) + "</b>", *words[last + 1 :]])


def tag_span(output: str) -> tuple[int, int] | None:
    """The words (first, last) the <b> element of a tagged output holds, None when it holds none."""
    marked = read_markup(output)
    element = next(node for node in marked.root.children if isinstance(node, Element))
    before = len(marked.text[: element.start].split())
    inside = len(marked.text[element.start : element.end].split())
    return (before, before + inside - 1) if inside else None


def span_f1(placed: tuple[int, int] | None, expected: tuple[int, int]) -> float:
    if placed is None:
        return 0.0
    ours, theirs = set(range(placed[0], placed[1] + 1)), set(range(expected[0], expected[1] + 1))
    overlap = len(ours & theirs)
    return 0.0 if not overlap else 2 * overlap / (len(ours) + len(theirs))


def measure(run_dir: str, beam: int, seed: int, data_dir: str | None) -> dict:
    translator = load(ModelSpec(run_dir, device="cpu", data_dir=data_dir))
    data = translator.config.data
    train, test = split_examples(data, "train"), split_examples(data, "test")
    if any(len(example.refs) != 1 for example in test):
        raise UserError(f"{run_dir}: its test split has several references a sentence; the benchmark needs one")
    train_sources, train_targets = [source for source, _ in train], [target for _, target in train]
    sources, references = [e.src for e in test], [e.refs[0] for e in test]
    reference_links = intersected_links(train_sources + sources, train_targets + references)[len(train) :]
    rng = random.Random(seed)
    chosen: dict[int, tuple[int, int, int, int]] = {}
    for index, (source, links) in enumerate(zip(sources, reference_links, strict=True)):
        if spans := consistent_spans(links, len(source.split())):
            chosen[index] = rng.choice(spans)
    inputs = [wrap(sources[i], *chosen[i][:2]) if i in chosen else sources[i] for i in range(len(sources))]
    marked = [read_markup(line) for line in inputs]
    options = translator.search_options(beam_size=beam)
    translations = translator.translate([m.text for m in marked], options, say=lambda _line: None)
    codec = translator.codec
    surfaces = codec.src_tokenizer.surface, codec.tgt_tokenizer.surface
    outputs = [tagged(m, t, *surfaces, data.lowercase) for m, t in zip(marked, translations, strict=True)]
    plain_outputs = [t.text for t in translations]
    output_links = intersected_links(train_sources + sources, train_targets + plain_outputs)[len(train) :]

    well_formed, same, f1s, scored = 0, 0, [], 0
    for index in sorted(chosen):
        output = outputs[index]
        try:
            back = read_markup(output)
        except MarkupError:
            continue
        kept = output.count("<b>") == output.count("</b>") == 1 and back.text.split() == plain_outputs[index].split()
        well_formed += kept
        first, last = chosen[index][:2]
        linked = sorted({t for s, t in output_links[index] if first <= s <= last})
        if not linked:
            continue
        scored += 1
        expected, placed = (linked[0], linked[-1]), tag_span(output)
        same += placed == expected
        f1s.append(span_f1(placed, expected))
    stripped = [read_markup(output).text for output in outputs]
    refs = [[reference] for reference in references]
    return {
        "machine": describe_machine("cpu"),
        "run": str(run_dir),
        "settings": {"beam": beam, "seed": seed, "span_words": list(SPAN_WORDS), "aligner": "eflomal, intersection"},
        "test_sentences": len(sources),
        "tagged_sentences": len(chosen),
        "well_formed": well_formed,
        "well_formed_share": well_formed / len(chosen) if chosen else None,
        "scored_sentences": scored,
        "same_span_share": same / scored if scored else None,
        "span_f1": sum(f1s) / len(f1s) if f1s else None,
        "bleu_without_tags": bleu(stripped, refs, lowercase=data.lowercase).score,
        "bleu_untagged_input": bleu(plain_outputs, refs, lowercase=data.lowercase).score,
        "examples": [[inputs[i], outputs[i]] for i in sorted(chosen)[:5]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = run_parser("benchmarks.markup", __doc__, DEFAULT_JSON)
    parser.add_argument("--seed", type=int, default=0, help="of the tagged spans")
    args = parser.parse_args(argv)
    results = measured("benchmarks.markup", measure, args.run_dir, args.beam, args.seed, args.data_dir)
    if results is None:
        return 2
    print(
        f"{results['tagged_sentences']} of {results['test_sentences']} sentences tagged; well-formed "
        f"{results['well_formed_share']:.1%}; on {results['scored_sentences']} the tag holds eflomal's words in "
        f"{results['same_span_share']:.1%}, F1 {results['span_f1']:.3f}; BLEU without tags "
        f"{results['bleu_without_tags']:.2f} (untagged {results['bleu_untagged_input']:.2f})"
    )
    write_results(args.json, results, "benchmarks.markup", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
