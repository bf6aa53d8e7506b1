"""The envelope every gradient message of ``loomdb.codecs.sketch`` shares, version 1, and the
checks of what goes in and what comes out.

No paper section for the envelope itself: SketchML (§3.5) counts only the payload; loomdb adds
a 16-byte header so that one ``decode`` reads a message of any method, and so that a corrupted
or hostile message is refused before anything is sized from it.

Header (little-endian)::

    0   b"LG"     magic
    2   uint8 1   version
    3   uint8     method code (METHODS)
    4   uint8     flags: bit 0 WIDE — some key is >= 2**32 (keys are 8 bytes; delta widths
                  1/2/4/8 instead of 1/2/3/4); no other bit is defined
    5   uint8 0   reserved
    6   uint16 0  reserved
    8   uint32    seed (the MinMaxSketch hash seed; ZipML's rounding seed)
    12  uint32    d, the number of keys in the message

Keys are non-negative integers below 2**63, strictly increasing; values are finite floats.
``Reader`` never allocates more than the bytes left can fill: every count read from a message
is checked against them first, and it records how many bytes each section took
(``breakdown``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from loomdb.codecs.blob import byte_view
from loomdb.errors import LoomDataError, LoomFormatError, LoomOptionError

MAGIC = b"LG"
VERSION = 1
HEADER = struct.Struct("<2sBBBBHII")
WIDE = 1
WIDE_FROM = 1 << 32  # the smallest key that needs the WIDE layout
MAX_KEYS = (1 << 32) - 1  # d is a uint32
GRADIENT = "pass the keys (feature indexes, int64, increasing) and their float64 values"
METHODS = {"none": 1, "keys": 2, "zipml8": 3, "zipml16": 4, "quantile": 5, "sketchml": 6}
NAMES = {code: name for name, code in METHODS.items()}
# What a decoder says when a message is broken: a codec cannot repair it, only re-encode it.
RESEND = (
    "the message was truncated or corrupted on its way, or was not written by "
    "loomdb.codecs.sketch: encode the gradient again"
)


def broken(what: str) -> LoomFormatError:
    return LoomFormatError(f"gradient message: {what}", hint=RESEND)


def check_gradient(keys: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(keys int64, values float64)`` of a sparse gradient, or the error saying what is wrong:
    1-D and of equal length, keys integer in [0, 2**63) and strictly increasing (sorted, no
    duplicates), values real and finite."""
    k, v = np.asarray(keys), np.asarray(values)
    if k.ndim != 1 or v.ndim != 1 or len(k) != len(v):
        raise LoomOptionError(
            f"a gradient is two 1-D arrays of equal length; got keys {k.shape}, values {v.shape}",
            hint=GRADIENT,
        )
    if len(k) and (k.dtype.kind not in "iu"):
        raise LoomOptionError(f"gradient keys must be integers; got dtype {k.dtype}", hint=GRADIENT)
    if len(v) and v.dtype.kind not in "iuf":
        raise LoomOptionError(
            f"gradient values must be real numbers; got dtype {v.dtype}", hint=GRADIENT
        )
    if len(k) > MAX_KEYS:
        raise LoomOptionError(
            f"a gradient message holds at most {MAX_KEYS:,} keys; got {len(k):,}",
            hint="split the gradient into several messages",
        )
    if len(k) and (k.min() < 0 or (k.dtype.kind == "u" and k.max() >= 1 << 63)):
        bad = k[k < 0][0] if k.min() < 0 else k.max()
        raise LoomDataError(
            f"gradient keys must be in [0, 2**63); got {int(bad)}",
            hint="keys are feature indexes: non-negative, below 2**63",
        )
    k = k.astype(np.int64, copy=False)
    step = np.diff(k)
    if (step <= 0).any():
        i = int(np.argmax(step <= 0)) + 1
        kind = "a duplicate" if step[i - 1] == 0 else "out of order"
        raise LoomDataError(
            f"gradient keys must be strictly increasing; keys[{i}] = {k[i]} follows "
            f"keys[{i - 1}] = {k[i - 1]} ({kind})",
            hint="sort the keys and sum the values of duplicate keys before encoding",
        )
    v = v.astype(np.float64, copy=False)
    if not np.isfinite(v).all():
        i = int(np.argmax(~np.isfinite(v)))
        raise LoomDataError(
            f"gradient values must be finite; the value of key {k[i]} is {v[i]}",
            hint="a NaN or infinite gradient means training diverged: lower the step size",
        )
    return k, v


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise LoomOptionError(
            f"seed must be an integer in [0, 2**32); got {seed!r}",
            hint="the seed of the message's hashes, e.g. the step number modulo 2**32",
        )
    return int(seed)


def is_wide(keys: np.ndarray) -> bool:
    return bool(len(keys)) and int(keys[-1]) >= WIDE_FROM


def header(method: str, keys: np.ndarray, seed: int) -> bytes:
    flags = WIDE if is_wide(keys) else 0
    return HEADER.pack(MAGIC, VERSION, METHODS[method], flags, 0, 0, seed, len(keys))


class Reader:
    """A cursor over a message's bytes that refuses to read (or size anything) past its end and
    counts the bytes of each section."""

    def __init__(self, blob: object):
        self.buf = np.frombuffer(byte_view(blob, "a gradient message"), dtype=np.uint8)
        self.pos = 0
        self.sizes: dict[str, int] = {}

    @property
    def left(self) -> int:
        return len(self.buf) - self.pos

    def need(self, size: int, what: str) -> None:
        if size > self.left:
            raise broken(
                f"{what} needs {size:,} bytes at offset {self.pos:,}; {self.left:,} remain"
            )

    def take(self, size: int, what: str, section: str) -> np.ndarray:
        self.need(size, what)
        out = self.buf[self.pos : self.pos + size]
        self.pos += size
        self.sizes[section] = self.sizes.get(section, 0) + size
        return out

    def unpack(self, layout: struct.Struct, what: str, section: str) -> tuple[Any, ...]:
        return layout.unpack(self.take(layout.size, what, section).tobytes())

    def array(self, dtype: str, count: int, what: str, section: str) -> np.ndarray:
        item = np.dtype(dtype)
        raw = self.take(count * item.itemsize, what, section)
        return raw.view(item).astype(item.newbyteorder("="), copy=True)

    def skip_accounted(self, size: int, section: str) -> None:
        """Account for ``size`` bytes a kernel read past ``pos`` (already bounds-checked)."""
        self.pos += size
        self.sizes[section] = self.sizes.get(section, 0) + size

    def end(self) -> None:
        if self.left:
            raise broken(f"{self.left:,} bytes follow the end of the message at {self.pos:,}")


def open_message(blob: object) -> tuple[str, int, int, int, Reader]:
    """``(method, flags, seed, d, reader)`` of a message whose header is sound."""
    reader = Reader(blob)
    if reader.left < HEADER.size:
        raise broken(f"{reader.left} bytes are shorter than the {HEADER.size}-byte header")
    magic, version, code, flags, r1, r2, seed, count = reader.unpack(HEADER, "header", "header")
    if magic != MAGIC or version != VERSION:
        raise LoomFormatError(
            f"not a gradient message of version {VERSION} (magic {magic!r}, version {version})",
            hint="decode it with the loomdb version that encoded it, or encode it again",
        )
    if code not in NAMES or flags & ~WIDE or r1 or r2:
        raise broken(f"unknown method code {code} or flags {flags:#x} (reserved {r1}, {r2})")
    return NAMES[code], flags, seed, count, reader


def finish(reader: Reader, flags: int, keys: np.ndarray, values: np.ndarray) -> None:
    """The checks every decoded message passes: its keys unique and increasing (the caller
    sorted them), its WIDE flag saying what the keys are, its values finite, nothing left."""
    reader.end()
    if len(keys) > 1 and (np.diff(keys) <= 0).any():
        raise broken("a key appears twice")
    if bool(flags & WIDE) != is_wide(keys):
        raise broken(f"its WIDE flag is {bool(flags & WIDE)} but its largest key says otherwise")
    if not np.isfinite(values).all():
        raise broken("it decodes to a value that is not finite")


class GradientCodec:
    """One method: ``encode(keys, values, *, seed=0) -> bytes`` and ``decode(blob) -> (keys,
    values)``.  Subclasses write ``body`` and read it back in ``read`` (keys sorted)."""

    name = ""
    lossless = False

    def encode(self, keys: Any, values: Any, *, seed: int = 0) -> bytes:
        k, v = check_gradient(keys, values)
        s = check_seed(seed)
        return header(self.name, k, s) + self.body(k, v, s)

    def decode(self, blob: object) -> tuple[np.ndarray, np.ndarray]:
        keys, values, _ = read_message(blob, {self.name: self})
        return keys, values

    def body(self, keys: np.ndarray, values: np.ndarray, seed: int) -> bytes:
        raise NotImplementedError

    def read(self, r: Reader, d: int, wide: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<gradient codec {self.name!r}>"


def read_message(
    blob: object, codecs: dict[str, GradientCodec]
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """``(keys, values, bytes per section)`` of a message of one of ``codecs``' methods."""
    method, flags, seed, count, reader = open_message(blob)
    if method not in codecs:
        raise LoomFormatError(
            f"a {method} gradient message given to the decoder of {', '.join(codecs)}",
            hint="decode any method's message with loomdb.codecs.sketch.decode",
        )
    keys, values = codecs[method].read(reader, count, bool(flags & WIDE), seed)
    finish(reader, flags, keys, values)
    return keys, values, reader.sizes
