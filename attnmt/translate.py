"""Translation with a trained run: `Translator.from_checkpoint(run_dir).translate(sentences)`.

The path a sentence takes: source tokenizer -> source vocabulary -> `search.decode_all`
(length-sorted batches, greedy or beam) -> target vocabulary -> detokenizer. `evaluate` adds
sacreBLEU BLEU and chrF on the detokenized text, the tokenized-lowercased BLEU of older papers,
and BLEU by source length. Reading the user's text files is `textfiles` (and `corpora.read_test_files`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnmt.checkpoint import checkpoints_dir, load_trained, read_index, read_meta, resolve_checkpoint, run_dir_of
from attnmt.config import Config, DataConfig, load_config
from attnmt.corpora import Example, load_corpus
from attnmt.data import TextCodec
from attnmt.engine import OnnxModel
from attnmt.ensemble import Ensemble, check_compatible
from attnmt.export import is_export, read_export, temporary_export
from attnmt.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    BootstrapResult,
    BucketScore,
    Score,
    bleu,
    bleu_by_length,
    chrf,
    paired_bootstrap,
    tokenized_bleu,
)
from attnmt.plot import attention_grid, attention_heatmap, length_plot
from attnmt.quantize import CHOICES as QUANTIZE_CHOICES
from attnmt.quantize import quantize_export, quantize_model
from attnmt.search import BeamStep, SearchOptions, StepModel, beam_search, decode_all
from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError, choose_device, write_text_atomic

# Longer sources are cut to this many tokens (with a warning): the encoder and the search's
# length limit grow with the source, and a runaway line (a whole file without newlines)
# should cost a truncated translation, not the memory of the machine.
MAX_SOURCE_TOKENS = 250
EOS_LABEL = "</s>"
CHECKPOINT_CHOICES = ("best", "last")
ENGINES = ("auto", "torch", "onnxruntime")


def _warn(message: str) -> None:
    print(f"attnmt: warning: {message}", file=sys.stderr)


@dataclass
class Translation:
    """One translated sentence (its best hypothesis) and the rest of its n-best list.

    attention: (len(tokens) + 1, len(source_tokens)); row t is the attention while emitting
    output token t, the last row the one for </s>. The source carries no EOS, so there is no
    extra column.
    """

    source: str
    text: str
    tokens: list[str]
    source_tokens: list[str]
    score: float  # log-probability / length penalty: what the search ranked by
    log_prob: float  # summed log-probability of the tokens and </s>
    attention: torch.Tensor
    alternatives: list[Translation] = field(default_factory=list)


def _rows(attention: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """Attention with exactly `rows` rows: a search that stopped on a non-EOS special token
    leaves one row short (pad with zeros) so the (tokens + 1, S) promise always holds."""
    attention = attention[:rows, :columns]
    if attention.shape[0] < rows or attention.shape[1] < columns:
        padded = attention.new_zeros(rows, columns)
        padded[: attention.shape[0], : attention.shape[1]] = attention
        return padded
    return attention


@dataclass
class SearchCandidate:
    """One of the 2K continuations beam search ranked at one step (see `search.BeamStep`)."""

    tokens: list[str]  # the hypothesis so far, the new token last
    parent: int  # slot of the beam it extends, among the previous step's kept candidates
    log_prob: float  # summed over its tokens
    status: str  # "finished" (ended in EOS among the first K), "kept" (a beam of the next step) or "dropped"
    slot: int  # its slot among the next step's beams; -1 unless kept
    score: float | None  # log_prob / length penalty, the ranking score, when finished
    attention: list[float]  # (S,) the attention of the step that chose its last token


@dataclass
class Explanation:
    """A sentence's search step by step (candidates best first) and the translation it gave."""

    source_tokens: list[str]
    steps: list[list[SearchCandidate]]
    translation: Translation


@contextlib.contextmanager
def temporary_export_of(path: str | Path, which: str = "best", quantize: str = "none") -> Iterator[Path]:
    """Run `path` exported into a temporary folder (quantized as asked), removed on leaving the block."""
    with temporary_export(path, which) as export_dir:
        yield export_dir if quantize == "none" else quantize_export(export_dir, export_dir.with_name(quantize))


class Translator:
    """A trained model with its tokenizers, vocabularies and decoding defaults."""

    def __init__(self, model: StepModel, codec: TextCodec, config: Config, *, device: str, checkpoint: Path):
        """`model` is in eval mode on `device`; `checkpoint` is the checkpoint folder (or export
        directory) it was read from."""
        self.model = model
        self.codec = codec
        self.config = config
        self.device = device
        self.checkpoint = checkpoint

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, which: str = "best", device: str = "auto") -> Translator:
        """`path`: a run directory (its best or last checkpoint) or one checkpoint folder."""
        if which not in CHECKPOINT_CHOICES:
            raise UserError(f"checkpoint {which!r}: expected one of {', '.join(CHECKPOINT_CHOICES)}")
        try:
            device = choose_device(device)
        except UserError as error:  # its message names the config key; here it is an argument
            raise UserError(f"device: {str(error).removeprefix('train.device: ')}") from None
        trained = load_trained(path, which)
        codec = TextCodec.load(trained.run_dir, trained.config.data)
        return cls(trained.model.to(device), codec, trained.config, device=device, checkpoint=trained.checkpoint)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        which: str = "best",
        device: str = "auto",
        engine: str = "auto",
        quantize: str = "none",
    ) -> Translator:
        """A run directory, a checkpoint folder or an ONNX export, run by `engine`: torch, onnxruntime,
        or auto (onnxruntime for an export, torch otherwise). A run asked for with onnxruntime is
        exported first, into a temporary folder that is gone once its sessions are loaded.
        `quantize="int8"` quantizes a run's model dynamically (`quantize.py`), on the CPU; an
        export is quantized when it is made."""
        if engine not in ENGINES:
            raise UserError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
        if quantize not in QUANTIZE_CHOICES:
            raise UserError(f"quantize {quantize!r}: expected one of {', '.join(QUANTIZE_CHOICES)}")
        exported = is_export(path)
        if engine == "torch" and exported:
            raise UserError(f"{path}: an ONNX export has no torch weights; run it with --engine onnxruntime")
        if exported and quantize != "none" and read_export(path).manifest.get("quantization", "none") != quantize:
            raise UserError(
                f"{path}: not quantized to {quantize}; an export is quantized when it is made: "
                f"attnmt export RUN_DIR --quantize {quantize}"
            )
        if engine == "torch" or (engine == "auto" and not exported):
            if quantize == "none":
                return cls.from_checkpoint(path, which=which, device=device)
            translator = cls.from_checkpoint(path, which=which, device="cpu" if device == "auto" else device)
            translator.model = quantize_model(translator.model)
            return translator
        if device not in ("auto", "cpu"):
            raise UserError(f"device {device!r}: the onnxruntime engine runs on the CPU")
        if exported:
            return cls.from_export(path)
        with temporary_export_of(path, which, quantize) as export_dir:
            translator = cls.from_export(export_dir)
        translator.checkpoint = resolve_checkpoint(path, which)
        return translator

    @classmethod
    def from_export(cls, directory: str | Path, *, threads: int | None = None) -> Translator:
        """An ONNX export (`attnmt export`) run by onnxruntime on the CPU; `threads` for its
        sessions (default: torch's thread count)."""
        model = OnnxModel(directory, threads=threads)
        config = load_config(model.export.directory / "config.yaml")
        codec = TextCodec.load(model.export.directory, config.data)
        return cls(model, codec, config, device="cpu", checkpoint=model.export.directory)

    @classmethod
    def ensemble(
        cls,
        paths: Sequence[str | Path],
        *,
        which: str = "best",
        device: str = "auto",
        engine: str = "auto",
        quantize: str = "none",
        attention: str | int = "mean",
    ) -> Translator:
        """Runs (or checkpoints, or exports) that decode as one model, by the mean of their
        log-probabilities at every step (`ensemble.Ensemble`). They must share vocabularies and
        tokenizers. The first member's config gives the decoding defaults; `attention` is "mean"
        or the index of the member whose attention is shown."""
        if not paths:
            raise UserError("an ensemble needs at least one run")
        members = [cls.load(path, which=which, device=device, engine=engine, quantize=quantize) for path in paths]
        check_compatible([(str(path), member.codec) for path, member in zip(paths, members, strict=True)])
        first = members[0]
        model = Ensemble([member.model for member in members], attention=attention)
        return cls(model, first.codec, first.config, device=first.device, checkpoint=first.checkpoint)

    def search_options(self, **overrides) -> SearchOptions:
        """The run's `decode` settings as SearchOptions, with `overrides` (None keeps a setting);
        impossible settings are a UserError."""
        return SearchOptions.from_config(self.config.decode, **overrides)

    def translate(
        self,
        sentences: Sequence[str],
        options: SearchOptions | None = None,
        *,
        first_number: int = 1,
        warn: Callable[[str], None] = _warn,
    ) -> list[Translation]:
        """One Translation per sentence, in order, searched as `options` say (default: the run's
        decode settings). Empty or blank sentences give empty translations; sources over
        MAX_SOURCE_TOKENS are truncated with a warning that names the sentence (numbered from
        `first_number`)."""
        options = self.search_options() if options is None else options
        source_tokens = [self.codec.source_tokens(sentence) for sentence in sentences]
        for index, tokens in enumerate(source_tokens):
            if len(tokens) > MAX_SOURCE_TOKENS:
                warn(
                    f"sentence {first_number + index} has {len(tokens)} tokens; "
                    f"only its first {MAX_SOURCE_TOKENS} are translated"
                )
                source_tokens[index] = tokens[:MAX_SOURCE_TOKENS]
        hypotheses = decode_all(
            self.model,
            [self.codec.src_vocab.encode(tokens) for tokens in source_tokens],
            options,
            batch_size=self.config.decode.batch_size,
            batch_tokens=self.config.decode.batch_tokens,
            device=self.device,
        )
        results = []
        for sentence, tokens, candidates in zip(sentences, source_tokens, hypotheses, strict=True):
            # decode_all gives an empty source one empty hypothesis, so `outputs` is never empty.
            best, *alternatives = [self._translation(sentence, tokens, hypothesis) for hypothesis in candidates]
            best.alternatives = alternatives
            results.append(best)
        return results

    def explain(self, sentence: str, options: SearchOptions | None = None) -> Explanation:
        """Beam search of one sentence, every step recorded: enough to replay it. With a beam of
        one this is greedy search (two candidates a step, the best one kept)."""
        options = self.search_options() if options is None else options
        source_tokens = self.codec.source_tokens(sentence)[:MAX_SOURCE_TOKENS]
        if not source_tokens:
            raise UserError("nothing to explain: the sentence has no tokens")
        ids = self.codec.src_vocab.encode(source_tokens)
        src = torch.tensor([ids], dtype=torch.long, device=self.device)  # (1, S)
        lengths = torch.tensor([len(ids)], dtype=torch.long, device=self.device)  # (1,)
        steps: list[list[SearchCandidate]] = []
        beams: list[list[str]] = [[]]  # the live hypotheses' tokens by slot

        def record(seen: BeamStep) -> None:
            fields = (seen.tokens, seen.origin, seen.log_probs, seen.finished, seen.slot, seen.attention.float())
            rows = zip(*(field[0].tolist() for field in fields), strict=True)  # sentence 0: the only one
            candidates = []
            for token, parent, log_prob, finished, slot, attention in rows:
                if log_prob == float("-inf"):  # not a candidate (a vocabulary smaller than 2K)
                    continue
                candidates.append(
                    SearchCandidate(
                        tokens=[*beams[parent], self.codec.tgt_vocab.id_to_token(token)],
                        parent=parent,
                        log_prob=log_prob,
                        status="finished" if finished else "kept" if slot >= 0 else "dropped",
                        slot=slot,
                        score=log_prob / seen.length_penalty if finished else None,
                        attention=attention,
                    )
                )
            beams[:] = [c.tokens for c in sorted((c for c in candidates if c.slot >= 0), key=lambda c: c.slot)]
            steps.append(candidates)

        best, *alternatives = [
            self._translation(sentence, source_tokens, hypothesis)
            for hypothesis in beam_search(self.model, src, lengths, options, observer=record)[0]
        ]
        best.alternatives = alternatives
        return Explanation(source_tokens, steps, best)

    def _translation(self, sentence: str, source_tokens: list[str], hypothesis) -> Translation:
        vocab = self.codec.tgt_vocab
        tokens = [vocab.id_to_token(index) for index in hypothesis.tokens]
        return Translation(
            source=sentence,
            text=self.codec.decode_target(hypothesis.tokens),
            tokens=tokens,
            source_tokens=source_tokens,
            score=hypothesis.score,
            log_prob=hypothesis.log_prob,
            attention=_rows(hypothesis.attention.float(), len(tokens) + 1, len(source_tokens)),
        )


# --- pictures ---------------------------------------------------------------------------


def _heatmap_item(translation: Translation):
    if not translation.source_tokens:
        raise UserError("an empty sentence has no attention to draw")
    return translation.attention.numpy(), translation.source_tokens, [*translation.tokens, EOS_LABEL]


def heatmap(translation: Translation, path: str | Path, title: str = "") -> Path:
    """The attention of one translation: source tokens along x, output tokens and </s> along y."""
    return attention_heatmap(*_heatmap_item(translation), path, title=title)


def heatmap_grid(translations: Sequence[Translation], path: str | Path) -> Path:
    """Several translations' attention in one figure (empty sentences are left out)."""
    shown = [t for t in translations if t.source_tokens]
    if not shown:
        raise UserError("only empty sentences; no attention to draw")
    return attention_grid([_heatmap_item(t) for t in shown], path, titles=[t.text or "(empty)" for t in shown])


def write_heatmaps(translations: Sequence[Translation], out_dir: str | Path, first_index: int = 0) -> list[Translation]:
    """OUT_DIR/NNNN.png for each non-empty sentence, NNNN its 1-based position counted from
    `first_index` (so file names match input lines); returns the translations drawn."""
    drawn = []
    for offset, translation in enumerate(translations):
        if translation.source_tokens:
            path = Path(out_dir) / f"{first_index + offset + 1:04d}.png"
            try:
                heatmap(translation, path, title=translation.text)
            except OSError as exc:
                raise UserError(f"{out_dir}: cannot write heatmaps ({exc.strerror or exc})") from None
            drawn.append(translation)
    return drawn


# --- evaluation -------------------------------------------------------------------------


@dataclass
class Evaluation:
    """Scores of one system on one test set, and what they were computed from."""

    sources: list[str]
    references: list[tuple[str, ...]]
    hypotheses: list[str]
    bleu: Score
    chrf: Score
    tokenized_bleu: Score
    by_length: list[BucketScore]
    lowercase: bool = False  # the model's data.lowercase, which BLEU and chrF used

    def figures(self) -> dict:
        """The numbers as plain JSON-ready values."""
        return {
            "sentences": len(self.hypotheses),
            "bleu": self.bleu.score,
            "bleu_signature": self.bleu.signature,
            "bleu_detail": self.bleu.detail,
            "chrf": self.chrf.score,
            "chrf_signature": self.chrf.signature,
            "tokenized_bleu": self.tokenized_bleu.score,
            "tokenized_bleu_signature": self.tokenized_bleu.signature,
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
) -> Evaluation:
    """Translate the examples' sources (searched as `options` say; default: the run's decode
    settings) and score them against all their references.

    Source lengths for the buckets are word tokens (whatever the model's tokenizer), and the
    tokenized BLEU word-tokenizes and lowercases both sides, so both compare across models.
    """
    if not examples:
        raise UserError("no sentences to evaluate on")
    data = translator.config.data
    sources = [example.src for example in examples]
    references = [tuple(example.refs) for example in examples]
    translations = translator.translate(sources, options)
    hypotheses = [t.text for t in translations]
    words = WordTokenizer(data.tgt_lang, lowercase=True)
    source_words = WordTokenizer(data.src_lang)
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
            [len(source_words.tokenize(s)) for s in sources],
            hypotheses,
            references,
            edges=length_buckets,
            lowercase=data.lowercase,
        ),
        lowercase=data.lowercase,
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


def evaluate_runs(
    runs: Sequence[str | Path],
    examples_for: Callable[[Translator], Sequence[Example]],
    *,
    which: str = "best",
    device: str = "auto",
    engine: str = "auto",
    quantize: str = "none",
    options_for: Callable[[Translator], SearchOptions | Tuning] | None = None,
    bootstrap_samples: int = 1000,
    ensemble: bool = False,
    announce: Callable[[str], None] = lambda note: None,
) -> list[RunEvaluation]:
    """Evaluate each run (one model in memory at a time) on `examples_for(translator)`, searched
    as `options_for(translator)` says (SearchOptions, or a Tuning that chose them; default: each
    run's decode settings); then, when all runs were scored on the same sentences and
    references, the paired bootstrap against the first. With `ensemble`, the runs are one
    system that decodes by the mean of their log-probabilities."""
    if bootstrap_samples < 1:
        raise UserError(f"--bootstrap: need at least 1 bootstrap sample, got {bootstrap_samples}")
    names = run_names(runs)
    systems = (
        [(" + ".join(names), list(runs))]
        if ensemble
        else [(name, [run]) for name, run in zip(names, runs, strict=True)]
    )
    results = []
    for name, paths in systems:
        if ensemble:
            translator = Translator.ensemble(paths, which=which, device=device, engine=engine, quantize=quantize)
        else:
            translator = Translator.load(paths[0], which=which, device=device, engine=engine, quantize=quantize)
        chosen = translator.search_options() if options_for is None else options_for(translator)
        tuning = chosen if isinstance(chosen, Tuning) else None
        options = tuning.options if tuning else chosen
        examples = examples_for(translator)
        announce(f"{name}: {translator.checkpoint}, {len(examples):,} sentences, beam {options.beam_size}")
        search = {"beam_size": options.beam_size, "length_penalty": options.length_penalty}
        if tuning:
            search |= {"tuned_on": tuning.split, "trials": tuning.trials}
        members = [str(resolve_checkpoint(path, which)) for path in paths] if ensemble else []
        evaluation = evaluate(translator, examples, options)
        results.append(RunEvaluation(name, translator.checkpoint, evaluation, search=search, members=members))
    bootstrap = significance([(r.name, r.evaluation) for r in results], bootstrap_samples)
    for result, compared in zip(results, bootstrap or [None] * len(results), strict=True):
        result.bootstrap = compared
    return results


@dataclass
class Tuning:
    """Search settings chosen on a held-out split, and every setting tried with its BLEU."""

    options: SearchOptions
    split: str
    trials: list[dict]


TUNE_BEAMS = (1, 3, 5, 10)
TUNE_PENALTIES = (0.0, 0.5, 1.0, 1.5, 2.0)


def tune_search(
    translator: Translator,
    examples: Sequence[Example],
    *,
    beams: Sequence[int] = TUNE_BEAMS,
    penalties: Sequence[float] = TUNE_PENALTIES,
    split: str = "valid",
    announce: Callable[[str], None] = lambda note: None,
) -> Tuning:
    """The beam size and length penalty with the best sacreBLEU on `examples` (a validation
    split: never the test set), trying every pair (the penalty only once for greedy search,
    which it does not change). Ties go to the smaller beam, then the smaller penalty."""
    if not examples:
        raise UserError("no validation sentences to tune on")
    base = translator.search_options()
    trials = []
    for beam in sorted(set(beams)):
        for penalty in sorted(set(penalties)) if beam > 1 else [base.length_penalty]:
            options = translator.search_options(beam_size=beam, length_penalty=penalty)
            score = evaluate(translator, examples, options).bleu.score
            trials.append({"beam_size": beam, "length_penalty": penalty, "bleu": score})
            announce(f"tuning on {split}: beam {beam}, length penalty {penalty}: BLEU {score:.2f}")
    best = max(trials, key=lambda t: (round(t["bleu"], 6), -t["beam_size"], -t["length_penalty"]))
    chosen = translator.search_options(beam_size=best["beam_size"], length_penalty=best["length_penalty"])
    return Tuning(chosen, split, trials)


def write_evaluation(results: Sequence[RunEvaluation], out_dir: str | Path, test_set: dict) -> Path:
    """evaluation.json (`test_set` says what was translated; every figure of every run),
    hypotheses-N.txt per run and length.png (BLEU by source length), each written atomically."""
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
        write_text_atomic(out_dir / "evaluation.json", json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise UserError(f"{out_dir}: cannot write the evaluation ({exc.strerror or exc})") from None
    return out_dir


def training_summary(checkpoint: Path) -> dict[str, float | int | None]:
    """How the scored weights were trained, from the checkpoints' meta.json: the checkpoint's
    step, validation score and minutes of training, and the steps and minutes of the whole run
    (its last checkpoint). None where a checkpoint does not say."""
    scored = read_meta(checkpoint)
    try:
        last_name = read_index(run_dir_of(checkpoint)).last
    except UserError:  # a damaged index: the scores are still worth writing
        last_name = None
    last = read_meta(checkpoints_dir(run_dir_of(checkpoint)) / last_name) if last_name else {}
    return {
        "step": scored.get("step"),
        "valid_score": scored.get("score"),
        "minutes": _minutes(scored),
        "run_steps": last.get("step"),
        "run_minutes": _minutes(last),
    }


def _minutes(meta: dict) -> float | None:
    return None if meta.get("elapsed") is None else meta["elapsed"] / 60


def length_points(results: Sequence[RunEvaluation]) -> dict[str, list[tuple[str, float]]]:
    """Per run, (bucket label, BLEU) of BLEU by source length: what `plot.length_plot` draws."""
    return {r.name: [(bucket.label, bucket.bleu) for bucket in r.evaluation.by_length] for r in results}


def split_examples(data: DataConfig, split: str, *, data_dir: str | None = None, cache: dict | None = None) -> list:
    """The valid or test examples of a run's corpus; `cache` (keyed by the data config)
    saves reading one corpus again for every run that uses it."""
    cache = {} if cache is None else cache
    key = data.model_dump_json()
    if key not in cache:
        cache[key] = load_corpus(data, data_dir=data_dir)
    return getattr(cache[key], split)


def nbest_lines(translations: Sequence[Translation], first_index: int = 0) -> list[str]:
    """Moses-style n-best lines `i ||| text ||| score`, i counted from `first_index`."""
    lines = []
    for offset, translation in enumerate(translations):
        for candidate in [translation, *translation.alternatives]:
            lines.append(f"{first_index + offset} ||| {candidate.text} ||| {candidate.score:.4f}")
    return lines
