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
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from attnmt.attention_heads import check_heads, head_attention
from attnmt.jobs.job import TranslationJob
from attnmt.search.options import SearchOverrides
from attnmt.serve.catalog import API_FIELDS, ServedRun, rounded, sentence_json
from attnmt.serve.schemas import (
    AnalysisResponse,
    ErrorBody,
    ExamplesResponse,
    ExplainRequest,
    ExplainResponse,
    HeadsRequest,
    HeadsResponse,
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
from attnmt.serve.state import Server, ServerState
from attnmt.translation import Source, Translation, scored_record
from attnmt.utils import UserError

STATIC = resources.files("attnmt.serve") / "static"
ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": ErrorBody} for status in (404, 413, 422, 503)}

router = APIRouter()
Result = TypeVar("Result")
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
    job = _job(request, state.search_overrides(request, request.n_best))
    job.check(spell=lambda feature: API_FIELDS.get(feature, feature))
    options = run.options(job.search)
    bound = job.bind(run.translator, default_glossary=run.glossary, bad_line=_bad_sentence, say=LOG.warning)
    sources = list(bound.sources(_lines(request)))
    if job.document and len(sources) > (most := state.limits.max_document_sentences):
        problem = f"the paragraphs hold {len(sources)} sentences; at most {most} (max_document_sentences)"
        raise RequestRefused(problem, field="sentences", limit=most)
    if request.prefixes is not None:  # checked alone: a bad one must not fail the batch it would join
        run.translator.check_prefixes(request.sentences, request.prefixes, options, first_number=0)
    if request.required_phrases is not None:
        run.translator.check_required_phrases(request.required_phrases, first_number=0)
    translations = await state.within_timeout(state.decoded(run.name, sources, options))
    finished = [unit for units in bound.finish([translations]) for unit in units]
    answers = []
    for unit in finished:
        for index, sentence in enumerate(unit.sentences):
            answer = sentence_json(sentence, request.return_attention)
            if request.required_phrases is not None:
                answer["missing_required_phrases"] = sentence.missing_required_phrases
            if unit.glossary is not None:
                answer["glossary"] = unit.glossary[index].record()
            if job.markup is not None and not job.document:  # a document's tags are its paragraph's
                answer["markup"] = unit.translation.text
            answers.append(answer)
    response = TranslateResponse.model_validate(
        {"model": run.name, "beam_size": options.beam_size, "translations": answers}
    )
    if job.document:
        response.paragraphs = [
            ParagraphTranslation(text=unit.translation.text, sentences=len(unit.sentences)) for unit in finished
        ]
    return response


def _job(request: TranslateRequest, search: SearchOverrides) -> TranslationJob:
    """The translation job a request asks for, in the job's plain values."""
    return TranslationJob(
        document=request.document,
        markup=request.markup,
        prefixes=request.prefixes is not None,
        required_phrases=request.required_phrases is not None,
        glossary=request.glossary,
        search=search,
        attention=request.return_attention,
    )


def _lines(request: TranslateRequest) -> list[str | Source]:
    """The request's sentences, each with its prefix and required phrases when it has them."""
    if request.prefixes is None and request.required_phrases is None:
        return list(request.sentences)
    prefixes = request.prefixes or [""] * len(request.sentences)
    required = request.required_phrases or [[] for _ in request.sentences]
    return [
        Source(text, prefix, tuple(phrases))
        for text, prefix, phrases in zip(request.sentences, prefixes, required, strict=True)
    ]


def _bad_sentence(number: int, problem: str) -> RequestRefused:
    """Markup that is not well-formed: a 422 naming the sentence (numbered from 1 by the job)."""
    return RequestRefused(problem, field=f"sentences[{number - 1}]")


@router.post("/v1/score", responses=ERRORS, response_model_exclude_unset=True)
async def score(request: ScoreRequest, state: Server) -> ScoreResponse:
    check_limits(request, state.limits)
    run = state.addressed(request)
    options = run.options(SearchOverrides(length_penalty=request.length_penalty))
    scoring = functools.partial(run.translator.score, first_number=0)
    work = asyncio.to_thread(state.in_turn, scoring, request.sentences, request.targets, options)
    scored = await state.within_timeout(work)
    records = [scored_record(t, request.return_attention) for t in scored]
    return ScoreResponse.model_validate({"model": run.name, "scored": records})


ONE_SENTENCE = {"/v1/explain", "/v1/heads"}  # routes whose request has one sentence: `sentence`, `prefix`


@router.post("/v1/explain", responses=ERRORS)
async def explain(request: ExplainRequest, state: Server) -> ExplainResponse:
    check_limits(request, state.limits)
    run = state.addressed(request)
    options = run.options(state.search_overrides(request))
    options = dataclasses.replace(options, n_best=options.beam_size)  # the whole final beam

    explain = functools.partial(
        run.translator.explain, prefix=request.prefix, required_phrases=request.required_phrases
    )
    work = asyncio.to_thread(state.in_turn, explain, request.sentence, options)
    explanation = await state.within_timeout(work)
    return ExplainResponse.model_validate(run.explanation_json(explanation, options.beam_size))


@router.post("/v1/heads", responses=ERRORS)
async def heads(request: HeadsRequest, state: Server) -> HeadsResponse:
    """Every layer's and head's attention of one translation, of a model made of layers of heads
    (`attention_heads`); any other model is a 422 naming `heads`, before anything is translated."""
    check_limits(request, state.limits)
    run = state.addressed(request)
    check_heads(run.translator)
    if not run.translator.count_source_tokens(request.sentence):
        raise RequestRefused("an empty sentence has no attention to show", field="sentence")
    if request.target is not None:
        given = [name for name in ("beam_size", "length_penalty", "max_length") if getattr(request, name) is not None]
        given += [name for name in ("prefix", "required_phrases") if getattr(request, name)]
        if given:
            raise RequestRefused(
                f"a given target is read, not searched for: leave out {', '.join(given)}", field=given[0]
            )
    return HeadsResponse.model_validate(await state.within_timeout(_heads_answer(request, run, state)))


async def _heads_answer(request: HeadsRequest, run: ServedRun, state: ServerState) -> dict:
    """The /v1/heads body: the request's target read by teacher forcing, or else the sentence
    translated as /v1/translate translates it (the same search, steering and server glossary, by
    the batcher), then its every head recomputed in turn."""
    if request.target is not None:
        score = functools.partial(run.translator.score, first_number=1)
        work = asyncio.to_thread(state.in_turn, score, [request.sentence], [request.target], run.options())
        [translation] = await work
    else:
        search = state.search_overrides(request)
        options = run.options(search)
        steering = Source(request.sentence, request.prefix, tuple(request.required_phrases))
        if request.prefix:  # checked alone: a bad one must not fail the batch it would join
            run.translator.check_prefixes([request.sentence], [request.prefix], options)
        if request.required_phrases:
            run.translator.check_required_phrases([request.required_phrases])
        job = TranslationJob(
            prefixes=bool(request.prefix), required_phrases=bool(request.required_phrases), search=search
        )
        bound = job.bind(run.translator, default_glossary=run.glossary, say=LOG.warning)
        [translation] = await state.decoded(run.name, list(bound.sources([steering])), options)
    return await asyncio.to_thread(_heads_json, state, run, translation)


def _heads_json(state: ServerState, run: ServedRun, translation: Translation) -> dict:
    heads = state.in_turn(head_attention, run.translator, translation)  # the model's pass takes its turn
    maps = {name: rounded(getattr(heads, name).tolist()) for name in ("cross", "encoder", "decoder")}
    return {
        "model": run.name,
        "text": translation.text,
        "source_tokens": heads.source,
        "outputs": heads.outputs,
        "inputs": heads.inputs,
        "alignment_layer": heads.alignment_layer,
        **maps,
    }


@router.get("/v1/models/{name}/examples", responses=ERRORS)
async def examples(name: str, state: Server) -> ExamplesResponse:
    run = state.served(name)
    sentences = await _reading_the_test_set(name, run.examples)
    return ExamplesResponse(model=run.name, split="test", sentences=sentences)


@router.get("/v1/models/{name}/analysis", responses=ERRORS)
async def analysis(name: str, state: Server) -> AnalysisResponse:
    run = state.served(name)
    translate_in_turn = functools.partial(state.in_turn, state.translate, run.name)
    body = await _reading_the_test_set(name, run.analysis, translate_in_turn, state.limits.analysis_sentences)
    return AnalysisResponse.model_validate(body)


async def _reading_the_test_set(name: str, work: Callable[..., Result], *args) -> Result:
    """`work(*args)` on a worker thread, a run's test set that cannot be read a 404 naming the run."""
    try:
        return await asyncio.to_thread(work, *args)
    except UserError as error:
        raise RequestRefused(f"{name}: its test set cannot be read ({error})", field="model", status=404) from None
