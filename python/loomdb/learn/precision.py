"""Per-epoch precision schedules for any-precision training (MLWeaving §6).

Precision only changes between epochs (the next epoch reads more or fewer bit planes; on a pcr
index, scan groups — PCR §4.2: "raise the scan group in a manner similar to learning rate
drops").
``adaptive`` is the paper's schedule: 2 bits for epochs 1–4, 3 for 5–8, 4 for 9–16, 5 for
17–32, and so on (one more bit each time the epoch count doubles).  ``adaptive-plateau`` is
loomdb's: start at 2 bits and add one whenever the epoch loss improved by less than 1%.
"""

from __future__ import annotations

import math
from typing import Any

from loomdb.errors import LoomOptionError

PLATEAU = 0.01
START = 2
SCHEDULES = ("adaptive", "adaptive-plateau")


def paper_schedule(epoch: int) -> int:
    """Bits for 1-based ``epoch`` under the paper's adaptive schedule."""
    if epoch <= 4:
        return START
    return min(32, int(math.floor(math.log2(epoch - 1))) + 1)


def plateau_schedule(history: list[dict[str, Any]]) -> int:
    """Bits for the next epoch given the losses so far."""
    if not history:
        return START
    bits = int(history[-1].get("precision", START))
    if len(history) >= 2:
        before, now = history[-2]["loss"], history[-1]["loss"]
        if before - now < PLATEAU * abs(before):
            bits += 1
    return min(32, bits)


def precision_for(setting: Any, epoch: int, history: list[dict[str, Any]], top: int = 32) -> int:
    """The precision to read in 0-based ``epoch`` for an option value (int or schedule);
    ``top`` is the most the layout holds (32 bits; a pcr index's scan groups), where the
    schedules stop."""
    if setting is None:
        return top
    if setting == "adaptive":
        return min(top, paper_schedule(epoch + 1))
    if setting == "adaptive-plateau":
        return min(top, plateau_schedule(history))
    if isinstance(setting, int) and not isinstance(setting, bool) and 1 <= setting <= top:
        return setting
    raise LoomOptionError(
        f"precision must be an integer from 1 to {top}, 'adaptive' or 'adaptive-plateau'; "
        f"got {setting!r}"
    )
