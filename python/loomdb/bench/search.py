"""The fewest steps (epochs, iterations) after which a deterministic optimiser meets a target.
No paper section.

A deterministic optimiser whose k-step run is a prefix of any longer run can be probed at any
k by running k steps.  Probing doubles k (1, 2, 4, …, ``cap``) until the target is met, then
narrows the bracket between the last miss and the first hit until they are adjacent.  Given the
optimum (``floor``), the next probe interpolates log(objective − floor) linearly in log k (the
gap of a first-order method falls like a power of k), clamped into the bracket, with a plain
bisection whenever an interpolated probe failed to halve the bracket; without it, bisection.
Either way the answer is a k that meets the target after k − 1 missed it; where the objective
is not monotone in k an earlier k could also meet it, so the probes are kept for the report.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Search:
    """``k``: the steps found (None: not met within ``cap``); ``probes``: k → objective."""

    target: float
    cap: int
    k: int | None = None
    probes: dict[int, float] = field(default_factory=dict)

    @property
    def best(self) -> float:
        return min(self.probes.values())


def interpolate(miss: int, hit: int, f_miss: float, f_hit: float, target: float, floor: float):
    """The k in (miss, hit) where log(f − floor) crosses log(target − floor), log k linear;
    None when the values do not allow it (a gap ≤ 0, or no fall from miss to hit)."""
    gaps = (f_miss - floor, f_hit - floor, target - floor)
    if miss < 1 or min(gaps) <= 0 or f_miss <= f_hit:
        return None
    g0, g1, gt = (math.log(g) for g in gaps)
    x0, x1 = math.log(miss), math.log(hit)
    k = round(math.exp(x0 + (gt - g0) * (x1 - x0) / (g1 - g0)))
    return min(max(k, miss + 1), hit - 1)


def fewest_steps(
    objective_after: Callable[[int], float],
    target: float,
    cap: int,
    floor: float | None = None,
) -> Search:
    """Smallest k (see the module) with ``objective_after(k) <= target``."""
    out = Search(target, cap)

    def meets(k: int) -> bool:
        if k not in out.probes:
            out.probes[k] = objective_after(k)
        return out.probes[k] <= target

    miss, k = 0, 1
    while not meets(k):
        if k >= cap:
            return out
        miss, k = k, min(2 * k, cap)
    bisect = floor is None
    while k - miss > 1:
        width = k - miss
        mid = None
        if not bisect and floor is not None:
            mid = interpolate(miss, k, out.probes[miss], out.probes[k], target, floor)
        if mid is None:
            mid = (miss + k) // 2
        if meets(mid):
            k = mid
        else:
            miss = mid
        bisect = floor is None or (not bisect and 2 * (k - miss) > width)
    out.k = k
    return out
