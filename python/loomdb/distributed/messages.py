"""The bytes a distributed step sends each way (SketchML §4.1: workers send encoded gradients,
the driver sends the model back).

A gradient of a (columns × k) model travels as one sparse vector: the key of entry (column c,
class j) is ``c·k + j``, the columns those where the worker's share holds a value (the
gradient is zero elsewhere), encoded by a gradient codec (``codecs/sketch.py``).

* **Up** (worker → driver), version 1: ``<B version, H k, I rows, d loss>`` then the k column
  sums of the loss derivative (float64, the intercept's gradient) then the codec's message of
  the data gradient ``Xᵀ·G``.
* **Down** (driver → worker), version 1: ``<B version, H k, I columns, d widest>`` then
  the k margin offsets (float64: intercept minus the standardisation's shift term) then the
  model (standardisation folded in) at the columns the worker's share holds: float64 values
  in column order when uncompressed (the worker knows the columns: no keys travel), else the
  codec's message of them.  Departure: the paper's driver broadcasts the whole model; loomdb
  sends each worker only the columns its next share can use, which is all its products read.
"""

from __future__ import annotations

import struct

import numpy as np

from loomdb.codecs import sketch
from loomdb.codecs.sketch_format import HEADER, is_wide
from loomdb.errors import LoomFormatError

VERSION = 1
_UP = struct.Struct("<BHId")
_DOWN = struct.Struct("<BHId")


def flat_keys(columns: np.ndarray, k: int) -> np.ndarray:
    """Keys ``c·k + j`` of the entries of ``columns`` (sorted) × k classes, increasing."""
    cols = np.asarray(columns, dtype=np.int64)
    return (cols[:, None] * k + np.arange(k, dtype=np.int64)).ravel()


def pack_gradient(
    columns: np.ndarray,
    grad: np.ndarray,
    loss: float,
    rows: int,
    gsum: np.ndarray,
    method: str,
    seed: int,
) -> bytes:
    """``grad`` (len(columns) × k): the data gradient at ``columns``."""
    k = grad.shape[1]
    body = sketch.encode(flat_keys(columns, k), grad.ravel(), method=method, seed=seed)
    head = _UP.pack(VERSION, k, rows, float(loss))
    return head + np.asarray(gsum, dtype="<f8").tobytes() + body


def unpack_gradient(
    blob: bytes, k: int, columns: int
) -> tuple[np.ndarray, np.ndarray, float, int, np.ndarray]:
    """``(keys, values, loss, rows, gsum)`` of an up message of a ``columns`` × ``k`` model."""
    head, gsum, rest = _split(blob, _UP, "gradient")
    _version, got_k, rows, loss = head
    if got_k != k:
        raise LoomFormatError(f"a worker's gradient has {got_k} classes; the model has {k}")
    keys, values = sketch.decode(rest)
    if len(keys) and keys[-1] >= columns * k:
        raise LoomFormatError("a worker's gradient names a column beyond the model")
    return keys, values, loss, rows, gsum


def codec_bytes(blob: bytes, k: int) -> int:
    """The bytes of an up message that are the codec's message (what compression acts on)."""
    return len(blob) - _UP.size - 8 * k


def raw_bytes(keys: np.ndarray) -> int:
    """The bytes codec ``none`` (§4.1's uncompressed Adam: 4-byte keys, float64 values; 8-byte
    keys past 2**32) takes for these keys: the reference a compression ratio is measured
    against."""
    return HEADER.size + len(keys) * (16 if is_wide(keys) else 12)


def pack_model(
    values: np.ndarray,
    columns: np.ndarray,
    offsets: np.ndarray,
    widest: int,
    method: str,
    seed: int,
) -> bytes:
    """``values`` (len(columns) × k): the folded model at ``columns``."""
    k = values.shape[1]
    head = _DOWN.pack(VERSION, k, len(columns), float(widest))
    if method == "none":
        body = np.ascontiguousarray(values, dtype="<f8").tobytes()
    else:
        body = sketch.encode(flat_keys(columns, k), values.ravel(), method=method, seed=seed)
    return head + np.asarray(offsets, dtype="<f8").tobytes() + body


def unpack_model(
    blob: bytes, columns: np.ndarray, method: str
) -> tuple[np.ndarray, np.ndarray, float]:
    """``(values (len(columns) × k), offsets, widest)`` of a down message."""
    head, offsets, rest = _split(blob, _DOWN, "model")
    _version, k, count, widest = head
    if count != len(columns):
        raise LoomFormatError(
            f"a model message holds {count} columns; the share has {len(columns)}"
        )
    if method == "none":
        if len(rest) != 8 * count * k:
            raise LoomFormatError("a model message's values do not fill its columns")
        return np.frombuffer(rest, dtype="<f8").reshape(count, k), offsets, widest
    keys, values = sketch.decode(rest)
    if not np.array_equal(keys, flat_keys(columns, k)):
        raise LoomFormatError("a model message's keys are not the share's columns")
    return values.reshape(count, k), offsets, widest


def _split(blob: bytes, head: struct.Struct, what: str):
    view = memoryview(blob)
    if len(view) < head.size:
        raise LoomFormatError(f"a {what} message of {len(view)} bytes is truncated")
    fields = head.unpack_from(view)
    k = fields[1]
    end = head.size + 8 * k
    if fields[0] != VERSION or k < 1 or len(view) < end:
        raise LoomFormatError(
            f"a {what} message is not version {VERSION} or is truncated",
            hint="install the same loomdb on the driver and every worker",
        )
    sums = np.frombuffer(view[head.size : end], dtype="<f8").copy()
    return fields, sums, bytes(view[end:])
