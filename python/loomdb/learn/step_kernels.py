"""One SGD step's arithmetic besides the products, in numba: a batch's 0/1 targets and class
weights; the loss, the scaled residuals and their column sums in one pass over the batch; the
gradient's assembly; Nesterov's update.
No paper section (Bismarck's SGD step; the losses of ``losses.py``).

Why: a 250-row minibatch's step made some thirty numpy calls besides its two products, each a
microsecond or more, and those fixed costs were half of a cold epoch over census-like data
(``bench cold``'s stages: 53 of 110 µs a toc batch).  The kernels compute exactly what the
numpy of ``losses.py`` and ``optimizers.py`` states, element by element, in the same order,
with two departures in the last bits: the loss and each residual column add row after row
instead of in numpy's pairwise order, and ``exp`` is the C library's where numpy may use its
own vectorised one.  Everything else is the same bits as the numpy forms (tested in
tests/unit/test_step_kernels.py).  They are ``nogil``, so a parallel train's shard threads
overlap in them too.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)

SQUARED, LOGISTIC, HINGE = 0, 1, 2
KIND_CODES = {"linear": SQUARED, "logistic": LOGISTIC, "svm": HINGE}
_LOG2 = math.log(2.0)
_TINY = 2.0**-20  # log1p(e) below it: e − e²/2 + e³/3, within 1e-18 relative
_FLUSH = 2.0**600  # a product of factors of at most 2 is logged before it passes this


@njit(cache=True, nogil=True)
def class_targets(y, classes, k, weights):  # pragma: no cover
    """``(T, sw, bad)``: ``Problem.targets`` of labels ``y`` over the sorted ``classes`` — row
    i's class is ``searchsorted(classes, y[i])``; ``T`` its 0/1 column (one column, class 1,
    when ``k`` is 1), ``sw`` its weight (``weights`` per class; 1 where there are none).  ``bad``
    is the first row whose label lies above every class (or has no weight), else −1."""
    n = len(y)
    T = np.zeros((n, k))
    sw = np.ones(n)
    for i in range(n):
        c, w = class_of(y[i], classes, weights)
        if c < 0:
            return T, sw, i
        j = 0 if k == 1 else c  # the column this row's class sets
        T[i, j] = target(c, j, k)
        sw[i] = w
    return T, sw, -1


@njit(cache=True, nogil=True, inline="always")
def class_of(label, classes, weights):  # pragma: no cover
    """``(c, weight)``: label's class ``searchsorted(classes, label)`` and its weight (1 where
    there are none); ``c`` is −1 for a label above every class (or without a weight)."""
    c = np.searchsorted(classes, label)
    if c >= len(classes) or (len(weights) and c >= len(weights)):
        return -1, 1.0
    return c, (weights[c] if len(weights) else 1.0)


@njit(cache=True, nogil=True, inline="always")
def target(c, j, k):  # pragma: no cover
    """Target column ``j``'s 0/1 value for class ``c``: class 1's column when ``k`` is 1,
    otherwise column c's (one-vs-rest)."""
    return 1.0 if c == (1 if k == 1 else j) else 0.0


@njit(cache=True, nogil=True, inline="always")
def _logistic(z, t):  # pragma: no cover
    """``(log(1 + eᶻ) − t·z, σ(z) − t)`` as ``np.logaddexp(0, z) − t·z`` and
    ``losses.sigmoid(z) − t`` compute them, from one exponential: e^(−|z|)."""
    if z >= 0.0:
        e = math.exp(-z)
        soft = _LOG2 if z == 0.0 else z + math.log1p(e)
        return soft - t * z, 1.0 / (1.0 + e) - t
    e = math.exp(z)  # z < 0, or NaN: both NaN then
    soft = math.log1p(e) if z < 0.0 else z
    return soft - t * z, e / (1.0 + e) - t


@njit(cache=True, nogil=True, inline="always")
def loss_add(kind, z, t, w, total, product):  # pragma: no cover
    """``(total, product, loss′)``: ``w · loss(z, t)`` added to a running loss kept as
    ``total + log(product)`` (:func:`loss_of`), and the derivative ``loss_at`` gives.

    A logistic row of weight 1 multiplies its ``1 + e^(−|z|)`` (at most 2) into ``product``
    instead of adding ``log1p`` of it: one ``log`` per many rows instead of a ``log1p`` per
    row (a warm dense epoch over 1M × 20 rows: 43 → 36 ms).  The sum differs
    from the row-by-row one in its last bits only; below ``_TINY`` the term is added as
    ``log1p``'s series, so a confident row's tiny loss is not lost in the product's rounding.
    The derivative, and so the model, is the same."""
    if kind != LOGISTIC or w != 1.0:
        value, d = loss_at(kind, z, t)
        return total + value * w, product, d
    e = math.exp(-abs(z))  # NaN stays NaN
    if z >= 0.0:
        d = 1.0 / (1.0 + e) - t
        total += z - t * z
    else:  # z < 0, or NaN
        d = e / (1.0 + e) - t
        total -= t * z
    if e < _TINY:
        return total + e * (1.0 - e * (0.5 - e / 3.0)), product, d
    product *= 1.0 + e
    if product > _FLUSH:  # long before it could overflow
        return total + math.log(product), 1.0, d
    return total, product, d


@njit(cache=True, nogil=True, inline="always")
def loss_of(total, product):  # pragma: no cover
    """The running loss of :func:`loss_add`."""
    return total + math.log(product)


@njit(cache=True, nogil=True, inline="always")
def loss_at(kind, z, t):  # pragma: no cover
    """``(loss, loss′)`` of margin ``z`` against target ``t``: ``losses.py``'s value and
    derivative for one element."""
    if kind == SQUARED:
        r = z - t
        return 0.5 * r**2, r
    if kind == LOGISTIC:
        return _logistic(z, t)
    u = 2.0 * t - 1.0  # HINGE, with t ∈ {0, 1} taken to ±1
    m = 1.0 - u * z
    value = m if not m <= 0.0 else 0.0  # np.maximum(0, m): NaN stays NaN
    return value, (-u if u * z < 1.0 else 0.0)


@njit(cache=True, nogil=True, error_model="numpy")
def residuals(kind, Z, T, sw, widest):  # pragma: no cover
    """``(Σ loss·sw, G, G's column sums)`` where ``G = loss′(Z, T) · (sw / widest)``: the
    trainer's ``(loss.value(Z, T) * sw[:, None]).sum()`` and ``loss.derivative(Z, T) * (sw /
    widest)[:, None]`` of ``losses.py``, in one pass."""
    n, k = Z.shape
    G = np.empty((n, k))
    gsum = np.zeros(k)
    total, product = 0.0, 1.0
    for i in range(n):
        w = sw[i]
        s = w / widest
        for j in range(k):
            total, product, d = loss_add(kind, Z[i, j], T[i, j], w, total, product)
            g = d * s
            G[i, j] = g
            gsum[j] += g
    return loss_of(total, product), G, gsum


@njit(cache=True, nogil=True, error_model="numpy")
def assemble(grad, scale, shift, gsum, decay, W):  # pragma: no cover
    """``scale[:, None] * (grad − outer(shift, gsum)) + decay · W``: the gradient of the
    standardised features' data term plus L2, from the raw product ``grad`` = Xᵀ·G."""
    m, k = grad.shape
    out = np.empty((m, k))
    for i in range(m):
        for j in range(k):
            out[i, j] = scale[i] * (grad[i, j] - shift[i] * gsum[j]) + decay * W[i, j]
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def momentum_step(p, g, v, s, beta, lr):  # pragma: no cover
    """Nesterov's ``v ← β·v + g; p ← p − lr·(g + β·v)`` and the running sum ``s += p``, element
    by element (``optimizers.Nesterov.step``), in place; any layout, one shape.  ``s`` sums the
    forward point, before the trainer's proximal L1 step (``Nesterov.end_epoch`` takes the
    mean's proximal point); the fused and device steps sum the same point."""
    for i in range(p.size):
        vi = v.flat[i] * beta + g.flat[i]
        v.flat[i] = vi
        pi = p.flat[i] - lr * (g.flat[i] + beta * vi)
        p.flat[i] = pi
        s.flat[i] += pi


@njit(cache=True, nogil=True, error_model="numpy")
def shrink(W, amount):  # pragma: no cover
    """The proximal step of ``amount·‖W‖₁`` in place: ``sign(W) · max(|W| − amount, 0)``,
    element by element as numpy computes it (NaN stays NaN)."""
    for i in range(W.size):
        w = W.flat[i]
        a = abs(w) - amount
        sign = 1.0 if w > 0.0 else (-1.0 if w < 0.0 else w - w)  # np.sign: +0 at ±0, NaN kept
        W.flat[i] = sign * (a if a >= 0.0 or a != a else 0.0)
