"""Where the gpu backend's arrays live: CuPy on an NVIDIA GPU, or numpy standing in for it.
No paper section.

The backend's code (``device_decode``, ``device_cache``, ``device_steps``) is written once
against an array module ``xp`` and the few things a device adds to it: a compute stream, a copy
stream that uploads while the compute stream works, the way back to the host, and the memory
free.  ``CupyDevice`` is the GPU; ``NumpyDevice`` runs the very same code on the host, so the
tests check its arithmetic on machines without a GPU (the GPU's own tests run where there is
one).

Uploads are ordered by events: the compute stream waits for the copy stream's upload before it
reads it.  CuPy's memory pool hands memory freed on a stream to the next allocation on that
stream, so an upload must stay referenced until the compute stream has used it: ``hold`` keeps
it until the next ``synchronize``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np


class NumpyDevice:
    """The host as a device: every operation runs at once, nothing is copied."""

    name = "numpy"
    xp: Any = np

    def upload(self, a: np.ndarray) -> Any:
        return np.array(a, order="C")  # a copy, as an upload is

    def hold(self, a: Any) -> None:
        pass

    def host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def synchronize(self) -> None:
        pass

    @contextlib.contextmanager
    def computing(self) -> Iterator[None]:
        yield

    def free_bytes(self) -> int:
        return 1 << 62


class CupyDevice:
    """The current CUDA device through CuPy, with a compute stream and a copy stream."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.xp = cupy
        self.compute = cupy.cuda.Stream(non_blocking=True)
        self.copy = cupy.cuda.Stream(non_blocking=True)
        self.held: list[Any] = []

    def upload(self, a: np.ndarray) -> Any:
        with self.copy:
            out = self.xp.asarray(np.ascontiguousarray(a))
        self.compute.wait_event(self.copy.record())
        self.held.append(out)
        return out

    def hold(self, a: Any) -> None:
        self.held.append(a)

    def host(self, a: Any) -> np.ndarray:
        return self.xp.asnumpy(a, stream=self.compute)  # waits for the compute stream

    def synchronize(self) -> None:
        self.compute.synchronize()
        self.held.clear()

    @contextlib.contextmanager
    def computing(self) -> Iterator[None]:
        with self.compute:
            yield

    def free_bytes(self) -> int:
        free, _total = self.xp.cuda.runtime.memGetInfo()
        return int(free) + int(self.xp.get_default_memory_pool().free_bytes())
