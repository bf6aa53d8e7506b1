"""Ctrl-C while a loomdb connection runs or reads a statement from the main thread: SIGINT
calls ``con.interrupt()`` (a train stops within a batch with LoomInterrupted, nothing written)
instead of Python's KeyboardInterrupt, which would reach only the main thread — waiting in
DuckDB while a UDF runs on a worker thread (the signal went unseen, or broke a UDF the main
thread ran).  No paper section.

One handler, :func:`_on_sigint`, is installed where SIGINT's handler is Python's default, only
on the main thread (no other may set a handler), and put back afterwards unless the caller set
one of their own meanwhile; a caller's own handler is left alone.  It interrupts the innermost
connection running a statement (:func:`interrupts`), and does what Python's default does when
none is: so a reader's rows (:func:`read`), read long after the call that made them returned,
answer Ctrl-C while a batch is read, and the caller's code between two batches gets Python's
KeyboardInterrupt as ever.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_running: list[Any] = []  # the loomdb connections running a statement, innermost last


def _on_sigint(signum: int, frame: Any) -> None:
    if _running:
        _running[-1].interrupt()
    else:
        signal.default_int_handler(signum, frame)


def _ours() -> bool | None:
    """Whether SIGINT's handler is this module's (True) or Python's default, which it may
    replace (False); None where it must be left alone (another thread, a handler of the
    caller's)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGINT)
    return (
        True if handler is _on_sigint else False if handler is signal.default_int_handler else None
    )


@contextmanager
def handling() -> Iterator[bool]:
    """:func:`_on_sigint` installed while the body runs where Python's default was (yields
    whether SIGINT is this module's to answer), and Python's default put back afterwards."""
    ours = _ours()
    if ours is False:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield ours is not None
    finally:
        if ours is False and signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def interrupts(con: Any) -> Iterator[None]:
    """While the body runs, SIGINT calls ``con.interrupt()`` (see the module's docstring)."""
    if con is None:
        yield
        return
    with handling() as answering:
        if answering:
            _running.append(con)
        try:
            yield
        finally:
            if answering:
                _running.pop()


def read(items: Iterator[Any], con: Any, waits_in_c: bool = False) -> Iterator[Any]:
    """``items`` read one at a time with SIGINT interrupting ``con`` during each read, and
    Python's default between them; the handler stays installed meanwhile (set and put back
    per item, it cost a row of ``iter_rows`` 24 µs, 80 times DuckDB's own).  ``waits_in_c``:
    a read waits in C, where no handler runs (Arrow's reader of DuckDB's stream), so it runs
    on a thread of its own (:func:`in_a_thread`) while the handler answers."""
    with handling() as answering:
        running = [con] if answering and con is not None else []
        fetch: Callable[[Iterator[Any]], Any] = in_a_thread if waits_in_c and running else next
        while True:
            _running.extend(running)
            try:
                item = fetch(items)
            except StopIteration:
                return
            finally:
                del _running[len(_running) - len(running) :]
            yield item


def in_a_thread(items: Iterator[Any]) -> Any:
    """``next(items)`` on a thread of its own while this one waits in Python, where a signal's
    handler runs: Arrow's reader of DuckDB's stream waits in C and never lets it."""
    box: list[tuple[bool, Any]] = []

    def fetch() -> None:
        try:
            box.append((True, next(items)))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread as it is
            box.append((False, e))

    worker = threading.Thread(target=fetch, name="loomdb-read", daemon=True)
    worker.start()
    worker.join()
    done, value = box[0]
    if not done:
        raise value
    return value
