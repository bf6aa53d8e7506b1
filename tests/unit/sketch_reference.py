"""What a gradient message must decode to, computed the slow, literal way: scalar Python over
SketchML §3.2–3.3 (buckets, signs apart, groups, a MinMaxSketch kept in a dict) and ZipML's
stochastic rounding — none of ``loomdb.codecs.sketch``'s code.

Shared with the codec, because they *are* the definitions: the DataSketches quantile sketch
(its quantiles are the splits; exact below 256 values a sign, which every input here stays
under), splitmix64 as the hash, numpy's ``default_rng(seed).random`` as ZipML's draws, and the
division of the r groups between the signs.
"""

from __future__ import annotations

import math

import datasketches
import numpy as np

MASK = (1 << 64) - 1


def mix(x: int) -> int:
    x &= MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def column(key: int, seed: int, row: int, t: int) -> int:
    return mix(key ^ mix(seed * 256 + row + 1)) % t


def edges(mags: list[float], buckets: int) -> list[float]:
    s = datasketches.quantiles_doubles_sketch(128)
    s.update(np.array(mags, dtype=np.float64))
    out = s.get_quantiles([j / buckets for j in range(buckets + 1)])
    return [min(mags), *out[1:-1], max(mags)]


def bucket(m: float, e: list[float]) -> int:
    """§3.2 Step 2: the zero-width bucket [m, m] if there is one, else the (s_j, s_j+1] holding
    m, else (m is the smallest value) the first."""
    for j in range(len(e) - 1):
        if e[j] == e[j + 1] == m:
            return j
    for j in range(len(e) - 1):
        if e[j] < m <= e[j + 1]:
            return j
    return 0


def groups_of(n_neg: int, n_pos: int, r: int) -> tuple[int, int]:
    if not n_neg or not n_pos:
        return (r if n_neg else 0), (r if n_pos else 0)
    r_neg = min(max(math.floor(r * n_neg / (n_neg + n_pos) + 0.5), 1), r - 1)
    return r_neg, r - r_neg


def quantise(values: list[float], q: int, r: int):
    """Per value: (its representative, the sign's splits, its sign, its group, its distance in
    the group, its bucket among the sign's), or None for an exact zero."""
    g_size = q // r
    neg = [i for i, v in enumerate(values) if v < 0]
    pos = [i for i, v in enumerate(values) if v > 0]
    r_neg, r_pos = groups_of(len(neg), len(pos), r)
    out: list = [None] * len(values)
    for members, groups, sign, first in ((neg, r_neg, -1.0, 0), (pos, r_pos, 1.0, r_neg)):
        if not members:
            continue
        e = edges([abs(values[i]) for i in members], groups * g_size)
        for i in members:
            j = bucket(abs(values[i]), e)
            rep = sign * (e[j] + (e[j + 1] - e[j]) / 2)
            out[i] = (rep, e, sign, first + j // g_size, j % g_size, j)
    return out


def sketchml(keys: list[int], values: list[float], q: int, r: int, s: int, seed: int):
    """The values SketchML must decode to, with t_g = ceil(n_g / 5)."""
    plan = quantise(values, q, r)
    g_size = q // r
    members: dict[int, list[int]] = {}
    for i, p in enumerate(plan):
        if p is not None:
            members.setdefault(p[3], []).append(i)
    out = [0.0] * len(values)
    for idx in members.values():
        t = -(-len(idx) // 5)
        cells: dict[tuple[int, int], int] = {}
        for i in idx:  # insert: keep the minimum
            for row in range(s):
                cell = (row, column(keys[i], seed, row, t))
                cells[cell] = min(cells.get(cell, g_size - 1), plan[i][4])
        for i in idx:  # query: the maximum over the rows
            dist = max(cells[(row, column(keys[i], seed, row, t))] for row in range(s))
            _, e, sign, _, own, j = plan[i]
            b = j - own + dist  # the same group's bucket ``dist`` from its zero side
            out[i] = sign * (e[b] + (e[b + 1] - e[b]) / 2)
    return out


def quantile(values: list[float], q: int, r: int) -> list[float]:
    return [0.0 if p is None else p[0] for p in quantise(values, q, r)]


def zipml(values: list[float], bits: int, seed: int) -> list[float]:
    levels = (1 << (bits - 1)) - 1
    scale = max((abs(v) for v in values), default=0.0)
    draws = np.random.default_rng(seed).random(len(values))
    out = []
    for v, u in zip(values, draws):
        x = v / scale * levels if scale > 0 else 0.0
        low = math.floor(x)
        level = min(max(low + (1 if u < x - low else 0), -levels), levels)
        out.append(level / levels * scale)
    return out
