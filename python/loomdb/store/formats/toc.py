"""The ``toc`` format: each minibatch compressed with tuple-oriented compression (TOC).

Training multiplies the compressed blobs directly (``TocMatrix``: A·v and v·A by the decode
tree passes of TOC §4), so an epoch never decompresses a batch.  A sparse source's minibatches
are encoded from their CSR form (``toc.encode_csr``: the bytes the dense matrix would give),
so a row as wide as 2^31 columns is never densified.
"""

from __future__ import annotations

from typing import Any

from loomdb.codecs import toc
from loomdb.codecs.blob import REBUILD
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.options import Choices, Option, Options
from loomdb.store.formats.base import Encoder, Format, SparseEncoder
from loomdb.store.storage import Buffer


class TocFormat(Format):
    name = "toc"
    options = Options(
        "layout",
        Option(
            "entropy",
            Choices(["zstd"]),
            None,
            doc="an entropy stage over TOC's packed integer arrays",
        ),
    )

    def check(self, options: dict[str, Any]) -> None:
        if options.get("dtype", "float64") != "float64":
            raise LoomOptionError(
                "a toc index stores float64 values exactly: 'dtype' does not apply",
                hint="leave 'dtype' out (it is for the dense format)",
            )

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        entropy = options.get("entropy")
        return lambda X: [toc.encode(X, entropy=entropy)]

    def sparse_encoder(
        self, stats: dict[str, Any], options: dict[str, Any], cols: int
    ) -> SparseEncoder:
        entropy = options.get("entropy")
        return lambda X: [toc.encode_csr(X.indptr, X.indices, X.values, cols, entropy=entropy)]

    def payload(self, parts: list[Buffer], rows: int, n_features: int, precision: int) -> Any:
        X = toc.TocMatrix.from_bytes(parts[0])
        if X.shape != (rows, n_features):
            raise LoomFormatError(
                f"a toc minibatch holds {X.shape}, not ({rows}, {n_features})", hint=REBUILD
            )
        return X
