"""Reading on a thread of its own: the same items in the same order, errors raised where they
happened, and a reader that always ends before the caller goes on."""

from __future__ import annotations

import threading

import pytest

from loomdb.store import read_ahead
from loomdb.store.read_ahead import ReadAhead


class Source:
    """A generator's life seen from outside: which thread ran it and whether it was closed."""

    def __init__(self, count: int, fail_at: int | None = None):
        self.count, self.fail_at = count, fail_at
        self.threads: set[int] = set()
        self.closed = threading.Event()
        self.taken = 0

    def __iter__(self):
        try:
            for i in range(self.count):
                self.threads.add(threading.get_ident())
                if i == self.fail_at:
                    raise ValueError(f"item {i} is broken")
                self.taken += 1
                yield {"item": i}
        finally:
            self.closed.set()


def test_items_arrive_in_order_from_another_thread():
    source = Source(3 * read_ahead.HAND + 5)  # hands, and a last short one
    got = list(ReadAhead().stream(source))
    assert [g["item"] for g in got] == list(range(source.count))
    assert source.threads and threading.get_ident() not in source.threads
    assert source.closed.is_set()


def test_an_error_is_raised_to_the_caller_after_the_items_before_it():
    source = Source(100, fail_at=37)
    got = []
    with pytest.raises(ValueError, match="item 37 is broken"):
        for g in ReadAhead().stream(source):
            got.append(g["item"])
    assert got == list(range(37))
    assert source.closed.is_set()


def test_a_stream_left_early_stops_its_reader():
    source = Source(10_000)
    reader = ReadAhead()
    stream = reader.stream(source)
    assert next(stream)["item"] == 0
    stream.close()  # the caller stopped (a cancel, a diverged step)
    assert source.closed.is_set()  # the reader ended and its generator was closed
    assert source.taken < source.count  # it stopped reading, well before the end
    assert not [t for t in threading.enumerate() if t.name == "loomdb-read"]


def test_stop_ends_a_reader_whose_stream_was_never_read():
    source = Source(10_000)
    reader = ReadAhead()
    reader.stream(source)
    reader.stop()
    assert source.closed.is_set()
    assert source.taken <= read_ahead.HAND * (read_ahead.DEPTH + 1)  # it read a few hands ahead
    reader.stop()  # again: nothing to do


def test_a_new_stream_stops_the_one_before():
    first, second = Source(10_000), Source(5)
    reader = ReadAhead()
    old = reader.stream(first)
    next(old)
    assert [g["item"] for g in reader.stream(second)] == list(range(5))
    assert first.closed.is_set()
