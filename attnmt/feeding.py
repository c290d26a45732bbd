"""Training batches made ahead of the step in a background thread, pinned for a GPU.

On a GPU the step's kernels run asynchronously: the host is free while they run. Collating the
next batch in that time (padding its ids into tensors) into page-locked memory, from which the
copy to the device runs without holding the host, keeps the GPU from waiting on the data. A
thread suffices: padding is tensor work that releases the GIL, and prepared data is
memory-mapped, so no worker process has to load it. On a CPU the step already uses every core,
so batches are made in line there (`feed` with `ahead=0`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Generic, TypeVar

Item = TypeVar("Item")
Made = TypeVar("Made")

_END = object()


class Prefetched(Generic[Item, Made]):
    """(item, make(item)) for each item of `items`, in order, at most `ahead` made in advance
    by one background thread. An error in `items` or `make` is raised by the iteration that
    would have returned it. `close()` (or leaving the `with` block) stops the thread; the items
    it made ahead are dropped, so a caller that stops early has consumed only what it took."""

    def __init__(self, items: Iterator[Item], make: Callable[[Item], Made], ahead: int = 2):
        assert ahead >= 1, "at least one batch ahead"
        self._made: queue.Queue = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(items, make), name="attnmt-prefetch", daemon=True)
        self._thread.start()

    def _put(self, entry) -> bool:
        while not self._stop.is_set():
            try:
                self._made.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self, items: Iterator[Item], make: Callable[[Item], Made]) -> None:
        try:
            for item in items:
                if not self._put((item, make(item))):
                    return
        except BaseException as error:  # handed to the consumer, raised where it iterates
            self._put(error)
            return
        self._put(_END)

    def __iter__(self) -> Iterator[tuple[Item, Made]]:
        return self

    def __next__(self) -> tuple[Item, Made]:
        entry = self._made.get()
        if entry is _END:
            self._made.put(_END)  # iterating again after the end ends again
            raise StopIteration
        if isinstance(entry, BaseException):
            self.close()
            raise entry
        return entry

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> Prefetched[Item, Made]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def feed(
    items: Iterator[Item], make: Callable[[Item], Made], ahead: int
) -> Generator[tuple[Item, Made], None, None] | Prefetched[Item, Made]:
    """(item, make(item)) for each item: made `ahead` in advance by a background thread
    (`Prefetched`), or in line when `ahead` is 0. Either closes (`contextlib.closing`)."""
    if ahead == 0:
        return ((item, make(item)) for item in items)
    return Prefetched(items, make, ahead)
