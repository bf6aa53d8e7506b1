"""The gpu backend's SGD steps: a run of minibatches stepped on the device, the model resident
there from the run's first step to its last.  No paper section (Bismarck's SGD step,
``learn/trainer``'s steps 1–4).

Why: the backend's two products alone (``margins``, ``gradient``) send the model to the device
and the margins and residuals back at every minibatch, and wait for each; an H100 then ran
slower than the cpu backend on every shape tried (0.20–0.68x).  Here the minibatches come from
the device cache (``device_cache``: decoded on the device once and kept), the model and the
optimiser's state are uploaded once per run of ``RUN`` minibatches and read back once, and
nothing in between waits for the device.

What it computes is the trainer's per-minibatch step: targets, margins at ``W∘scale`` with the
shift folded into the offset, the loss and residuals scaled by ``sw / widest``, the gradient plus
``l2 · rows/widest · W``, the optimiser's update (``sgd``, or ``nesterov`` as
``optimizers.Nesterov.step``, its running sum taking the point before the proximal step as
``step_kernels.momentum_step``'s does), the proximal L1 step: ``device_arrays``' ``step``, three
CUDA kernels on a GPU (``cuda_kernels``), ``learn/losses.py``'s numpy forms on numpy.
Departures, in the last bits: the products and sums add in the device's order, and a run's
losses are summed on the device, row by row, once at the end of the run; a model that turns
non-finite is found at the end of the run, not at the minibatch (the trainer restarts either
way).  Adam and skip policies keep the per-minibatch path (``margins``/``gradient``), on the
same device cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.accel.device_arrays import Model, Step
from loomdb.learn import fused_steps
from loomdb.seams import Batch

OPTIMIZERS = ("sgd", "nesterov")
RUN = fused_steps.RUN  # minibatches per run: one upload and one read-back of the model each
DEVICE = "device"


def payload_of(batch: Batch, width: int) -> str | None:
    """Every minibatch that no skip policy thinned is stepped here."""
    return DEVICE if batch.weights is None and not batch.removed else None


class DeviceSteps:
    def __init__(self, device: Any, cache: Any):
        self.device, self.cache = device, cache

    def runs(self, batches: Iterable[Batch], width: int) -> Iterator[Any]:
        return fused_steps.runs(batches, width, payload_of)

    def step(
        self, kind: str, run: list[Batch], total: float, W, b, problem, config, optimizer, lr,
        widest,
    ) -> tuple[float, int, bool]:  # fmt: skip
        """``fused_steps.step``'s contract: train ``run`` in order, updating ``W``, ``b``,
        ``optimizer`` and ``widest`` in place; ``(total + its losses, rows, diverged)``."""
        device, xp = self.device, self.device.xp
        momentum = optimizer.name == "nesterov"
        with device.computing():
            state = [device.upload(a) for a in _state(optimizer)] if momentum else [None] * 4
            vW, sW, vb, sb = state
            scale, shift = problem.scaling.scale, problem.scaling.shift
            model = Model(device.upload(W), device.upload(b), vW, sW, vb, sb,
                          device.upload(scale), device.upload(shift))  # fmt: skip
            losses = xp.zeros(sum(batch.rows for batch in run))
            rows = 0
            for batch in run:
                n = batch.rows
                if not n:
                    continue
                X = self.cache.matrix(batch.X)
                T, sw = self.cache.targets(batch, problem)
                widest[0] = max(widest[0], n)
                beta = _beta(optimizer) if momentum else 0.0
                step = Step(config.kind, widest[0], config.l2 * (n / widest[0]), lr, beta,
                            momentum, config.fit_intercept, config.l1)  # fmt: skip
                device.step(X, T, sw, model, step, losses[rows : rows + n])
                rows += n
            W[...] = device.host(model.W)
            b[...] = device.host(model.b)
            if momentum:
                for mine, theirs in zip(state, _state(optimizer)):
                    theirs[...] = device.host(mine)
            total += float(device.host(losses.sum()))
            device.synchronize()
        return total, rows, not (np.isfinite(W).all() and np.isfinite(b).all())


def _state(optimizer: Any) -> tuple[np.ndarray, ...]:
    return (optimizer.vW, optimizer.sW, optimizer.vb, optimizer.sb)


def _beta(optimizer: Any) -> float:
    """``optimizers.Nesterov.step``'s β for this step, counting it (the count stays on the
    host)."""
    t = optimizer.t if optimizer.tmax is None else min(optimizer.t, optimizer.tmax)
    optimizer.t += 1
    optimizer.count += 1
    return t / (t + 3.0)
