"""Dynamic batching: requests that arrive within a few milliseconds are decoded together.

One worker thread owns the model. It takes the first waiting request, waits up to
`batch_wait_ms` for more (or until `max_batch_sentences`), groups what it has by model and
search options, and decodes each group as one call of `translate`. Decoding a batch costs little
more than decoding one sentence on a CPU, so under load the server answers many requests for
the price of one; with a single client it adds at most the wait.

The answer for a sentence does not depend on its batch-mates (the search is batch-invariant, and
tested so), so batching changes speed only. The queue is bounded: a full queue refuses at once
(`QueueFull`; the API answers 503) rather than letting latency grow without end. A request whose
caller gave up (its future cancelled) is skipped, not decoded.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from attnmt.search.options import SearchOptions
from attnmt.translation import Source, Translation

QueueFull = queue.Full

# translate(model name, sentences (text or `Source`s), options) -> one Translation per sentence
Translate = Callable[[str, Sequence[str | Source], SearchOptions], list[Translation]]


@dataclass
class _Job:
    model: str
    options: SearchOptions
    sentences: Sequence[str | Source]
    future: Future = field(default_factory=Future)


class Batcher:
    """Queues translation requests and decodes them in batches on one worker thread.

    `compute_lock` is held while decoding, so other work on the same models (an explanation,
    the test-set analysis) takes turns with the batches instead of competing for the cores.
    `on_batch(sentences)` is told the size of every batch decoded (for /metrics).
    """

    def __init__(
        self,
        translate: Translate,
        *,
        compute_lock: threading.Lock,
        max_queue: int = 256,
        batching: bool = True,
        wait_ms: float = 5.0,
        max_batch_sentences: int = 256,
        on_batch: Callable[[int], None] = lambda sentences: None,
    ):
        self._translate = translate
        self._lock = compute_lock
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=max_queue)
        self._batching, self._wait = batching, wait_ms / 1000
        self._max_sentences = max_batch_sentences
        self._on_batch = on_batch
        self._thread = threading.Thread(target=self._work, name="attnmt-batcher", daemon=True)
        self._thread.start()

    def submit(self, model: str, sentences: Sequence[str | Source], options: SearchOptions) -> Future:
        """A future of the sentences' Translations (a `Source`'s prefix continued, its required
        phrases met); QueueFull when the queue is at its bound."""
        job = _Job(model, options, sentences)
        self._queue.put_nowait(job)
        return job.future

    def pending(self) -> int:
        """Requests waiting (not yet taken into a batch)."""
        return self._queue.qsize()

    def close(self) -> None:
        """Finish what is queued, then stop the worker."""
        self._queue.put(None)
        self._thread.join()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            jobs, stop = self._gather(job)
            self._decode([job for job in jobs if job.future.set_running_or_notify_cancel()])
            if stop:
                return

    def _gather(self, first: _Job) -> tuple[list[_Job], bool]:
        """The first job and those arriving within the wait, up to the batch's sentence bound;
        and whether the stop sentinel came meanwhile."""
        jobs, sentences = [first], len(first.sentences)
        deadline = time.monotonic() + self._wait
        while self._batching and sentences < self._max_sentences:
            try:
                job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
            sentences += len(job.sentences)
        return jobs, False

    def _decode(self, jobs: list[_Job]) -> None:
        groups: dict[tuple[str, SearchOptions], list[_Job]] = {}
        for job in jobs:
            groups.setdefault((job.model, job.options), []).append(job)
        for (model, options), group in groups.items():
            sentences = [sentence for job in group for sentence in job.sentences]
            try:
                with self._lock:
                    translations = self._translate(model, sentences, options)
            except Exception as error:  # handed to each caller, who answers for it; the worker goes on
                for job in group:
                    job.future.set_exception(error)
                continue
            self._on_batch(len(sentences))
            start = 0
            for job in group:
                job.future.set_result(translations[start : start + len(job.sentences)])
                start += len(job.sentences)
