"""The runs a server serves: loaded once at start, looked up by name, never by a path.

A request names a model; only names from this catalog resolve, so nothing a client sends ever
reaches the file system. Each `ServedRun` also says what it is (`describe`), offers examples
from its test set and the error-analysis view of that set (both read lazily, once), and turns
`Translation`s and `Explanation`s into the API's JSON.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from attnmt.attention_heads import check_heads
from attnmt.checkpoint import training_summary
from attnmt.evaluation import split_examples
from attnmt.jobs.glossary import Glossary, read_glossary
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu, chrf, sentence_chrf
from attnmt.search.options import SearchOptions, SearchOverrides
from attnmt.tokenize import WordTokenizer
from attnmt.translate import Translator
from attnmt.translation import Explanation, Translation
from attnmt.utils import UserError

# A user error's field -> the request field that set it (the API's face of `UserError.field`);
# a request about one sentence names the per-sentence fields singly (ONE_SENTENCE).
API_FIELDS = {
    "decode.beam_size": "beam_size",
    "decode.n_best": "n_best",
    "decode.length_penalty": "length_penalty",
    "max_length": "max_length",
    "prefix": "prefixes",
    "prefixes": "prefixes",
    "required_phrases": "required_phrases",
    "glossary": "glossary",
    "document": "document",
    "markup": "markup",
    "n_best": "n_best",
    "attention": "return_attention",
    "source": "sentences",
    "target": "targets",
    "heads": "heads",  # not a request field: the model asked for (/v1/heads) has no layers of heads to show
}
ONE_SENTENCE = {"sentences": "sentence", "prefixes": "prefix", "targets": "target"}
EXAMPLES = 30  # test sources offered as examples on the page
ANALYSIS_CHUNK = 64  # test sentences translated per turn, so that requests interleave with the analysis


def api_field(error: UserError, *, one_sentence: bool = False) -> str | None:
    """The request field a user error names, in the API's words (of a request with one sentence,
    with `one_sentence`); None when no request field set it."""
    field = API_FIELDS.get(error.field or "")
    return ONE_SENTENCE.get(field, field) if one_sentence and field is not None else field


def rounded(values: Sequence) -> list:
    """Attention as JSON, nested lists of any depth: 4 decimals are plenty for a picture and keep
    the bodies small."""
    return [rounded(value) if isinstance(value, list | tuple) else round(value, 4) for value in values]


def hypothesis_json(translation: Translation, with_attention: bool) -> dict:
    body = {
        "text": translation.text,
        "tokens": translation.tokens,
        "score": translation.score,
        "log_prob": translation.log_prob,
    }
    if with_attention:
        body["attention"] = rounded(translation.attention.tolist())
    return body


def sentence_json(translation: Translation, with_attention: bool) -> dict:
    return {
        "source": translation.source,
        "source_tokens": translation.source_tokens,
        "hypotheses": [hypothesis_json(t, with_attention) for t in [translation, *translation.alternatives]],
    }


class ServedRun:
    """One trained run behind the API: its Translator and what the page shows about it."""

    def __init__(self, name: str, translator: Translator):
        self.name = name
        self.translator = translator
        self.glossary: Glossary | None = None  # `attnmt serve --glossary`: for requests without their own
        self._test: list | None = None
        self._analysis: dict | None = None
        self._lock = threading.Lock()  # one reader of the test set, one analysis at a time

    def options(self, overrides: SearchOverrides | None = None) -> SearchOptions:
        """The run's decode settings with a request's `overrides`."""
        return self.translator.search_options(overrides)

    def describe(self) -> dict:
        """The run as /v1/models lists it: its name, what the model is, and how it was trained."""
        described = self.translator.describe()
        valid_metric = described.pop("valid_metric")
        training = {
            **training_summary(self.translator.checkpoint),
            "checkpoint": self.translator.checkpoint.name,
            "valid_metric": valid_metric,  # what valid_score measures
        }
        return {"name": self.name, **described, "training": training, "heads": self.has_heads()}

    def has_heads(self) -> bool:
        """Whether its model is made of layers of heads that /v1/heads shows (a transformer, not an ensemble)."""
        try:
            check_heads(self.translator)
        except UserError:
            return False
        return True

    def _test_examples(self) -> list:
        """The run's test split (read once); a corpus that cannot be read is a UserError."""
        with self._lock:
            if self._test is None:
                self._test = split_examples(self.translator.data, "test")
            return self._test

    def examples(self) -> list[str]:
        """Up to EXAMPLES test sources, spread over the split."""
        sources = [example.src for example in self._test_examples()]
        step = max(1, len(sources) // EXAMPLES)
        return sources[::step][:EXAMPLES]

    def analysis(self, translate: Callable[[Sequence[str], SearchOptions], list[Translation]], limit: int) -> dict:
        """The first `limit` test sentences translated with the run's decode settings, each with
        its sentence-level chrF and source length in words, worst first; computed once.
        `translate` is how the server decodes (in turns, beside the live requests)."""
        examples = self._test_examples()[:limit]
        with self._lock:
            if self._analysis is None:
                self._analysis = self._analyse(examples, translate)
            return self._analysis

    def _analyse(self, examples: list, translate) -> dict:
        lowercase = self.translator.lowercase
        options = self.options()
        sources = [example.src for example in examples]
        references = [tuple(example.refs) for example in examples]
        outputs: list[str] = []
        for start in range(0, len(sources), ANALYSIS_CHUNK):
            outputs += [t.text for t in translate(sources[start : start + ANALYSIS_CHUNK], options)]
        scores = sentence_chrf(outputs, references, lowercase=lowercase)
        words = WordTokenizer(self.translator.source_language)
        columns = zip(sources, references, outputs, scores, strict=True)
        rows = [
            {
                "index": index,
                "source": source,
                "references": list(refs),
                "output": output,
                "chrf": score,
                "length": len(words.tokenize(source)),
            }
            for index, (source, refs, output, score) in enumerate(columns)
        ]
        return {
            "model": self.name,
            "split": "test",
            "beam_size": options.beam_size,
            "bleu": bleu(outputs, references, lowercase=lowercase).score if outputs else None,
            "chrf": chrf(outputs, references, lowercase=lowercase).score if outputs else None,
            "sentences": sorted(rows, key=lambda row: (row["chrf"], row["index"])),
        }

    def explanation_json(self, explanation: Explanation, beam_size: int) -> dict:
        best = explanation.translation
        return {
            "model": self.name,
            "beam_size": beam_size,
            "source_tokens": explanation.source_tokens,
            "steps": [
                [{**dataclasses.asdict(c), "attention": rounded([c.attention])[0]} for c in candidates]
                for candidates in explanation.steps
            ],
            "hypotheses": [hypothesis_json(t, True) for t in [best, *best.alternatives]],
        }


def served_name(path: Path) -> str:
    """A run directory (or export) serves as its folder's name; one checkpoint folder as run@checkpoint."""
    if path.parent.name == "checkpoints":
        return f"{path.parent.parent.name}@{path.name}"
    return path.name


def model_name(spec: ModelSpec) -> str:
    """The name a model is served under: its path's `served_name`, or its members' joined by "+"."""
    return "+".join(served_name(Path(os.path.abspath(path))) for path in spec.paths)  # symbolic links kept


class Catalog:
    """The served models by name, in the order given (the first is the default)."""

    def __init__(self, runs: Sequence[ServedRun]):
        if not runs:
            raise UserError("serve: give at least one run directory")
        self.runs = {run.name: run for run in runs}
        self.default = runs[0].name

    @classmethod
    def load(cls, models: Sequence[ModelSpec], glossary: str | None = None) -> Catalog:
        """Load every model once (`loading.load`); a missing or untrained run, or two models with
        one name, is a UserError. `glossary`: a glossary file read for each run's languages and
        vocabularies, used by every request that sends no glossary of its own."""
        names: dict[str, ModelSpec] = {}
        for spec in models:
            name = model_name(spec)
            if name in names:
                given, other = (", ".join(each.paths) for each in (spec, names[name]))
                raise UserError(f"{given}: two runs would both be served as {name!r} (the other: {other})")
            names[name] = spec
        catalog = cls([ServedRun(name, load(spec)) for name, spec in names.items()])
        if glossary:
            for run in catalog.runs.values():
                translator = run.translator
                run.glossary = read_glossary(
                    glossary, translator.source_language, translator.lowercase, translator.encode_target
                )
        return catalog

    def get(self, name: str | None) -> ServedRun:
        """The run a request names (None: the default); an unknown name is a KeyError."""
        return self.runs[self.default if name is None else name]
