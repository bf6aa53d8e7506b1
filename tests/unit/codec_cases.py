"""The codecs the kit (``codec_kit``) runs: dense, TOC (every variant, with and without its
zstd stage) and MLWeaving's woven planes."""

from __future__ import annotations

import numpy as np
from codec_kit import Codec, Shape
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from loomdb.codecs import dense, toc, toc_format, weave
from loomdb.fuzz import seeds, targets

FLOATS = st.one_of(
    st.sampled_from([0.0, 0.0, -0.0, 1.0, 2.5, -3.0, np.nan, np.inf, -np.inf]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SHAPES = st.tuples(st.integers(0, 20), st.integers(0, 30))


def _dense_expected(X: np.ndarray, variant: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    return X.astype(np.float32).astype(np.float64) if variant == "float32" else X


DENSE = Codec(
    name="dense",
    version=dense.VERSION,
    variants=("float64", "float32"),
    encode=lambda X, variant: dense.encode(X, dtype=variant),
    decode=lambda blob, shape: dense.decode(blob),
    expected=_dense_expected,
    use=lambda blob, shape: targets.dense(blob),
    examples=seeds.matrices,
    arrays=arrays(np.float64, SHAPES, elements=FLOATS),
)


def _toc_encode(X: np.ndarray, variant: str) -> bytes:
    base, _, stage = variant.partition("+")
    return toc.encode(X, variant=base, entropy=stage or None)


TOC = Codec(
    name="toc",
    version=toc_format.VERSION,
    variants=tuple(v + stage for v in toc.VARIANTS for stage in ("", "+zstd")),
    encode=_toc_encode,
    decode=lambda blob, shape: toc.decode(blob),
    expected=lambda X, variant: np.asarray(X, dtype=np.float64),
    use=lambda blob, shape: targets.toc(blob),
    examples=seeds.matrices,
    arrays=arrays(np.float64, SHAPES, elements=FLOATS),
)


def _planes(blob: bytes, shape: Shape) -> list[bytes]:
    size = weave.plane_bytes(*shape)
    return [blob[i : i + size] for i in range(0, len(blob), size)]


def _weave_use(blob: bytes, shape: Shape) -> None:
    n, m = shape
    W = weave.WovenMatrix(_planes(blob, shape), n, m, weave.BITS)
    W @ np.ones(m), np.ones(n) @ W


def _weave_examples() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    out = {}
    for n, m in [(1, 1), (8, 64), (9, 65), (13, 70)]:
        U = rng.integers(0, 2**32, size=(n, m), dtype=np.uint64).astype(np.uint32)
        U[:, ::4] = 0
        out[f"block-{n}x{m}"] = U
    return out


WEAVE = Codec(
    name="weave",
    version=weave.LAYOUT_VERSION,
    variants=("planes",),
    encode=lambda U, variant: b"".join(bytes(p) for p in weave.weave_block(U)),
    decode=lambda blob, shape: weave.unweave(_planes(blob, shape), *shape, weave.BITS),
    expected=lambda U, variant: np.asarray(U, dtype=np.uint32),
    use=_weave_use,
    examples=_weave_examples,
    arrays=arrays(
        np.uint32,
        st.tuples(st.integers(1, 20), st.integers(1, 130)),
        elements=st.one_of(st.just(0), st.integers(0, 2**32 - 1)),
    ),
)

CODECS = {c.name: c for c in (DENSE, TOC, WEAVE)}
