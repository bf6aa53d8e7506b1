"""A parallel epoch in n threads of this process (DuckDB's, or a PostgreSQL backend's for the
epochs it keeps in memory): Bismarck's shards (``learn/averaging``), each trained by a thread of
its own while this thread reads the epoch's minibatches and deals them out by number; every
call into the database (reads, ``check``) stays on this thread.  No paper section of its own
(Bismarck §3.3 runs segments in processes; threads share the decoded minibatches kept between
epochs instead of reading them n times).

Threads run Python one at a time but for code that lets go of the interpreter lock — numpy's
matrix products and ufuncs on large enough arrays, numba kernels compiled ``nogil`` (TOC's and
MLWeaving's products): a shard's step overlaps another's in those and waits for the lock in the
rest, so the speed-up grows with the work per minibatch (features × classes). Dense minibatches
of a narrow model, TOC and MLWeaving minibatches step in runs, one such kernel call each
(``learn/fused_steps``). Each shard reads its minibatches ``DEAL`` at a time from a short queue
of its own (``DEPTH`` hands), so memory holds a few hundred minibatches per shard beyond what
the epoch cache keeps, and a hand costs one queue operation instead of one per minibatch. BLAS
runs one thread per call while the train holds the shards' threads (threadpoolctl; process-wide,
as BLAS's setting is): the shards are the parallelism, and OpenBLAS's own threads serialise
concurrent callers and oversubscribe the cores. The caller's ``check`` (a cancel) runs here,
between minibatches and while the shards finish; a cancel stops every shard before it takes its
next minibatch.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from threadpoolctl import threadpool_limits

from loomdb.learn import fused_steps
from loomdb.learn.averaging import Start, begin, merge, shard_of, train
from loomdb.learn.problem import Problem
from loomdb.learn.trainer import EpochSource, TrainConfig
from loomdb.seams import Batch

DEAL = fused_steps.RUN  # minibatches handed to a shard at a time
DEPTH = 4  # hands waiting per shard
POLL_S = 0.05
_END = object()


class ThreadedShards:
    """The trainer's ``EpochRunner`` for ``shards`` threads over ``source``'s minibatches; a
    context manager holding the threads (and BLAS at one thread) for the whole train."""

    def __init__(
        self,
        source: EpochSource,
        problem: Problem,
        config: TrainConfig,
        shards: int,
        check: Callable[[], None] | None = None,
    ):
        self.source, self.problem, self.config = source, problem, config
        self.shards, self.check = shards, check or (lambda: None)
        self._stack = contextlib.ExitStack()
        self._threads: list[ThreadPoolExecutor] = []  # shard j's thread: j's own, every epoch

    def __enter__(self) -> ThreadedShards:
        self._stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
        self._threads = [
            self._stack.enter_context(
                ThreadPoolExecutor(1, thread_name_prefix="loomdb-shard", initializer=_no_signals)
            )
            for _ in range(self.shards)
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        self._threads = []
        self._stack.close()

    def __call__(self, epoch, precision, W, b, optimizer, lr, widest) -> dict[str, Any]:
        if not self._threads:
            with self:
                return self(epoch, precision, W, b, optimizer, lr, widest)
        start = Start.of(self.problem, self.config, W, b, optimizer, lr, widest[0])
        results = [begin(start, j) for j in range(self.shards)]
        feeds: list[queue.Queue] = [queue.Queue(DEPTH) for _ in range(self.shards)]
        stop = threading.Event()
        futures = [
            thread.submit(_train, start, r, _drained(f, stop), self.shards)
            for thread, r, f in zip(self._threads, results, feeds)
        ]
        try:
            for j, hand in _hands(self.source.train_batches(epoch, precision), self.shards):
                self.check()
                _put(feeds[j], hand, futures[j])
            for feed, future in zip(feeds, futures):
                _put(feed, _END, future)
            while wait(futures, timeout=POLL_S).not_done:
                self.check()
        except BaseException:
            stop.set()
            for feed, future in zip(feeds, futures):
                _put(feed, _END, future)
            wait(futures)
            raise
        for future in futures:
            future.result()  # a shard's own error, raised here
        totals = merge(results, start, W, b, optimizer)
        widest[0] = max(r.widest for r in results)
        return {**totals, "shards_in": "threads"}


# what a fault raises in the thread that caused it; every other signal is the process's
_FAULTS = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGABRT", "SIGSYS"}


def _no_signals() -> None:
    """Leave the process's signals to the thread that started the train.  In a PostgreSQL
    backend its handlers (a cancel, ``statement_timeout``'s alarm, a latch's wake-up) belong to
    the thread that runs PostgreSQL's code, and the shards' threads never do; Python runs its
    own handlers in the main thread whichever thread the signal reached."""
    if hasattr(signal, "pthread_sigmask"):
        faults = {getattr(signal, name) for name in _FAULTS if hasattr(signal, name)}
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - faults)


def _hands(batches: Iterable[Batch], shards: int) -> Iterator[tuple[int, list[Batch]]]:
    """``(shard, minibatches)``: the epoch's minibatches dealt by number, ``DEAL`` at a time
    per shard — a list (the epoch cache) by slices, a stream as it is read."""
    if isinstance(batches, list):
        mine = [batches[j::shards] for j in range(shards)]
        for first in range(0, len(mine[0]), DEAL):
            for j, hand in enumerate(own[first : first + DEAL] for own in mine):
                if hand:
                    yield j, hand
        return
    dealt: list[list[Batch]] = [[] for _ in range(shards)]
    for i, batch in enumerate(batches):
        j = shard_of(i, shards)  # the epoch's i-th minibatch (its number)
        dealt[j].append(batch)
        if len(dealt[j]) == DEAL:
            yield j, dealt[j]
            dealt[j] = []
    yield from ((j, rest) for j, rest in enumerate(dealt) if rest)


def _train(start: Start, result, batches: Iterator[Batch], shards: int) -> None:
    train(start, result, batches, shards)
    for _ in batches:  # a shard that stopped early (diverged) still empties its queue
        pass


def _drained(feed: queue.Queue, stop: threading.Event) -> Iterator[Batch]:
    while not stop.is_set():
        item = feed.get()
        if item is _END:
            return
        yield from item


def _put(feed: queue.Queue, item: Any, future: Future) -> None:
    """Hand ``item`` to a shard, unless its thread has ended (then its error is raised later)."""
    while not future.done():
        try:
            feed.put(item, timeout=POLL_S)
            return
        except queue.Full:
            continue
