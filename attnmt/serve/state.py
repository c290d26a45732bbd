"""One server's state, in one object: the runs, the limits, the metrics, the batcher.

`create_app` makes one `ServerState` and keeps it on `app.state.server`; every route receives it
through the `server` dependency, so routes are plain functions of a request and this object,
with nothing captured in closures. The batcher's worker thread starts with the app (`start`) and
stops with it (`stop`); until then a translation is refused with a 503.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from attnmt.search.options import SearchOptions, SearchOverrides
from attnmt.serve.batcher import Batcher, QueueFull
from attnmt.serve.catalog import Catalog, ServedRun
from attnmt.serve.schemas import ExplainRequest, Limits, RequestRefused, ScoreRequest, TranslateRequest
from attnmt.translation import Source, Translation

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
Result = TypeVar("Result")


class Metrics:
    """Prometheus metrics of one app (its own registry, so apps in one process stay apart)."""

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


@dataclass
class ServerState:
    """What the routes share. `compute_lock` is held by whatever decodes (the batcher's batches,
    an explanation, the test-set analysis), so they take turns instead of competing for the cores."""

    catalog: Catalog
    limits: Limits
    metrics: Metrics = field(default_factory=Metrics)
    compute_lock: threading.Lock = field(default_factory=threading.Lock)
    _batcher: Batcher | None = field(default=None, init=False)

    def start(self) -> None:
        self._batcher = Batcher(
            self.translate,
            compute_lock=self.compute_lock,
            max_queue=self.limits.max_queue,
            batching=self.limits.batching,
            wait_ms=self.limits.batch_wait_ms,
            max_batch_sentences=self.limits.max_batch_sentences,
            on_batch=self.metrics.batch.observe,
        )
        self.metrics.queue.set_function(self._batcher.pending)

    def stop(self) -> None:
        """Finish what is queued, then stop the batcher's worker."""
        batcher, self._batcher = self._batcher, None
        if batcher is not None:
            batcher.close()

    @property
    def batcher(self) -> Batcher:
        if self._batcher is None:
            raise RequestRefused(
                "not started (run it under uvicorn or in a TestClient context)", field="server", status=503
            )
        return self._batcher

    def translate(self, model: str, sentences: Sequence[str | Source], options: SearchOptions) -> list[Translation]:
        """Decode now, on the calling thread (the batcher's worker calls this with the lock held)."""
        translator = self.catalog.get(model).translator
        return translator.translate_sources(sentences, options, say=lambda message: None)

    async def decoded(self, model: str, sources: Sequence[str | Source], options: SearchOptions) -> list[Translation]:
        """`sources` decoded by the batcher, with whatever other requests' sentences it joins them
        to; a full queue is a 503. The caller bounds the wait (`within_timeout`)."""
        try:
            future = self.batcher.submit(model, sources, options)
        except QueueFull:
            limit = self.limits.max_queue
            raise RequestRefused(
                "too many requests queued; try again shortly", field="server", limit=limit, status=503
            ) from None
        return await asyncio.wrap_future(future)

    def in_turn(self, work: Callable[..., Result], *args) -> Result:
        """`work(*args)` on the calling thread, taking turns with the batches for the cores."""
        with self.compute_lock:
            return work(*args)

    def served(self, name: str | None) -> ServedRun:
        """The run a request names (None: the default); any other name is a 404 naming the served ones."""
        try:
            return self.catalog.get(name)
        except KeyError:
            served = ", ".join(self.catalog.runs)
            raise RequestRefused(f"{name!r} is not served; served: {served}", field="model", status=404) from None

    def addressed(self, request: TranslateRequest | ExplainRequest | ScoreRequest) -> ServedRun:
        """The run a request names (`served`), refusing with a 422 naming the field any language
        the request gives that the run does not translate from or into."""
        run = self.served(request.model)
        source, target = run.translator.source_language, run.translator.target_language
        pair = f"{run.name!r} translates {source} -> {target}"
        for name, asked, actual in (
            ("source_language", request.source_language, source),
            ("target_language", request.target_language, target),
        ):
            if asked is not None and asked != actual:
                raise RequestRefused(f"{pair}, not {asked!r}", field=name)
        return run

    @staticmethod
    def search_overrides(request: TranslateRequest | ExplainRequest, n_best: int = 1) -> SearchOverrides:
        """The search settings a request gives, as one value: the one place a request's search
        fields are read (impossible ones are a `UserError`, a 422 naming the request field, when
        the run's options are made of them)."""
        return SearchOverrides(
            beam_size=request.beam_size,
            n_best=n_best,
            length_penalty=request.length_penalty,
            max_length=request.max_length,
        )

    async def within_timeout(self, work: Awaitable[Result]) -> Result:
        """The awaitable's result, or a 503 when it takes longer than the request timeout."""
        try:
            return await asyncio.wait_for(work, self.limits.timeout_s)
        except TimeoutError:
            timeout = self.limits.timeout_s
            raise RequestRefused(
                f"no answer within {timeout:g} s", field="timeout_s", limit=timeout, status=503
            ) from None


def _server_state(request: Request) -> ServerState:
    return request.app.state.server


# A route's parameter `state: Server` receives the app's ServerState.
Server = Annotated[ServerState, Depends(_server_state)]
