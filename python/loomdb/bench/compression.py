"""Stored sizes of a minibatch under TOC and the schemes the paper compares it with (Table 5).

DEN: dense float64.  CSR: int32 column indexes + float64 values + int32 row pointers.
CVI: CSR with value indexing (distinct-value table + 1/2/4-byte indexes).  DVI: dense with value
indexing.  gzip, snappy, zstd, lz4: general compressors over the DEN bytes.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable

import numpy as np

from loomdb.codecs import toc


def den(X: np.ndarray) -> int:
    return X.size * 8


def _index_width(distinct: int) -> int:
    return 1 if distinct <= 1 << 8 else 2 if distinct <= 1 << 16 else 4


def csr(X: np.ndarray) -> int:
    nnz = int(np.count_nonzero(X))
    return nnz * (4 + 8) + (X.shape[0] + 1) * 4


def cvi(X: np.ndarray) -> int:
    values = X[X != 0]
    distinct = len(np.unique(values))
    return len(values) * (4 + _index_width(distinct)) + distinct * 8 + (X.shape[0] + 1) * 4


def dvi(X: np.ndarray) -> int:
    distinct = len(np.unique(X))
    return X.size * _index_width(distinct) + distinct * 8


def _general(compress: Callable[[bytes], bytes]) -> Callable[[np.ndarray], int]:
    return lambda X: len(compress(np.ascontiguousarray(X).tobytes()))


def schemes() -> dict[str, Callable[[np.ndarray], int]]:
    import lz4.frame
    import zstandard

    out: dict[str, Callable[[np.ndarray], int]] = {
        "TOC_SPARSE": lambda X: len(toc.encode(X, variant="sparse")),
        "TOC_SPARSE_AND_LOGICAL": lambda X: len(toc.encode(X, variant="sparse_logical")),
        "TOC_FULL": lambda X: len(toc.encode(X)),
        "TOC_FULL+zstd": lambda X: len(toc.encode(X, entropy="zstd")),
        "CSR": csr,
        "CVI": cvi,
        "DVI": dvi,
        "gzip-6": _general(lambda b: gzip.compress(b, 6)),
        "zstd-3": _general(zstandard.ZstdCompressor(level=3).compress),
        "zstd-19": _general(zstandard.ZstdCompressor(level=19).compress),
        "lz4": _general(lz4.frame.compress),
    }
    try:
        import snappy

        out["snappy"] = _general(snappy.compress)
    except ImportError:  # python-snappy missing: the table says so
        pass
    return out
