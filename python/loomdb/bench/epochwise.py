"""Time to a target for an in-memory optimiser that can be stepped one epoch at a time.
No paper section.

Only the epochs are timed; the objective is measured between them, untimed.  The run stops at
the first epoch whose model meets the target, at ``cap`` epochs, or when the objective has not
set a new best for ``patience`` epochs in a row (a constant step's noise floor above the
target: it will not get there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Race:
    """``epochs``/``seconds`` to the target (None: not met); ``best`` objective; ``ran`` epochs;
    ``why``: how the run ended ("met", "cap", "plateau"); ``spent``: seconds of all epochs run."""

    epochs: int | None
    seconds: float | None
    best: float
    ran: int
    why: str
    spent: float = 0.0


def race(
    epoch: Callable[[], None],
    objective: Callable[[], float],
    target: float,
    cap: int,
    patience: int | None = None,
) -> Race:
    spent, best, since = 0.0, float("inf"), 0
    for k in range(1, cap + 1):
        started = time.perf_counter()
        epoch()
        spent += time.perf_counter() - started
        value = objective()
        if value <= target:
            return Race(k, spent, min(best, value), k, "met", spent)
        if value < best:
            best, since = value, 0
        else:
            since += 1
        if patience is not None and since >= patience:
            return Race(None, None, best, k, "plateau", spent)
    return Race(None, None, best, cap, "cap", spent)
