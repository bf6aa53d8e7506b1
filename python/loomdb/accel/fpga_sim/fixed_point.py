"""The engine's number formats (MLWeaving §4.2.2, §4.3.2, Algorithm 1) and the host's conversions.

Formats, as the engine's reference design uses them:

* **model**: int32 two's complement with 23 fraction bits (Q8.23).  Updates wrap modulo 2^32
  (a fixed-width register; there is no saturation logic).
* **sample value**: at precision s the engine sees bits a[1..s] of u, bit 1 the most
  significant; its value is Q_s(a) = Σ a[i]·2^−i (u / 2^32 truncated to s bits).
* **products** are bit-serial: Q_s(a)·x = Σ_{i=1..s} a[i]·(x >> i), one term per cycle, each
  term truncated by the arithmetic shift (floor).  The model enters widened by 4 extra fraction
  bits (Q8.27, i.e. x << 4) so the shifted terms keep 4 more bits.
* **accumulators** (dot products, per-feature gradients) are 36 bits wide with 27 fraction
  bits, two's complement, and *wrap* modulo 2^36.  Wrapping is modular, so summing exactly in
  int64 and wrapping once gives the same bits as wrapping after every addition; the simulator
  relies on that.  For data in [0, 1] a dot product leaves the range (±2^8) only when
  Σ|x_k| ≥ 256, i.e. when the model itself has diverged.
* **labels** are stored at 32 bits as Q8.23 (rounded to nearest on the host) and widened to
  Q.27 in the serial part.
* **serial part**: scale = df(dot, b) >> (j + log2 B) — λ = 2^−j and the 1/B of the mini-batch
  average are one arithmetic shift.  df is dot − b for least squares (the paper's only loss).
  loomdb's extension: "logistic" uses σ(dot) − b with σ evaluated exactly and floored to the
  Q.27 grid (a hardware LUT/piecewise σ is *not* modelled), "svm" uses the hinge sub-gradient
  −t·[t·dot < 1] with t = ±1.  For both, a label counts as positive when it is > 0.5, so
  {0, 1} and {−1, +1} labels both work.
* **update**: the gradient accumulated over the 8 samples of a group is shifted back to Q8.23
  (>> 4, floor) and subtracted from the working model.
"""

from __future__ import annotations

import numpy as np

from loomdb.errors import LoomDataError

FRAC = 23  # model fraction bits (Q8.23)
EXTRA = 4  # accumulator fraction bits beyond the model's
ACC_FRAC = FRAC + EXTRA  # 27
ACC_BITS = 36
MODEL_BITS = 32
LABEL_LIMIT = 2.0 ** (MODEL_BITS - 1 - FRAC)  # |label| < 256 fits Q8.23
LOSS_CODES = {"linear": 0, "logistic": 1, "svm": 2}


def to_fixed(values: np.ndarray, frac: int = FRAC) -> np.ndarray:
    """Float → fixed point by floor (kept for callers that build models by truncation)."""
    return np.floor(np.asarray(values, dtype=np.float64) * 2.0**frac).astype(np.int64)


def model_to_fixed(weights: np.ndarray) -> np.ndarray:
    """A float model → the engine's int32 Q8.23 (round to nearest; must fit ±256)."""
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w)) or np.any(np.abs(w) >= LABEL_LIMIT):
        raise LoomDataError(
            "fpga-sim: an initial model weight is not finite or outside ±256",
            hint="the engine's model is Q8.23; start from zeros or a smaller model",
        )
    return np.round(w * 2.0**FRAC).astype(np.int64).astype(np.int32)


def to_float(model: np.ndarray) -> np.ndarray:
    """The engine's Q8.23 model → float64 weights."""
    return np.asarray(model, dtype=np.float64) / 2.0**FRAC


def labels_to_fixed(y: np.ndarray, loss: str) -> np.ndarray:
    """Labels as the serial part sees them: Q.27 int64 (stored as Q8.23, widened by 4 bits)."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(y)):
        raise LoomDataError(
            "fpga-sim: a label is NaN or infinite", hint="drop or fix those rows first"
        )
    if loss == "linear":
        if np.any(np.abs(y) >= LABEL_LIMIT):
            raise LoomDataError(
                f"fpga-sim: a label is outside ±{LABEL_LIMIT:g}, which Q8.23 cannot hold",
                hint="scale the label column into a smaller range",
            )
        return np.round(y * 2.0**FRAC).astype(np.int64) << EXTRA
    positive = y > 0.5
    one = np.int64(1) << ACC_FRAC
    if loss == "logistic":
        return np.where(positive, one, np.int64(0))
    return np.where(positive, one, -one)  # svm: t = ±1


def loss_code(loss: str) -> int:
    return LOSS_CODES[loss]


def dequantize(U: np.ndarray, bits: int = 32) -> np.ndarray:
    """Q_s(u) as float64: the top ``bits`` bits of each uint32 code, value u / 2^32."""
    U = np.asarray(U, dtype=np.uint32)
    if bits < 32:
        U = (U >> np.uint32(32 - bits)) << np.uint32(32 - bits)
    return U.astype(np.float64) / 2.0**32
