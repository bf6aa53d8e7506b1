"""A minibatch's payload as a dense float64 matrix on the device, decoded there: a TOC tree or
MLWeaving planes travel compressed and are expanded by the device.  No paper section for the
device; the decodes are TOC's Algorithm 6 (§4) and MLWeaving's reading of s planes (§4.3).

TOC: the tree's nodes get their key pair's column and value, and every code then walks to the
root one parent step at a time, all codes together, writing its pair into its row (a finished
code writes a zero into a spare column).  The steps are the tree's depth, found on the host.
MLWeaving: the s planes' bits are ORed into 32-bit codes, most significant plane first, and read
as ``weave.values`` reads them (the middle of the truncation interval; zero stays zero).  Both
give exactly ``toarray()``'s numbers (tests/unit/test_device_steps.py).  Other payloads are
expanded on the host (``toarray()``) and uploaded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import toc_products
from loomdb.codecs.toc import TocMatrix
from loomdb.codecs.weave import BITS, WovenMatrix


def dense(device: Any, X: Any) -> Any:
    """``X`` (a dense array, ``TocMatrix``, ``WovenMatrix`` or anything with ``toarray()``) as
    a C-ordered float64 device matrix."""
    if type(X) is TocMatrix:
        return _toc(device, X)
    if type(X) is WovenMatrix:
        return _woven(device, X)
    host = X if isinstance(X, np.ndarray) else X.toarray()
    return device.upload(np.asarray(host, dtype=np.float64))


def _toc(device: Any, X: TocMatrix) -> Any:
    xp = device.xp
    arrays = (X.pair_columns(), X.pair_values(), X.nparent, X.nkey, X.codes, X.starts)
    icol, values, nparent, nkey, codes, starts = (device.upload(a) for a in arrays)
    n_pairs, cols = len(X.pairs), X.cols
    steps = toc_products.depth(n_pairs, X.nparent)
    key = xp.concatenate([xp.arange(n_pairs), nkey.astype(xp.int64) - 1])
    column = xp.concatenate([xp.asarray([cols]), icol[key].astype(xp.int64)])
    value = xp.concatenate([xp.zeros(1), values[key]])
    parent = xp.concatenate([xp.zeros(1 + n_pairs, dtype=xp.int64), nparent.astype(xp.int64)])
    row = xp.searchsorted(starts[1:].astype(xp.int64), xp.arange(len(codes)), side="right")
    out = xp.zeros((X.rows, cols + 1))
    node = codes.astype(xp.int64)
    for _ in range(steps):
        out[row, column[node]] = value[node]
        node = parent[node]
    return xp.ascontiguousarray(out[:, :cols])


def _woven(device: Any, X: WovenMatrix) -> Any:
    xp = device.xp
    words = device.upload(X.words())  # (chunks, rows padded to 8, s)
    chunks, rows, s = words.shape
    lanes = xp.arange(64, dtype=xp.uint64)
    codes = xp.zeros((chunks, rows, 64), dtype=xp.uint64)
    for p in range(s):
        codes |= ((words[:, :, p, None] >> lanes) & xp.uint64(1)) << xp.uint64(BITS - 1 - p)
    read = xp.where(codes > 0, codes / 2.0**32 + 2.0 ** -(s + 1), 0.0)
    full = read.transpose(1, 0, 2).reshape(rows, chunks * 64)
    return xp.ascontiguousarray(full[: X.n, : X.m])
