"""The ``toc`` format: each minibatch compressed with tuple-oriented compression (TOC).

Training multiplies the compressed blobs directly (``TocMatrix``: A·v and v·A by the decode
tree passes of TOC §4), so an epoch never decompresses a batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import toc
from loomdb.options import Option, one_of
from loomdb.store.formats.base import RowBatchFormat


class TocFormat(RowBatchFormat):
    name = "toc"
    default_batch_size = 250  # the paper's minibatch size
    OPTIONS = [
        Option(
            "entropy",
            (str,),
            None,
            one_of("zstd"),
            "'zstd'",
            doc="an entropy stage over TOC's packed integer arrays",
        ),
    ]

    def encode(self, X: np.ndarray, options: dict[str, Any]) -> bytes:
        return toc.encode(X, entropy=options.get("entropy"))

    def payload(self, blob: bytes, options: dict[str, Any]) -> Any:
        return toc.TocMatrix.from_bytes(bytes(blob))
