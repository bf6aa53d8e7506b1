"""The ``gpu`` backend: the same products on an NVIDIA GPU through CuPy.  No paper section.

An optional extra (``pip install loomdb[gpu]``, CuPy built for your CUDA).  Dense payloads are
copied to the device per batch; compressed payloads that can show themselves as a dense array
(``toarray()``) are expanded on the host first — a GPU gains most on wide dense batches.
Results come back as numpy arrays, so the trainer is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.seams import Batch


def _cupy() -> Any:
    import cupy

    return cupy


class GpuBackend:
    name = "gpu"
    description = "CuPy on an NVIDIA GPU"

    def available(self) -> tuple[bool, str]:
        try:
            cp = _cupy()
        except ImportError as e:
            return False, f"CuPy is not installed ({e}); pip install 'loomdb[gpu]'"
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, no device
            return False, f"no usable CUDA device: {e}"
        return (count > 0, "" if count > 0 else "no CUDA device found")

    def supports(self, fmt: str) -> bool:
        return True

    def _device_matrix(self, batch: Batch) -> Any:
        cp = _cupy()
        cached = batch.scratch.get("gpu")
        if cached is None:
            X = batch.X if isinstance(batch.X, np.ndarray) else batch.X.toarray()
            cached = cp.asarray(np.ascontiguousarray(X, dtype=np.float64))
            batch.scratch["gpu"] = cached
        return cached

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray:
        cp = _cupy()
        return cp.asnumpy(self._device_matrix(batch) @ cp.asarray(W))

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray:
        cp = _cupy()
        return cp.asnumpy(self._device_matrix(batch).T @ cp.asarray(R))
