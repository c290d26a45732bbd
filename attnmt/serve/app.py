"""The FastAPI application: `create_app(catalog, limits)`.

Laid out as FastAPI's "bigger applications": the routes on a router (`routes.py`) over one
server state (`state.py`), assembled here with the middleware that counts, times and size-limits
every request, and the handlers that turn every refusal into one JSON shape.

Routes: the page (`/`), `/v1/models`, `/v1/translate`, `/v1/score`, `/v1/explain`, `/v1/heads` (a
transformer's every layer and head), a run's test-set `examples` and `analysis`, `/health`,
`/metrics` (Prometheus), and FastAPI's `/docs`.

Whatever a client sends gets an answer in one JSON shape, `ErrorBody` `{"error", "field", "limit"}`,
with a 4xx status (503 when the server is too busy): malformed JSON, wrong types, unknown keys, a
body or a request over its limits, an unknown model, impossible search settings. A 500 would be a bug.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar, cast

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import HTTPExceptionHandler

from attnmt import __version__
from attnmt.serve.catalog import Catalog, api_field
from attnmt.serve.routes import ONE_SENTENCE, STATIC, router
from attnmt.serve.schemas import ErrorBody, Limits, RequestRefused
from attnmt.serve.state import Metrics, ServerState
from attnmt.utils import UserError
from attnmt.views import STATIC as SHARED_STATIC

UNMATCHED = "other"  # the /metrics label of a request no route matched (a 404)
_E = TypeVar("_E", bound=Exception)


def error_response(status: int, message: str, field: str | None = None, limit: float | None = None) -> JSONResponse:
    return JSONResponse(ErrorBody(error=message, field=field, limit=limit).model_dump(), status_code=status)


def _field_name(location: Sequence) -> str | None:
    """pydantic's ("body", "sentences", 3) -> "sentences[3]"; None for the body itself."""
    parts = [part for part in location if part != "body"]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


async def _invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    field = _field_name(first.get("loc", ()))
    if first.get("type") == "json_invalid":
        return error_response(422, f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'parse error')})")
    if field is None:
        what = "missing" if first.get("type") == "missing" else "not a JSON object"
        return error_response(422, f"the body is {what}: expected a JSON object (see /docs)")
    return error_response(422, f"{field}: {first.get('msg', 'invalid')}", field)


async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """FastAPI's HTTPException, and Starlette's 404 and 405."""
    if error.status_code == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8, say)
        return error_response(422, "the body is not UTF-8 JSON")
    limit = request.app.state.server.limits.max_body_bytes if error.status_code == 413 else None
    return error_response(error.status_code, str(error.detail), limit=limit)


async def _user_error(request: Request, error: UserError) -> JSONResponse:
    """Every user error under a route, the library's and the server's alike: a `RequestRefused`
    names its request field, status and limit itself; any other error's field is the library's
    (`decode.beam_size`, `prefix`), answered under the request field that set it (`api_field`)."""
    if isinstance(error, RequestRefused):
        return error_response(error.status, str(error), error.field, error.limit)
    route = request.scope.get("route")
    field = api_field(error, one_sentence=getattr(route, "path", None) in ONE_SENTENCE)
    return error_response(422, error.rendered(field), field)


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    """A bug: say so in JSON, not in a traceback."""
    return error_response(500, f"internal error ({type(error).__name__})")


def _handle(app: FastAPI, kind: type[_E], handler: Callable[[Request, _E], Awaitable[JSONResponse]]) -> None:
    """`app.add_exception_handler`, typed: Starlette calls a handler with the exceptions it was
    registered for only, but its hints take handlers of any Exception."""
    app.add_exception_handler(kind, cast(HTTPExceptionHandler, handler))


class RouteLabel:
    """The /metrics label of a request: the template of the route that matches it
    ("/v1/models/{name}/examples"; "other" when none does), never what the client typed, so the
    labels stay few. Matched with Starlette's own `matches`, before the request is answered, so
    that a request refused before routing (a body over its limit) is labelled by its route too."""

    def __init__(self, routes: Sequence[BaseRoute]):
        self.routes = [route for route in routes if isinstance(route, (Route, Mount))]

    def __call__(self, scope) -> str:
        partial = None  # the right path with another method: answered 405
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route.path
            if match is Match.PARTIAL and partial is None:
                partial = route.path
        return partial or UNMATCHED


class _Guard:
    """ASGI middleware: counts and times every request by its route, and refuses a body over its
    limit (413) whether it declares its length or streams it."""

    def __init__(self, app, *, metrics: Metrics, label: RouteLabel, max_body_bytes: int):
        self.app, self.metrics, self.label, self.max_body_bytes = app, metrics, label, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [500]
        label = self.label(scope)

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


@asynccontextmanager
async def _lifespan(app: FastAPI):
    """The batcher's worker runs while the app does."""
    state: ServerState = app.state.server
    state.start()
    yield
    await asyncio.to_thread(state.stop)


def create_app(catalog: Catalog, limits: Limits | None = None) -> FastAPI:
    """The app serving `catalog`'s runs within `limits`; its batcher starts with it and stops
    when the app shuts down (use it as a context manager, or under uvicorn)."""
    state = ServerState(catalog, limits or Limits())
    app = FastAPI(
        title="attnmt",
        version=__version__,
        description="Attention-based translation (RNN or Transformer): translate, look at the attention (a "
        "transformer's layer by layer and head by head), replay the search.",
        lifespan=_lifespan,
    )
    app.state.server = state
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.mount("/shared", StaticFiles(directory=str(SHARED_STATIC)), name="shared")  # also in the web export
    _handle(app, RequestValidationError, _invalid_request)
    _handle(app, StarletteHTTPException, _http_error)
    _handle(app, UserError, _user_error)
    _handle(app, Exception, _unexpected)
    # FastAPI keeps an included router as one route of its own: the label matches the router's routes
    label = RouteLabel([*app.routes, *router.routes])
    app.add_middleware(_Guard, metrics=state.metrics, label=label, max_body_bytes=state.limits.max_body_bytes)
    return app
