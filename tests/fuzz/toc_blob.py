"""atheris entry point: TOC blobs from coverage-guided mutation must never crash the reader.

Run: python tests/fuzz/toc_blob.py -runs=5000   (exits 0 when no input crashed)
"""

from __future__ import annotations

import sys

import atheris
import numpy as np

import loomdb.codecs.toc_kernels  # noqa: F401  (numba compiles it: load it uninstrumented)

with atheris.instrument_imports(include=["loomdb"]):
    from loomdb.codecs import toc
    from loomdb.errors import LoomFormatError

SEED = toc.encode(np.random.default_rng(3).integers(0, 3, (30, 20)).astype(float))


def one_input(data: bytes) -> None:
    try:
        m = toc.TocMatrix.from_bytes(data)
    except LoomFormatError:
        return
    m @ np.ones(m.cols)
    np.ones(m.rows) @ m
    if m.rows * m.cols <= 1 << 20:
        m.toarray()


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
