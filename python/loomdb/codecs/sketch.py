"""Sparse gradient codecs: SketchML (Jiang et al., SIGMOD 2018) and the baselines it is measured
against, for exchanging gradients between workers and a driver.

A sparse gradient is two 1-D arrays: ``keys`` (integers, any integer dtype, in [0, 2**63),
strictly increasing — sorted, no duplicates) and ``values`` (finite floats).  Every method is
a codec object with the same two calls::

    from loomdb.codecs import sketch

    blob = sketch.METHODS["sketchml"].encode(keys, values, seed=step)   # -> bytes
    keys, values = sketch.decode(blob)        # any method's message -> (int64, float64)

    sketch.encode(keys, values, method="zipml8")      # the same, by name
    sketch.get("sketchml")                             # a codec by name (LoomOptionError if none)
    sketch.SketchML(q=256, r=8, s=2, columns=0.2)      # another configuration of a method
    sketch.breakdown(blob)                             # bytes per section: keys, means, sketch …

The registry ``METHODS`` (read-only), by name:

======== ======== =========================================================================
name     lossless what travels
======== ======== =========================================================================
none     yes      raw pairs: 4-byte keys and float64 values, 12 bytes a pair (§4.1 "Adam")
keys     yes      delta-binary keys (§3.4), float64 values — the ablation's first step
zipml8   no       raw keys, uniform 8-bit values with stochastic rounding (ZipML)
zipml16  no       the same with 16-bit values (the paper's ZipML setting)
quantile no       delta-binary keys, one-byte quantile-bucket indexes (§3.2) — "+ quantisation"
sketchml no       SketchML: quantile buckets (q = 256, from the DataSketches quantile sketch,
                  k = 128), signs apart, r = 8 groups, each a MinMaxSketch of s = 2 rows and
                  t = ceil(n_g / 5) columns (§3.3), delta-binary keys per group (§3.4)
======== ======== =========================================================================

What the lossy methods promise (tested):

* keys come back bit-exactly, as int64, sorted; a value of exactly 0 comes back as 0.0;
* ``sketchml`` and ``quantile``: every nonzero value comes back nonzero and of its own sign;
  its magnitude is never above its bucket's representative, and its bucket index is off by
  less than q/r (``quantile``: not at all);
* ``zipml*``: a value comes back as one of the two levels around it (it may become 0).

``seed`` (an integer in [0, 2**32), default 0) travels in the message: SketchML's hash
functions and ZipML's rounding draw from it.  Give each message its own seed (the step number,
say) so that hash collisions do not fall on the same keys every step.  Encoding ``quantile``
and ``sketchml`` needs the ``datasketches`` package; decoding any method needs only numpy and
numba, and is reproducible bit for bit (encoding is too, below 256 values of a sign, where the
quantile sketch is exact).  Encoding refuses keys that are unsorted, repeated, negative or not
integers and values that are NaN or infinite (``LoomDataError``/``LoomOptionError``); decoding
refuses anything that is not a message a codec could have written (``LoomFormatError``), after
checking each size it reads against the bytes left, so hostile bytes cost no more than their
length.  The byte formats (version 1): ``sketch_format`` (the 16-byte header),
``sketch_baselines``, ``sketch_sketchml``; keys in ``sketch_keys``, buckets in
``sketch_quantile``, the MinMaxSketch in ``sketch_minmax``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from loomdb.codecs.sketch_baselines import DeltaKeys, Raw, ZipML
from loomdb.codecs.sketch_format import GradientCodec, open_message, read_message
from loomdb.codecs.sketch_sketchml import Quantile, SketchML
from loomdb.errors import LoomOptionError

__all__ = [
    "METHODS",
    "GradientCodec",
    "Quantile",
    "SketchML",
    "ZipML",
    "breakdown",
    "decode",
    "encode",
    "get",
    "method_of",
]

METHODS: Mapping[str, GradientCodec] = MappingProxyType(
    {c.name: c for c in (Raw(), DeltaKeys(), ZipML(8), ZipML(16), Quantile(), SketchML())}
)


def get(name: str) -> GradientCodec:
    """The codec registered as ``name``."""
    if name not in METHODS:
        raise LoomOptionError(
            f"unknown gradient codec {name!r}; choose from {', '.join(METHODS)}",
            hint="sketch.METHODS names every codec",
        )
    return METHODS[name]


def encode(keys: Any, values: Any, *, method: str = "sketchml", seed: int = 0) -> bytes:
    """The message of a sparse gradient under the registered ``method``."""
    return get(method).encode(keys, values, seed=seed)


def decode(blob: object) -> tuple[np.ndarray, np.ndarray]:
    """``(keys int64, values float64)`` of a message of any method (its header names it)."""
    keys, values, _ = read_message(blob, dict(METHODS))
    return keys, values


def breakdown(blob: object) -> dict[str, int]:
    """Bytes of each section of a message (header, params, counts, keys, values, means,
    sketch), after decoding it; they add up to ``len(blob)``."""
    return dict(read_message(blob, dict(METHODS))[2])


def method_of(blob: object) -> str:
    """The method a message was encoded with (its header only is read)."""
    return open_message(blob)[0]
