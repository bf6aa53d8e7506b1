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
stream, so an upload stays referenced until the compute stream has used it: until the next
``synchronize``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from loomdb.accel import cuda_kernels
from loomdb.learn.losses import LOSSES
from loomdb.learn.step_kernels import KIND_CODES


class NumpyDevice:
    """The host as a device: every operation runs at once.  Its residuals are
    ``learn/losses.py``'s numpy forms; its update is ``step_kernels.assemble`` and the
    optimisers' steps, written with numpy."""

    name = "numpy"
    xp: Any = np

    def upload(self, a: np.ndarray) -> Any:
        return np.array(a, order="C")  # a copy, as an upload is

    def host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def synchronize(self) -> None:
        pass

    @contextlib.contextmanager
    def computing(self) -> Iterator[None]:
        yield

    def free_bytes(self) -> int:
        return 1 << 62

    def residuals(self, kind: str, Z, offset, T, sw, widest: float) -> tuple[Any, Any]:
        """``(loss·sw, loss′·sw/widest)`` of margins ``Z + offset`` against targets ``T``."""
        loss, Z = LOSSES[kind], Z + offset
        return loss.value(Z, T) * sw[:, None], loss.derivative(Z, T) * (sw / widest)[:, None]

    def update(self, p, product, scale, shift, gsum, decay, lr, state, beta) -> None:
        """``p``'s step, in place: its gradient ``scale·(product − shift·gsum) + decay·p``,
        then SGD's, or with ``state`` (velocity, running sum) Nesterov's."""
        grad = scale * (product - shift * gsum) + decay * p
        v, s = state
        if v is None:
            p -= lr * grad
            return
        v *= beta
        v += grad
        p -= lr * (grad + beta * v)
        s += p


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
        """``a`` on the device, copied on the copy stream; the compute stream waits for it.
        From pageable memory: staging through pinned memory here was slower (1.6 GB/s
        against 4.3 on an H100 machine, 32 MB arrays)."""
        with self.copy:
            out = self.xp.asarray(np.ascontiguousarray(a))
        self.compute.wait_event(self.copy.record())
        self.held.append(out)
        return out

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

    def residuals(self, kind: str, Z, offset, T, sw, widest: float) -> tuple[Any, Any]:
        return cuda_kernels.residuals()(Z, offset, T, sw[:, None], float(widest), KIND_CODES[kind])

    def update(self, p, product, scale, shift, gsum, decay, lr, state, beta) -> None:
        v, s = state
        momentum = v is not None
        if not momentum:  # the kernel's velocity and sum go unused: any array of p's shape
            v = s = self.xp.empty_like(p)
        cuda_kernels.update()(product, scale, shift, gsum, decay, lr, beta, momentum, p, v, s)
