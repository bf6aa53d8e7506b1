"""Consecutive dense minibatches' SGD steps in one numba call: the cpu backend's serial loop and
every parallel shard, for models narrow enough that Python's per-minibatch work outweighs the
arithmetic.  No paper section (Bismarck's SGD step, ``trainer``'s steps 1–4).

Why: a 256-row × 20-feature minibatch's step is a few thousand multiply-adds, and the per-batch
path around them (a dozen numpy and numba calls, each holding the interpreter lock) took
22 µs of its ~25 µs, so a warm epoch over 1M rows cost 90 ms and two shard threads, each
waiting for the lock, ran slower than one.  Here a run of minibatches is one ``nogil`` call
that computes each row's margins, loss and gradient in one pass over the row (the row is read
from memory once), so shard threads run side by side.

What it computes is the trainer's step, with the same kernels for the parts that are not
products — ``class_of``, ``target``, ``loss_at``, ``assemble``, ``momentum_step``, ``shrink`` —
in the same order: targets, margins at ``W∘scale`` with the shift folded into the offset, the
loss and residuals scaled by ``sw / widest``, the gradient plus ``l2 · rows/widest · W``, the
optimiser's update, the proximal L1 step, and a stop at the first non-finite model.  One
departure: the products X·W and Xᵀ·G are summed row by row here instead of in BLAS's order, so a
model differs from the per-batch path's in the last bits (tests/unit/test_dense_steps.py holds
them within 1e-12).  Which path runs depends only on the model's width, the optimiser and the
payload, never on a thread or the machine's load, so a train is reproducible run to run and a
parallel train with one shard is the serial loop bit for bit.

Wider models (features × classes above ``WIDEST``: MNIST's 784 × 10) keep the per-batch path,
whose BLAS products outrun these loops and release the lock themselves.  So do skip policies
(the batch's weights), other backends, Adam (its ``β**t`` is Python's ``pow``, whose bits this
kernel does not promise) and payloads that are not C-ordered float64 arrays (TOC, MLWeaving,
sparse).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numba import njit, typed, types

from loomdb.learn.step_kernels import (
    KIND_CODES,
    assemble,
    class_of,
    loss_at,
    momentum_step,
    shrink,
    target,
)
from loomdb.seams import Batch

# features × classes served here; wider models' products are BLAS's.  Measured (a serial warm
# epoch, 256-row minibatches): 1.8x the per-batch path at 20 × 1, 1.2x at 256 × 1 and 128 × 4,
# even at 512 × 1, 0.87x at 100 × 10, 0.76x at 200 × 8.
WIDEST = 512
RUN = 64  # minibatches per call: what a shard holds beyond its queue, and a cancel's delay
_MATRICES = types.Array(types.float64, 2, "C", readonly=True)
_NONE_2D, _NONE_1D = np.zeros((0, 0)), np.zeros(0)


def serves(backend: Any, optimizer: Any, W: np.ndarray) -> bool:
    """Whether a train on ``backend`` with ``optimizer`` and model ``W`` steps here."""
    return (
        getattr(backend, "name", None) == "cpu"
        and getattr(optimizer, "name", None) in ("sgd", "nesterov")
        and W.size <= WIDEST
    )


def runs(batches: Iterable[Batch]) -> Iterator[list[Batch] | Batch]:
    """``batches`` as lists of up to ``RUN`` consecutive dense minibatches, each other batch
    alone, in the order they came."""
    run: list[Batch] = []
    for batch in batches:
        if _dense(batch):
            run.append(batch)
            if len(run) == RUN:
                yield run
                run = []
            continue
        if run:
            yield run
            run = []
        yield batch
    if run:
        yield run


def _dense(batch: Batch) -> bool:
    X = batch.X
    return (
        type(X) is np.ndarray
        and X.dtype == np.float64
        and X.ndim == 2
        and X.flags.c_contiguous
        and batch.weights is None
        and not batch.removed
    )


def step(
    run: list[Batch], total: float, W, b, problem, config, optimizer, lr, widest
) -> tuple[float, int, bool]:
    """Train ``run`` in order, updating ``W``, ``b``, ``optimizer`` and ``widest`` in place;
    ``(total + each minibatch's Σ loss·weight, rows, diverged)`` — the sums added minibatch by
    minibatch, as the per-batch path adds them, so how minibatches are grouped into runs never
    changes a bit; diverged: the model turned non-finite and the run stopped there.  A label
    outside the classes raises what the per-batch path raises."""
    Xs = typed.List.empty_list(_MATRICES)
    for batch in run:
        Xs.append(batch.X)
    labels = np.concatenate([batch.y for batch in run]).astype(np.float64, copy=False)
    momentum = optimizer.name == "nesterov"
    state = (
        (optimizer.vW, optimizer.sW, optimizer.vb, optimizer.sb)
        if momentum
        else (_NONE_2D, _NONE_2D, _NONE_1D, _NONE_1D)
    )
    tmax = -1 if not momentum or optimizer.tmax is None else int(optimizer.tmax)
    weights = problem.class_weights if problem.class_weights is not None else _NONE_1D
    total, rows, steps, wide, t, failed, diverged = _steps(
        Xs,
        labels,
        float(total),
        KIND_CODES[config.kind],
        problem._class_values if problem.classes else _NONE_1D,
        problem.k,
        np.asarray(weights, dtype=np.float64),
        W,
        b,
        problem.scaling.scale,
        problem.scaling.shift,
        float(lr),
        float(config.l1),
        float(config.l2),
        bool(config.fit_intercept),
        float(widest[0]),
        momentum,
        *state,
        int(optimizer.t) if momentum else 0,
        tmax,
    )
    widest[0] = int(wide)
    if momentum:
        optimizer.t = int(t)
        optimizer.count += steps
    if failed >= 0:
        problem.targets(run[failed].y)  # raises the label's error, as the per-batch path does
    return total, rows, bool(diverged)


@njit(cache=True, nogil=True, error_model="numpy")
def _steps(
    Xs, labels, total, kind, classes, k, weights, W, b, scale, shift, lr, l1, l2,
    fit_intercept, widest, momentum, vW, sW, vb, sb, t, tmax,
):  # pragma: no cover  # fmt: skip
    """The trainer's steps over the minibatches ``Xs`` in order, whose labels follow each other
    in ``labels``; ``(total + their losses, rows, steps, widest, t, failed, diverged)`` —
    ``failed``: the minibatch whose label lies outside ``classes`` (−1), ``diverged``: the
    model turned non-finite (training stops at either)."""
    m = W.shape[0]
    Weff, grad = np.empty((k, m)), np.empty((k, m))  # by class: each row a contiguous vector
    offset, gsum, no_intercept = np.empty(k), np.empty(k), np.zeros(k)
    rows, steps, first = 0, 0, 0
    for s in range(len(Xs)):
        X = Xs[s]
        n = X.shape[0]
        y = labels[first : first + n]
        first += n
        if n == 0:
            continue
        for f in range(m):
            for c in range(k):
                Weff[c, f] = W[f, c] * scale[f]
        for c in range(k):
            offset[c] = b[c] - _dot(shift, Weff[c])
        widest = max(widest, float(n))
        loss, known = _gradient(kind, X, y, classes, k, weights, Weff, offset, widest, grad, gsum)
        if not known:
            return total, rows, steps, widest, t, s, False
        total += loss
        gW = assemble(grad.T, scale, shift, gsum, l2 * (n / widest), W)
        t = _update(
            W, b, gW, gsum if fit_intercept else no_intercept, lr, momentum, vW, sW, vb, sb, t, tmax
        )
        if l1:
            shrink(W, lr * l1)
        steps += 1
        rows += n
        if not np.isfinite(W).all():
            return total, rows, steps, widest, t, -1, True
    return total, rows, steps, widest, t, -1, False


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _gradient(
    kind, X, y, classes, k, weights, Weff, offset, widest, grad, gsum
):  # pragma: no cover
    """One minibatch's pass, row by row: its margins, ``(Σ loss·sw, every label known)``, and
    into ``grad`` and ``gsum`` (Xᵀ·G)ᵀ and ΣG for ``G = loss′ · sw / widest`` (``residuals``);
    ``Weff`` holds a row of weights per class."""
    grad[:] = 0.0
    gsum[:] = 0.0
    loss = 0.0
    m = X.shape[1]
    for i in range(X.shape[0]):
        label, w = -2, 1.0  # regression: the value is the target, every row weighs 1
        if len(classes):
            label, w = class_of(y[i], classes, weights)
            if label < 0:
                return loss, False
        ws = w / widest
        x = X[i]
        for c in range(k):
            z = _dot(x, Weff[c]) + offset[c]
            value, d = loss_at(kind, z, y[i] if label == -2 else target(label, c, k))
            loss += value * w
            g = d * ws
            gsum[c] += g
            into = grad[c]
            for f in range(m):
                into[f] += x[f] * g
    return loss, True


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _dot(a, b):  # pragma: no cover
    """``a · b`` in four running sums (elements f mod 4), added pairwise at the end: a fixed
    order that keeps four additions in flight where one sum would wait on each."""
    s0 = s1 = s2 = s3 = 0.0
    n = len(a)
    whole = n - n % 4
    for f in range(0, whole, 4):
        s0 += a[f] * b[f]
        s1 += a[f + 1] * b[f + 1]
        s2 += a[f + 2] * b[f + 2]
        s3 += a[f + 3] * b[f + 3]
    for f in range(whole, n):
        s0 += a[f] * b[f]
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _update(W, b, gW, gb, lr, momentum, vW, sW, vb, sb, t, tmax):  # pragma: no cover
    """The optimiser's step in place (``optimizers.SGD`` or ``Nesterov``); the next ``t``."""
    if momentum:
        now = t if tmax < 0 else min(t, tmax)
        beta = now / (now + 3.0)
        momentum_step(W, gW, vW, sW, beta, lr)
        momentum_step(b, gb, vb, sb, beta, lr)
        return t + 1
    for f in range(W.shape[0]):
        for c in range(W.shape[1]):
            W[f, c] -= lr * gW[f, c]
    for c in range(len(b)):
        b[c] -= lr * gb[c]
    return t
