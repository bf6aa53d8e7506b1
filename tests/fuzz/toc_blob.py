"""atheris entry point: TOC blobs from coverage-guided mutation must never crash the reader.

Run: python tests/fuzz/toc_blob.py -runs=5000   (exits 0 when no input crashed)
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

import loomdb.codecs.toc_kernels  # noqa: F401  (numba compiles it: load it uninstrumented)

sys.path.insert(0, str(Path(__file__).parent))

with atheris.instrument_imports(include=["loomdb"]):
    from toc_check import rejects_or_reads  # the same check the hypothesis tests use


if __name__ == "__main__":
    atheris.Setup(sys.argv, rejects_or_reads)
    atheris.Fuzz()
