"""Seed inputs of each fuzz target: valid encodings of small matrices, one for every variant
and stage, so that mutation starts from inputs that reach every stage of a decoder (header,
sections, the zstd stage, the tree build, the products).

No paper section: the matrices echo TOC's Figure 3 and the edge cases of its §3 (all-zero rows,
one row, fully dense rows, −0.0 and NaN as values) and MLWeaving's padding to 8 × 64 (§4.3);
the gradients echo SketchML's Figures 3 and 6 (values around zero in equal-count buckets) and
its edge cases: no key, one key, one sign, fewer values than buckets, ties, zeros, keys past
2**32 and deltas of every width (§3.2–3.4);
the records, PCR's padding of images with fewer scans (§3).
"""

from __future__ import annotations

import numpy as np

from loomdb.codecs import dense, jpeg_scans, pcr, sketch, toc, weave
from loomdb.fuzz.targets import join_weave_input


def matrices() -> dict[str, np.ndarray]:
    """Small matrices whose encodings exercise every path of the decoders."""
    rng = np.random.default_rng(7)
    figure3 = np.zeros((4, 4))
    figure3[0] = [1.1, 2, 3, 1.4]
    figure3[1, :3] = [1.1, 2, 3]
    figure3[2, 1:] = [1.1, 3, 1.4]
    figure3[3, :2] = [1.1, 2]
    repeats = rng.integers(0, 3, (12, 10)).astype(float)  # repeated runs: LZW makes nodes
    repeats[5] = 0.0  # an all-zero row
    odd = np.array([[-0.0, 0.0, np.nan, np.inf], [2.5, -np.inf, 0.0, 2.5]])
    wide = np.zeros((3, 300))
    wide[rng.integers(0, 3, 40), rng.integers(0, 300, 40)] = rng.integers(1, 700, 40)
    return {
        "figure3": figure3,
        "repeats": repeats,
        "odd-values": odd,
        "wide": wide,  # 2-byte integers in the packed sections
        "one-cell": np.array([[4.0]]),
        "empty": np.zeros((0, 3)),
    }


def dense_seeds() -> list[bytes]:
    out = []
    for X in matrices().values():
        if X.size <= 256:  # seeds stay well under the default --max-len
            out += [dense.encode(X), dense.encode(X, dtype="float32")]
    return out


def toc_seeds() -> list[bytes]:
    return [
        toc.encode(X, variant=variant, entropy=entropy)
        for X in matrices().values()
        for variant in toc.VARIANTS
        for entropy in (None, "zstd")
    ]


def weave_seeds() -> list[bytes]:
    rng = np.random.default_rng(8)
    out = []
    for n, m, s in [(1, 1, 1), (8, 64, 32), (9, 65, 3), (5, 130, 2)]:
        U = rng.integers(0, 2**32, size=(n, m), dtype=np.uint64).astype(np.uint32)
        U[:, ::3] = 0  # zero values and words: the kernels skip them
        planes = [bytes(p) for p in weave.weave_block(U)[:s]]
        out.append(join_weave_input(planes, n, m, s))
    return out


def gradients() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Small sparse gradients ``(keys, values)`` whose messages exercise every path."""
    rng = np.random.default_rng(9)
    figure3 = np.array([-0.36, -0.12, -0.05, -0.02, 0.01, 0.03, 0.08, 0.14, 0.21, 0.52])
    many = np.round(rng.standard_t(3, 120) * 0.01, 4)  # ties after rounding; both signs
    many[::17] = 0.0
    return {
        "figure3": (np.array([1, 4, 5, 9, 14, 20, 33, 290, 70_000, 16_777_300]), figure3),
        "empty": (np.zeros(0, np.int64), np.zeros(0)),
        "one-key": (np.array([3]), np.array([-0.25])),
        "one-sign": (np.arange(0, 120, 3), -rng.random(40) - 1e-3),
        "ties-and-zeros": (np.arange(30), np.repeat([0.5, 0.0, -0.5, 0.5, 0.0, 2.0], 5)),
        "wide-keys": (
            np.array([7, 2**32, 2**32 + 5, 2**40, 2**63 - 1]),
            np.array([1e-300, -2, 3, 0, 1e300]),
        ),
        "many": (np.cumsum(rng.integers(1, 400, 120)), many),
    }


# Configurations whose messages are small (q = 16 buckets, not 256): the test kit's exhaustive
# mutations stay fast, and the format is the same whatever q is.
SMALL = {"quantile-q16": sketch.Quantile(q=16, r=4), "sketchml-q16": sketch.SketchML(q=16, r=4)}


def gradient_codec(variant: str) -> sketch.GradientCodec:
    """A registered codec, or one of ``SMALL``."""
    return SMALL[variant] if variant in SMALL else sketch.get(variant)


def sketch_seeds() -> list[bytes]:
    return [
        gradient_codec(variant).encode(keys, values, seed=5)
        for keys, values in gradients().values()
        for variant in [*sketch.METHODS, *SMALL]
    ]


def pcr_seeds() -> list[bytes]:
    """Records of small progressive JPEGs (Pillow writes libjpeg's default progression, so no
    jpegtran is needed here): gray, colour, both in one record (padded), one image."""
    rng = np.random.default_rng(9)
    gray = [progressive_jpeg(rng.integers(0, 256, (h, w), dtype=np.uint8)) for h, w in [(8, 8)]]
    rgb = [progressive_jpeg(rng.integers(0, 256, (12, 9, 3), dtype=np.uint8))]
    out = []
    for images in (gray, rgb, gray + rgb, gray * 3):
        scans = [jpeg_scans.split(j) for j in images]
        out.append(pcr.join(pcr.record(np.arange(len(images), dtype=float), scans)))
    return out


def progressive_jpeg(pixels: np.ndarray, quality: int = 75) -> bytes:
    """``pixels`` (H, W) or (H, W, 3) uint8 as a progressive JPEG written by Pillow."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=quality, progressive=True)
    return buffer.getvalue()


SEEDS = {
    "dense": dense_seeds,
    "toc": toc_seeds,
    "weave": weave_seeds,
    "sketch": sketch_seeds,
    "pcr": pcr_seeds,
}
