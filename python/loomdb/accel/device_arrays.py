"""Where the gpu backend's arrays live: CuPy on an NVIDIA GPU, or numpy standing in for it.
No paper section.

The backend's code (``device_decode``, ``device_cache``, ``device_steps``) is written once
against an array module ``xp`` and the few things a device adds to it: a compute stream, a copy
stream that uploads while the compute stream works, the way back to the host, the memory free,
and one minibatch's SGD step (``step``: numpy's forms here, three CUDA kernels on a GPU).
``CupyDevice`` is the GPU; ``NumpyDevice`` runs the very same code on the host, its step in
numpy, so the tests check the backend's arithmetic on machines without a GPU (the GPU's own
tests, its kernels' against numpy's step among them, run where there is one).

Uploads are ordered by events: the compute stream waits for the copy stream's upload before it
reads it.  CuPy's memory pool hands memory freed on a stream to the next allocation on that
stream, so an upload stays referenced until the compute stream has used it: until the next
``synchronize``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from loomdb.accel import cuda_kernels
from loomdb.learn.losses import LOSSES
from loomdb.learn.step_kernels import KIND_CODES


@dataclasses.dataclass
class Model:
    """A run's model on the device: weights ``W`` (features × classes) and intercepts ``b``,
    Nesterov's velocities and running sums of each (None with sgd), and the scaling's
    ``scale`` and ``shift`` (one per feature): the trainer's weights act on
    ``(x − shift)·scale``."""

    W: Any
    b: Any
    vW: Any
    sW: Any
    vb: Any
    sb: Any
    scale: Any
    shift: Any


@dataclasses.dataclass(frozen=True)
class Step:
    """One minibatch's step: its loss, the widest minibatch so far (the residuals' divisor),
    the L2 decay ``l2 · rows/widest``, the step size, Nesterov's β (0 with sgd), whether the
    intercept learns, and the L1 weight of the proximal step."""

    kind: str
    widest: float
    decay: float
    lr: float
    beta: float
    momentum: bool
    intercept: bool
    l1: float


class NumpyDevice:
    """The host as a device: every operation runs at once.  Its step is ``learn/losses.py``'s
    numpy forms and the trainer's update (``step_kernels.assemble``, the optimisers' steps),
    written with numpy."""

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

    def step(self, X, T, sw, model: Model, step: Step, loss) -> None:
        """Minibatch ``X`` (targets ``T``, sample weights ``sw``) steps ``model`` in place and
        writes each row's loss ``Σₖ loss·sw`` into ``loss``."""
        fn, Weff = LOSSES[step.kind], model.W * model.scale[:, None]
        Z = X @ Weff + (model.b - model.shift @ Weff)
        loss[...] = (fn.value(Z, T) * sw[:, None]).sum(axis=1)
        G = fn.derivative(Z, T) * (sw / step.widest)[:, None]
        gsum = G.sum(axis=0)
        grad = model.scale[:, None] * (X.T @ G - model.shift[:, None] * gsum)
        _descend(model.W, grad + step.decay * model.W, model.vW, model.sW, step)
        _descend(model.b, gsum if step.intercept else np.zeros_like(gsum), model.vb, model.sb, step)
        if step.l1:
            shrunk = np.maximum(np.abs(model.W) - step.lr * step.l1, 0.0)
            model.W[...] = np.sign(model.W) * shrunk


def _descend(p, grad, v, s, step: Step) -> None:
    """``p``'s step down ``grad``, in place: SGD's, or with ``step.momentum`` Nesterov's (its
    velocity ``v`` and running sum ``s`` too)."""
    if not step.momentum:
        p -= step.lr * grad
        return
    v *= step.beta
    v += grad
    p -= step.lr * (grad + step.beta * v)
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

    def step(self, X, T, sw, model: Model, step: Step, loss) -> None:
        """``NumpyDevice.step`` in ``cuda_kernels``' three launches on the compute stream."""
        (n, m), K = X.shape, model.W.shape[1]
        parts = _blocks(n, cuda_kernels.PART)
        G, P = self.xp.empty((n, K)), self.xp.empty((parts, m + 1, K))
        i32, f64 = np.int32, np.float64
        _kernel("loomdb_margins")(
            (_blocks(n, cuda_kernels.WARPS),), (32 * cuda_kernels.WARPS,),
            (X, model.W, model.scale, model.shift, model.b, T, sw, i32(n), i32(m), i32(K),
             i32(KIND_CODES[step.kind]), f64(step.widest), G, loss),
        )  # fmt: skip
        _kernel("loomdb_gradient_parts")(
            (_blocks(m + 1, cuda_kernels.THREADS), parts), (cuda_kernels.THREADS,),
            (X, G, i32(n), i32(m), i32(K), i32(cuda_kernels.PART), P),
        )  # fmt: skip
        state = (model.vW, model.sW, model.vb, model.sb) if step.momentum else (model.W,) * 4
        _kernel("loomdb_update")(
            (_blocks((m + 1) * K, cuda_kernels.THREADS),), (cuda_kernels.THREADS,),
            (P, i32(parts), i32(m), i32(K), model.scale, model.shift, f64(step.decay),
             f64(step.lr), f64(step.beta), i32(step.momentum), i32(step.intercept),
             f64(step.l1), model.W, model.b, *state),
        )  # fmt: skip


def _blocks(count: int, per: int) -> int:
    return -(-count // per)


def _kernel(name: str) -> Any:
    return cuda_kernels.module().get_function(name)
