"""Which stored minibatches form a step, and which worker holds each.  SketchML §4.1 ("each
worker holds a partition of the data and computes a gradient on a minibatch of it").

The training minibatches ``0 … n−1`` (shuffled once when laid out) are cut into ``shares``
contiguous blocks of ``span = ⌈n / shares⌉``; step ``s`` of every epoch is minibatch ``s`` of
each block — ``{s + i·span}`` — so the step's minibatch is ``shares`` stored minibatches, one
per block, and an epoch is ``span`` steps that see every minibatch once (Bismarck's fixed
order, as the trainer's).  Block ``i`` goes to worker ``i mod W``: a worker reads its
partition as contiguous ranges, once.  The steps do not depend on the workers: one worker
holding every block (``inprocess``) takes the same steps, which is what makes it the
reference.  A lost worker's minibatches are handed round-robin to the workers left.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


class StepPlan:
    def __init__(self, batches: int, shares: int):
        self.batches = batches
        self.shares = max(1, min(shares, batches))
        self.span = math.ceil(batches / self.shares) if batches else 0

    @property
    def steps(self) -> int:
        return self.span

    def step(self, s: int) -> list[int]:
        """The stored minibatches of step ``s``, in block order."""
        return [b for b in range(s, self.batches, self.span)]

    def blocks(self) -> list[range]:
        return [
            range(i * self.span, min((i + 1) * self.span, self.batches))
            for i in range(self.shares)
            if i * self.span < self.batches
        ]


class Assignment:
    """The worker holding each stored minibatch."""

    def __init__(self, plan: StepPlan, workers: Sequence[str]):
        self.owner: dict[int, str] = {}
        for i, block in enumerate(plan.blocks()):
            for b in block:
                self.owner[b] = workers[i % len(workers)]

    def held_by(self, worker: str) -> list[int]:
        return sorted(b for b, w in self.owner.items() if w == worker)

    def shares(self, batches: Sequence[int]) -> dict[str, list[int]]:
        """A step's minibatches grouped by the worker holding them (workers in first-seen
        order, each one's minibatches in order)."""
        out: dict[str, list[int]] = {}
        for b in batches:
            out.setdefault(self.owner[b], []).append(b)
        return out

    def reassign(self, lost: Sequence[str], left: Sequence[str]) -> dict[str, list[int]]:
        """Hand the minibatches of the ``lost`` workers to those ``left``; returns what each
        of them must load."""
        moved = sorted(b for b, w in self.owner.items() if w in set(lost))
        out: dict[str, list[int]] = {}
        for j, b in enumerate(moved):
            worker = left[j % len(left)]
            self.owner[b] = worker
            out.setdefault(worker, []).append(b)
        return out


def ranges(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted minibatch numbers as ``[first, stop)`` runs (what a reader reads at once)."""
    out: list[tuple[int, int]] = []
    for b in sorted(numbers):
        if out and out[-1][1] == b:
            out[-1] = (out[-1][0], b + 1)
        else:
            out.append((b, b + 1))
    return out
