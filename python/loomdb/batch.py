"""The unit that flows between storage formats, the trainer and backends.

A storage format yields :class:`Batch` objects; a backend computes on them; the trainer only
loops.  ``X`` is whatever the format stores, as long as it behaves like a matrix for the two
products generalized linear models need (TOC §4, ARCHITECTURE "Seams"):

* ``X @ W`` — right multiplication, ``W`` of shape ``(m,)`` or ``(m, k)``;
* ``R @ X`` — left multiplication, ``R`` of shape ``(n,)`` or ``(k, n)``.

A dense ``numpy.ndarray``, a ``TocMatrix`` and a woven block read at precision ``s`` all qualify.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class MatrixLike(Protocol):
    """What a batch payload must support so that backends can compute on it."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __matmul__(self, other: np.ndarray) -> np.ndarray: ...

    def __rmatmul__(self, other: np.ndarray) -> np.ndarray: ...


@dataclass
class Batch:
    """One stored minibatch: the feature payload, its labels and what reading it cost."""

    X: Any
    y: np.ndarray
    number: int = 0
    nbytes: int = 0
    meta: dict[str, Any] = field(default_factory=dict)  # reported in the epoch's history
    scratch: dict[str, Any] = field(default_factory=dict)  # a backend's working space

    @property
    def rows(self) -> int:
        return int(self.y.shape[0])
