"""One small thread pool for image work: jpegtran runs as a child process and Pillow decodes
without the GIL, so threads give real parallelism.  No paper section.

The pool is made on first use and lives for the process (a PostgreSQL backend included: its
threads only ever run jpegtran or Pillow, never the server's code).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
WORKERS = max(1, min(8, os.cpu_count() or 1))
SERIAL_BELOW = 4  # items: not worth a hand-off to the pool

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="loomdb-image")
        return _pool


def map_all(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, in order, spread over the pool; the first error is raised."""
    items = list(items)
    if len(items) < SERIAL_BELOW or WORKERS == 1:
        return [fn(x) for x in items]
    return list(_executor().map(fn, items))
