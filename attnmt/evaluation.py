"""Scoring translations: `evaluate` one model on a test set, `evaluate_runs` to compare models
(with the paired bootstrap), `tune_search` to choose the beam size and length penalty on the
validation split. The checks built on it live beside it: `int8_export` (an int8 export kept
only when it scores close to float32) and `shortlist_check` (a new vocabulary shortlist against
the whole vocabulary).

`evaluate` translates the sources, then scores the detokenized text with sacreBLEU's BLEU and
chrF, tokenized lowercased BLEU (the papers' Moses-tokenized figure where the corpus ships
tokenized references, Multi30k; on attnmt's word tokens always), and BLEU by source length.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.checkpoint import training_summary
from attnmt.config import DataConfig
from attnmt.data.corpora import load_corpus, tokenized_references, tokenized_references_beside
from attnmt.data.splits import Example
from attnmt.loading import ModelSpec, load
from attnmt.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    BootstrapResult,
    BucketScore,
    Score,
    bleu,
    bleu_by_length,
    chrf,
    moses_bleu,
    paired_bootstrap,
    tokenized_bleu,
)
from attnmt.plot import length_plot
from attnmt.provenance import with_content_hash
from attnmt.search.options import SearchOptions, SearchOverrides
from attnmt.tokenize import WordTokenizer
from attnmt.translate import Translator
from attnmt.utils import Say, UserError, WriteFailed, silent, write_text_atomic
from attnmt.vocab import SPECIALS, UNK


@dataclass
class Evaluation:
    """Scores of one system on one test set, and what they were computed from."""

    sources: list[str]
    references: list[tuple[str, ...]]
    hypotheses: list[str]
    bleu: Score
    chrf: Score
    tokenized_bleu: Score  # on attnmt's word tokens
    by_length: list[BucketScore]
    lowercase: bool = False  # the model's data.lowercase, which BLEU and chrF used
    moses_bleu: Score | None = None  # the papers' metric, where the corpus ships tokenized references

    def figures(self) -> dict:
        """The numbers as plain JSON-ready values."""
        return {
            "sentences": len(self.hypotheses),
            "bleu": self.bleu.score,
            "bleu_signature": self.bleu.signature,
            "bleu_detail": self.bleu.detail,
            "length_ratio": self.bleu.length_ratio,
            "chrf": self.chrf.score,
            "chrf_signature": self.chrf.signature,
            "tokenized_bleu": self.tokenized_bleu.score,
            "tokenized_bleu_signature": self.tokenized_bleu.signature,
            # on the tokens tokenized BLEU reads, where a word model's <unk> is one token
            "tokenized_length_ratio": self.tokenized_bleu.length_ratio,
            **(
                {
                    "moses_bleu": self.moses_bleu.score,
                    "moses_bleu_signature": self.moses_bleu.signature,
                    "moses_length_ratio": self.moses_bleu.length_ratio,
                }
                if self.moses_bleu
                else {}
            ),
            "bleu_by_length": [
                {"bucket": b.label, "low": b.low, "high": b.high, "sentences": b.sentences, "bleu": b.bleu}
                for b in self.by_length
            ],
        }


def evaluate(
    translator: Translator,
    examples: Sequence[Example],
    options: SearchOptions | None = None,
    *,
    length_buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS,
    tokenized: Mapping[str, str] | None = None,
) -> Evaluation:
    """Translate the examples' sources (searched as `options` say; default: the run's decode
    settings) and score them against all their references.

    Source lengths for the buckets are word tokens (whatever the model's tokenizer), and the
    word-token BLEU word-tokenizes and lowercases both sides, so both compare across models.
    `tokenized` (each raw reference -> the dataset's own tokenized line, `corpora.tokenized_references`)
    adds the papers' Moses-tokenized BLEU; a reference it lacks is a UserError naming it.
    """
    if not examples:
        raise UserError("no sentences to evaluate on")
    data = translator.config.data
    sources = [example.src for example in examples]
    references = [tuple(example.refs) for example in examples]
    translations = translator.translate(sources, options)
    hypotheses = [t.text for t in translations]
    words = WordTokenizer(data.tgt_lang, lowercase=True, keep=[SPECIALS[UNK]])  # a word model's <unk>: one token
    papers = None
    if tokenized is not None:
        missing = next((ref for refs in references for ref in refs if ref.strip() not in tokenized), None)
        if missing is not None:
            raise UserError(f"no tokenized reference for {missing!r}: the references are not the dataset's")
        tokenized_refs = [[tokenized[ref.strip()] for ref in refs] for refs in references]
        papers = moses_bleu(hypotheses, tokenized_refs, data.tgt_lang)
    return Evaluation(
        sources=sources,
        references=references,
        hypotheses=hypotheses,
        bleu=bleu(hypotheses, references, lowercase=data.lowercase),
        chrf=chrf(hypotheses, references, lowercase=data.lowercase),
        tokenized_bleu=tokenized_bleu(
            [words.tokenize(h) for h in hypotheses], [[words.tokenize(r) for r in refs] for refs in references]
        ),
        by_length=bleu_by_length(
            [len(tokens) for tokens in map(WordTokenizer(data.src_lang).tokenize, sources)],
            hypotheses,
            references,
            edges=length_buckets,
            lowercase=data.lowercase,
        ),
        lowercase=data.lowercase,
        moses_bleu=papers,
    )


def significance(systems: Sequence[tuple[str, Evaluation]], samples: int = 1000) -> list[BootstrapResult] | None:
    """Paired bootstrap of BLEU against the first system; None unless there are several
    systems evaluated on the same sentences and references."""
    if len(systems) < 2:
        return None
    first = systems[0][1]
    if any(e.sources != first.sources or e.references != first.references for _, e in systems):
        return None
    hypotheses = [(name, evaluation.hypotheses) for name, evaluation in systems]
    return paired_bootstrap(hypotheses, first.references, samples=samples, lowercase=first.lowercase)


@dataclass
class RunEvaluation:
    """One run's scores in a comparison: its name, the checkpoint that was scored, the
    Evaluation, and the paired bootstrap against the first run (when runs share a test set)."""

    name: str
    checkpoint: Path
    evaluation: Evaluation
    bootstrap: BootstrapResult | None = None
    search: dict = field(default_factory=dict)  # the options used, and the tuning trials if tuned
    members: list[str] = field(default_factory=list)  # an ensemble's checkpoints


def run_names(runs: Sequence[str | Path]) -> list[str]:
    """Short names (the folder's name) where they are unique, else the paths as given."""
    names = [Path(run).name or str(run) for run in runs]
    return names if len(set(names)) == len(names) else [str(run) for run in runs]


def system_names(systems: Sequence[ModelSpec]) -> list[str]:
    """Each system's name: its runs' `run_names`, joined by " + " for an ensemble."""
    names = iter(run_names([path for spec in systems for path in spec.paths]))
    return [" + ".join(next(names) for _ in spec.paths) for spec in systems]


def evaluate_runs(
    systems: Sequence[ModelSpec],
    examples_for: Callable[[Translator], Sequence[Example]],
    *,
    options_for: Callable[[Translator], SearchOptions | Tuning] | None = None,
    tokenized_for: Callable[[Translator], Mapping[str, str] | None] = lambda translator: None,
    bootstrap_samples: int = 1000,
    say: Say = silent,
) -> list[RunEvaluation]:
    """Evaluate each system (a run, or an ensemble of runs; one in memory at a time) on
    `examples_for(translator)`, searched as `options_for(translator)` says (SearchOptions, or a
    Tuning that chose them; default: each run's decode settings); then, when all systems were
    scored on the same sentences and references, the paired bootstrap against the first.
    `tokenized_for(translator)`: the dataset's tokenized references, for the papers' BLEU."""
    if bootstrap_samples < 1:
        raise UserError(f"need at least 1 bootstrap sample, got {bootstrap_samples}", field="bootstrap")
    results = []
    for name, spec in zip(system_names(systems), systems, strict=True):
        translator = load(spec)
        chosen = translator.search_options() if options_for is None else options_for(translator)
        tuning, options = (chosen, chosen.options) if isinstance(chosen, Tuning) else (None, chosen)
        examples = examples_for(translator)
        say(f"{name}: {translator.checkpoint}, {len(examples):,} sentences, beam {options.beam_size}")
        search = {
            "beam_size": options.beam_size,
            "length_penalty": options.length_penalty,
            "stopping": options.stopping,
        }
        search |= {"min_length": options.min_length} if options.min_length else {}
        if tuning:
            search |= {"tuned_on": tuning.split, "trials": tuning.trials}
        members = [str(member) for member in translator.members] if len(spec.paths) > 1 else []
        evaluation = evaluate(translator, examples, options, tokenized=tokenized_for(translator))
        results.append(RunEvaluation(name, translator.checkpoint, evaluation, search=search, members=members))
    bootstrap = significance([(r.name, r.evaluation) for r in results], bootstrap_samples)
    for result, compared in zip(results, bootstrap or (None,) * len(results), strict=True):
        result.bootstrap = compared
    return results


@dataclass
class Tuning:
    """Search settings chosen on a held-out split, and every setting tried with its BLEU."""

    options: SearchOptions
    split: str
    trials: list[dict]

    def largest_chosen(self) -> list[str]:
        """The settings ("beam size", "length penalty") whose chosen value is the largest of
        several tried: the grid's edge, beyond which a larger value might score higher still."""
        beams = {t["beam_size"] for t in self.trials}
        penalties = {t["length_penalty"] for t in self.trials if t["beam_size"] > 1}
        chosen = []
        if len(beams) > 1 and self.options.beam_size == max(beams):
            chosen.append("beam size")
        if self.options.beam_size > 1 and len(penalties) > 1 and self.options.length_penalty == max(penalties):
            chosen.append("length penalty")
        return chosen


TUNE_BEAMS = (1, 3, 5, 10)
TUNE_PENALTIES = (0.0, 0.5, 1.0, 1.5, 2.0)


def tune_search(
    translator: Translator,
    examples: Sequence[Example],
    *,
    beams: Sequence[int] = TUNE_BEAMS,
    penalties: Sequence[float] = TUNE_PENALTIES,
    split: str = "valid",
    overrides: SearchOverrides | None = None,
    say: Say = silent,
) -> Tuning:
    """The beam size and length penalty with the best sacreBLEU on `examples` (a validation
    split: never the test set), trying every pair (the penalty only once for greedy search,
    which it does not change), each search with the other settings `overrides` gives (its
    stopping rule, minimum length, ...; default: the run's).
    Ties go to the smaller beam, then the smaller penalty."""
    if not examples:
        raise UserError("no validation sentences to tune on")
    if not beams or min(beams) < 1:
        raise UserError(f"expected beam sizes of at least 1, got {list(beams)}", field="tune_beams")
    if penalties and min(penalties) < 0:
        raise UserError(f"expected length penalties of at least 0, got {list(penalties)}", field="tune_penalties")
    kept = overrides or SearchOverrides()  # the settings not tuned
    base = translator.search_options(kept)
    trials = []
    for beam in sorted(set(beams)):
        for penalty in sorted(set(penalties)) if beam > 1 else [base.length_penalty]:
            options = translator.search_options(kept, beam_size=beam, length_penalty=penalty)
            score = evaluate(translator, examples, options).bleu.score
            trials.append({"beam_size": beam, "length_penalty": penalty, "bleu": score})
            say(f"tuning on {split}: beam {beam}, length penalty {penalty}: BLEU {score:.2f}")
    best = max(trials, key=lambda t: (round(t["bleu"], 6), -t["beam_size"], -t["length_penalty"]))
    chosen = translator.search_options(kept, beam_size=best["beam_size"], length_penalty=best["length_penalty"])
    return Tuning(chosen, split, trials)


def choose_search(
    translator: Translator,
    overrides: SearchOverrides | None = None,
    *,
    tune: bool = False,
    tune_beams: Sequence[int] | None = None,
    tune_penalties: Sequence[float] | None = None,
    scored: str = "test",
    valid: Callable[[], Sequence[Example]] = lambda: [],
    say: Say = silent,
) -> SearchOptions | Tuning:
    """How to search when scoring `scored` ("test", "valid", or "files" given by the user): the
    run's decode settings with those `overrides` gives; or, with `tune`, the beam size and length
    penalty that score best on the validation examples `valid()` (over `tune_beams` and
    `tune_penalties`, default TUNE_BEAMS and TUNE_PENALTIES; the other overrides kept as given).
    Tuning scores the test split only, never what it tuned on, and chooses both settings itself."""
    overrides = overrides or SearchOverrides()
    if not tune:
        if tune_beams or tune_penalties:
            field = "tune_beams" if tune_beams else "tune_penalties"
            raise UserError("a tuning grid needs tuning asked for too", field=field)
        return translator.search_options(overrides)
    if overrides.beam_size is not None or overrides.length_penalty is not None:
        raise UserError("tuning chooses the beam size and the length penalty: give neither", field="tune")
    if scored != "test":
        what = "given files" if scored == "files" else f"the {scored} split"
        raise UserError(f"tunes on the valid split and scores the test split, not {what}", field="tune")
    beams, penalties = tune_beams or TUNE_BEAMS, tune_penalties or TUNE_PENALTIES
    tuning = tune_search(translator, valid(), beams=beams, penalties=penalties, overrides=overrides, say=say)
    say(f"tuned on valid: beam {tuning.options.beam_size}, length penalty {tuning.options.length_penalty}")
    for setting in tuning.largest_chosen():  # the best may lie past the grid
        flag = "--tune-beams" if setting == "beam size" else "--tune-penalties"
        say(f"the {setting} chosen is the largest tried: a larger one may score higher ({flag} widens the grid)")
    return tuning


def write_evaluation(results: Sequence[RunEvaluation], out_dir: str | Path, test_set: dict) -> Path:
    """evaluation.json (`test_set` says what was translated, and how: the command, machine and code;
    every figure of every run; a hash of the content), hypotheses-N.txt per run and length.png
    (BLEU by source length), each written atomically."""
    out_dir = Path(out_dir)
    figures = {**test_set, "runs": []}
    try:
        for index, result in enumerate(results, 1):
            run = {
                "name": result.name,
                "checkpoint": str(result.checkpoint),
                "training": training_summary(result.checkpoint),
                "search": result.search,
                **({"members": result.members} if result.members else {}),
                **result.evaluation.figures(),
            }
            if result.bootstrap is not None:
                compared = result.bootstrap
                run["bootstrap"] = {"mean": compared.mean, "ci95": compared.ci, "p_value": compared.p_value}
            figures["runs"].append(run)
            hypotheses = "".join(line + "\n" for line in result.evaluation.hypotheses)
            write_text_atomic(out_dir / f"hypotheses-{index}.txt", hypotheses)
        length_plot(length_points(results), out_dir / "length.png")
        text = json.dumps(with_content_hash(figures), indent=2, ensure_ascii=False)
        write_text_atomic(out_dir / "evaluation.json", text + "\n")
    except WriteFailed as error:  # a full disk: the file it names, and what is intact
        error.field = "output_dir"
        raise
    except OSError as exc:
        raise UserError(f"{out_dir}: cannot write the evaluation ({exc.strerror or exc})", field="output_dir") from None
    return out_dir


def length_points(results: Sequence[RunEvaluation]) -> dict[str, list[tuple[str, float]]]:
    """Per run, (bucket label, BLEU) of BLEU by source length: what `plot.length_plot` draws."""
    return {r.name: [(bucket.label, bucket.bleu) for bucket in r.evaluation.by_length] for r in results}


def split_examples(data: DataConfig, split: str, *, cache: dict | None = None) -> list[Example]:
    """The train, valid or test examples of a run's corpus (read from its `data_dir`, else as
    `download.locate` finds it); `cache` (keyed by the data config) saves reading one corpus
    again for every run that uses it."""
    cache = {} if cache is None else cache
    key = data.model_dump_json()
    if key not in cache:
        cache[key] = load_corpus(data)
    return getattr(cache[key], split)


def split_tokenized(data: DataConfig, split: str, *, cache: dict | None = None) -> dict[str, str] | None:
    """`corpora.tokenized_references` of a run's split, read once per data config into `cache`."""
    cache = {} if cache is None else cache
    key = ("tokenized", split, data.model_dump_json())
    if key not in cache:
        cache[key] = tokenized_references(data, split)
    return cache[key]


def files_tokenized(reference_files: Sequence[str | Path]) -> dict[str, str] | None:
    """The dataset's tokenized references of one reference file given by path, where it is one of
    Multi30k's (`corpora.tokenized_references_beside`); None for several files or any other."""
    return tokenized_references_beside(reference_files[0]) if len(reference_files) == 1 else None
