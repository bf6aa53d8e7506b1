"""Quantile-bucket quantification with separated signs and grouped buckets (SketchML §3.2, and
§3.3's Solutions 1 and 2).

Faithful to the paper:

* Quantile splits (§3.2 Step 1) come from the DataSketches classic quantiles sketch (the
  ``datasketches`` package, ``quantiles_doubles_sketch``, k = 128 — the paper's sketch of size
  128): splits at ranks 0, 1/q_s, …, 1, so every bucket holds about as many values.  The sketch
  is exact below 2k = 256 values and randomised above (encoding is then not reproducible
  bit-for-bit; decoding always is).
* Representatives (§3.2 Step 2) are bucket **midpoints**, computed as ``a + (b - a) / 2`` so
  that neither huge nor subnormal splits overflow or round to zero.  The q representatives
  travel with the message (8 bytes each).
* Signs are separated (§3.3 Solution 1): negative and positive values get their own sketch and
  buckets, so a split sits at zero and no bucket straddles it.  Buckets are numbered by their
  distance from zero, nearest first, on each side.
* Grouping (§3.3 Solution 2): the buckets of each sign form groups of q/r consecutive buckets.

How q is divided between signs (the paper leaves it open): in whole groups, in proportion to
how many values each sign has — ``r_neg = floor(r · n_neg / (n_neg + n_pos) + 1/2)``, at least
one group for a sign that has values and at least one left for the other — and
``q_s = r_s · q / r``.  Buckets then hold about the same number of values on both sides, as in
one equal-count quantisation, and no group mixes signs.

Which bucket a value goes into: the bucket ``(s_j, s_{j+1}]`` that holds it (the lowest bucket
also takes the smallest value); a value equal to a split that repeats (a zero-width bucket
``[m, m]``, from ties or fewer values than buckets) goes into that bucket, so it decodes
exactly.  Exact zeros are not quantised at all: the codecs send their keys in a list of their
own and decode them to 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loomdb.codecs.sketch_kernels import bucket_of
from loomdb.errors import LoomStateError


@dataclass
class Plan:
    """The quantisation of one gradient's values.

    ``reps``: the representatives, the negatives' (negative numbers, nearest zero first) then
    the positives'; ``index``: each value's bucket in ``reps`` (-1 for an exact zero).  Bucket
    ``i`` belongs to group ``i // group``; groups ``0 .. r_neg - 1`` are negative.
    """

    r_neg: int
    r_pos: int
    group: int
    reps: np.ndarray
    index: np.ndarray


def divide(n_neg: int, n_pos: int, r: int) -> tuple[int, int]:
    """How many of the r groups each sign gets (see the module docstring)."""
    if n_neg + n_pos == 0:
        return 0, 0
    if n_pos == 0:
        return r, 0
    if n_neg == 0:
        return 0, r
    r_neg = int(np.floor(r * n_neg / (n_neg + n_pos) + 0.5))
    r_neg = min(max(r_neg, 1), r - 1)
    return r_neg, r - r_neg


def splits(magnitudes: np.ndarray, buckets: int, k: int) -> np.ndarray:
    """``buckets + 1`` quantile splits of positive magnitudes, from min to max (§3.2 Step 1)."""
    try:
        import datasketches
    except ImportError:  # decoding never needs it; only encoding does
        raise LoomStateError(
            "encoding a quantile or SketchML gradient needs the datasketches package",
            hint="pip install datasketches",
        ) from None
    sketch = datasketches.quantiles_doubles_sketch(k)
    sketch.update(np.ascontiguousarray(magnitudes, dtype=np.float64))
    out = np.asarray(sketch.get_quantiles(list(np.arange(buckets + 1) / buckets)))
    out[0], out[-1] = sketch.get_min_value(), sketch.get_max_value()
    return np.maximum.accumulate(out)  # the sketch's quantiles are monotone; make sure


def midpoints(edges: np.ndarray) -> np.ndarray:
    """Each bucket's midpoint (§3.2 Step 2), never outside its bucket."""
    a, b = edges[:-1], edges[1:]
    return a + (b - a) / 2


def plan(values: np.ndarray, q: int, r: int, k: int) -> Plan:
    """Quantise ``values`` (finite float64) into q buckets in r groups, signs apart."""
    group = q // r
    neg, pos = values < 0, values > 0
    r_neg, r_pos = divide(int(neg.sum()), int(pos.sum()), r)
    index = np.full(len(values), -1, dtype=np.int64)
    reps = []
    offset = 0
    for mask, groups, sign in ((neg, r_neg, -1.0), (pos, r_pos, 1.0)):
        if not groups:
            continue
        mags = np.abs(values[mask])
        edges = splits(mags, groups * group, k)
        index[mask] = offset + bucket_of(mags, edges)
        reps.append(sign * midpoints(edges))
        offset += groups * group
    return Plan(r_neg, r_pos, group, np.concatenate(reps) if reps else np.zeros(0), index)
