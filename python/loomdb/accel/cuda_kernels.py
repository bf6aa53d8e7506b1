"""The gpu backend's two element-wise kernels, in CUDA C through CuPy: a minibatch's residuals
and the model's update, each one launch where numpy's forms take a dozen.  No paper section.

Why: a step was some fifty CuPy calls of 10 µs each on the host, about 500 µs a minibatch
whatever its size (measured on an H100: 20,000 × 4,096 in 1,024s, 11 ms an epoch; 10,000 × 784
in 256s, 20 ms), so the device waited on Python.  These compute, element by element, what
``device_arrays.NumpyDevice`` computes with ``learn/losses.py``'s numpy forms and the trainer's
update (``step_kernels.assemble``, ``optimizers.SGD``/``Nesterov.step``); the compiler may fuse
a multiply and an add, so they agree with them to rounding, not to the bit
(tests/unit/test_gpu_backend.py holds trained models to 1e-9).
"""

from __future__ import annotations

import functools
from typing import Any

from loomdb.learn.step_kernels import HINGE, LOGISTIC, SQUARED

_RESIDUALS = f"""
double x = z + offset;
double v, d;
if (kind == {SQUARED}) {{
    double r = x - t;
    v = 0.5 * r * r;
    d = r;
}} else if (kind == {LOGISTIC}) {{
    double e = exp(-fabs(x));
    double soft = x > 0.0 ? x + log1p(e) : log1p(exp(x));
    v = soft - t * x;
    d = (x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e)) - t;
}} else {{  /* {HINGE}: t in {{0, 1}} taken to -1, +1 */
    double u = 2.0 * t - 1.0;
    double m = 1.0 - u * x;
    v = (m > 0.0 || m != m) ? m : 0.0;
    d = u * x < 1.0 ? -u : 0.0;
}}
value = v * w;
g = d * (w / widest);
"""

_UPDATE = """
double grad = scale * (product - shift * gsum) + decay * p;
if (momentum) {
    double vi = v * beta + grad;
    v = vi;
    p = p - lr * (grad + beta * vi);
    s = s + p;
} else {
    p = p - lr * grad;
}
"""


@functools.cache
def residuals() -> Any:
    """``(value·w, loss′·w/widest)`` of margins ``z + offset`` against targets ``t``."""
    import cupy

    return cupy.ElementwiseKernel(
        "float64 z, float64 offset, float64 t, float64 w, float64 widest, int32 kind",
        "float64 value, float64 g",
        _RESIDUALS,
        "loomdb_residuals",
    )


@functools.cache
def update() -> Any:
    """The gradient ``scale·(product − shift·gsum) + decay·p`` and the optimiser's step of
    ``p`` (and, with momentum, of its velocity ``v`` and running sum ``s``), in place.  ``s``
    takes ``p`` before the proximal L1 step, as ``step_kernels.momentum_step`` does
    (``optimizers.Nesterov.end_epoch`` shrinks the mean)."""
    import cupy

    return cupy.ElementwiseKernel(
        "float64 product, float64 scale, float64 shift, float64 gsum, float64 decay, "
        "float64 lr, float64 beta, bool momentum",
        "float64 p, float64 v, float64 s",
        _UPDATE,
        "loomdb_update",
    )
