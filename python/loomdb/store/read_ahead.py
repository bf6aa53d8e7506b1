"""Querying a reader's next page while the caller works on this one.  No paper section.

A reader asks for an epoch's minibatches a page at a time (``storage.Reader``), and the caller
checks, decodes and trains on each page's rows before the next query starts.  Where the engine
runs a query without holding Python's lock (DuckDB's Python API lets go of it while a statement
runs), the next page's query can run on the other core meanwhile, and an epoch that reads
every minibatch takes about the longer of reading and training instead of their sum.  The
database says whether its queries may run from another thread (``Database.concurrent_reads``:
DuckDB's serialises every use of its cursor; PostgreSQL's server-side SPI may only be called
from the backend's own thread).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def ahead(calls: Iterable[Callable[[], T]]) -> Generator[T, None, None]:
    """The results of ``calls``, in order; while the caller holds one result, the next call
    runs in a thread of this iterator's own (one call ahead, so two results live at a time).
    A call's error is raised where its result would have come.  Closing the iterator (or its
    end) waits for a call under way, so nothing runs on the caller's database after it."""
    pending = iter(calls)
    with ThreadPoolExecutor(1, thread_name_prefix="loomdb-read-ahead") as thread:
        call = next(pending, None)
        running = None if call is None else thread.submit(call)
        while running is not None:
            result = running.result()
            call = next(pending, None)
            running = None if call is None else thread.submit(call)
            yield result
