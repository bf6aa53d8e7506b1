"""Consecutive minibatches' SGD steps in one numba call: the cpu backend's serial loop and every
parallel shard, for dense minibatches of models narrow enough that Python's per-minibatch work
outweighs the arithmetic, and for TOC and MLWeaving minibatches of any width.  No paper section
(Bismarck's SGD step, ``trainer``'s steps 1–4; the products of TOC §4 and MLWeaving §4.2).

Why: a 256-row × 20-feature minibatch's step is a few thousand multiply-adds, and the per-batch
path around them (a dozen numpy and numba calls, each holding the interpreter lock) took 22 µs
of its ~25 µs, so a warm epoch over 1M rows cost 90 ms and two shard threads, each waiting for
the lock, ran slower than one; a TOC or MLWeaving minibatch's products are numba already, and
the same Python around them was a third of a cold census-like TOC epoch and most of an MLWeaving
epoch at 4 bits. Here a run of minibatches is one ``nogil`` call, so shard threads run side by
side. A dense minibatch is stepped in one pass per row (its margins, loss and gradient while the
row is in cache); a TOC minibatch with TOC's own passes (``toc_products``: A·v, then v·A of the
residuals), an MLWeaving one with the bit-sliced products of its planes (``weave_products``).

What it computes is the trainer's step, with the same kernels for the parts that are not
products — ``class_of``, ``target``, ``loss_add``, ``assemble``, ``momentum_step``,
``shrink`` — in the same order: targets, margins at ``W∘scale`` with the shift folded into the
offset, the loss and residuals scaled by ``sw / widest``, the gradient plus
``l2 · rows/widest · W``, the optimiser's update, the proximal L1 step, and a stop at the first
non-finite model.  Departures, in the last bits only (tests/unit/test_fused_steps.py holds the
models within 1e-10): dense products add row by row instead of in BLAS's order, and the offset
``b − shift·(W∘scale)`` is summed here, not by BLAS.  Which path runs depends only on the
payload, the model's width, the backend and the optimiser, never on a thread or the machine's
load, so a train is reproducible run to run and a parallel train with one shard is the serial
loop bit for bit.

Wider dense models (features × classes above ``WIDEST``: MNIST's 784 × 10) keep the per-batch
path, whose BLAS products outrun these loops and release the lock themselves.  So do skip
policies (the batch's weights), other backends, Adam (its ``β**t`` is Python's ``pow``, whose
bits this kernel does not promise) and other payloads (sparse, pcr).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from numba import njit, typed, types
from numba.extending import overload

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)
from loomdb.codecs import toc_products, weave_products
from loomdb.codecs.toc import TocMatrix
from loomdb.codecs.weave import WovenMatrix
from loomdb.errors import LoomFormatError
from loomdb.learn.step_kernels import (
    KIND_CODES,
    assemble,
    class_of,
    loss_add,
    loss_of,
    momentum_step,
    shrink,
    target,
)
from loomdb.seams import Batch

# dense features × classes served here; wider models' products are BLAS's.  Measured (a serial
# warm epoch, 256-row minibatches): 1.8x the per-batch path at 20 × 1, 1.2x at 256 × 1 and
# 128 × 4, even at 512 × 1, 0.87x at 100 × 10, 0.76x at 200 × 8.
WIDEST = 512
RUN = 64  # minibatches per call: what a shard holds beyond its queue, and a cancel's delay
DENSE, TOC, WOVEN = "dense", "toc", "mlweaving"


def _read(dtype: Any, ndim: int) -> types.Array:
    """The type of a C-ordered array the kernel only reads (writable ones are taken too)."""
    return types.Array(dtype, ndim, "C", readonly=True)


_U32, _U64 = _read(types.uint32, 1), _read(types.uint64, 1)
_PAYLOADS = {
    DENSE: _read(types.float64, 2),
    # a TocMatrix's tree: first-layer pairs (32-bit), their shift, the value table, kept
    # parents, keys, codes, row starts
    TOC: types.Tuple((_U32, types.uint32, _read(types.float64, 1), _U32, _U32, _U32, _U64)),
    # a WovenMatrix's planes as the bit-sliced kernels read them, and its rows
    WOVEN: types.Tuple((_read(types.uint64, 3), types.int64)),
}
_TREE = (np.uint32, np.float64, np.uint32, np.uint32, np.uint32, np.uint64)  # the arrays
_NONE_2D, _NONE_1D = np.zeros((0, 0)), np.zeros(0)


def serves(backend: Any, optimizer: Any) -> bool:
    """Whether a train on ``backend`` with ``optimizer`` steps here (what its payloads allow)."""
    return getattr(backend, "name", None) == "cpu" and getattr(optimizer, "name", None) in (
        "sgd",
        "nesterov",
    )


def runs(
    batches: Iterable[Batch], width: int, kind_of: Callable[[Batch, int], str | None] | None = None
) -> Iterator[tuple[str, list[Batch]] | Batch]:
    """``batches`` as ``(payload, minibatches)``: up to ``RUN`` consecutive minibatches of one
    payload this module steps (for a model of ``width`` features × classes; ``kind_of``: which
    payload a minibatch is to another stepper, ``payload_of`` by default), and each other batch
    alone, in order."""
    kind_of = kind_of or payload_of
    run: list[Batch] = []
    kind = ""  # the run's payload
    for batch in batches:
        this = kind_of(batch, width)
        if run and (this != kind or len(run) == RUN):
            yield kind, run
            run = []
        if this is None:
            yield batch
            continue
        run.append(batch)
        kind = this
    if run:
        yield kind, run


def payload_of(batch: Batch, width: int) -> str | None:
    """``DENSE``, ``TOC``, ``WOVEN``, or None: the per-batch path steps it."""
    if batch.weights is not None or batch.removed:
        return None
    X = batch.X
    if type(X) is TocMatrix:
        tree = X.tree()
        arrays = tree[:1] + tree[2:]
        if type(tree[1]) is not np.uint32 or any(
            a.dtype != d or not a.flags.c_contiguous for a, d in zip(arrays, _TREE)
        ):
            return None  # 64-bit pairs: the per-batch path
        return TOC
    if type(X) is WovenMatrix:
        return WOVEN
    if type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and X.flags.c_contiguous:
        return DENSE if width <= WIDEST else None
    return None


def step(
    kind: str, run: list[Batch], total: float, W, b, problem, config, optimizer, lr, widest
) -> tuple[float, int, bool]:
    """Train ``run`` (minibatches of payload ``kind``, from ``runs``) in order, updating ``W``,
    ``b``, ``optimizer`` and ``widest`` in place; ``(total + each minibatch's Σ loss·weight,
    rows, diverged)`` — the sums added minibatch by minibatch, as the per-batch path adds them,
    so how minibatches are grouped into runs never changes a bit; diverged: the model turned
    non-finite and the run stopped there. A label outside the classes raises what the per-batch
    path raises."""
    momentum = optimizer.name == "nesterov"
    _check_model(W, b, problem, optimizer if momentum else None)
    payloads, labels = _prepared(kind, run, W.shape[0])
    state = (
        (optimizer.vW, optimizer.sW, optimizer.vb, optimizer.sb)
        if momentum
        else (_NONE_2D, _NONE_2D, _NONE_1D, _NONE_1D)
    )
    tmax = -1 if not momentum or optimizer.tmax is None else int(optimizer.tmax)
    weights = problem.class_weights if problem.class_weights is not None else _NONE_1D
    total, rows, steps, wide, t, failed, diverged = _steps(
        payloads,
        labels,
        float(total),
        KIND_CODES[config.kind],
        problem.class_values if problem.classes else _NONE_1D,
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


def _check_model(W, b, problem, momentum) -> None:
    """Refuse a model whose parts disagree in shape before the kernel indexes one by
    another's: a parallel epoch's model and optimiser state arrive as bytes (``shard_state``),
    and the compiled loops check no bounds."""
    m, k = W.shape if W.ndim == 2 else (-1, -1)
    arrays: dict[str, tuple[Any, tuple[int, ...]]] = {"b": (b, (k,))}
    arrays.update(scale=(problem.scaling.scale, (m,)), shift=(problem.scaling.shift, (m,)))
    if problem.class_weights is not None:
        arrays["class_weights"] = (problem.class_weights, (len(problem.classes),))
    if momentum is not None:
        for name in ("vW", "sW", "vb", "sb"):
            arrays[name] = (getattr(momentum, name), (m, k) if name[-1] == "W" else (k,))
    bad = [n for n, (a, shape) in arrays.items() if np.shape(a) != shape]
    if k != problem.k or bad:
        raise LoomFormatError(
            f"a model of shape {W.shape} for {problem.k} class columns, its "
            f"{', '.join(bad) or 'parts'} of another shape",
            hint=HINT,
        )


def _check_batch(X: Any, y: np.ndarray, m: int) -> None:
    """Refuse a minibatch whose width is not the model's, or whose labels are not one a row."""
    rows, width = X.shape
    if width != m or len(y) != rows:
        raise LoomFormatError(
            f"a minibatch of {rows} rows × {width} features with {len(y)} labels, for a model "
            f"of {m} features",
            hint=HINT,
        )


HINT = "the minibatches and the model come from different indexes: loom_reindex the index"

_MEMO = "fused_run"  # the key of a run's prepared payloads in its first minibatch's scratch


def _prepared(kind: str, run: list[Batch], m: int) -> tuple[Any, np.ndarray]:
    """The run's payloads as the kernel reads them and its labels in one array.  A warm
    epoch's minibatches are the same objects every epoch (``store/epochs`` keeps them), so
    what is made here is kept in the run's first minibatch's ``scratch`` and used again while
    the run holds the very same payloads and labels: making them was a fifth of a warm dense
    epoch (4 µs a minibatch, measured over 1M × 20).  The memo holds the arrays, never the
    minibatches, so a cold epoch's minibatches are freed as before."""
    memo = run[0].scratch.get(_MEMO)
    if (
        memo is not None
        and memo[0] == (kind, m)
        and len(memo[1]) == len(run)
        and all(x is b.X and y is b.y for x, y, b in zip(memo[1], memo[2], run))
    ):
        return memo[3], memo[4]
    payloads = _listed(_PAYLOADS[kind])
    for batch in run:
        _check_batch(batch.X, batch.y, m)
        _append(payloads, _payload(kind, batch.X))
    labels = np.concatenate([batch.y for batch in run]).astype(np.float64, copy=False)
    run[0].scratch[_MEMO] = ((kind, m), [b.X for b in run], [b.y for b in run], payloads, labels)
    return payloads, labels


@njit(cache=True, nogil=True)
def _listed(item_type):  # pragma: no cover
    """An empty ``typed.List`` of ``item_type``, made by compiled code: the Python-level
    ``typed.List`` API compiles its helpers in every new process (half a second, measured: a
    PostgreSQL parallel worker is a new process every epoch), where this is read from numba's
    cache like every kernel here."""
    return typed.List.empty_list(item_type)


@njit(cache=True, nogil=True)
def _append(items, item):  # pragma: no cover
    """``items.append(item)``, compiled and cached for the same reason as :func:`_listed`."""
    items.append(item)


def _payload(kind: str, X: Any) -> Any:
    """What the kernel reads of a minibatch's payload ``X`` (``_PAYLOADS``)."""
    if kind == DENSE:
        return X
    return X.tree() if kind == TOC else (X.words(), X.shape[0])


@njit(cache=True, nogil=True, error_model="numpy")
def _steps(
    payloads, labels, total, kind, classes, k, weights, W, b, scale, shift, lr, l1, l2,
    fit_intercept, widest, momentum, vW, sW, vb, sb, t, tmax,
):  # pragma: no cover  # fmt: skip
    """The trainer's steps over the minibatches ``payloads`` in order, whose labels follow each
    other in ``labels``; ``(total + their losses, rows, steps, widest, t, failed, diverged)``
    — ``failed``: the minibatch whose label lies outside ``classes`` (−1), ``diverged``: the
    model turned non-finite (training stops at either)."""
    m = W.shape[0]
    Weff, grad = np.empty((k, m)), np.empty((k, m))  # by class: each row a contiguous vector
    offset, gsum, no_intercept = np.empty(k), np.empty(k), np.zeros(k)
    rows, steps, first = 0, 0, 0
    for s in range(len(payloads)):
        payload = payloads[s]
        n = rows_of(payload)
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
        loss, known = gradient(
            payload, kind, y, classes, k, weights, Weff, offset, widest, grad, gsum
        )
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


def rows_of(payload):  # pragma: no cover
    """A payload's rows (numba: ``_rows_of``)."""


def gradient(
    payload, kind, y, classes, k, weights, Weff, offset, widest, grad, gsum
):  # pragma: no cover
    """One minibatch's ``(Σ loss·sw, every label known)``, and into ``grad`` and ``gsum``
    (Xᵀ·G)ᵀ and ΣG for ``G = loss′ · sw / widest`` (``residuals``); ``Weff`` holds a row of
    weights per class (numba: ``_gradient``, by payload)."""


@overload(rows_of, jit_options={"cache": True})
def _rows_of(payload):  # pragma: no cover
    if isinstance(payload, types.Array):
        return lambda payload: payload.shape[0]
    if len(payload) == 2:  # WOVEN
        return lambda payload: payload[1]
    return lambda payload: len(payload[-1]) - 1  # a TOC tree: its row starts


@overload(gradient, jit_options={"cache": True})
def _gradient(
    payload, kind, y, classes, k, weights, Weff, offset, widest, grad, gsum
):  # pragma: no cover
    if isinstance(payload, types.Array):
        return _dense_gradient
    return _woven_gradient if len(payload) == 2 else _toc_gradient


@njit(cache=True, nogil=True, inline="always")
def _label(y, i, classes, weights):  # pragma: no cover
    """Row i's class (−2 in regression, −1 unknown) and weight."""
    if len(classes):
        return class_of(y[i], classes, weights)
    return -2, 1.0  # regression: the value is the target, every row weighs 1


def _dense_gradient(
    payload, kind, y, classes, k, weights, Weff, offset, widest, grad, gsum
):  # pragma: no cover
    """A dense minibatch in one pass over its rows: each row's margins, residuals and share of
    the gradient while the row is in cache."""
    X = payload
    grad[:] = 0.0
    gsum[:] = 0.0
    loss, product = 0.0, 1.0
    for i in range(X.shape[0]):
        label, w = _label(y, i, classes, weights)
        if label == -1:
            return loss_of(loss, product), False
        x = X[i]
        for c in range(k):
            z = _dot(x, Weff[c]) + offset[c]
            loss, product, g = _residual(kind, z, y, i, label, c, k, w, widest, loss, product)
            gsum[c] += g
            into = grad[c]
            for f in range(len(x)):
                into[f] += x[f] * g
    return loss_of(loss, product), True


def _toc_gradient(
    payload, kind, y, classes, k, weights, Weff, offset, widest, grad, gsum
):  # pragma: no cover
    """A TOC minibatch: A·(W∘scale) by TOC's forward pass, the residuals row by row, then
    their product with A by its backward pass — what ``TocMatrix``'s ``@`` does."""
    n, cols = len(payload[-1]) - 1, grad.shape[1]  # ``TocMatrix.tree``: row starts last
    if k == 1:
        Z = toc_products.matvec(*payload, Weff[0]).reshape(n, 1)
    else:
        Z = toc_products.matmat(*payload, np.ascontiguousarray(Weff.T))
    G = np.empty((k, n))
    loss, known = _residuals(kind, Z, y, classes, k, weights, offset, widest, G, gsum)
    if not known:
        return loss, False
    if k == 1:
        grad[0] = toc_products.rmatvec(*payload, G[0], cols)
    else:
        grad[:] = toc_products.rmatmat(*payload, G, cols)
    return loss, True


def _woven_gradient(
    payload, kind, y, classes, k, weights, Weff, offset, widest, grad, gsum
):  # pragma: no cover
    """An MLWeaving minibatch: A·(W∘scale) and the residuals' product with A straight from its
    planes, a class at a time (``weave_products``) — what ``WovenMatrix``'s ``@`` does."""
    words, n = payload
    Z = weave_products.matmul(words, Weff.T)  # rows padded to 8: those past n are never read
    G = np.empty((k, n))
    loss, known = _residuals(kind, Z, y, classes, k, weights, offset, widest, G, gsum)
    if not known:
        return loss, False
    grad[:] = weave_products.rmatmul(words, G.T, grad.shape[1]).T
    return loss, True


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _residuals(kind, Z, y, classes, k, weights, offset, widest, G, gsum):  # pragma: no cover
    """``(Σ loss·sw, every label known)`` of margins ``Z + offset`` over ``G``'s rows, and into
    ``G`` (by class) and ``gsum`` the residuals ``loss′ · sw / widest`` and their sums."""
    gsum[:] = 0.0
    loss, product = 0.0, 1.0
    for i in range(G.shape[1]):
        label, w = _label(y, i, classes, weights)
        if label == -1:
            return loss_of(loss, product), False
        for c in range(k):
            z = Z[i, c] + offset[c]
            loss, product, g = _residual(kind, z, y, i, label, c, k, w, widest, loss, product)
            G[c, i] = g
            gsum[c] += g
    return loss_of(loss, product), True


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _residual(kind, z, y, i, label, c, k, w, widest, loss, product):  # pragma: no cover
    """Row i's loss·w at margin ``z`` for target column ``c`` (its value in regression,
    ``label`` −2, else the 0/1 of its class) added to the running ``(loss, product)``
    (``loss_add``), and its loss′·w / widest."""
    t = y[i] if label == -2 else target(label, c, k)
    loss, product, d = loss_add(kind, z, t, w, loss, product)
    return loss, product, d * (w / widest)


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
