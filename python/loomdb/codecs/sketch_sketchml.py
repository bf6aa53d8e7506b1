"""SketchML (§3) and its quantisation step alone (the ablation chain's "+ quantisation").

Bodies after the 16-byte header (little-endian)::

    params   uint16 q, uint8 r, uint8 s (0 for quantile), uint8 r_neg, uint8 r_pos,
             uint16 0                       (r_neg + r_pos is r, or 0 when no value is nonzero)
    reps     (r_neg + r_pos) · q/r float64  the bucket representatives (``sketch_quantile``)

``quantile`` (keys delta-binary, exact bucket indexes)::

    uint32 n, n delta-binary keys of the nonzero values, n bucket indexes (1 byte each; 2 when
    there are more than 256 buckets), then the d - n keys whose value is exactly 0

``sketchml`` — per group g (negative groups first, each sign's nearest zero first)::

    uint32 n_g, uint32 t_g, n_g delta-binary keys, s · t_g cells (uint8, row-major)

then the d - Σ n_g keys whose value is exactly 0 (delta-binary).  A key's decoded value is the
representative of bucket ``g · q/r + max_i cells[i, h_i(key)]`` (``sketch_minmax``).

Sizes (§3.5): ``d·(key bytes + 1/4) + 8q + s·t`` plus 16 bytes of header, 8 of params and 8 per
group; ``t_g = ceil(n_g · columns)`` with columns = 1/5, the paper's t = d/5 (the authors' code
uses 0.3 per group: ``columns=0.3``).  Exact zeros are loomdb's addition: the paper's gradients
have none; here their keys travel in a list of their own and decode to 0.0, so a zero neither
takes a bucket nor comes back with a sign.
"""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np

from loomdb.codecs import sketch_kernels as kernels
from loomdb.codecs import sketch_minmax as minmax
from loomdb.codecs.sketch_format import GradientCodec, Reader, broken, is_wide
from loomdb.codecs.sketch_keys import pack_deltas, read_deltas
from loomdb.codecs.sketch_quantile import Plan, plan
from loomdb.errors import LoomOptionError

PARAMS = struct.Struct("<HBBBBH")
COUNT = struct.Struct("<I")
GROUP = struct.Struct("<II")


MIN_COLUMNS = 0.001  # columns is kept as a fraction of denominator at most 1000


def _check_params(q: int, r: int, s: int, k: int) -> None:
    ok = 2 <= r <= 255 and 0 < q < 1 << 16 and q % r == 0 and q // r <= 256
    if not ok:
        raise LoomOptionError(
            f"q must be a multiple of r with 2 <= r <= 255, q < 65536 and q/r <= 256; got "
            f"q={q}, r={r}",
            hint="the paper's q = 256 buckets in r = 8 groups (the defaults)",
        )
    if not 1 <= s <= minmax.MAX_ROWS:
        raise LoomOptionError(
            f"s (MinMaxSketch rows) must be in [1, {minmax.MAX_ROWS}]; got {s}",
            hint="the paper's s = 2 (the default)",
        )
    if k < 2 or k > 32768 or k & (k - 1):
        raise LoomOptionError(
            f"k (quantile sketch size) must be a power of 2 in [2, 32768]; got {k}",
            hint="the paper's m = 128 (the default)",
        )


def _read_params(r: Reader, sketch: bool) -> tuple[int, int, int, int, np.ndarray]:
    """``(group size, r_neg, r_pos, s, reps)``, checked."""
    q, groups, s, r_neg, r_pos, zero = r.unpack(PARAMS, "the parameters", "params")
    if not (groups and q % groups == 0 and 1 <= q // groups <= 256 and not zero):
        raise broken(f"its parameters q={q}, r={groups} do not make groups of 1 to 256 buckets")
    if r_neg + r_pos not in (0, groups) or (s == 0) == sketch or s > minmax.MAX_ROWS:
        raise broken(f"its groups ({r_neg} + {r_pos} of {groups}) or rows ({s}) do not add up")
    group = q // groups
    reps = r.array("<f8", (r_neg + r_pos) * group, "the representatives", "means")
    neg, pos = reps[: r_neg * group], reps[r_neg * group :]
    ok = np.isfinite(reps).all() and (neg < 0).all() and (pos > 0).all()
    if not ok or (np.diff(neg) > 0).any() or (np.diff(pos) < 0).any():
        raise broken("its representatives are not finite, of their sign and ordered from zero")
    return group, r_neg, r_pos, s, reps


def _merge(keys: list[np.ndarray], values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The lists (each sorted) merged into one sorted gradient."""
    k, v = np.concatenate(keys), np.concatenate(values).astype(np.float64, copy=False)
    if len(keys) > 16:  # a scan of the heads costs runs × d: sort instead
        order = np.argsort(k, kind="stable")
        return k[order], v[order]
    return kernels.merge_runs(k, v, np.cumsum([len(x) for x in keys]).astype(np.int64))


class Quantile(GradientCodec):
    """Delta-binary keys and quantile-bucket indexes: SketchML without its MinMaxSketch."""

    name = "quantile"

    def __init__(self, q: int = 256, r: int = 8, k: int = 128):
        _check_params(q, r, 1, k)
        self.q, self.r, self.k = q, r, k

    def body(self, keys: np.ndarray, values: np.ndarray, seed: int) -> bytes:
        return self.write(keys, plan(values, self.q, self.r, self.k), seed)

    def write(self, keys: np.ndarray, p: Plan, seed: int) -> bytes:
        """The body of the message of ``keys`` quantised by ``p``."""
        nz, wide = p.index >= 0, is_wide(keys)
        width = "<u1" if len(p.reps) <= 256 else "<u2"
        return b"".join(
            [
                PARAMS.pack(self.q, self.r, 0, p.r_neg, p.r_pos, 0),
                p.reps.astype("<f8").tobytes(),
                COUNT.pack(int(nz.sum())),
                pack_deltas(keys[nz], wide),
                p.index[nz].astype(width).tobytes(),
                pack_deltas(keys[~nz], wide),
            ]
        )

    def read(self, r: Reader, d: int, wide: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
        _, _, _, _, reps = _read_params(r, sketch=False)
        (n,) = r.unpack(COUNT, "the count of nonzero values", "counts")
        if n > d or (n and not len(reps)):
            raise broken(f"it claims {n:,} nonzero values of {d:,} ({len(reps)} buckets)")
        keys = read_deltas(r, n, wide, "the keys of nonzero values")
        width = "<u1" if len(reps) <= 256 else "<u2"
        index = r.array(width, n, f"{n:,} bucket indexes", "values")
        if n and index.max() >= len(reps):
            raise broken(f"a bucket index is past its {len(reps)} buckets")
        zeros = read_deltas(r, d - n, wide, "the keys of zero values")
        return _merge([keys, zeros], [reps[index], np.zeros(d - n)])


class SketchML(GradientCodec):
    """Quantile buckets, grouped MinMaxSketches and delta-binary keys (§3)."""

    name = "sketchml"

    def __init__(self, q: int = 256, r: int = 8, s: int = 2, columns: float = 0.2, k: int = 128):
        _check_params(q, r, s, k)
        if not MIN_COLUMNS <= columns <= 16:  # kept to 1/1000: less would be no column
            raise LoomOptionError(
                f"columns (t per key of a group) must be in [{MIN_COLUMNS}, 16]; got {columns}",
                hint="the paper's t = d/5 is columns=0.2 (the default); a group of n keys "
                "gets ceil(n · columns) columns",
            )
        self.q, self.r, self.s, self.k = q, r, s, k
        self.columns = Fraction(columns).limit_denominator(1000)

    def width(self, n: int) -> int:
        """t_g: the columns of a group of n keys, ``ceil(n · columns)``."""
        return -(-n * self.columns.numerator // self.columns.denominator)

    def body(self, keys: np.ndarray, values: np.ndarray, seed: int) -> bytes:
        return self.write(keys, plan(values, self.q, self.r, self.k), seed)

    def write(self, keys: np.ndarray, p: Plan, seed: int) -> bytes:
        """The body of the message of ``keys`` quantised by ``p`` (the tests hand it a known
        plan: above 256 values a sign, the quantile sketch is randomised)."""
        groups, wide = p.r_neg + p.r_pos, is_wide(keys)
        gid = np.where(p.index >= 0, p.index // p.group, groups).astype(np.int16)  # zeros last
        order = np.argsort(gid, kind="stable")  # a radix sort; keys stay sorted in a group
        ends = np.cumsum(np.bincount(gid, minlength=groups + 1))
        keys, dist = keys[order], (p.index % p.group)[order]
        out = [
            PARAMS.pack(self.q, self.r, self.s, p.r_neg, p.r_pos, 0),
            p.reps.astype("<f8").tobytes(),
        ]
        start = 0
        for g in range(groups):
            gk, gd = keys[start : ends[g]], dist[start : ends[g]]
            t = self.width(len(gk))
            cells = minmax.build(gk, gd, seed, self.s, t, p.group - 1).tobytes() if t else b""
            out += [GROUP.pack(len(gk), t), pack_deltas(gk, wide), cells]
            start = ends[g]
        out.append(pack_deltas(keys[start:], wide))
        return b"".join(out)

    def read(self, r: Reader, d: int, wide: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
        group, r_neg, r_pos, s, reps = _read_params(r, sketch=True)
        keys, values, total = [], [], 0
        for g in range(r_neg + r_pos):
            n, t = r.unpack(GROUP, f"group {g}'s counts", "counts")
            total += n
            if total > d or (n == 0) != (t == 0):
                raise broken(f"group {g} claims {n:,} keys in {t:,} columns ({d:,} in all)")
            gk = read_deltas(r, n, wide, f"group {g}")
            cells = r.take(s * t, f"group {g}'s {s}×{t} sketch", "sketch").reshape(s, t)
            if t and cells.max() >= group:
                raise broken(f"group {g}'s sketch holds a distance past its {group} buckets")
            keys.append(gk)
            values.append(reps[g * group + minmax.query(cells, gk, seed)])
        keys.append(read_deltas(r, d - total, wide, "the keys of zero values"))
        values.append(np.zeros(d - total))
        return _merge(keys, values)
