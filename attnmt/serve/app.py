"""The FastAPI application: `create_app(catalog, limits)`.

Routes: the page (`/`), `/v1/models`, `/v1/translate`, `/v1/explain`, a run's test-set
`examples` and `analysis`, `/health`, `/metrics` (Prometheus), and FastAPI's `/docs`.

Whatever a client sends gets an answer in one JSON shape, `{"error", "field", "limit"}`, with a
4xx status (503 when the server is too busy): malformed JSON, wrong types, unknown keys, a body
or a request over its limits, an unknown model, impossible search settings. A 500 would be a bug.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections.abc import Sequence
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from attnmt import __version__
from attnmt.search import SearchOptions
from attnmt.serve.batcher import Batcher, QueueFull
from attnmt.serve.catalog import Catalog, ServedRun, api_field, sentence_json
from attnmt.serve.schemas import (
    ErrorBody,
    ExplainRequest,
    ExplainResponse,
    Limits,
    ModelInfo,
    RequestRefused,
    TranslateRequest,
    TranslateResponse,
    check_limits,
)
from attnmt.translate import Translation
from attnmt.utils import UserError

STATIC = resources.files("attnmt.serve") / "static"
ERRORS = {status: {"model": ErrorBody} for status in (404, 413, 422, 503)}
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def error_response(status: int, message: str, field: str | None = None, limit: float | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field, "limit": limit}, status_code=status)


def _field_name(location: Sequence) -> str | None:
    """pydantic's ("body", "sentences", 3) -> "sentences[3]"; None for the body itself."""
    parts = [part for part in location if part != "body"]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


def _validation_response(error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    field = _field_name(first.get("loc", ()))
    if first.get("type") == "json_invalid":
        return error_response(422, f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'parse error')})")
    if field is None:
        what = "missing" if first.get("type") == "missing" else "not a JSON object"
        return error_response(422, f"the body is {what}: expected a JSON object (see /docs)")
    return error_response(422, f"{field}: {first.get('msg', 'invalid')}", field)


class _Metrics:
    """Prometheus counters of one app (its own registry, so apps in one process stay apart)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("attnmt_requests", "HTTP requests answered", ["path", "status"], registry=self.registry)
        self.latency = Histogram(
            "attnmt_request_seconds",
            "time from arrival to answer",
            ["path"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch = Histogram(
            "attnmt_batch_sentences", "sentences decoded together", buckets=BATCH_BUCKETS, registry=self.registry
        )
        self.queue = Gauge("attnmt_queue_requests", "requests waiting to be decoded", registry=self.registry)

    @staticmethod
    def path_label(path: str) -> str:
        """A bounded set of labels: a route's template, never what a client typed."""
        if path in ("/", "/health", "/metrics", "/docs", "/openapi.json", "/v1/models", "/v1/translate", "/v1/explain"):
            return path
        match = re.fullmatch(r"/v1/models/[^/]+/(examples|analysis)", path)
        if match:
            return f"/v1/models/{{name}}/{match.group(1)}"
        return "/static" if path.startswith("/static/") else "other"


class _Guard:
    """ASGI middleware: counts and times every request, and refuses a body over its limit (413)
    whether it declares its length or streams it."""

    def __init__(self, app, *, metrics: _Metrics, max_body_bytes: int):
        self.app, self.metrics, self.max_body_bytes = app, metrics, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [500]
        label = self.metrics.path_label(scope["path"])

        async def counting_send(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            declared = dict(scope["headers"]).get(b"content-length")
            if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
                await self._too_large(scope, receive, counting_send)
            else:
                await self.app(scope, self._limited(receive), counting_send)
        finally:
            self.metrics.requests.labels(label, str(status[0])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)

    def _limited(self, receive):
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:  # FastAPI passes an HTTPException from reading the body on
                raise HTTPException(413, "the body is too large")
            return message

        return limited_receive

    async def _too_large(self, scope, receive, send):
        response = error_response(413, f"the body is over {self.max_body_bytes:,} bytes", limit=self.max_body_bytes)
        await response(scope, receive, send)


def create_app(catalog: Catalog, limits: Limits | None = None) -> FastAPI:
    """The app serving `catalog`'s runs within `limits`; its batcher starts with it and stops
    when the app shuts down (use it as a context manager, or under uvicorn)."""
    limits = limits or Limits()
    metrics = _Metrics()
    compute_lock = threading.Lock()

    def translate(model: str, sentences: Sequence[str], options: SearchOptions) -> list[Translation]:
        return catalog.get(model).translator.translate(sentences, options, say=lambda message: None)

    state: dict[str, Batcher] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state["batcher"] = Batcher(
            translate,
            compute_lock=compute_lock,
            max_queue=limits.max_queue,
            batching=limits.batching,
            wait_ms=limits.batch_wait_ms,
            max_batch_sentences=limits.max_batch_sentences,
            on_batch=metrics.batch.observe,
        )
        metrics.queue.set_function(state["batcher"].pending)
        yield
        await asyncio.to_thread(state.pop("batcher").close)

    app = FastAPI(
        title="attnmt",
        version=__version__,
        description="Attention-based RNN translation: translate, look at the attention, replay the search.",
        lifespan=lifespan,
    )
    app.add_middleware(_Guard, metrics=metrics, max_body_bytes=limits.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request, error: RequestValidationError):
        return _validation_response(error)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's HTTPException, and Starlette's 404 and 405
    async def http_error(request, error: StarletteHTTPException):
        if error.status_code == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8, say)
            return error_response(422, "the body is not UTF-8 JSON")
        limit = limits.max_body_bytes if error.status_code == 413 else None
        return error_response(error.status_code, str(error.detail), limit=limit)

    @app.exception_handler(RequestRefused)
    async def over_limit(request, error: RequestRefused):
        return error_response(error.status, str(error), error.field, error.limit)

    @app.exception_handler(Exception)
    async def unexpected(request, error: Exception):  # a bug: say so in JSON, not in a traceback
        return error_response(500, f"internal error ({type(error).__name__})")

    def served(name: str | None) -> ServedRun:
        try:
            return catalog.get(name)
        except KeyError:
            served = ", ".join(catalog.runs)
            raise RequestRefused("model", f"{name!r} is not served; served: {served}", status=404) from None

    def search_options(run: ServedRun, request, n_best: int = 1) -> SearchOptions:
        try:
            return run.options(request.beam_size, n_best, request.length_penalty, request.max_length)
        except UserError as error:
            raise RequestRefused(api_field(error) or "beam_size", error.problem) from None

    async def answer_within_limit(work):
        """The awaitable's result, or 503 when it takes longer than the request timeout."""
        try:
            return await asyncio.wait_for(work, limits.timeout_s)
        except TimeoutError:
            raise RequestRefused(
                "timeout_s", f"no answer within {limits.timeout_s:g} s", limits.timeout_s, 503
            ) from None

    def batcher() -> Batcher:
        if "batcher" not in state:
            raise RequestRefused("server", "not started (run it under uvicorn or in a TestClient context)", status=503)
        return state["batcher"]

    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "models": list(catalog.runs), "queued": batcher().pending()}

    @app.get("/metrics", include_in_schema=False)
    async def prometheus():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models", response_model=dict[str, list[ModelInfo]])
    async def models():
        return JSONResponse({"models": [run.describe() for run in catalog.runs.values()]})

    @app.post("/v1/translate", response_model=TranslateResponse, responses=ERRORS)
    async def translate_sentences(request: TranslateRequest):
        check_limits(request, limits)
        run = served(request.model)
        options = search_options(run, request, request.n_best)
        try:
            future = batcher().submit(run.name, request.sentences, options)
        except QueueFull:
            raise RequestRefused(
                "server", "too many requests queued; try again shortly", limits.max_queue, 503
            ) from None
        translations = await answer_within_limit(asyncio.wrap_future(future))
        return JSONResponse(
            {
                "model": run.name,
                "beam_size": options.beam_size,
                "translations": [sentence_json(t, request.return_attention) for t in translations],
            }
        )

    @app.post("/v1/explain", response_model=ExplainResponse, responses=ERRORS)
    async def explain(request: ExplainRequest):
        check_limits(request, limits)
        run = served(request.model)
        options = search_options(run, request, n_best=1)
        options = dataclasses.replace(options, n_best=options.beam_size)  # the whole final beam

        def work():
            with compute_lock:
                return run.translator.explain(request.sentence, options)

        try:
            explanation = await answer_within_limit(asyncio.to_thread(work))
        except UserError as error:  # an empty sentence
            raise RequestRefused("sentence", str(error)) from None
        return JSONResponse(run.explanation_json(explanation, options.beam_size))

    @app.get("/v1/models/{name}/examples", responses=ERRORS)
    async def examples(name: str) -> dict:
        run = served(name)
        try:
            sentences = await asyncio.to_thread(run.examples)
        except UserError as error:
            raise RequestRefused("model", f"{name}: its test set cannot be read ({error})", status=404) from None
        return {"model": run.name, "split": "test", "sentences": sentences}

    @app.get("/v1/models/{name}/analysis", responses=ERRORS)
    async def analysis(name: str):
        run = served(name)

        def translate_in_turn(sentences, options):
            with compute_lock:
                return translate(run.name, sentences, options)

        try:
            body = await asyncio.to_thread(run.analysis, translate_in_turn, limits.analysis_sentences)
        except UserError as error:
            raise RequestRefused("model", f"{name}: its test set cannot be read ({error})", status=404) from None
        return JSONResponse(body)

    return app
