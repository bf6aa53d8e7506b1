"""The seams where loomdb's layers meet: batches, backends, storage formats, catalog records.

No paper section; this is the contract (ARCHITECTURE "Seams").  A storage format lays a source
out and yields :class:`Batch` objects for an epoch at a precision the trainer chose; a backend
computes on them; the trainer only loops; the catalog keeps :class:`IndexInfo` and
:class:`ModelRecord` rows.  Formats and backends are found by name through registries with
entry points (``loomdb.formats``, ``loomdb.backends``), so third parties plug in here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


class MatrixLike(Protocol):
    """A batch payload: dense array, ``TocMatrix``, woven planes read at precision s…"""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __matmul__(self, other: np.ndarray) -> np.ndarray: ...

    def __rmatmul__(self, other: np.ndarray) -> np.ndarray: ...


@dataclass
class Batch:
    """One minibatch: the format's payload ``X``, its labels and the bytes read for it.

    When a skip policy (SlimML, a baseline) removed rows of the minibatch before it was read,
    ``removed`` counts them and ``removed_bytes`` their stored bytes (never read), and
    ``weights`` (per kept row) are what the policy multiplies each row's gradient by so that
    the kept rows estimate the whole minibatch's gradient sum.
    """

    X: Any
    y: np.ndarray
    number: int = 0
    nbytes: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)  # a backend's working space
    weights: np.ndarray | None = None
    removed: int = 0
    removed_bytes: int = 0

    @property
    def rows(self) -> int:
        return int(self.y.shape[0])

    @property
    def sampled(self) -> int:
        """Rows of the minibatch as the sampler chose it, before any were removed."""
        return self.rows + self.removed


@dataclass
class Aggregates:
    """SlimML's aggregated points of a grouped layout (SlimML §3.2, Def. 3), one per group.

    ``means`` are the groups' mean rows in the original feature space, ``labels`` their mean
    labels ŷ, ``norm1`` ‖[a, 1]‖₁, ``rows`` their sizes and ``part_bytes`` the stored bytes of
    each of a group's parts (labels first), so the bytes a skipped group saves are known
    without reading it.
    """

    rows: np.ndarray
    means: np.ndarray
    labels: np.ndarray
    norm1: np.ndarray
    part_bytes: np.ndarray

    def bytes_of(self, ids: np.ndarray, parts: int) -> int:
        """Stored bytes of groups ``ids`` read with parts ``0 … parts``."""
        return int(self.part_bytes[ids, : parts + 1].sum())


@runtime_checkable
class Backend(Protocol):
    """Computes the two products a GLM needs on a batch of a format it supports.

    * ``margins(batch, W)``  → ``batch.X @ W``, ``W`` (features, k) → (rows, k);
    * ``gradient(batch, R)`` → ``Xᵀ·R``, ``R`` (rows, k) → (features, k).

    A backend whose hardware owns the epoch (fpga-sim) also has ``run_epoch`` (see
    :class:`EpochKernel`); the trainer's loop still owns history, stopping and validation.
    A backend that steps runs of minibatches itself (gpu) has ``steps(optimizer)``: None, or an
    object with ``runs`` and ``step`` as ``learn/fused_steps`` has them.  A backend with memory
    of its own (gpu) may have ``keeper()``: an object whose ``adopt(batch)`` keeps a minibatch
    there and gives back a stand-in for it (or None: no room), so that an epoch too large for
    the host's cache is kept on the device (``store/epochs``).
    """

    name: str

    def available(self) -> tuple[bool, str]: ...

    def supports(self, fmt: str) -> bool: ...

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray: ...

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray: ...


@dataclass
class EpochStep:
    """What a hardware epoch needs of the trainer: targets, step size and the model form."""

    kind: str
    lr: float
    l2: float
    fit_intercept: bool
    targets: Any  # callable: labels → (T (rows, k), sample weights (rows,))
    batch_size: int = 0  # rows of a whole stored minibatch (0: not known)


class EpochKernel(Protocol):
    """A backend that runs a whole epoch itself: returns the new (W, b) and its report."""

    def run_epoch(
        self, batches: Iterable[Batch], W: np.ndarray, b: np.ndarray, step: EpochStep
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]: ...


@dataclass
class IndexInfo:
    """A laid-out source, as the catalog records it (``loom.indexes``)."""

    name: str
    source: str
    label: str
    columns: list[str]
    format: str
    format_version: int
    options: dict[str, Any]
    stats: dict[str, Any]
    label_counts: dict[float, int]
    rows: int
    skipped: int
    batches: int
    bytes: int
    source_signature: str
    uid: str = ""
    owner: str | None = None
    built_at: Any = None

    @property
    def table(self) -> str:
        """What the index reads its source as (:func:`read_as`)."""
        return read_as(self.source, self.stats)


def read_as(source: str, stats: Any) -> str:
    """What an index built on ``source`` reads: the table its build read, schema-qualified as
    the engine resolved ``source`` then (``stats["relation"]``), so that another schema made
    current later reads that one still; ``source`` as given for a query, or where no table was
    recorded (an index built before they were, or on a temporary table)."""
    recorded = stats.get("relation") if isinstance(stats, dict) else None
    return recorded if isinstance(recorded, str) and recorded else source


@dataclass
class ModelRecord:
    """A trained model, as the catalog records it (``loom.models``)."""

    name: str
    kind: str
    coefficients: list[list[float]]
    intercept: list[float]
    feature_names: list[str]
    classes: list[float]
    standardization: dict[str, Any]
    options: dict[str, Any]
    history: list[dict[str, Any]]
    rows_processed: int
    rows_skipped: int
    timings: dict[str, float]
    storage_format: str
    backend: str
    source: str
    label: str
    report: dict[str, Any] | None = None
    uid: str = ""
    owner: str | None = None
    created_at: Any = None
    version: int | None = None  # 1, 2, … (loom.model_versions keeps the others)


class StorageFormat(Protocol):
    """How a profiled source becomes stored minibatch rows, and how they are read back.

    ``columns`` are the storage table's ``(name, abstract type)``; ``encode`` turns one
    minibatch (features then the label, float64) into the rows to store; ``read`` yields the
    batches of ``[first, stop)`` at ``precision`` bits (formats that store values at one
    precision ignore it and say so with ``any_precision = False``), checking what it reads.
    """

    name: str
    version: int
    any_precision: bool
    options: Any  # loomdb.options.Options: what this format accepts at layout time
    columns: list[tuple[str, str]]

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Any: ...

    def decode(self, rows: list[tuple], precision: int, n_features: int) -> Batch: ...

    def read(
        self, db: Any, relation: str, first: int, stop: int, precision: int, n_features: int
    ) -> Iterator[Batch]: ...
