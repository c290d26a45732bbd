"""The JSON API's bodies (pydantic: FastAPI documents them, and the routes build them) and the server's limits.

Requests are strict: a number given as a string, a float where an integer belongs, or a key the
API does not know is a 422 naming the field, not a guess. Types are checked here; the limits,
which the server's operator may change, are checked against `Limits` by `check_limits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from attnmt.utils import UserError


@dataclass(frozen=True)
class Limits:
    """What one request may ask for, and how the server protects itself."""

    max_sentences: int = 64  # sentences per /v1/translate request
    max_chars: int = 1000  # characters per sentence
    max_document_chars: int = 20000  # characters per paragraph of a `document` request
    max_document_sentences: int = 256  # sentences a `document` request's paragraphs are cut into
    max_beam: int = 16  # beam size (and so n-best)
    max_length: int = 512  # output tokens per sentence, EOS included
    max_body_bytes: int = 1 << 20  # request body
    timeout_s: float = 30.0  # from arrival to answer
    max_queue: int = 256  # requests waiting to be decoded; beyond this, 503
    batching: bool = True  # decode requests that arrive together as one batch (False: one at a time)
    batch_wait_ms: float = 5.0  # how long the first request of a batch waits for others
    max_batch_sentences: int = 256  # sentences decoded together at most
    analysis_sentences: int = 2000  # test sentences in the error-analysis view

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool):
                continue
            if value < 0 or (value == 0 and name != "batch_wait_ms"):  # 0 ms: batch only what queued meanwhile
                raise InvalidLimit(f"expected a positive number, got {value:g}", field=name)


class InvalidLimit(UserError):
    """A server limit that cannot work (zero sentences, a negative timeout); `field` names the limit."""

    def __init__(self, problem: str, *, field: str):
        super().__init__(problem, field=field)


class RequestRefused(UserError):
    """A request the server will not answer: over a limit, naming no served model, or no answer
    in time; `field` is the request field, in the API's words. Answered, as every `UserError` is
    (`app.py`), with `status` (422 by default) and a JSON body naming the field and, where one
    applies, the limit."""

    def __init__(self, problem: str, *, field: str | None = None, limit: float | int | None = None, status: int = 422):
        super().__init__(problem, field=field)
        self.limit, self.status = limit, status


class _Addressed(BaseModel):
    """What every request to a model carries: which model, and optionally the languages the
    client expects it to translate between (a mismatch is a 422 naming the field)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    model: str | None = Field(None, description="a name from /v1/models (default: the first run served)")
    source_language: str | None = Field(None, description="if given, must be the model's source language")
    target_language: str | None = Field(None, description="if given, must be the model's target language")


class _Request(_Addressed):
    beam_size: int | None = Field(None, ge=1, description="default: the run's decode.beam_size; 1 = greedy")
    length_penalty: float | None = Field(
        None, ge=0, le=10, allow_inf_nan=False, description="GNMT alpha (0 = raw log-probability); default: the run's"
    )
    max_length: int | None = Field(
        None, ge=1, description="output tokens per sentence at most, EOS included (default: the run's a * S + b)"
    )


class TranslateRequest(_Request):
    sentences: list[str] = Field(min_length=1, description="raw sentences in the run's source language")
    prefixes: list[str] | None = Field(
        None,
        description='the start of each sentence\'s translation, which the search continues ("" for none); '
        "an unfinished last word is completed",
    )
    required_phrases: list[list[str]] | None = Field(
        None,
        description="per sentence, target phrases its translations must contain (terminology); "
        "a sentence may have a prefix too",
    )
    glossary: list[list[str]] | None = Field(
        None,
        description="[source, target] terms: where a source term occurs in a sentence (whole words, the run's "
        "normalization and lowercasing, the longest first), its target is required of the translation",
    )
    n_best: int = Field(1, ge=1, description="hypotheses per sentence, best first (at most beam_size)")
    return_attention: bool = Field(False, description="add each hypothesis's (target x source) attention")
    markup: Literal["html"] | None = Field(
        None,
        description="the sentences hold inline tags: taken out before translation, put back in each sentence's "
        "`markup` around the target words aligned to those they enclosed (not with prefixes); with `document`, "
        "each paragraph's tags are put back in its `paragraphs` text",
    )
    document: bool = Field(
        False,
        description="each of `sentences` is a paragraph: cut into sentences, which `translations` hold in "
        "order, and put back together in `paragraphs` with the paragraph's spacing (no prefixes or required phrases)",
    )


class ScoreRequest(_Addressed):
    sentences: list[str] = Field(min_length=1, description="raw sentences in the run's source language")
    targets: list[str] = Field(min_length=1, description="their translations, one each, to be scored")
    length_penalty: float | None = Field(
        None, ge=0, le=10, allow_inf_nan=False, description="GNMT alpha for the score; default: the run's"
    )
    return_attention: bool = Field(False, description="add each translation's (target + 1) x source attention")


class ExplainRequest(_Request):
    sentence: str = Field(description="one raw sentence")
    prefix: str = Field("", description='the start of its translation, which the search continues ("" for none)')
    required_phrases: list[str] = Field([], description="target phrases its translation must contain")


class HeadsRequest(ExplainRequest):
    """One sentence's translation, to be shown layer by layer and head by head (a transformer's)."""

    target: str | None = Field(
        None,
        description="a translation of the sentence to look at instead of the model's own: read as /v1/score "
        "reads a target (teacher forcing), so the search fields (beam_size, length_penalty, max_length, prefix, "
        "required_phrases) cannot go with it. Default (null): the sentence is translated as /v1/translate "
        "translates it with the same search fields (and the server's glossary), and that translation is shown",
    )


def check_limits(request: TranslateRequest | ExplainRequest | ScoreRequest, limits: Limits) -> None:
    """Raise RequestRefused for the first field over its limit."""
    if isinstance(request, ExplainRequest):
        named = [("sentence", request.sentence), ("prefix", request.prefix)]
        named += [(f"required_phrases[{i}]", phrase) for i, phrase in enumerate(request.required_phrases)]
        if isinstance(request, HeadsRequest) and request.target is not None:
            named.append(("target", request.target))
    else:
        if len(request.sentences) > limits.max_sentences:
            raise RequestRefused(
                f"at most {limits.max_sentences} per request, got {len(request.sentences)}",
                field="sentences",
                limit=limits.max_sentences,
            )
        named = [(f"sentences[{i}]", sentence) for i, sentence in enumerate(request.sentences)]
        if isinstance(request, TranslateRequest) and request.document:  # paragraphs: their own limit
            _check_texts(named, limits.max_document_chars, "max_document_chars")
            named = []
        named += _targets(request) if isinstance(request, ScoreRequest) else _steering(request)
    _check_texts(named, limits.max_chars, "max_chars")
    if isinstance(request, ScoreRequest):
        return
    if request.beam_size is not None and request.beam_size > limits.max_beam:
        raise RequestRefused(
            f"at most {limits.max_beam}, got {request.beam_size}", field="beam_size", limit=limits.max_beam
        )
    if request.max_length is not None and request.max_length > limits.max_length:
        raise RequestRefused(
            f"at most {limits.max_length}, got {request.max_length}", field="max_length", limit=limits.max_length
        )


def _one_each(field: str, given: list, request: TranslateRequest | ScoreRequest, what: str) -> None:
    if len(given) != len(request.sentences):
        raise RequestRefused(f"{len(given)} {what} for {len(request.sentences)} sentences: give one each", field=field)


def _targets(request: ScoreRequest) -> list[tuple[str, str]]:
    _one_each("targets", request.targets, request, "targets")
    return [(f"targets[{i}]", text) for i, text in enumerate(request.targets)]


def _steering(request: TranslateRequest) -> list[tuple[str, str]]:
    """The prefixes and required phrases, checked to come one per sentence."""
    named = []
    if request.prefixes is not None:
        _one_each("prefixes", request.prefixes, request, "prefixes")
        named += [(f"prefixes[{i}]", prefix) for i, prefix in enumerate(request.prefixes)]
    if request.required_phrases is not None:
        _one_each("required_phrases", request.required_phrases, request, "lists of required phrases")
        for i, phrases in enumerate(request.required_phrases):
            named += [(f"required_phrases[{i}]", phrase) for phrase in phrases]
    return named


def _check_texts(named: list[tuple[str, str]], most: int, limit: str) -> None:
    """Each (field, text): within `most` characters (the Limits field `limit`), and text a
    tokenizer can read."""
    for field, text in named:
        if len(text) > most:
            raise RequestRefused(f"at most {most} characters ({limit}), got {len(text)}", field=field, limit=most)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # JSON can spell lone surrogates ("\ud800"); no tokenizer can read them
            raise RequestRefused("not valid Unicode text (a lone surrogate)", field=field) from None


# --- responses: every route builds its body as one of these, so a body cannot drift from /docs ---


class _Response(BaseModel):
    """A response body: a key the model does not declare is an error (a 500), never sent."""

    model_config = ConfigDict(extra="forbid")


class Hypothesis(_Response):
    text: str
    tokens: list[str] = Field(description="target tokens, without </s>")
    score: float = Field(description="log-probability / length penalty: what the search ranked by")
    log_prob: float = Field(description="summed log-probability of the tokens and </s>")
    attention: list[list[float]] | None = Field(
        None, description="(len(tokens) + 1) x len(source_tokens); the last row is the one for </s>"
    )


class GlossaryOutcome(_Response):
    applied: list[list[str]] = Field(description="[source, target] terms the best translation contains")
    missing: list[list[str]] = Field(
        description="glossary terms (not required phrases) found in the sentence, as [source, target], whose "
        "target the best translation lacks, its length limit having left no room"
    )


class SentenceTranslation(_Response):
    source: str
    source_tokens: list[str]
    hypotheses: list[Hypothesis]
    missing_required_phrases: list[str] | None = Field(
        None,
        description="with required phrases: those the best translation lacks, its length limit having left no room",
    )
    glossary: GlossaryOutcome | None = Field(None, description="with a glossary: the terms found in the sentence")
    markup: str | None = Field(None, description="with markup: the best translation with the sentence's tags put back")


class ParagraphTranslation(_Response):
    text: str = Field(description="the paragraph's translation: its sentences' best translations, its own spacing")
    sentences: int = Field(description="how many of `translations`, the next in order, are this paragraph's")


class TranslateResponse(_Response):
    model: str
    beam_size: int
    translations: list[SentenceTranslation]
    paragraphs: list[ParagraphTranslation] | None = Field(None, description="with `document`: one per paragraph")


class ScoredTranslation(_Response):
    source: str
    target: str
    source_tokens: list[str]
    tokens: list[str] = Field(description="the target's tokens, without </s>")
    token_log_probs: list[float] = Field(description="each token's log-probability, then </s>'s")
    log_prob: float = Field(description="their sum")
    score: float = Field(description="log_prob / length penalty, as a search would rank it")
    choices: list[str] = Field(description="at each step (each token, then </s>) the model's own most probable token")
    choice_log_probs: list[float] = Field(description="their log-probabilities")
    attention: list[list[float]] | None = Field(
        None, description="(len(tokens) + 1) x len(source_tokens), under teacher forcing"
    )


class ScoreResponse(_Response):
    model: str
    scored: list[ScoredTranslation]


class Candidate(_Response):
    tokens: list[str] = Field(description="the hypothesis so far, its new token last")
    parent: int = Field(description="slot of the beam it extends, among the previous step's kept candidates")
    log_prob: float
    status: str = Field(description="finished, kept or dropped")
    slot: int = Field(description="its slot among the next step's beams; -1 unless kept")
    score: float | None = Field(description="log_prob / length penalty, when finished")
    attention: list[float] = Field(description="over the source tokens, while choosing its last token")


class ExplainResponse(_Response):
    model: str
    beam_size: int
    source_tokens: list[str]
    steps: list[list[Candidate]] = Field(description="per step, the 2K candidates ranked, best first")
    hypotheses: list[Hypothesis]


class HeadsResponse(_Response):
    model: str
    text: str = Field(description="the translation shown: the model's best, or the request's `target`")
    source_tokens: list[str] = Field(description="the source tokens (S)")
    outputs: list[str] = Field(description="the output tokens, then </s> (T + 1): what each decoder step put out")
    inputs: list[str] = Field(description="<s>, then the output tokens (T + 1): what each decoder step was fed")
    alignment_layer: int = Field(
        description="the decoder layer (from 0) whose heads' mean is the translation's own attention, as "
        "/v1/translate returns it with return_attention"
    )
    cross: list[list[list[list[float]]]] = Field(
        description="[decoder layer][head][output][source]: each output step's attention over the source "
        "(rows `outputs`, columns `source_tokens`); each row sums to 1"
    )
    encoder: list[list[list[list[float]]]] = Field(
        description="[encoder layer][head][source][source]: each source position's self-attention over the "
        "source (rows and columns `source_tokens`)"
    )
    decoder: list[list[list[list[float]]]] = Field(
        description="[decoder layer][head][output][input]: each output step's self-attention over what it was "
        "fed so far (rows `outputs`, columns `inputs`); zero above the diagonal"
    )


class ModelInfo(_Response):
    name: str
    source_language: str
    target_language: str
    architecture: dict = Field(
        description="family (rnn or transformer), its settings (rnn: rnn, attention, decoder and sizes; "
        "transformer: d_model, heads, feed_forward, layers, norm), tokenizer, parameters"
    )
    training: dict = Field(
        description="steps, validation score and minutes of the served checkpoint; started_from: the run and "
        "checkpoint a continued run began from (attnmt train --from), else null"
    )
    decoding: dict = Field(description="the run's default beam size and length penalty")
    heads: bool = Field(
        description="whether /v1/heads shows its every layer and head: a transformer (not an ensemble of them)"
    )


class ModelsResponse(_Response):
    models: list[ModelInfo] = Field(description="in the order given to `attnmt serve`; the first is the default")


class ExamplesResponse(_Response):
    model: str
    split: str = Field(description="always test")
    sentences: list[str] = Field(description="sources spread over the split")


class AnalysedSentence(_Response):
    index: int = Field(description="its line in the test split, from 0")
    source: str
    references: list[str]
    output: str = Field(description="the translation with the run's decode settings")
    chrf: float = Field(description="sentence-level chrF")
    length: int = Field(description="source length in words")


class AnalysisResponse(_Response):
    model: str
    split: str = Field(description="always test")
    beam_size: int
    bleu: float | None = Field(description="corpus BLEU of the sentences below (None for an empty split)")
    chrf: float | None = Field(description="corpus chrF of the sentences below")
    sentences: list[AnalysedSentence] = Field(description="worst chrF first")


class HealthResponse(_Response):
    status: str = Field(description="ok")
    models: list[str]
    queued: int = Field(description="requests waiting to be decoded")


class ErrorBody(_Response):
    error: str = Field(description="what was wrong, in one line")
    field: str | None = Field(None, description="the request field at fault")
    limit: int | float | None = Field(None, description="the limit it went over")
