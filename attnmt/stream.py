"""Translating a stream of sentences of any length in bounded memory, optionally in worker processes.

Lines are read lazily and translated a window at a time: within a window `search.decode_all`
sorts the sentences by length (little padding) and gives the results back in input order, so
the output is the input's order whatever the window or the number of workers. At most
`workers + 1` windows are held at once: memory depends on the window, never on the file.

Worker processes each load the model once (`loading.load` of the `ModelSpec` they are given;
torch threads divided among them) and translate whole windows; the parent reads, hands out windows and writes the
results in order. On a CPU, several single-threaded processes can beat one process with
several threads when batches are too small to keep the threads busy.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice

from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions
from attnmt.translate import Translator
from attnmt.translation import Source, Translation

WINDOW = 5000  # sentences sorted and translated together


Line = str | Source  # a sentence, or one with the start or the phrases its translation must have


def windows(lines: Iterable[Line], size: int = WINDOW) -> Iterator[list[Line]]:
    """Consecutive lists of at most `size` lines, read as they are needed."""
    iterator = iter(lines)
    while window := list(islice(iterator, size)):
        yield window


_worker_translator: Translator | None = None  # one per worker process


def _start_worker(spec: ModelSpec, threads: int) -> None:
    import torch

    global _worker_translator
    torch.set_num_threads(threads)
    _worker_translator = load(spec)


def _translate_in_worker(window: list[Line], options: SearchOptions, first_number: int) -> list[Translation]:
    assert _worker_translator is not None, "worker started without a model"
    return _worker_translator.translate_sources(window, options, first_number=first_number)


def translate_windows(
    lines: Iterable[Line],
    options: SearchOptions,
    *,
    translator: Translator | None = None,
    spec: ModelSpec | None = None,
    workers: int = 1,
    window: int = WINDOW,
) -> Iterator[list[Translation]]:
    """The translations of `lines` (sentences, or `Source`s) a window at a time, in input order.

    One process uses `translator`; with `workers` > 1, each of that many processes loads the
    model `spec` describes, and the CPU's threads are shared among them. A spec that needs
    exporting (a run on onnxruntime) should be `spec.exported()` first, or each worker exports.
    """
    if workers <= 1:
        assert translator is not None, "one process translates with the translator it is given"
        first = 1
        for sentences in windows(lines, window):
            yield translator.translate_sources(sentences, options, first_number=first)
            first += len(sentences)
        return
    assert spec is not None, "worker processes need to know how to load the model"
    threads = max(1, (os.cpu_count() or 1) // workers)
    context = multiprocessing.get_context("spawn")  # fork after torch's thread pools start can hang
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(spec, threads)) as pool:
        pending: deque[Future] = deque()
        first = 1
        for sentences in windows(lines, window):
            pending.append(pool.submit(_translate_in_worker, sentences, options, first))
            first += len(sentences)
            if len(pending) > workers:  # every worker busy, and no more windows than that in memory
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class StreamProgress:
    """A progress bar on stderr when it is a terminal (sentences, generated tokens/s, ETA when the
    total is known); nothing otherwise, so logs and pipes stay clean."""

    def __init__(self, total: int | None) -> None:
        self.progress = None
        self.start, self.tokens = time.perf_counter(), 0
        if not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("[bold]translate"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[speed]} tok/s"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.task = self.progress.add_task("translate", total=total, speed="-")
        self.progress.start()

    def update(self, translations: list[Translation]) -> None:
        if self.progress is None:
            return
        self.tokens += sum(len(t.tokens) + 1 for t in translations)  # EOS counts, as in the benchmarks
        speed = self.tokens / max(time.perf_counter() - self.start, 1e-9)
        self.progress.update(self.task, advance=len(translations), speed=f"{speed:,.0f}")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
