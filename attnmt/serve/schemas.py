"""The JSON API's bodies (pydantic: FastAPI documents them, and the routes build them) and the server's limits.

Requests are strict: a number given as a string, a float where an integer belongs, or a key the
API does not know is a 422 naming the field, not a guess. Types are checked here; the limits,
which the server's operator may change, are checked against `Limits` by `check_limits`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class Limits:
    """What one request may ask for, and how the server protects itself."""

    max_sentences: int = 64  # sentences per /v1/translate request
    max_chars: int = 1000  # characters per sentence
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
                raise InvalidLimit(name, f"expected a positive number, got {value:g}")


class InvalidLimit(ValueError):
    """A server limit that cannot work (zero sentences, a negative timeout): names the field."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


class RequestRefused(Exception):
    """A request the server will not answer: over a limit, naming no served model, impossible
    search settings, or no answer in time. Answered with `status` (422 by default) and a JSON
    body naming the field and, where one applies, the limit."""

    def __init__(self, field: str, message: str, limit: float | int | None = None, status: int = 422):
        super().__init__(f"{field}: {message}")
        self.field, self.message, self.limit, self.status = field, message, limit, status


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    model: str | None = Field(None, description="a name from /v1/models (default: the first run served)")
    beam_size: int | None = Field(None, ge=1, description="default: the run's decode.beam_size; 1 = greedy")
    length_penalty: float | None = Field(
        None, ge=0, le=10, allow_inf_nan=False, description="GNMT alpha (0 = raw log-probability); default: the run's"
    )
    max_length: int | None = Field(
        None, ge=1, description="output tokens per sentence at most, EOS included (default: the run's a * S + b)"
    )


class TranslateRequest(_Request):
    sentences: list[str] = Field(min_length=1, description="raw sentences in the run's source language")
    n_best: int = Field(1, ge=1, description="hypotheses per sentence, best first (at most beam_size)")
    return_attention: bool = Field(False, description="add each hypothesis's (target x source) attention")


class ExplainRequest(_Request):
    sentence: str = Field(description="one raw sentence")


def check_limits(request: TranslateRequest | ExplainRequest, limits: Limits) -> None:
    """Raise RequestRefused for the first field over its limit."""
    if isinstance(request, TranslateRequest):
        if len(request.sentences) > limits.max_sentences:
            raise RequestRefused(
                "sentences",
                f"at most {limits.max_sentences} per request, got {len(request.sentences)}",
                limits.max_sentences,
            )
        named = [(f"sentences[{i}]", sentence) for i, sentence in enumerate(request.sentences)]
    else:
        named = [("sentence", request.sentence)]
    for field, text in named:
        if len(text) > limits.max_chars:
            raise RequestRefused(field, f"at most {limits.max_chars} characters, got {len(text)}", limits.max_chars)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # JSON can spell lone surrogates ("\ud800"); no tokenizer can read them
            raise RequestRefused(field, "not valid Unicode text (a lone surrogate)") from None
    if request.beam_size is not None and request.beam_size > limits.max_beam:
        raise RequestRefused("beam_size", f"at most {limits.max_beam}, got {request.beam_size}", limits.max_beam)
    if request.max_length is not None and request.max_length > limits.max_length:
        raise RequestRefused("max_length", f"at most {limits.max_length}, got {request.max_length}", limits.max_length)


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


class SentenceTranslation(_Response):
    source: str
    source_tokens: list[str]
    hypotheses: list[Hypothesis]


class TranslateResponse(_Response):
    model: str
    beam_size: int
    translations: list[SentenceTranslation]


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


class ModelInfo(_Response):
    name: str
    source_language: str
    target_language: str
    architecture: dict = Field(description="rnn, attention, decoder, sizes, parameters")
    training: dict = Field(description="steps, validation score and minutes of the served checkpoint")
    decoding: dict = Field(description="the run's default beam size and length penalty")


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
