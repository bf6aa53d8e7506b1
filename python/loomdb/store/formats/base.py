"""What every storage format shares: labels as part 0, its parts after, one Batch per minibatch.

No paper section.  A format says how a minibatch's features become parts (``encoder``) and how
parts read at a precision become a matrix-like payload (``payload``); ``store.storage`` stores
and checks the parts, ``store.layout`` decides what to read.  ``value_map`` names the affine map
a format applied to the values it stores (mlweaving: min–max), so the trainer can fold any
standardisation on top of it and the model predicts on raw rows.

A sparse source's minibatches arrive as ``CsrRows`` (``sparse_encoder``): a format that stores
them as they are says so by overriding it (toc); the others get them densified, refused when a
dense minibatch would exceed ``MAX_DENSIFIED`` bytes (with the hint to use toc).
An any-precision format reads fewer parts at a lower fidelity; ``fidelity`` names the train
option that picks it (mlweaving: ``precision``, bits; pcr: ``scans``, scan groups) and
``top()`` its highest value.  A format whose source is not numeric columns (pcr: images)
profiles it itself (``profile``), makes its stored parts itself (``encoding``), is bound to an
index's options to read it (``bind``) and names the features a model learns (``features``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from loomdb.codecs import dense
from loomdb.codecs.blob import REBUILD
from loomdb.csr import CsrRows
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.options import Options
from loomdb.seams import Batch, IndexInfo
from loomdb.store.source import SourceProfile
from loomdb.store.storage import Buffer, Stored

Encoder = Callable[[np.ndarray], list[bytes]]
SparseEncoder = Callable[[CsrRows], list[bytes]]
MAX_DENSIFIED = 16 << 20  # bytes of one densified minibatch of a sparse source


class RowBlocks:
    """Payloads stacked by rows: a minibatch made of several stored groups (a SlimML layout).

    The products run block by block on each payload's own kernels (TOC's tree passes, woven
    planes), so stacking never decompresses; ``toarray`` is for backends that want values.
    """

    __array_ufunc__ = None  # ndarray @ RowBlocks defers to __rmatmul__

    def __init__(self, blocks: list[Any]):
        self.blocks = blocks
        self.shape = (sum(int(b.shape[0]) for b in blocks), int(blocks[0].shape[1]))

    def __matmul__(self, W: np.ndarray) -> np.ndarray:
        return np.vstack([np.asarray(b @ W).reshape(b.shape[0], -1) for b in self.blocks])

    def __rmatmul__(self, R: np.ndarray) -> np.ndarray:
        parts, start = [], 0
        for b in self.blocks:
            parts.append(np.asarray(R[..., start : start + b.shape[0]] @ b))
            start += b.shape[0]
        return np.sum(parts, axis=0)

    def toarray(self) -> np.ndarray:
        return np.vstack([b if isinstance(b, np.ndarray) else b.toarray() for b in self.blocks])


class Format:
    name = "format"
    version = 1
    any_precision = False  # reads fewer bytes at a lower precision
    fidelity: str | None = None  # the train option choosing the precision read, if any
    value_map: str | None = None  # the affine map applied to stored values, if any
    options = Options("layout")  # what this format accepts besides the shared layout options

    def parts(self, precision: int) -> int:
        """How many feature parts a read at ``precision`` bits needs."""
        return 1

    def top(self) -> int:
        """The highest precision a read can ask for (an unbound format: its most)."""
        return 32

    def bind(self, info: IndexInfo) -> Format:
        """This format configured to read index ``info`` (most formats need nothing)."""
        return self

    def features(self, info: IndexInfo) -> list[str]:
        """The names of the features a model trained on ``info`` learns."""
        return list(info.columns)

    def inputs(self, options: dict[str, Any]) -> dict[str, Any] | None:
        """How a model's raw input becomes its features, when not from its feature columns."""
        return None

    def profile(
        self, db: Any, source: str, label: str, opts: dict[str, Any], split: Any = None
    ) -> Any:
        """The source's profile: its numeric columns' (``store/source.py``), or its sparse
        array columns' (``store/sparse.py``); a format reading other sources overrides it.
        ``split`` (``store/split.py``) leaves the test rows out of it."""
        from loomdb.store import sparse

        return sparse.profile_source(db, source, label, opts, split)

    def encoding(self, db: Any, prof: SourceProfile, opts: dict[str, Any], progress: Any) -> Any:
        """The stored parts of a source, if this format makes them itself (None: the rows are
        read as numbers and cut into minibatches by ``store.layout``, ``encoder`` encodes)."""
        return None

    def check(self, options: dict[str, Any]) -> None:
        """Refuse layout options this format cannot honour (the shared ones included)."""

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        raise NotImplementedError

    def sparse_encoder(
        self, stats: dict[str, Any], options: dict[str, Any], cols: int
    ) -> SparseEncoder:
        """How a sparse source's minibatches (``cols`` columns) become parts: densified here."""
        size = int(options["batch_size"]) * cols * 8
        if size > MAX_DENSIFIED:
            raise LoomOptionError(
                f"the {self.name} format stores sparse rows dense: a minibatch of "
                f"{options['batch_size']} rows × {cols:,} columns would take "
                f"{size / 2**20:,.1f} MiB (at most {MAX_DENSIFIED >> 20} MiB)",
                hint='lay the source out with {"format": "toc"}, which stores sparse rows '
                "without densifying them",
            )
        encode = self.encoder(stats, options)
        return lambda X: encode(X.toarray())

    def payload(self, parts: list[Buffer], rows: int, n_features: int, precision: int) -> Any:
        raise NotImplementedError

    def stack(self, payloads: list[Any]) -> Any:
        """One payload of several decoded ones' rows (a minibatch of stored groups)."""
        return payloads[0] if len(payloads) == 1 else RowBlocks(payloads)

    def encode_labels(self, y: np.ndarray) -> bytes:
        return dense.encode(y.reshape(-1, 1))

    def decode_labels(self, blob: Buffer, rows: int | None = None) -> np.ndarray:
        """A minibatch's labels (``rows``: how many it holds, for a format whose label width
        follows from them: mlweaving's float32 or float64)."""
        return dense.decode(blob)[:, 0]

    def decode(self, stored: Stored, n_features: int, precision: int) -> Batch:
        y = self.decode_labels(stored.parts[0], stored.rows)
        if len(y) != stored.rows:
            raise LoomFormatError(
                f"minibatch {stored.batch} holds {len(y)} labels for {stored.rows} rows",
                hint=REBUILD,
            )
        X = self.payload(stored.parts[1:], stored.rows, n_features, precision)
        return Batch(X=X, y=y, number=stored.batch, nbytes=stored.nbytes)
