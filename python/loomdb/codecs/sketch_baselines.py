"""The baselines SketchML is measured against (SketchML §4.1, §4.3): raw key-value pairs, keys
alone delta-binary encoded (the first step of the ablation chain, Figure 8a "Key"), and
ZipML-style uniform 8/16-bit values with raw keys.

Bodies after the 16-byte header (little-endian):

* ``none`` — d raw keys (4 bytes each; 8 if WIDE), then d float64 values: the paper's 12 bytes
  a pair.  Lossless.
* ``keys`` — the keys delta-binary encoded (``sketch_keys``), then d float64 values.  Lossless.
* ``zipml8`` / ``zipml16`` — d raw keys, a float64 scale ``max |v|``, then d signed 8/16-bit
  levels in [-L, L], L = 127 or 32767.  A value is rounded **stochastically** to one of its
  two neighbouring levels of ``v / scale · L`` (unbiased, as ZipML does), with the message's
  seed; it decodes to ``level / L · scale``.  Small values round to 0 often: the weakness the
  paper reports for 8 bits.
"""

from __future__ import annotations

import struct

import numpy as np

from loomdb.codecs.sketch_format import GradientCodec, Reader, broken, is_wide
from loomdb.codecs.sketch_keys import pack_deltas, pack_raw, read_deltas, read_raw

SCALE = struct.Struct("<d")


def _values(values: np.ndarray) -> bytes:
    return values.astype("<f8").tobytes()


def _read_values(r: Reader, d: int) -> np.ndarray:
    return r.array("<f8", d, f"{d:,} float64 values", "values")


class Raw(GradientCodec):
    """Raw (key, value) pairs: 12 bytes each (16 with WIDE keys)."""

    name, lossless = "none", True

    def body(self, keys: np.ndarray, values: np.ndarray, seed: int) -> bytes:
        return pack_raw(keys, is_wide(keys)) + _values(values)

    def read(self, r: Reader, d: int, wide: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
        return read_raw(r, d, wide), _read_values(r, d)


class DeltaKeys(GradientCodec):
    """Delta-binary keys, float64 values: the key compression alone."""

    name, lossless = "keys", True

    def body(self, keys: np.ndarray, values: np.ndarray, seed: int) -> bytes:
        return pack_deltas(keys, is_wide(keys)) + _values(values)

    def read(self, r: Reader, d: int, wide: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
        return read_deltas(r, d, wide, "the keys"), _read_values(r, d)


class ZipML(GradientCodec):
    """Uniform fixed-point values with stochastic rounding, raw keys."""

    def __init__(self, bits: int):
        self.bits = bits
        self.name = f"zipml{bits}"
        self.levels = (1 << (bits - 1)) - 1
        self.dtype = f"<i{bits // 8}"

    def body(self, keys: np.ndarray, values: np.ndarray, seed: int) -> bytes:
        scale = float(np.abs(values).max()) if len(values) else 0.0
        x = values / scale * self.levels if scale > 0 else np.zeros_like(values)
        low = np.floor(x)
        up = np.random.default_rng(seed).random(len(x)) < x - low
        levels = np.clip(low + up, -self.levels, self.levels).astype(self.dtype)
        return pack_raw(keys, is_wide(keys)) + SCALE.pack(scale) + levels.tobytes()

    def read(self, r: Reader, d: int, wide: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
        keys = read_raw(r, d, wide)
        (scale,) = r.unpack(SCALE, "the scale", "params")
        if not (np.isfinite(scale) and scale >= 0):
            raise broken(f"its ZipML scale is {scale}; expected a finite number >= 0")
        levels = r.array(self.dtype, d, f"{d:,} {self.bits}-bit levels", "values")
        if len(levels) and np.abs(levels.astype(np.int64)).max() > self.levels:
            raise broken(f"a {self.bits}-bit level lies outside [-{self.levels}, {self.levels}]")
        return keys, levels / self.levels * scale
