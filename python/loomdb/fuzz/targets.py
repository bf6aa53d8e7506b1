"""What every decoder must do with any input bytes: reject them with ``LoomFormatError``, or
return something that is safe to use and agrees with itself.

No paper section: these are loomdb's robustness checks of its codecs (TOC §3.2 and §4 for the
TOC reader and its products; MLWeaving §4.3 for the woven planes; PCR §3 for the records of
progressive JPEG scans, decoded by Pillow as the trainer does).

A target takes one input and returns normally when the decoder behaved; anything it raises
other than ``LoomFormatError`` is a finding.  Past decoding, each target uses what it got the
way loomdb does (TOC: A·v, v·A, A·M, M·A; MLWeaving: the products of ``WovenMatrix``) and checks
the answers against a dense decode when the matrix is small and its values are tame, so a blob
that decodes one way and multiplies another (a row naming a column twice) is caught too.  A
gradient message (SketchML §3) must decode to int64 keys, strictly increasing, and as many
finite float64 values, its sections adding up to its length; a lossless method's must encode
back to the same gradient.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from loomdb.codecs import dense as dense_codec
from loomdb.codecs import pcr as pcr_codec
from loomdb.codecs import sketch as sketch_codec
from loomdb.codecs import sketch_format
from loomdb.codecs import toc as toc_codec
from loomdb.codecs import weave as weave_codec
from loomdb.imaging import pixels

SMALL = 1 << 16  # cells: decode densely and compare the products with numpy
VECTOR = 1 << 20  # columns or rows: multiply by vectors (larger claims are only parsed)
MATRIX = 1 << 12  # columns or rows: also multiply by small matrices
WEAVE_HEAD = struct.Struct("<BHB")  # n − 1, m − 1, s − 1 of a weave input (then its planes)
PCR_IMAGES, PCR_SIZE = 4, 8  # images of a record decoded (with Pillow), features' size


def dense(data: bytes) -> None:
    X = dense_codec.decode(data)
    rows, cols = struct.unpack_from("<II", data, 4)
    if X.shape != (rows, cols) or X.dtype != np.float64:
        raise AssertionError(f"dense decoded {X.shape} {X.dtype} from a {rows}×{cols} header")


def toc(data: bytes) -> None:
    m = toc_codec.TocMatrix.from_bytes(data)
    rows, cols = m.shape
    if rows > VECTOR or cols > VECTOR:
        return
    v, u = _operand(cols), _operand(rows)
    results = {"A·v": (m @ v, v), "v·A": (u @ m, u)}
    if rows <= MATRIX and cols <= MATRIX:
        M, U = _operand(cols, 3), _operand(rows, 2).T
        results.update({"A·M": (m @ M, M), "M·A": (U @ m, U)})
    shapes = {"A·v": (rows,), "v·A": (cols,), "A·M": (rows, 3), "M·A": (2, cols)}
    for name, (got, _) in results.items():
        if got.shape != shapes[name]:
            raise AssertionError(f"TOC {name} has shape {got.shape}; expected {shapes[name]}")
    if rows * cols > SMALL:
        return
    X = m.toarray()
    if X.shape != (rows, cols):
        raise AssertionError(f"TOC toarray has shape {X.shape}; expected {(rows, cols)}")
    _agree(X, results, "TOC")


def weave(data: bytes) -> None:
    n, m, s, planes = split_weave_input(data)
    W = weave_codec.WovenMatrix(planes, n, m, s)
    U = W.quantized()
    if U.shape != (n, m) or (U & np.uint32((1 << (32 - s)) - 1)).any():
        raise AssertionError(f"unweave at precision {s} kept bits past plane {s}")
    v, u, M = _operand(m), _operand(n), _operand(m, 2)
    _agree(W.toarray(), {"A·v": (W @ v, v), "v·A": (u @ W, u), "A·M": (W @ M, M)}, "weave")


def sketch(data: bytes) -> None:
    keys, values, sizes = sketch_format.read_message(data, dict(sketch_codec.METHODS))
    if keys.dtype != np.int64 or values.dtype != np.float64 or keys.shape != values.shape:
        raise AssertionError(f"sketch decoded keys {keys.shape}, values {values.shape}")
    if (np.diff(keys) <= 0).any() or (len(keys) and keys[0] < 0) or not np.isfinite(values).all():
        raise AssertionError("sketch decoded unsorted or negative keys, or a value not finite")
    if sum(sizes.values()) != len(data):
        raise AssertionError(f"sketch sections {sizes} do not add up to {len(data)} bytes")
    codec = sketch_codec.METHODS[sketch_codec.method_of(data)]
    if codec.lossless:
        again = sketch_codec.decode(codec.encode(keys, values))
        if again[0].tobytes() != keys.tobytes() or again[1].tobytes() != values.tobytes():
            raise AssertionError(f"a {codec.name} message does not encode back to itself")


def join_weave_input(planes: list[bytes], n: int, m: int, s: int) -> bytes:
    """A weave fuzz input: the block's shape and precision, then its planes back to back."""
    return WEAVE_HEAD.pack(n - 1, m - 1, s - 1) + b"".join(planes)


def split_weave_input(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """(n, m, s, planes) from a weave fuzz input; the planes are cut at the block's plane size,
    so inputs of the wrong length give planes of the wrong size or too few of them."""
    if len(data) < WEAVE_HEAD.size:
        return 1, 1, 1, []
    a, b, c = WEAVE_HEAD.unpack_from(data)
    n, m, s = 1 + a % 64, 1 + b % 512, 1 + c % 32
    size, body = weave_codec.plane_bytes(n, m), data[WEAVE_HEAD.size :]
    return n, m, s, [body[i : i + size] for i in range(0, len(body), size)]


def _operand(rows: int, cols: int = 0) -> np.ndarray:
    """A fixed operand in [−1, 1], no zeros to hide a wrong entry behind (cheaper than an RNG)."""
    x = np.cos(np.arange(1, rows * max(cols, 1) + 1, dtype=np.float64))
    return x.reshape(rows, cols) if cols else x


def _agree(X: np.ndarray, results: dict, codec: str) -> None:
    """Each product equals the same product of the dense decode (when the values are tame)."""
    if not np.isfinite(X).all() or np.abs(X).max(initial=0.0) > 1e100:
        return
    for name, (got, operand) in results.items():
        want = X @ operand if name.startswith("A") else operand @ X
        scale = max(1.0, float(np.abs(X).max(initial=0.0)))
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9 * scale * max(X.shape)):
            raise AssertionError(f"{codec} {name} differs from the dense decode's product")


def pcr(data: bytes) -> None:
    """A Progressive Compressed Record as one byte string (its metadata, then every scan
    group): split, every image rebuilt at the last and the first fidelity and decoded into a
    feature vector, as a pcr index's reader does (PCR §3.2)."""
    parts = pcr_codec.split(data)
    meta = pcr_codec.decode_meta(parts[0])
    if len(parts) != meta.groups + 1 or meta.offsets()[-1] != len(data):
        raise AssertionError(f"a record split into {len(parts)} parts for {meta.groups} groups")
    for k in sorted({meta.groups, min(1, meta.groups)}):
        jpegs = pcr_codec.images(meta, parts[1 : k + 1])
        if len(jpegs) != meta.images:
            raise AssertionError(f"{len(jpegs)} images rebuilt from a record of {meta.images}")
        for jpeg in jpegs[:PCR_IMAGES]:
            U = pixels.features(jpeg, PCR_SIZE, "gray")
            if U.shape != (PCR_SIZE * PCR_SIZE,) or U.dtype != np.uint8:
                raise AssertionError(f"features of shape {U.shape} {U.dtype}")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "dense": dense,
    "toc": toc,
    "weave": weave,
    "sketch": sketch,
    "pcr": pcr,
}
