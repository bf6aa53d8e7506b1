"""The gpu backend's SGD step in three CUDA kernels, through CuPy: the margins and residuals of
a minibatch's rows, the gradient's sums over slices of its rows, and the model's update.  No
paper section (Bismarck's SGD step, ``learn/trainer``'s steps 1–4).

Why: a step written with CuPy's operations was some ten calls (a product, a reduction, an
element-wise kernel each), 250–600 µs a minibatch on the host whatever its size, so a warm epoch
of dense minibatches was bound by Python: 20,000 × 4,096 in 1,024s took 5.9 ms on an H200
(3.9x the cpu backend's 16 cores, target 5x), 10,000 × 784 in 256s 10 ms (0.85x).  CuPy cannot
capture cuBLAS in a CUDA graph, so the step is these three launches instead, with no cuBLAS
(now 1.8–2.3 ms, 9–13x, and 2.3–2.6 ms, 3.2x; README, Benchmarks, gpu):

- ``loomdb_margins``: a warp per row reads the row once per class, ``Σⱼ (xⱼ − shiftⱼ)·Wⱼ·scaleⱼ
  + b`` (the shift folded in, as the trainer's offset ``b − shift·(W∘scale)`` is), then the loss
  and its derivative, element by element as ``learn/losses.py`` has them; it writes the
  residuals ``loss′·sw/widest`` and the row's loss ``Σₖ loss·sw``.
- ``loomdb_gradient_parts``: a thread per column and slice of ``PART`` rows sums ``xᵢⱼ·gᵢₖ``
  (and, in a column of ones past the last, ``gᵢₖ``), reading the rows in order: the threads of a
  warp read neighbouring columns of a row.  No atomics: the slices' sums are added in order by
  the update, so a train gives the same bits every run.
- ``loomdb_update``: a thread per weight (and per intercept) adds the slices' sums and takes
  the trainer's gradient ``scale·(product − shift·gsum) + decay·W`` (the intercept's ``gsum``, or
  zero without one), the optimiser's step (``sgd``, or ``nesterov`` as
  ``optimizers.Nesterov.step``: the running sum takes the point before the proximal step, as
  ``step_kernels.momentum_step`` does) and the proximal L1 step.

``device_arrays.NumpyDevice.step`` computes the same with numpy; the sums add in another order,
so the two agree to rounding, not to the bit (tests/unit/test_gpu_backend.py holds trained
models to the cpu backend's within 1e-9).
"""

from __future__ import annotations

import functools
from typing import Any

from loomdb.learn.step_kernels import HINGE, LOGISTIC, SQUARED

PART = 64  # rows per slice of the gradient's sums
WARPS = 8  # rows per block of the margins (a warp each)
THREADS = 128  # per block of the gradient's sums and of the update

_SOURCE = f"""
__device__ void loss_of(int kind, double x, double t, double* v, double* d) {{
    if (kind == {SQUARED}) {{
        double r = x - t;
        *v = 0.5 * r * r;
        *d = r;
    }} else if (kind == {LOGISTIC}) {{
        double e = exp(-fabs(x));
        double soft = x > 0.0 ? x + log1p(e) : log1p(exp(x));
        *v = soft - t * x;
        *d = (x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e)) - t;
    }} else {{  /* {HINGE}: t in {{0, 1}} taken to -1, +1 */
        double u = 2.0 * t - 1.0;
        double m = 1.0 - u * x;
        *v = (m > 0.0 || m != m) ? m : 0.0;
        *d = u * x < 1.0 ? -u : 0.0;
    }}
}}

extern "C" __global__ void loomdb_margins(
    const double* X, const double* W, const double* scale, const double* shift,
    const double* b, const double* T, const double* sw, int n, int m, int K, int kind,
    double widest, double* G, double* loss)
{{
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= n) return;  /* the whole warp: it shares its row */
    const double* x = X + (size_t)row * m;
    double w = sw[row], total = 0.0;
    for (int k = 0; k < K; k++) {{
        double z = 0.0;
        for (int j = lane; j < m; j += 32)
            z += (x[j] - shift[j]) * (W[(size_t)j * K + k] * scale[j]);
        for (int o = 16; o > 0; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
        double v, d;
        loss_of(kind, z + b[k], T[(size_t)row * K + k], &v, &d);
        if (lane == 0) G[(size_t)row * K + k] = d * (w / widest);
        total += v * w;
    }}
    if (lane == 0) loss[row] = total;
}}

extern "C" __global__ void loomdb_gradient_parts(
    const double* X, const double* G, int n, int m, int K, int part, double* P)
{{
    int j = blockIdx.x * blockDim.x + threadIdx.x;  /* j == m: the column of ones */
    if (j > m) return;
    int start = blockIdx.y * part, stop = min(n, start + part);
    for (int k = 0; k < K; k++) {{
        double sum = 0.0;
        for (int i = start; i < stop; i++)
            sum += (j < m ? X[(size_t)i * m + j] : 1.0) * G[(size_t)i * K + k];
        P[((size_t)blockIdx.y * (m + 1) + j) * K + k] = sum;
    }}
}}

extern "C" __global__ void loomdb_update(
    const double* P, int parts, int m, int K, const double* scale, const double* shift,
    double decay, double lr, double beta, int momentum, int intercept, double l1,
    double* W, double* b, double* vW, double* sW, double* vb, double* sb)
{{
    int at = blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (m + 1) * K) return;
    int j = at / K, k = at % K;
    double product = 0.0, gsum = 0.0;
    for (int c = 0; c < parts; c++) {{
        product += P[((size_t)c * (m + 1) + j) * K + k];
        gsum += P[((size_t)c * (m + 1) + m) * K + k];
    }}
    bool weight = j < m;
    double* p = weight ? W + at : b + k;
    double grad = weight ? scale[j] * (product - shift[j] * gsum) + decay * *p
                         : (intercept ? gsum : 0.0);
    if (momentum) {{
        double* v = weight ? vW + at : vb + k;
        double* s = weight ? sW + at : sb + k;
        double vi = *v * beta + grad;
        *v = vi;
        *p = *p - lr * (grad + beta * vi);
        *s = *s + *p;
    }} else {{
        *p = *p - lr * grad;
    }}
    if (weight && l1 != 0.0) {{  /* sign(p)·max(|p| − lr·l1, 0), NaN kept */
        double a = fabs(*p) - lr * l1;
        *p = a > 0.0 ? copysign(a, *p) : (a != a ? a : copysign(0.0, *p));
    }}
}}
"""


@functools.cache
def module() -> Any:
    """The three kernels, compiled by CuPy once per process (and cached on disk by it)."""
    import cupy

    return cupy.RawModule(code=_SOURCE)


def source() -> str:
    """The kernels' CUDA C (a test compiles it where a CUDA compiler is at hand)."""
    return _SOURCE
