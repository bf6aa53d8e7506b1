"""The ``gpu`` backend: the trainer's steps on an NVIDIA GPU through CuPy.  No paper section.

An optional extra (``pip install loomdb[gpu]``, or ``loomdb[gpu-cuda13]``: CuPy for your
CUDA).  Minibatches stay on the device between epochs (``device_cache``, within half the device
memory free at the first train; an epoch too large for the host's ``cache_mb`` is kept on the
device only, ``keeper``), TOC and MLWeaving minibatches travel compressed and are decoded there
(``device_decode``), uploads run on their own stream while the compute stream works
(``device_arrays``), and a run of minibatches is stepped with the model resident on the device
(``device_steps``: sgd and nesterov).  Adam and skip policies use the two products
(``margins``, ``gradient``) minibatch by minibatch, on the same cache.  Results come back as
numpy arrays, so the trainer is unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from loomdb.accel.device_arrays import CupyDevice
from loomdb.accel.device_cache import DeviceCache
from loomdb.accel.device_steps import OPTIMIZERS, DeviceSteps
from loomdb.accel.registry import GPU_INSTALL
from loomdb.seams import Batch


def _cupy() -> Any:
    import cupy

    return cupy


@functools.cache
def _on_cupy() -> tuple[CupyDevice, DeviceCache]:
    """The process's one CuPy device and its cache, shared by every train (a tune's trials
    read the same kept minibatches)."""
    device = CupyDevice()
    return device, DeviceCache(device)


class GpuBackend:
    name = "gpu"
    description = "CuPy on an NVIDIA GPU"

    def __init__(self, device: Any = None):
        """On ``device`` (``device_arrays``; the tests run it on numpy), else on CuPy's."""
        self._device = device
        self._cache = None if device is None else DeviceCache(device)

    def available(self) -> tuple[bool, str]:
        if self._device is not None:
            return True, ""
        try:
            cp = _cupy()
        except ImportError as e:
            return False, f"CuPy is not installed ({e}); {GPU_INSTALL}"
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, no device
            return False, f"no usable CUDA device: {e}"
        return (count > 0, "" if count > 0 else "no CUDA device found")

    def supports(self, fmt: str) -> bool:
        return True

    def _shared(self) -> tuple[Any, DeviceCache]:
        if self._device is None:
            return _on_cupy()
        assert self._cache is not None
        return self._device, self._cache

    def _product(self, batch: Batch, other: np.ndarray, transposed: bool) -> np.ndarray:
        device, cache = self._shared()
        with device.computing():
            X = cache.matrix(batch.X)
            out = device.host((X.T if transposed else X) @ device.upload(other))
            device.synchronize()
        return out

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray:
        return self._product(batch, W, transposed=False)

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray:
        return self._product(batch, R, transposed=True)

    def keeper(self) -> DeviceCache:
        """What keeps an epoch too large for the host's ``cache_mb`` on the device
        (``store/epochs``: ``adopt``)."""
        return self._shared()[1]

    def steps(self, optimizer: Any) -> DeviceSteps | None:
        """The device's own steps for ``optimizer``, or None (the per-minibatch path)."""
        if getattr(optimizer, "name", None) not in OPTIMIZERS:
            return None
        return DeviceSteps(*self._shared())
