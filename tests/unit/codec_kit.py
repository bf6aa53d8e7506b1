"""The test kit every codec runs (numcodecs' ``tests/common.py``, written small).

A codec under test is a ``Codec``: how to encode an array in one of its variants, how to decode
bytes back, what the decode must equal, and how loomdb *uses* a decoded record (the fuzz target
of ``loomdb.fuzz.targets``).  The kit checks, for every codec:

* round trip: ``decode(encode(X))`` equals what the codec promises, bit for bit;
* malformed input: a truncation at every offset is rejected with ``LoomFormatError``; every
  single-byte mutation and any random bytes are rejected with it or decode to something safe to
  use — never another exception;
* backwards compatibility: every fixture ``tests/fixtures/codecs/<codec>/v<N>/<name>.bin``
  decodes to its ``<name>.npy``, for every version N the codec ever wrote (1 … its current one).

Fixtures are never edited, only added.  ``write_missing_fixtures`` (run by the test when
``LOOMDB_WRITE_FIXTURES=1``) writes those of the current version that do not exist yet and never
overwrites one; the expected arrays come from the source matrices, not from decoding, so a
decoder bug cannot bake itself into a fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loomdb.errors import LoomFormatError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "codecs"
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Codec:
    name: str  # the fixture folder
    version: int  # the format version it writes now
    variants: tuple[str, ...]
    encode: Callable[[np.ndarray, str], bytes]
    decode: Callable[[bytes, Shape], np.ndarray]  # shape: of the expected array
    expected: Callable[[np.ndarray, str], np.ndarray]  # what decode(encode(X, variant)) must be
    use: Callable[[bytes, Shape], None]  # decode and use, as loomdb (or the fuzzer) does
    examples: Callable[[], dict[str, np.ndarray]]  # the fixtures' source matrices
    arrays: Any  # a hypothesis strategy of arrays the codec round-trips


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes, dtypes and bit patterns (−0.0 ≠ 0.0; NaN payloads compared)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.tobytes() == b.tobytes()


def check_round_trip(codec: Codec, X: np.ndarray, variant: str) -> None:
    out = codec.decode(codec.encode(X, variant), X.shape)
    want = codec.expected(X, variant)
    assert same_bits(np.asarray(out), want), f"{codec.name}/{variant}: round trip differs"


def rejects_or_uses(codec: Codec, blob: bytes, shape: Shape) -> bool:
    """True when the blob decoded and was used, False when it was rejected as malformed."""
    try:
        codec.use(blob, shape)
    except LoomFormatError:
        return False
    return True


def check_truncations(codec: Codec, blob: bytes, shape: Shape) -> None:
    for cut in range(len(blob)):
        with pytest.raises(LoomFormatError):
            codec.use(blob[:cut], shape)


def mutations(blob: bytes) -> Iterator[bytes]:
    """Every single-byte mutation of a small blob: each offset with a few telling values."""
    for at in range(len(blob)):
        for value in {blob[at] ^ 0x01, blob[at] ^ 0x80, 0x00, 0xFF}:
            if value != blob[at]:
                yield blob[:at] + bytes([value]) + blob[at + 1 :]


def check_mutations(codec: Codec, blob: bytes, shape: Shape) -> None:
    for mutated in mutations(blob):
        rejects_or_uses(codec, mutated, shape)


def fixture_paths(codec: Codec) -> dict[int, list[Path]]:
    """The fixture files of every version of a codec, by version."""
    out = {}
    for folder in sorted(FIXTURES.glob(f"{codec.name}/v*")):
        out[int(folder.name[1:])] = sorted(folder.glob("*.bin"))
    return out


def check_fixtures(codec: Codec) -> int:
    """Decode every committed fixture of every version; the number checked."""
    versions = fixture_paths(codec)
    missing = set(range(1, codec.version + 1)) - {v for v, files in versions.items() if files}
    assert not missing, (
        f"{codec.name}: no fixtures of version(s) {sorted(missing)}; write them with "
        "LOOMDB_WRITE_FIXTURES=1 pytest tests/unit/test_codecs.py (they are never overwritten)"
    )
    checked = 0
    for files in versions.values():
        for path in files:
            want = np.load(path.with_suffix(".npy"), allow_pickle=False)
            got = codec.decode(path.read_bytes(), want.shape)
            assert same_bits(np.asarray(got), want), f"{path} no longer decodes to its .npy"
            checked += 1
    return checked


def write_missing_fixtures(codec: Codec) -> list[Path]:
    """Write the current version's fixtures that do not exist yet; never overwrite one."""
    folder = FIXTURES / codec.name / f"v{codec.version}"
    written = []
    for name, X in codec.examples().items():
        for variant in codec.variants:
            path = folder / f"{name}-{variant}.bin"
            if path.exists() or path.with_suffix(".npy").exists():
                continue
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(codec.encode(X, variant))
            np.save(path.with_suffix(".npy"), codec.expected(X, variant), allow_pickle=False)
            written.append(path)
    return written
