"""The API's routes, on one router over the server's state (`state.ServerState`).

Every route is a plain function of its request and `state: Server`; each JSON route returns its
response model (`schemas`), which FastAPI documents at /docs and sends as built, so a body can
never differ from its documentation. Refusals are `UserError`s, raised by the library or as a
`RequestRefused` here, which the app answers with an `ErrorBody` naming the request field (see
`app.py`); a route that takes one sentence is in ONE_SENTENCE, so its fields are named singly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from importlib import resources
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from attnmt.documents import Documents
from attnmt.glossary import Glossary, glossary_of, required_phrases
from attnmt.markup import Marked, MarkupError, read_markup, tagged
from attnmt.serve.batcher import QueueFull
from attnmt.serve.catalog import sentence_json
from attnmt.serve.schemas import (
    AnalysisResponse,
    ErrorBody,
    ExamplesResponse,
    ExplainRequest,
    ExplainResponse,
    HealthResponse,
    ModelsResponse,
    ParagraphTranslation,
    RequestRefused,
    ScoreRequest,
    ScoreResponse,
    TranslateRequest,
    TranslateResponse,
    check_limits,
)
from attnmt.serve.state import Server
from attnmt.translate import MAX_SOURCE_TOKENS, Source, scored_record
from attnmt.utils import UserError

STATIC = resources.files("attnmt.serve") / "static"
ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": ErrorBody} for status in (404, 413, 422, 503)}

router = APIRouter()
LOG = logging.getLogger("attnmt.serve")


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    # str(): resources.files() is typed as a Traversable, not a path; the package is on disk, as app.py's mounts assume
    return FileResponse(str(STATIC / "index.html"))


@router.get("/health")
async def health(state: Server) -> HealthResponse:
    return HealthResponse(status="ok", models=list(state.catalog.runs), queued=state.batcher.pending())


@router.get("/metrics", include_in_schema=False)
async def metrics(state: Server) -> Response:
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/models")
async def models(state: Server) -> ModelsResponse:
    return ModelsResponse.model_validate({"models": [run.describe() for run in state.catalog.runs.values()]})


# exclude_unset: a hypothesis carries `attention` only when the request asked for it
@router.post("/v1/translate", responses=ERRORS, response_model_exclude_unset=True)
async def translate(request: TranslateRequest, state: Server) -> TranslateResponse:
    check_limits(request, state.limits)
    run = state.addressed(request)
    options = state.search_options(run, request, request.n_best)
    glossary = _glossary(request, run)
    documents, texts, marked = None, request.sentences, None
    if request.document:
        documents, texts = _documents(request, run, state.limits.max_document_sentences)
    if request.markup is not None:
        marked = _marked(request)
        texts = [sentence.text for sentence in marked]
    sources = _sources(texts, request, glossary)
    if request.prefixes is not None:  # checked alone: a bad one must not fail the batch it would join
        run.translator.check_prefixes(request.sentences, request.prefixes, options, first_number=0)
    if request.required_phrases is not None:
        run.translator.check_required_phrases(request.required_phrases, first_number=0)
    try:
        future = state.batcher.submit(run.name, sources, options)
    except QueueFull:
        limit = state.limits.max_queue
        raise RequestRefused(
            "too many requests queued; try again shortly", field="server", limit=limit, status=503
        ) from None
    translations = await state.within_timeout(asyncio.wrap_future(future))
    answers = [sentence_json(t, request.return_attention) for t in translations]
    for answer, translation in zip(answers, translations, strict=True):
        if request.required_phrases is not None:
            answer["missing_required_phrases"] = translation.missing_required_phrases
        if glossary is not None:
            answer["glossary"] = glossary.applied(translation.source, translation.missing_required_phrases).record()
    if marked is not None:
        codec, lowercase = run.translator.codec, run.translator.config.data.lowercase
        surfaces = codec.src_tokenizer.surface, codec.tgt_tokenizer.surface
        for answer, translation, sentence in zip(answers, translations, marked, strict=True):
            answer["markup"] = tagged(sentence, translation, *surfaces, lowercase)
    response = TranslateResponse.model_validate(
        {"model": run.name, "beam_size": options.beam_size, "translations": answers}
    )
    if documents is not None:
        joined = documents.joined([translations])
        response.paragraphs = [
            ParagraphTranslation(text=paragraph.join([t.text for t in done]), sentences=len(done))
            for paragraph, done in joined
        ]
    return response


def _marked(request: TranslateRequest) -> list[Marked]:
    """Each sentence's text and tags; markup that is not well-formed is a 422 naming the sentence."""
    if request.prefixes is not None:
        raise RequestRefused("prefixes cannot be combined with markup", field="prefixes")
    marked = []
    for index, sentence in enumerate(request.sentences):
        try:
            marked.append(read_markup(sentence))
        except MarkupError as error:
            raise RequestRefused(error.problem, field=f"sentences[{index}]") from None
    return marked


def _documents(request: TranslateRequest, run, most: int) -> tuple[Documents, list[str]]:
    """The request's paragraphs cut into sentences (`attnmt.documents`), at most `most` of them;
    a sentence over the model's limit is cut into parts, which the server's log tells."""

    def count_tokens(text: str) -> int:
        return len(run.translator.codec.source_tokens(text))

    documents = Documents(run.translator.config.data.src_lang, count_tokens, MAX_SOURCE_TOKENS, LOG.warning)
    sentences = list(documents.sentences(request.sentences))
    if len(sentences) > most:
        raise RequestRefused(
            f"the paragraphs hold {len(sentences)} sentences; at most {most} (max_document_sentences)",
            field="sentences",
            limit=most,
        )
    return documents, sentences


def _glossary(request: TranslateRequest, run) -> Glossary | None:
    """The request's glossary for the addressed run's languages and vocabularies, checked; the
    server's (`attnmt serve --glossary`) when it sends none (an empty list: none at all)."""
    if request.glossary is None:
        return run.glossary
    data = run.translator.config.data
    entries = []
    for index, term in enumerate(request.glossary):
        if len(term) != 2:
            raise UserError(f"glossary[{index}]: expected [source, target], got {len(term)} strings", field="glossary")
        entries.append((f"glossary[{index}]", term[0], term[1]))
    return glossary_of(entries, data.src_lang, data.lowercase, run.translator.codec.encode_target)


def _sources(texts: list[str], request: TranslateRequest, glossary: Glossary | None) -> list:
    """The sentences to translate (the request's, or its document's), each with its prefix and
    required phrases when it has them, and the targets of the glossary's terms found in it."""
    prefixes = request.prefixes or [""] * len(texts)
    given = request.required_phrases or [[] for _ in texts]
    return [
        Source(text, prefix=prefix, required_phrases=required_phrases(text, phrases, glossary))
        for text, prefix, phrases in zip(texts, prefixes, given, strict=True)
    ]


@router.post("/v1/score", responses=ERRORS, response_model_exclude_unset=True)
async def score(request: ScoreRequest, state: Server) -> ScoreResponse:
    check_limits(request, state.limits)
    run = state.addressed(request)
    options = run.options(length_penalty=request.length_penalty)
    scoring = functools.partial(run.translator.score, first_number=0)
    work = asyncio.to_thread(state.in_turn, scoring, request.sentences, request.targets, options)
    scored = await state.within_timeout(work)
    records = [scored_record(t, request.return_attention) for t in scored]
    return ScoreResponse.model_validate({"model": run.name, "scored": records})


ONE_SENTENCE = {"/v1/explain"}  # routes whose request has one sentence: `sentence`, `prefix`


@router.post("/v1/explain", responses=ERRORS)
async def explain(request: ExplainRequest, state: Server) -> ExplainResponse:
    check_limits(request, state.limits)
    run = state.addressed(request)
    options = state.search_options(run, request, n_best=1)
    options = dataclasses.replace(options, n_best=options.beam_size)  # the whole final beam

    explain = functools.partial(
        run.translator.explain, prefix=request.prefix, required_phrases=request.required_phrases
    )
    work = asyncio.to_thread(state.in_turn, explain, request.sentence, options)
    explanation = await state.within_timeout(work)
    return ExplainResponse.model_validate(run.explanation_json(explanation, options.beam_size))


@router.get("/v1/models/{name}/examples", responses=ERRORS)
async def examples(name: str, state: Server) -> ExamplesResponse:
    run = state.served(name)
    try:
        sentences = await asyncio.to_thread(run.examples)
    except UserError as error:
        raise RequestRefused(f"{name}: its test set cannot be read ({error})", field="model", status=404) from None
    return ExamplesResponse(model=run.name, split="test", sentences=sentences)


@router.get("/v1/models/{name}/analysis", responses=ERRORS)
async def analysis(name: str, state: Server) -> AnalysisResponse:
    run = state.served(name)

    translate_in_turn = functools.partial(state.in_turn, state.translate, run.name)
    try:
        body = await asyncio.to_thread(run.analysis, translate_in_turn, state.limits.analysis_sentences)
    except UserError as error:
        raise RequestRefused(f"{name}: its test set cannot be read ({error})", field="model", status=404) from None
    return AnalysisResponse.model_validate(body)
