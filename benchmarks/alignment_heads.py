"""Which of a transformer's cross-attention maps gives its word alignments: every decoder layer's
heads one by one, each layer's mean over its heads, and the mean over every layer, scored against
a statistical aligner (needs `pip install eflomal`).

    python -m benchmarks.alignment_heads RUN_DIR [--beam 5] [--limit N] [--data-dir DIR] [--json OUT]

The model translates the run's test split (the first `--limit` sentences). For each translation
every layer's and head's attention is recomputed by teacher forcing (`attention_heads`), each
candidate map is turned into word links as `attnmt translate --alignment` turns the model's own
attention into links (each target word to the source word its tokens attend to most), and the
links are compared with eflomal's (Östling and Tiedemann 2016) links between the source and the
model's output, aligned together with the training pairs in both directions and intersected, as
the markup benchmark does: the alignment error rate (Och and Ney 2003, eflomal's links as sure
links) over the whole split, with precision and recall. The mean over heads is what attnmt can
choose by configuration (`model.alignment_layer`): heads are not comparable across trainings
(their order is arbitrary), layers are, so the single heads are reported for insight only.

Quality only: nothing is timed, and it may run beside other work.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from attnmt.alignment import aer
from attnmt.attention_heads import check_heads, head_attention
from attnmt.checkpoint import training_summary
from attnmt.evaluation import split_examples
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu
from attnmt.pace import pace_probe
from benchmarks.markup import intersected_links
from benchmarks.measure import describe_machine, measured, positive_int, run_parser, write_results

DEFAULT_JSON = Path("benchmarks/results/alignment-heads.json")


def candidate_maps(heads) -> dict:
    """(layer, head) -> (T + 1, S) map: every layer's heads (0, 1, ...), each layer's mean of
    heads ("mean"), and the mean over every layer ("all", "mean")."""
    layers, count = heads.cross.shape[:2]
    maps = {("all", "mean"): heads.cross.mean(dim=(0, 1))}
    for layer in range(layers):
        maps[layer, "mean"] = heads.cross[layer].mean(dim=0)
        for head in range(count):
            maps[layer, head] = heads.cross[layer, head]
    return maps


def name(layer, head) -> str:
    layers = "all layers" if layer == "all" else f"layer {layer}"
    return f"{layers}, {'mean of heads' if head == 'mean' else f'head {head}'}"


def scores(found: list[set], sure: list[set]) -> dict:
    """Corpus-level AER, precision and recall of `found` links against `sure` ones, sentence by sentence."""
    hits = sum(len(a & s) for a, s in zip(found, sure, strict=True))
    proposed, expected = sum(len(a) for a in found), sum(len(s) for s in sure)
    return {
        "aer": aer([(n, *link) for n, links in enumerate(found) for link in links],
                   [(n, *link) for n, links in enumerate(sure) for link in links]),
        "precision": hits / proposed if proposed else None,
        "recall": hits / expected if expected else None,
        "links": proposed,
    }  # fmt: skip


def measure(run_dir: str, beam: int, limit: int | None, data_dir: str | None) -> dict:
    translator = load(ModelSpec(run_dir, device="cpu", data_dir=data_dir))
    check_heads(translator)
    data = translator.config.data
    train, test = split_examples(data, "train"), split_examples(data, "test")[:limit]
    sources = [example.src for example in test]
    translations = translator.translate(sources, translator.search_options(beam_size=beam), say=lambda _line: None)
    outputs = [translation.text for translation in translations]
    train_sources, train_targets = [source for source, _ in train], [target for _, target in train]
    sure = intersected_links(train_sources + sources, train_targets + outputs)[len(train) :]
    found: dict[tuple, list[set]] = {}
    alignment_layer = None
    for translation in translations:
        if not translation.tokens:
            for links in found.values():
                links.append(set())
            continue
        heads = head_attention(translator, translation)
        alignment_layer = heads.alignment_layer
        for maps, attention in candidate_maps(heads).items():
            links = set(translator.align(dataclasses.replace(translation, attention=attention)))
            found.setdefault(maps, []).append(links)
    ranked = sorted(((maps, scores(links, sure)) for maps, links in found.items()), key=lambda item: item[1]["aer"])
    layer_means = [layer for (layer, head), _ in ranked if layer != "all" and head == "mean"]
    return {
        "machine": describe_machine("cpu"),
        "pace": pace_probe(),
        "run": str(run_dir),
        "model": {name: getattr(translator.config.model, name) for name in translator.config.model.settings()},
        "data": translator.config.data.model_dump(mode="json"),
        "training": training_summary(translator.checkpoint),
        "settings": {"beam": beam, "limit": limit, "aligner": "eflomal, intersection of both directions"},
        "test_sentences": len(sources),
        "bleu": bleu(outputs, [list(example.refs) for example in test], lowercase=data.lowercase).score,
        "eflomal_links": sum(len(links) for links in sure),
        "alignment_layer_of_the_run": alignment_layer,
        "best_layer_mean": layer_means[0] if layer_means else None,
        "candidates": [{"layer": layer, "head": head, **result} for (layer, head), result in ranked],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = run_parser("benchmarks.alignment_heads", __doc__, DEFAULT_JSON)
    parser.add_argument("--limit", type=positive_int, help="the first N test sentences (default: all)")
    args = parser.parse_args(argv)
    results = measured("benchmarks.alignment_heads", measure, args.run_dir, args.beam, args.limit, args.data_dir)
    if results is None:
        return 2
    for row in results["candidates"]:
        measured_row = f"AER {row['aer']:.3f}  P {row['precision']:.3f}  R {row['recall']:.3f}"
        print(f"{name(row['layer'], row['head']):<28} {measured_row}")
    best, bleu_score = results["best_layer_mean"], results["bleu"]
    print(f"best layer (mean of heads): {best}; BLEU {bleu_score:.2f} on {results['test_sentences']} sentences")
    write_results(args.json, results, "benchmarks.alignment_heads", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
