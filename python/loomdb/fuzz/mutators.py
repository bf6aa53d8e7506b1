"""Structure-aware mutation of TOC blobs, so that fuzzing reaches past the parser.

No paper section: loomdb's own fuzzing aid for the TOC reader (§3.2 format, Algorithm 2 tree).

Byte-level mutation of a TOC blob mostly breaks its framing (a count, a width, the zstd frame),
and the blob is rejected before the decode tree is built: about 1 input in 80 decodes.  Half
of the time this mutator instead parses the blob into its sections, changes one entry of one
section (a column, a value, a code, a row length) or the header's shape, and writes it back
with valid framing — with or without the zstd stage — so the tree build and the products see
inputs that are well framed but wrong inside (codes pointing forward, columns repeated or out
of order, lengths that do not add up).  The other half, and whenever the blob does not parse,
it hands over to libFuzzer's own mutator.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from loomdb.codecs.toc_format import LOGICAL, ZSTD, Sections, parse, serialize
from loomdb.errors import LoomFormatError, LoomOptionError


def toc(data: bytes, max_size: int, seed: int, mutate: Callable[[bytes, int], bytes]) -> bytes:
    """One mutation of ``data`` (``mutate`` is libFuzzer's, ``atheris.Mutate``)."""
    rng = random.Random(seed)
    if rng.random() < 0.5:
        return mutate(data, max_size)
    try:
        s = parse(data)
    except LoomFormatError:
        return mutate(data, max_size)
    zstd = bool(data[4] & ZSTD) != (rng.random() < 0.1)  # now and then, toggle the stage
    _change_one(s, rng)
    try:
        out = serialize(s, 1 if zstd else None)
    except (LoomOptionError, ValueError):  # a value past what the format packs
        return mutate(data, max_size)
    return out[:max_size]


def _change_one(s: Sections, rng: random.Random) -> None:
    lengths = np.diff(np.append(s.starts, _total(s)))
    arrays = {"icol": s.icol, "values": s.values, "lengths": lengths}
    if s.ivalue is not None:
        arrays["ivalue"] = s.ivalue
    if s.codes is not None:
        arrays["codes"] = s.codes
    name = rng.choice([*arrays, "shape"])
    if name == "shape":
        s.rows, s.cols = max(0, s.rows + rng.choice([-1, 1])), max(0, s.cols + rng.choice([-1, 1]))
        return
    a = arrays[name].copy()
    if a.size == 0:
        return
    i = rng.randrange(a.size)
    if name == "values":
        a[i] = rng.choice([0.0, -0.0, np.nan, np.inf, 1e308, a[rng.randrange(a.size)]])
    else:
        a[i] = max(
            0,
            rng.choice(
                [
                    0,
                    1,
                    int(a[i]) - 1,
                    int(a[i]) + 1,
                    int(a.max()) + 1,
                    int(a[rng.randrange(a.size)]),
                ]
            ),
        )
    if name != "lengths":
        setattr(s, name, a)
        return
    s.starts, total = np.cumsum(a) - a, int(a.sum())
    if s.flags & LOGICAL:
        s.codes = _resize(s.codes, total)
        return
    s.icol = _resize(s.icol, total)  # every pair is its own code: the pairs follow the total
    if s.ivalue is None:
        s.values = _resize(s.values, total)
    else:
        s.ivalue = _resize(s.ivalue, total)


def _total(s: Sections) -> int:
    return len(s.codes) if s.codes is not None else len(s.icol)


def _resize(a: np.ndarray | None, size: int) -> np.ndarray:
    """``a`` cut or padded (by repeating its last entry) to ``size`` entries."""
    assert a is not None
    if size <= len(a) or not len(a):
        return a[:size] if len(a) else np.zeros(size, dtype=a.dtype)
    return np.concatenate([a, np.full(size - len(a), a[-1], dtype=a.dtype)])
