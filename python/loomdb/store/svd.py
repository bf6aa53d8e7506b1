"""Funk's incremental SVD: the dimensionality reduction of SlimML's aggregator.

SlimML §3.2, step 1 (and §3.4: "the incremental SVD method [5]", Simon Funk's): the N×d
attribute matrix becomes a dense N×v one, X′ = U, one dimension at a time, each fitted to the
residual left by the dimensions before it by stochastic gradient descent over the entries —
e = 10 iterations per dimension, each iteration sweeping the entries of a = 5% of the attributes
(at least one) drawn at random, so the cost is O(v·e·a·N) and the time does not grow with d
beyond a.  U and the attribute loadings M start at 0.1 (Funk's initial value).  It is an
approximation: a dimension sees at most e·a attributes.  Only the ordering of rows along each
dimension matters downstream (the median splits of ``store.groups``).

Departures, each for a reason:

* values are z-scored with the layout's column statistics before the factorisation (inside the
  kernel; nothing is copied), so a column's unit cannot decide the division on its own;
* each variable gets its own step — a row's coordinate η/a, an attribute's loading η/N — where
  Funk used one learning rate (0.001) tuned to ratings: a row here has a entries per iteration
  and an attribute N, and no single rate suits both (measured on a9a and MNIST: with one rate
  the loadings either stay at 0.1 or diverge within e = 10 iterations);
* an attribute's loading takes the sum of its N entry-wise updates once per sweep of its column
  (a row's coordinate moves after every entry, as in Funk's).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)

ITERATIONS = 10  # e: iterations per dimension (SlimML §4.2)
ATTRIBUTE_SHARE = 0.05  # a: the share of attributes each iteration sweeps (SlimML §4.2)
STEP = 1.0  # η
INITIAL = 0.1  # Funk's initial value of every coordinate and loading


@njit(cache=True)
def _factorise(
    X, shift, scale, dims, iterations, per_iteration, step, initial, seed
):  # pragma: no cover
    np.random.seed(seed)
    n, d = X.shape
    U = np.empty((n, dims))
    M = np.empty((d, dims))
    lr_u = step / per_iteration
    lr_m = step / max(n, 1)
    for k in range(dims):
        U[:, k] = initial
        M[:, k] = initial
        for _ in range(iterations):
            columns = np.random.permutation(d)[:per_iteration]
            for c in range(per_iteration):
                j = columns[c]
                m = M[j, k]
                pull = 0.0
                for i in range(n):
                    r = (X[i, j] - shift[j]) * scale[j]
                    for q in range(k):
                        r -= U[i, q] * M[j, q]
                    err = r - U[i, k] * m
                    pull += err * U[i, k]
                    U[i, k] += lr_u * err * m
                M[j, k] = m + lr_m * pull
    return U


def reduce(X: np.ndarray, shift: np.ndarray, scale: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """X′ (N × ``dims``): Funk's incremental SVD of the z-scored rows of ``X``."""
    n, d = X.shape
    if dims < 1 or n == 0 or d == 0:
        return np.zeros((n, max(dims, 0)))
    per_iteration = max(1, int(round(ATTRIBUTE_SHARE * d)))
    return _factorise(
        np.ascontiguousarray(X, dtype=np.float64),
        np.ascontiguousarray(shift, dtype=np.float64),
        np.ascontiguousarray(scale, dtype=np.float64),
        int(dims),
        ITERATIONS,
        per_iteration,
        STEP,
        INITIAL,
        int(seed),
    )
