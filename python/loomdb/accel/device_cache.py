"""The gpu backend's device cache: each minibatch decoded on the device once and kept there,
with its targets, while they fit a budget.  No paper section.

A minibatch is known by its payload object.  The trainer's epochs keep their decoded
minibatches between epochs (``store/epochs``, within ``cache_mb``) and hand the same objects to
every epoch (and to every trial of a ``loom_tune``), so a kept minibatch is uploaded and decoded
once and read from device memory after that.  An epoch too large for the host's ``cache_mb`` is
kept here instead (``adopt``): each minibatch is decoded on the device as it is read and the
host keeps a stand-in (a ``Resident`` payload and the labels), so later epochs read nothing from
the database and upload nothing.  An entry leaves the cache when its payload (or stand-in) is
freed.  The budget is ``SHARE`` of the device memory free when the cache was made (one cache
per process and device); a minibatch that does not fit is used and then freed, never kept.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

from loomdb.accel import device_decode
from loomdb.errors import LoomError
from loomdb.seams import Batch

SHARE = 0.5  # of the device memory free when the cache is made


class Resident:
    """The payload of a minibatch kept on the device (``DeviceCache.adopt``): the host holds
    only this, and the cache holds the decoded matrix for as long as this lives."""

    __slots__ = ("shape", "__weakref__")

    def __init__(self, shape: tuple[int, int]):
        self.shape = shape

    def toarray(self) -> Any:
        raise LoomError(
            "this minibatch is kept on the gpu backend's device, and only the gpu backend reads it",
            hint="a loomdb bug: another backend was handed the gpu's cached minibatch; train "
            'with {"cache_mb": 0} to go on, and report it',
        )


class DeviceCache:
    def __init__(self, device: Any, budget: int | None = None):
        self.device = device
        self.budget = int(SHARE * device.free_bytes()) if budget is None else budget
        self.held = 0
        self.entries: dict[int, dict[str, tuple[Any, int]]] = {}

    def matrix(self, X: Any) -> Any:
        """``X`` as a dense device matrix (``device_decode.dense``)."""
        kept = self.entries.get(id(X), {}).get("X")
        if kept is not None:
            return kept[0]
        with self.device.computing():
            out = device_decode.dense(self.device, X)
        return self._keep(X, "X", out, int(out.nbytes))

    def cost(self, batch: Batch) -> int:
        """The device bytes ``adopt`` keeps for ``batch``: its payload as a dense matrix."""
        rows, cols = batch.X.shape
        return 8 * rows * cols

    def adopt(self, batch: Batch) -> Batch | None:
        """``batch`` with its payload decoded on the device and kept there in its stead: the
        same minibatch, its ``X`` a ``Resident`` that the cache's entry lives as long as; None
        (nothing decoded) when the decoded matrix would not fit the budget."""
        if self.held + self.cost(batch) > self.budget:
            return None
        resident = Resident(batch.X.shape)
        with self.device.computing():
            out = device_decode.dense(self.device, batch.X)
        self._keep(resident, "X", out, int(out.nbytes))
        return dataclasses.replace(batch, X=resident, scratch={})

    def targets(self, batch: Batch, problem: Any) -> tuple[Any, Any]:
        """The minibatch's ``problem.targets`` on the device (raising what they raise)."""
        kept = self.entries.get(id(batch.X), {}).get("targets")
        if kept is not None and kept[0][0] is batch.y:
            return kept[0][1], kept[0][2]
        T, sw = problem.targets(batch.y)
        pair = (self.device.upload(T), self.device.upload(sw))
        self._keep(batch.X, "targets", (batch.y, *pair), T.nbytes + sw.nbytes)
        return pair

    def _keep(self, X: Any, name: str, value: Any, nbytes: int) -> Any:
        """``value``, kept as ``X``'s ``name`` if its ``nbytes`` fit the budget."""
        if self.held + nbytes > self.budget:
            return value
        key = id(X)
        if key not in self.entries:
            try:
                weakref.finalize(X, self._drop, key)
            except TypeError:  # a payload that cannot say when it is freed is never kept
                return value
            self.entries[key] = {}
        _, before = self.entries[key].get(name, (None, 0))
        self.entries[key][name] = (value, nbytes)
        self.held += nbytes - before
        return value

    def _drop(self, key: int) -> None:
        self.held -= sum(nbytes for _, nbytes in self.entries.pop(key, {}).values())
