"""The codecs the kit (``codec_kit``) runs: dense, TOC (every variant, with and without its
zstd stage), MLWeaving's woven planes, Progressive Compressed Records (a record of JPEGs
transcoded by jpegtran; decoded, it must give the baseline JPEGs' pixels exactly) and the
gradient messages of ``loomdb.codecs.sketch``."""

from __future__ import annotations

import io

import numpy as np
import sketch_reference as reference
from codec_kit import Codec, Shape
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from loomdb.codecs import dense, jpeg_scans, pcr, sketch, sketch_format, toc, toc_format, weave
from loomdb.fuzz import seeds, targets
from loomdb.imaging import pixels as image_pixels
from loomdb.imaging import transcode

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


def _baseline_jpeg(pixels: np.ndarray) -> bytes:
    """One image as a baseline JPEG, the form photos arrive in (Pillow, quality 85)."""
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(pixels, dtype=np.uint8)).save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


def _pcr_encode(X: np.ndarray, variant: str) -> bytes:
    """Images (n, H, W[, 3]) → baseline JPEGs → jpegtran's progression → one record."""
    scans = [jpeg_scans.split(transcode.progressive(_baseline_jpeg(x))) for x in X]
    return pcr.join(pcr.record(np.arange(len(X), dtype=np.float64), scans))


def _pcr_decode(blob: bytes, shape: Shape) -> np.ndarray:
    parts = pcr.split(blob)
    jpegs = pcr.images(pcr.decode_meta(parts[0]), parts[1:])
    return np.stack([image_pixels.pixels(j) for j in jpegs])


def _pcr_expected(X: np.ndarray, variant: str) -> np.ndarray:
    """What the baseline JPEGs decode to (by Pillow, not through a record): lossless."""
    return np.stack([image_pixels.pixels(_baseline_jpeg(x)) for x in X])


def _pcr_examples() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(12)
    ramp = np.add.outer(np.arange(16), np.arange(16)).astype(np.uint8) * 7
    return {
        "gray-3x16x16": np.stack([ramp, ramp.T, 255 - ramp]),
        "rgb-2x12x20": rng.integers(0, 256, (2, 12, 20, 3), dtype=np.uint8),
        "rgb-1x1x1": np.full((1, 1, 1, 3), 200, dtype=np.uint8),
    }


PCR = Codec(
    name="pcr",
    version=pcr.VERSION,
    variants=("record",),
    encode=_pcr_encode,
    decode=_pcr_decode,
    expected=_pcr_expected,
    use=lambda blob, shape: targets.pcr(blob),
    examples=_pcr_examples,
    arrays=st.one_of(
        arrays(np.uint8, st.tuples(st.integers(1, 3), st.integers(1, 24), st.integers(1, 24))),
        arrays(
            np.uint8,
            st.tuples(st.integers(1, 2), st.integers(1, 17), st.integers(1, 17), st.just(3)),
        ),
    ),
)

CODECS = {c.name: c for c in (DENSE, TOC, WEAVE, PCR)}


# Gradient messages (loomdb.codecs.sketch): an "array" is a structured array of (key, value)
# pairs; the lossy methods must decode to what the scalar reference says (sketch_reference).
GRAD = np.dtype([("key", "<i8"), ("value", "<f8")])
SEED = 11


def gradient(keys, values) -> np.ndarray:
    out = np.zeros(len(keys), dtype=GRAD)
    out["key"], out["value"] = keys, values
    return out


def _sketch_expected(X: np.ndarray, variant: str) -> np.ndarray:
    keys, values = [int(k) for k in X["key"]], [float(v) for v in X["value"]]
    method = variant.split("-")[0]
    if method in ("none", "keys"):
        return X.copy()
    if method.startswith("zipml"):
        return gradient(keys, reference.zipml(values, int(method[5:]), SEED))
    if method == "quantile":
        return gradient(keys, reference.quantile(values, 16, 4))
    return gradient(keys, reference.sketchml(keys, values, 16, 4, 2, SEED))


@st.composite
def _gradients(draw) -> np.ndarray:
    keys = draw(
        st.sets(
            st.one_of(st.integers(0, 600), st.integers(0, 2**33), st.integers(0, 2**63 - 1)),
            max_size=40,
        )
    )
    finite = st.floats(allow_nan=False, allow_infinity=False)
    tame = st.sampled_from([0.0, -0.0, 0.5, -0.5, 0.25, -2.0, 5e-324, -1.7976931348623157e308])
    values = draw(st.lists(st.one_of(tame, finite), min_size=len(keys), max_size=len(keys)))
    return gradient(sorted(keys), values)


SKETCH = Codec(
    name="sketch",
    version=sketch_format.VERSION,
    variants=("none", "keys", "zipml8", "zipml16", *seeds.SMALL),
    encode=lambda X, variant: seeds.gradient_codec(variant).encode(X["key"], X["value"], seed=SEED),
    decode=lambda blob, shape: gradient(*sketch.decode(blob)),
    expected=_sketch_expected,
    use=lambda blob, shape: targets.sketch(blob),
    examples=lambda: {name: gradient(*kv) for name, kv in seeds.gradients().items()},
    arrays=_gradients(),
)

CODECS[SKETCH.name] = SKETCH
