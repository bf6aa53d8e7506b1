"""Reading an epoch's stored minibatches on a thread of their own while the caller trains.

No paper section.  A cold epoch (one that reads the layout, ``cache_mb`` too small to keep it)
does two things per minibatch: read it (the storage query, the checksum, the decode — TOC's
decode tree, MLWeaving's planes) and step on it.  Serially they add up; here a reader thread
reads ahead while the caller steps, so the epoch takes about the longer of the two.  The reader
yields exactly the minibatches the layout does, in the same order, so a train is the same bits
whether it reads ahead or not.

Both sides run Python only one at a time, so the overlap comes from what lets go of the
interpreter lock: the engine's query, numba's kernels (the decoders and the fused steps of
``learn/fused_steps``), the checksum.  Minibatches cross in hands of ``HAND`` (one queue
operation per hand), at most ``DEPTH`` hands ahead, so memory holds a few dozen minibatches
beyond what the epoch cache keeps.

One reader at a time: ``stream`` stops the previous one before it starts, and ``stop`` (which
``Epochs.close`` calls before the train uses the database again, on success or failure) makes
the reader leave off at its next minibatch and waits for it, so the engine's connection never
runs two statements at once.  An error of the reader is raised to the caller where its
minibatch would have been.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

HAND = 16  # minibatches per queue operation
DEPTH = 4  # hands read ahead
POLL_S = 0.05  # how often a reader waiting for room looks whether it was stopped
_END = object()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


class ReadAhead:
    """Streams read by one background thread at a time."""

    def __init__(self) -> None:
        self._current: _Reader | None = None

    def stream(self, items: Iterable[Any]) -> Iterator[Any]:
        """``items``, read on a thread of their own; the previous stream is stopped first."""
        self.stop()
        reader = self._current = _Reader(iter(items))
        return _received(reader)

    def stop(self) -> None:
        """Make the reader leave off and wait until it has (nothing to do if none runs)."""
        if self._current is not None:
            self._current.stop()
            self._current = None


class _Reader:
    def __init__(self, items: Iterator[Any]):
        self.hands: queue.Queue = queue.Queue(DEPTH)
        self.stopping = threading.Event()
        self.thread = threading.Thread(
            target=_read, args=(items, self.hands, self.stopping), name="loomdb-read", daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def _read(items: Iterator[Any], hands: queue.Queue, stopping: threading.Event) -> None:
    hand: list[Any] = []
    end: Any = _END
    try:
        for item in items:
            hand.append(item)
            if len(hand) == HAND:
                if not _put(hands, hand, stopping):
                    break
                hand = []
            if stopping.is_set():
                break
    except BaseException as error:  # raised to the caller where it happened
        end = _Failed(error)
    close = getattr(items, "close", None)
    try:
        if close is not None:
            close()  # a generator's own cleanup runs here, on the thread that ran it
    except BaseException as error:
        end = end if isinstance(end, _Failed) else _Failed(error)
    if not stopping.is_set() and (not hand or _put(hands, hand, stopping)):
        _put(hands, end, stopping)


def _put(hands: queue.Queue, item: Any, stopping: threading.Event) -> bool:
    """Hand ``item`` over unless the reader is stopped first; whether it was handed."""
    while not stopping.is_set():
        try:
            hands.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _received(reader: _Reader) -> Iterator[Any]:
    try:
        while True:
            hand = reader.hands.get()
            if hand is _END:
                return
            if isinstance(hand, _Failed):
                raise hand.error
            yield from hand
    finally:  # done, failed or abandoned: the reader ends before the caller goes on
        reader.stop()
