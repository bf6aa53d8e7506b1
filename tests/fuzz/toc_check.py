"""What every TOC fuzz input must satisfy: rejected with LoomFormatError, or safe to use."""

from __future__ import annotations

import numpy as np

from loomdb.codecs import toc
from loomdb.errors import LoomFormatError


def rejects_or_reads(blob: bytes) -> None:
    try:
        m = toc.TocMatrix.from_bytes(blob)
    except LoomFormatError:
        return
    m @ np.ones(m.cols)
    np.ones(m.rows) @ m
    if m.rows * m.cols <= 1 << 20:
        m.toarray()
