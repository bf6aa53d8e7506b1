"""``loomdb bench toc``: TOC against DEN, CSR, CVI, DVI and general compressors (TOC §5).

Per dataset (250-row minibatches; MNIST-10k and a9a.t when ../shared/datasets is there, plus
synthetic Census-like, Rcv1-like and Deep1B-like data): the compression ratio vs DEN of every
scheme, TOC's encode and decode speed, the matrix operations on the compressed form against
scipy's CSR and dense numpy, and (with SQL) the epoch time per storage format.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from loomdb.bench.compression import den, schemes
from loomdb.bench.table import BenchTable
from loomdb.codecs import toc

BATCH = 250


def datasets(quick: bool) -> list[tuple[str, np.ndarray]]:
    from loomdb.datasets import load_a9a, load_mnist, shared_datasets

    rng = np.random.default_rng(0)
    rows = 500 if quick else 10_000
    out = []
    folder = shared_datasets()
    if folder is not None:
        out.append(("MNIST-10k", load_mnist(folder, limit=rows)[0]))
        out.append(("a9a.t", load_a9a(folder)[0][: rows if quick else None]))
    census = []
    for card in (2, 3, 5, 7, 9, 16, 4, 6, 12, 8):
        onehot = np.zeros((rows, card))
        onehot[np.arange(rows), rng.integers(0, card, rows)] = 1.0
        census.append(onehot)
    census.append(rng.integers(0, 5, (rows, 6)).astype(float))
    out.append(("Census-like", np.hstack(census)))
    rcv = np.zeros((rows // 5 if not quick else 250, 47_236))
    nnz = int(rcv.size * 0.002)
    rcv[rng.integers(0, rcv.shape[0], nnz), rng.integers(0, rcv.shape[1], nnz)] = rng.random(nnz)
    out.append(("Rcv1-like", rcv))
    out.append(("Deep1B-like", rng.normal(size=(rows, 96))))
    return out


def _batches(X: np.ndarray) -> list[np.ndarray]:
    return [X[i : i + BATCH] for i in range(0, len(X), BATCH)]


def _best(fn: Callable[[], object], repeat: int = 5, calls: int = 1) -> float:
    """Seconds per call of ``fn``: the best of ``repeat`` samples of ``calls`` calls each."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / calls


def _per_call(fn: Callable[[], object], sample_s: float = 2e-3) -> float:
    """Seconds per call of a fast ``fn`` (a product takes microseconds, about what a timer's
    noise is): samples of as many calls as fill ``sample_s``."""
    calls = max(1, int(sample_s / max(_best(fn, 1), 1e-7)))
    return _best(fn, 5, calls)


def ratios(data: list[tuple[str, np.ndarray]]) -> BenchTable:
    found = schemes()
    table = BenchTable(
        "toc: compression ratio vs DEN (dense float64), 250-row batches", ["data", *found]
    )
    for name, X in data:
        batches = _batches(X)
        total = sum(den(b) for b in batches)
        table.add(name, *[total / sum(size(b) for b in batches) for size in found.values()])
    if "snappy" not in found:
        table.notes.append("snappy not measured: python-snappy is not installed")
    return table


def speeds(data: list[tuple[str, np.ndarray]]) -> BenchTable:
    table = BenchTable(
        "toc: speed on one 250-row batch (encode/decode MB of DEN per s; products in µs, "
        "best of 5 samples of 2 ms of calls)",
        [
            "data",
            "encode MB/s",
            "decode MB/s",
            "A·v toc",
            "A·v csr",
            "A·v dense",
            "v·A toc",
            "v·A csr",
            "A·M toc",
            "A·M csr",
            "vs csr (A·v)",
        ],
    )
    rng = np.random.default_rng(1)
    for name, X in data:
        table.add(name, *_speed_row(X, rng))
    table.notes.append("vs csr (A·v): CSR time / TOC time; above 1 TOC is faster")
    return table


def _speed_row(X: np.ndarray, rng: np.random.Generator) -> list[float]:
    import scipy.sparse as sp

    batches = _batches(X)
    mb = sum(den(b) for b in batches) / 1e6
    blobs = [toc.encode(b) for b in batches]
    enc = _best(lambda: [toc.encode(b) for b in batches], 2)
    dec = _best(lambda: [toc.decode(b) for b in blobs], 2)
    B = batches[0]
    m, c = toc.TocMatrix.from_bytes(blobs[0]), sp.csr_matrix(B)
    v, u = rng.normal(size=B.shape[1]), rng.normal(size=B.shape[0])
    M = rng.normal(size=(B.shape[1], 10))
    us = [
        _per_call(lambda: m @ v),
        _per_call(lambda: c @ v),
        _per_call(lambda: B @ v),
        _per_call(lambda: u @ m),
        _per_call(lambda: c.T @ u),
        _per_call(lambda: m @ M),
        _per_call(lambda: c @ M),
    ]
    us = [t * 1e6 for t in us]
    return [mb / enc, mb / dec, *us, us[1] / us[0]]


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    from loomdb.bench.formats import epoch_times

    data = datasets(quick)
    tables = [ratios(data), speeds(data)]
    labelled = []
    for name, X in data[:2] if len(data) > 4 else data[:1]:
        y = (X[:, 0] > np.median(X[:, 0])).astype(float) if name != "MNIST-10k" else None
        if y is None:
            from loomdb.datasets import load_mnist, shared_datasets

            folder = shared_datasets()
            assert folder is not None
            y = (load_mnist(folder, limit=len(X))[1] < 5).astype(float)
        labelled.append((name, X, y))
    tables.append(epoch_times(labelled, dsn, epochs=3 if quick else 10))
    return tables
