"""The toc storage format through SQL on both engines: training on the compressed blobs equals
training on dense batches, and inference runs on the stored blobs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.datasets import load_a9a

pytestmark = pytest.mark.postgres


@pytest.fixture
def a9a(engine, datasets):
    X, y = load_a9a(datasets)
    engine.load("adult", X[:3000], (y[:3000] > 0).astype(float))
    return engine


def coefficients(engine, name):
    return np.asarray(
        json.loads(engine.scalar(f"SELECT coefficients FROM loom.models WHERE name = '{name}'"))
    )


@pytest.mark.parametrize("extra", [{}, {"entropy": "zstd"}])
def test_training_on_toc_equals_dense(a9a, extra):
    engine = a9a
    common = {"epochs": 4, "seed": 7, "batch_size": 250}
    engine.scalar(f"SELECT loom_train('d', 'adult', 'y', '{json.dumps(common)}')")
    toc = {**common, "format": "toc", **extra}
    engine.scalar(f"SELECT loom_train('t', 'adult', 'y', '{json.dumps(toc)}')")
    assert np.allclose(coefficients(engine, "t"), coefficients(engine, "d"), rtol=1e-9, atol=1e-12)
    assert engine.scalar("SELECT storage_format FROM loom.models WHERE name = 't'") == "toc"


def test_toc_index_is_smaller_and_serves_inference(a9a):
    engine = a9a
    dense = json.loads(
        engine.scalar("SELECT loom_create_index('ixd', 'adult', 'y', '{\"batch_size\": 250}')")
    )
    toc = json.loads(
        engine.scalar("SELECT loom_create_index('ixt', 'adult', 'y', '{\"format\": \"toc\"}')")
    )
    assert toc["batches"] == 12 and dense["bytes"] > 20 * toc["bytes"]
    engine.scalar("SELECT loom_train('m', NULL, 'y', '{\"index\": \"ixt\", \"epochs\": 3}')")
    on_blobs = json.loads(engine.scalar("SELECT loom_evaluate_index('m', 'ixt', 'cpu')"))
    on_rows = json.loads(engine.scalar("SELECT loom_evaluate('m', 'adult')"))
    assert on_blobs["rows"] == on_rows["rows"] == 3000
    for metric in ("accuracy", "f1", "log_loss"):
        assert on_blobs[metric] == pytest.approx(on_rows[metric], rel=1e-9)
    # a9a's binary features tie many scores: summation order may break ties differently
    assert on_blobs["roc_auc"] == pytest.approx(on_rows["roc_auc"], rel=1e-4)


def test_numba_cache_works_inside_postgres(pg_dsn, datasets):
    from pathlib import Path

    import psycopg

    from loomdb.bench.tables import load_postgres

    X, y = load_a9a(datasets)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        load_postgres(conn, "cache_t", X[:500], (y[:500] > 0).astype(float))
        conn.execute("SELECT loom_train('cache_m', 'cache_t', 'y', '{\"format\": \"toc\"}')")
        conn.execute("SELECT loom_drop_model('cache_m')")
        conn.execute("DROP TABLE cache_t")
        row = conn.execute(
            "SELECT value FROM loom.settings WHERE key = 'numba_cache_dir'"
        ).fetchone()
    assert row is not None
    cache = Path(row[0])
    if not cache.is_dir():
        pytest.skip("the server's numba cache is not on this machine")
    assert any(cache.rglob("*toc_kernels*.nbi")), f"no numba cache files under {cache}"
