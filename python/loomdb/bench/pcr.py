"""``loomdb bench pcr``: training on Progressive Compressed Records at every fidelity k.

PCR §4: "our evaluation focuses on the differences obtained by reading various amounts of scan
groups.  Reading all the data is the baseline."  For ants and bees (colour photos, 10 scans)
and MNIST digits rendered as JPEGs (grayscale, 6 scans), on each engine: the images are loaded
from their folder (``loom_load``), laid out as one pcr index of 64-image records, and for each
k a logistic model is trained on the index at k (``cache_mb`` 0: every epoch reads and decodes
its records) and evaluated on held-out images at k and at full fidelity.  Per k the table gives
the bytes an epoch read (what the engine returned: ``offsets[k]`` summed over the records),
their ratio to the full record and to the original JPEG files, the median epoch time and its
speed-up over k = L, and — measured once per dataset in this process, the same for both
engines — how fast images decode into features at k (in parallel, as training decodes them)
and how close they are to the full image (PSNR over every pixel, MSSIM on luma).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine, engines
from loomdb.bench.table import BenchTable
from loomdb.codecs import jpeg_scans
from loomdb.imaging import pixels, quality, transcode

QUALITY_SAMPLE = {"ants/bees": 24, "MNIST-jpeg": 300}  # images whose PSNR/MSSIM is averaged
DECODE_SAMPLE = 2000  # images decoded per k for the decode rate
REPEAT = 3  # the decode rate is the best of these many passes


@dataclass
class ImageSet:
    name: str
    loader: str
    train: tuple[str, dict[str, Any]]
    test: tuple[str, dict[str, Any]]
    size: int
    color: str
    sample: list[bytes] = field(default_factory=list)  # training images, for the fidelity columns


def image_sets(quick: bool) -> list[ImageSet]:
    from loomdb.datasets import shared_datasets

    folder = shared_datasets()
    if folder is None:
        return []
    photos = folder / "hymenoptera_data"
    train_digits = 2000 if quick else 8000
    return [
        ImageSet("ants/bees", "images", (str(photos / "train"), {}), (str(photos / "val"), {}),
                 32, "rgb"),
        ImageSet("MNIST-jpeg", "mnist-jpeg", (str(folder), {"limit": train_digits}),
                 (str(folder), {"first": 8000, "limit": 1000 if quick else 2000}), 28, "gray"),
    ]  # fmt: skip


def _images(ds: ImageSet) -> list[bytes]:
    from loomdb import loaders

    loader = loaders.get(ds.loader)
    opts = (loaders.COMMON + loader.options).parse(ds.train[1])
    return [row[-1] for row in loader.rows(ds.train[0], opts)]


def fidelity(ds: ImageSet) -> dict[int, tuple[float, float, float]]:
    """k → (images decoded per second, mean PSNR, mean MSSIM); k = 0 is the original JPEG."""
    images = _images(ds)[:DECODE_SAMPLE]
    scans = [jpeg_scans.split(p) for p in transcode.progressive_all(images)]
    top = max(len(s) for s in scans)
    out: dict[int, tuple[float, float, float]] = {}
    refs = [pixels.pixels(j) for j in images[: QUALITY_SAMPLE[ds.name]]]
    lumas = [pixels.pixels(j, "L") for j in images[: QUALITY_SAMPLE[ds.name]]]
    for k in range(top + 1):
        jpegs = images if k == 0 else [jpeg_scans.join(s[:k]) for s in scans]
        pixels.features_all(jpegs[:64], ds.size, ds.color)  # warm the pool
        best = float("inf")
        for _ in range(REPEAT):
            started = time.perf_counter()
            pixels.features_all(jpegs, ds.size, ds.color)
            best = min(best, time.perf_counter() - started)
        rate = len(jpegs) / best
        psnr = np.mean([quality.psnr(pixels.pixels(j), r) for j, r in zip(jpegs, refs)])
        ssim = np.mean([quality.mssim(pixels.pixels(j, "L"), r) for j, r in zip(jpegs, lumas)])
        out[k] = (rate, float(psnr), float(ssim))
    return out


def _load(engine: BenchEngine, ds: ImageSet, table: str, part: tuple[str, dict]) -> None:
    opts = json.dumps({**part[1], "replace": True})
    engine.run(f"SELECT {engine.loom}loom_load('{ds.loader}', '{part[0]}', '{table}', '{opts}')")


def _accuracy(engine: BenchEngine, options: dict[str, Any] | None = None) -> float:
    text = engine.scalar(
        f"SELECT {engine.loom}loom_evaluate('bench_pcr_m', 'bench_pcr_test', "
        f"'{json.dumps(options or {})}')"
    )
    return float(json.loads(text)["accuracy"])


def measure(engine: BenchEngine, ds: ImageSet, epochs: int, table: BenchTable, fid) -> None:
    _load(engine, ds, "bench_pcr_train", ds.train)
    _load(engine, ds, "bench_pcr_test", ds.test)
    opts = {"format": "pcr", "record_size": 64, "image_size": ds.size, "color": ds.color}
    engine.run(
        f"SELECT {engine.loom}loom_create_index('bench_pcr', 'bench_pcr_train', 'label', "
        f"'{json.dumps(opts)}')"
    )
    stats = json.loads(engine.scalar("SELECT stats FROM loom.indexes WHERE name = 'bench_pcr'"))
    offsets = np.cumsum(stats["group_bytes"])
    top, source = int(stats["groups"]), int(stats["source_bytes"])
    rate, psnr, ssim = fid[0]
    nan = float("nan")
    table.add(engine.name, ds.name, "jpeg", source, source / offsets[top], 1.0, rate, psnr, ssim,
              nan, nan, nan, nan)  # fmt: skip
    rows: list[list[Any]] = []
    for k in range(1, top + 1):
        train = {"index": "bench_pcr", "scans": k, "epochs": epochs, "tol": 0, "cache_mb": 0,
                 "replace": True, "progress": False}  # fmt: skip
        engine.run(
            f"SELECT {engine.loom}loom_train('bench_pcr_m', NULL, 'label', '{json.dumps(train)}')"
        )
        history = json.loads(
            engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_pcr_m'")
        )
        read = history[-1]["bytes_read"]
        ms = float(np.median([h["seconds"] for h in history])) * 1000
        rate, psnr, ssim = fid[k]
        accuracy = (_accuracy(engine, {"scans": k}), _accuracy(engine))
        rows.append(
            [engine.name, ds.name, k, read, read / offsets[top], read / source, rate, psnr, ssim]
            + [*accuracy, ms]
        )
    for row in rows:
        table.add(*row, rows[-1][-1] / row[-1])
    engine.run(f"SELECT {engine.loom}loom_drop_model('bench_pcr_m')")
    engine.run(f"SELECT {engine.loom}loom_drop_index('bench_pcr')")


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    epochs = 2 if quick else 8
    table = BenchTable(
        f"pcr: logistic regression on Progressive Compressed Records, read at k scan groups "
        f"({epochs} epochs)",
        [
            "engine",
            "data",
            "k",
            "bytes/epoch",
            "vs full",
            "vs jpeg",
            "decode img/s",
            "PSNR dB",
            "MSSIM",
            "acc@k",
            "acc@full",
            "epoch ms",
            "speed vs full",
        ],  # fmt: skip
        notes=[
            "bytes/epoch: what the engine returned for parts <= k of every record (metadata "
            "and groups 1..k) = offsets[k]; jpeg: the original files' bytes",
            "decode img/s, PSNR (all pixels), MSSIM (luma): this process, the training images "
            "(decode: up to 2,000, in parallel, into the model's features, best of 3); jpeg: "
            "the original (baseline) files",
            "acc@k: trained and evaluated at k on held-out images (ants/bees: val folder; "
            "MNIST: digits 8000+); acc@full: the same model on the full images",
            "epoch ms: median over epochs, every epoch reads and decodes (cache_mb 0); "
            "speed vs full: epoch time at k = L over epoch time at k",
        ],
    )
    sets = image_sets(quick)
    if not sets:
        table.notes.append("not measured: the shared datasets (../shared/datasets) are absent")
        return [table]
    fids = {ds.name: fidelity(ds) for ds in sets}
    with engines(dsn) as found:
        for engine in found:
            for ds in sets:
                measure(engine, ds, epochs, table, fids[ds.name])
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return [table]
