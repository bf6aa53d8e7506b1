"""The ``cpu`` backend: numpy (and whatever numba kernels a format's payload uses).

It asks the payload for its products, so dense arrays use BLAS and compressed payloads
(``TocMatrix``, ``WovenMatrix``) run their own kernels without decompressing.
"""

from __future__ import annotations

import numpy as np

from loomdb.seams import Batch


class CpuBackend:
    name = "cpu"
    description = "numpy/numba on this machine's CPU"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def supports(self, fmt: str) -> bool:
        return True

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray:
        return np.asarray(batch.X @ W).reshape(batch.rows, -1)

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray:
        return np.asarray(R.T @ batch.X).T.reshape(-1, R.shape[1])
