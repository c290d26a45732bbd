"""Batches made ahead in a background thread (`feeding`): same items, same order, errors where
they belong, and a thread that stops when told."""

import threading
import time

import pytest

from attnmt.feeding import Prefetched, feed


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_every_item_comes_once_in_order_with_what_was_made_of_it(ahead):
    made = list(feed(iter(range(50)), lambda item: item * item, ahead))
    assert made == [(item, item * item) for item in range(50)]


def test_an_error_in_make_is_raised_where_its_item_would_come():
    def make(item):
        if item == 3:
            raise ValueError("item 3 is bad")
        return item

    fed = Prefetched(iter(range(10)), make, ahead=2)
    assert [next(fed) for _ in range(3)] == [(0, 0), (1, 1), (2, 2)]
    with pytest.raises(ValueError, match="item 3 is bad"):
        next(fed)


def test_at_most_ahead_items_are_made_in_advance():
    made = []

    def make(item):
        made.append(item)
        return item

    with Prefetched(iter(range(100)), make, ahead=2) as fed:
        next(fed)
        time.sleep(0.3)
        # the one taken, two waiting in the queue, one made and waiting for room
        assert len(made) <= 4


def test_closing_stops_the_thread_on_an_endless_stream():
    def endless():
        item = 0
        while True:
            yield item
            item += 1

    before = threading.active_count()
    fed = Prefetched(endless(), lambda item: item, ahead=2)
    assert next(fed) == (0, 0)
    fed.close()
    assert threading.active_count() == before
