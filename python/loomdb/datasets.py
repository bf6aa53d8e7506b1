"""Loaders for the real datasets tests and benchmarks use (IDX for MNIST, LIBSVM text).
No paper section.

They take a path: loomdb never downloads data.  ``shared_datasets()`` finds the project's
``../shared/datasets`` folder (or ``$LOOMDB_DATASETS``) and returns ``None`` when it is absent.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

from loomdb.errors import LoomFormatError, LoomOptionError


def shared_datasets() -> Path | None:
    """The folder of real datasets beside the checkout, or ``None`` when there is none."""
    env = os.environ.get("LOOMDB_DATASETS")
    candidates = [Path(env)] if env else []
    root = Path(__file__).resolve().parents[2]
    candidates += [root.parent / "shared" / "datasets", root / "shared" / "datasets"]
    return next((p for p in candidates if (p / "a9a.t").exists()), None)


def _open(path: Path):
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")


_FETCH = "fetch the MNIST test files again (t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz)"


def load_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (MNIST's format: big-endian header, then the array)."""
    try:
        with _open(Path(path)) as f:
            data = f.read()
    except (EOFError, zlib.error) as e:  # a download cut short; a gzip stream that is not
        raise LoomFormatError(f"{path} is cut short or corrupt: {e}", hint=_FETCH) from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise LoomFormatError(f"{path} is not an IDX file: bad magic number", hint=_FETCH)
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if data[2] not in dtypes:
        raise LoomFormatError(f"{path}: unknown IDX element type {data[2]:#x}", hint=_FETCH)
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    itemsize = np.dtype(dtypes[data[2]]).itemsize
    if len(data) != 4 + 4 * ndim + int(np.prod(shape)) * itemsize:
        held = max(len(data) - 4 - 4 * ndim, 0) / itemsize
        raise LoomFormatError(
            f"{path}: header says {shape} but the file holds {held:g} items", hint=_FETCH
        )
    return np.frombuffer(data, dtype=dtypes[data[2]], offset=4 + 4 * ndim).reshape(shape)


def load_mnist(folder: str | Path, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST test set as ``(X float64 (n, 784) in 0..255, y int64 (n,))``."""
    folder = Path(folder)
    images = load_idx(folder / "t10k-images-idx3-ubyte.gz")
    labels = load_idx(folder / "t10k-labels-idx1-ubyte.gz")
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise LoomFormatError(
            f"{folder}/t10k-images-idx3-ubyte.gz holds an array of shape {images.shape}, "
            "not 28 × 28 images",
            hint=_FETCH,
        )
    if labels.ndim != 1 or len(labels) != len(images):
        raise LoomFormatError(
            f"{folder} holds {len(images):,} images but {labels.size:,} labels",
            hint=_FETCH,
        )
    X = images.reshape(images.shape[0], -1).astype(np.float64)
    y = labels.astype(np.int64)
    return (X[:limit], y[:limit]) if limit else (X, y)


def load_libsvm(path: str | Path, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A LIBSVM text file (``label idx:val …``, 1-based indexes) as dense ``(X, y)``."""
    labels: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    with open(path) as f:
        for r, line in enumerate(f):
            parts = line.split()
            if not parts:
                continue
            labels.append(float(parts[0]))
            for item in parts[1:]:
                idx, _, val = item.partition(":")
                rows.append(r)
                cols.append(int(idx) - 1)
                vals.append(float(val))
    m = n_features or (max(cols) + 1 if cols else 0)
    X = np.zeros((len(labels), m))
    X[np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)] = vals
    return X, np.asarray(labels)


def load_a9a(folder: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """a9a.t (Adult, binarised): 16,281 × 123, labels ±1."""
    return load_libsvm(Path(folder) / "a9a.t", n_features=123)


def mnist_jpegs(
    folder: str | Path, first: int = 0, limit: int | None = None, quality: int = 90
) -> tuple[list[bytes], np.ndarray]:
    """MNIST test images ``first … first + limit`` rendered as grayscale baseline JPEGs
    (Pillow, libjpeg's encoder at ``quality``) and their labels: real photos' format for
    small, real digits."""
    import io

    from PIL import Image

    X, y = load_mnist(folder)
    if first >= len(X):
        raise LoomOptionError(
            f"'first' is {first}, but {folder} holds {len(X):,} MNIST test images "
            f"(numbers 0 … {len(X) - 1})",
            hint="give a first image number below that",
        )
    stop = len(X) if limit is None else min(len(X), first + limit)
    out = []
    for row in X[first:stop]:
        buffer = io.BytesIO()
        Image.fromarray(row.reshape(28, 28).astype(np.uint8), "L").save(
            buffer, "JPEG", quality=quality
        )
        out.append(buffer.getvalue())
    return out, y[first:stop]
