"""Best of a few timed runs, fewer when one run is long (its noise is then small).
No paper section."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

LONG_S = 10.0  # after runs this long in all, one more repeat teaches little


def best_of(run: Callable[[], T], key: Callable[[T], float], repeat: int) -> T:
    """The result with the smallest ``key`` among up to ``repeat`` calls of ``run``."""
    started = time.perf_counter()
    best = run()
    for _ in range(repeat - 1):
        if time.perf_counter() - started > LONG_S:
            break
        again = run()
        if key(again) < key(best):
            best = again
    return best
