"""Building a run's vocabulary shortlist and checking it against the whole vocabulary:
`build_shortlist` counts the training pairs' co-occurrences (`shortlist.build`), decodes the
validation split with and without the result, stores the shortlist with the run and its check
(`ShortlistCheck`) beside it as shortlist.json.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from attnmt.checkpoint import resolve_checkpoint, run_dir_of
from attnmt.data.corpora import load_corpus
from attnmt.data.splits import Example
from attnmt.evaluation import evaluate, split_examples
from attnmt.export import is_export
from attnmt.loading import ModelSpec, load
from attnmt.shortlist import Shortlist
from attnmt.shortlist import build as build_from_ids
from attnmt.shortlist import save as save_shortlist
from attnmt.translate import Translator
from attnmt.utils import Say, UserError, silent, write_text_atomic


@dataclass(frozen=True)
class ShortlistCheck:
    """A new shortlist against the whole vocabulary on the valid split: how many reference
    tokens each sentence's own candidates hold, how large a batch's vocabulary is, and how many
    outputs stay the same (greedy and the run's beam, each with and without the shortlist)."""

    sentences: int
    target_vocabulary: int
    recall: float  # share of the references' tokens (EOS excluded) among their sentence's candidates
    sentence_vocabulary: float  # mean size of one sentence's candidates, specials and frequent ones included
    batch_vocabulary: float  # mean size of a decoding batch's union of candidates
    searches: dict[str, dict[str, float]]  # "greedy" / "beam K" -> identical, full_bleu, shortlist_bleu

    def __str__(self) -> str:
        parts = [
            f"recall {100 * self.recall:.2f}% of valid reference tokens; {self.sentence_vocabulary:,.0f} candidates "
            f"per sentence, {self.batch_vocabulary:,.0f} per batch, of {self.target_vocabulary:,}"
        ]
        for name, figures in self.searches.items():
            parts.append(
                f"{name}: {figures['identical']:,.0f}/{self.sentences:,} outputs identical, BLEU "
                f"{figures['shortlist_bleu']:.2f} against {figures['full_bleu']:.2f}"
            )
        return "; ".join(parts)


def build_shortlist(spec: ModelSpec, *, per_source: int, frequent: int, say: Say = silent) -> ShortlistCheck:
    """Build the shortlist of `spec`'s run (its first path) from the run's training data, check
    it on the valid split, and store it with the run, beside it its check (`shortlist.json`)."""
    if is_export(spec.paths[0]):
        raise UserError(f"{spec.paths[0]}: an export; build the shortlist from the run, then export it again")
    translator = load(replace(spec, shortlist=False))
    run_dir = run_dir_of(resolve_checkpoint(spec.paths[0], spec.checkpoint))
    codec, data = translator.codec, translator.config.data
    pairs = load_corpus(data).train
    say(f"counting the co-occurrences of {len(pairs):,} training pairs")
    built = build_from_ids(
        [codec.encode_source(src) for src, _ in pairs],
        [codec.encode_target(tgt) for _, tgt in pairs],
        codec.src_vocab,
        codec.tgt_vocab,
        per_source=per_source,
        frequent=frequent,
    )
    examples = split_examples(data, "valid")
    check = _check_shortlist(translator, built, examples, say)
    save_shortlist(built, run_dir)
    report = {"per_source": per_source, "frequent": frequent, **asdict(check)}
    write_text_atomic(run_dir / "shortlist.json", json.dumps(report, indent=2) + "\n")
    return check


def _check_shortlist(translator: Translator, built: Shortlist, examples: Sequence[Example], say: Say) -> ShortlistCheck:
    import torch

    codec = translator.codec
    found = total = 0
    sizes = []
    for example in examples:
        src = torch.tensor([codec.encode_source(example.src)], dtype=torch.long)
        allowed = set(built.vocabulary(src).tolist())
        sizes.append(len(allowed))
        reference = codec.encode_target(example.refs[0])
        found += sum(token in allowed for token in reference)
        total += len(reference)
    batch_sizes: list[int] = []
    searches = {}
    for options in {translator.search_options(beam_size=1), translator.search_options()}:
        name = "greedy" if options.is_greedy else f"beam {options.beam_size}"
        say(f"decoding the valid split ({name}) with and without the shortlist")
        translator.shortlist = None
        full = evaluate(translator, examples, options)
        translator.shortlist = _Counting(built, batch_sizes)
        short = evaluate(translator, examples, options)
        translator.shortlist = None
        identical = sum(a == b for a, b in zip(full.hypotheses, short.hypotheses, strict=True))
        searches[name] = {"identical": identical, "full_bleu": full.bleu.score, "shortlist_bleu": short.bleu.score}
    return ShortlistCheck(
        sentences=len(examples),
        target_vocabulary=len(codec.tgt_vocab),
        recall=found / max(total, 1),
        sentence_vocabulary=sum(sizes) / max(len(sizes), 1),
        batch_vocabulary=sum(batch_sizes) / max(len(batch_sizes), 1),
        searches=dict(sorted(searches.items(), key=lambda item: item[0] != "greedy")),
    )


class _Counting:
    """A shortlist that records the size of every batch vocabulary it gives."""

    def __init__(self, built: Shortlist, sizes: list[int]):
        self.built, self.sizes = built, sizes

    def vocabulary(self, src):
        chosen = self.built.vocabulary(src)
        self.sizes.append(int(chosen.numel()))
        return chosen
