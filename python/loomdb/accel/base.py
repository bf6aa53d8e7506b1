"""What a backend implements.

A backend computes the two products generalized linear models need on a :class:`Batch` of a
storage format it supports:

* ``margins(batch, W)``  → ``batch.X @ W``  (``W`` is ``(features, k)``, result ``(rows, k)``);
* ``gradient(batch, R)`` → ``Rᵀ @ batch.X`` transposed, i.e. ``Xᵀ·R`` of shape ``(features, k)``.

It also says whether it can run here (``available``) and on which formats (``supports``).

* A **training job** is the trainer calling ``margins`` and ``gradient`` on every batch a
  format yields — or, for a backend whose hardware owns the whole epoch loop, calling its
  ``fit(source, problem, config, progress) -> (model, history)`` once (``fpga_sim``), which may
  leave a ``last_report`` that is stored with the model.
* An **inference job** is ``margins`` over an index's stored batches
  (``loom_evaluate_index(model, index, backend)``), on the stored form: TOC blobs, woven planes.

Backends are found by name through the
registry (``loomdb.accel.registry``), which also loads the entry-point group ``loomdb.backends``,
so another package can add one without touching loomdb.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from loomdb.batch import Batch


@runtime_checkable
class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when usable here, else ``(False, why)``."""
        ...

    def supports(self, fmt: str) -> bool: ...

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray: ...

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray: ...
