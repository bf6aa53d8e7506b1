"""The mlweaving index through SQL on both engines: bytes read ∝ precision (Eq. 4),
any-precision training, prediction on raw rows, staleness and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.codecs import weave
from loomdb.datasets import load_mnist

pytestmark = pytest.mark.postgres


@pytest.fixture
def mnist(engine, datasets):
    X, digits = load_mnist(datasets, limit=2000)
    y = (digits < 5).astype(float)
    engine.load("mn", X, y)
    engine.scalar("SELECT loom_create_index('wi', 'mn', 'y', '{\"format\": \"mlweaving\"}')")
    return engine, X, y


def train(engine, name, **options):
    opts = {
        "index": "wi",
        "model": "linear",
        "epochs": 20,
        "lr": 0.01,
        "lr_schedule": "constant",
        "l2": 0.0,
        "standardize": "minmax",
        "progress": False,
        **options,
    }
    engine.scalar(f"SELECT loom_train('{name}', NULL, 'y', '{json.dumps(opts)}')")
    return json.loads(engine.scalar(f"SELECT history FROM loom.models WHERE name = '{name}'"))


def test_index_catalog_row_and_size(mnist):
    engine, X, _ = mnist
    row = engine.rows("SELECT format, rows, bytes, columns FROM loom.indexes WHERE name = 'wi'")
    fmt, rows, nbytes, columns = row[0]
    assert (fmt, rows) == ("mlweaving", 2000) and len(json.loads(columns)) == 784
    # every plane of every block, plus 4-byte labels
    assert nbytes == weave.index_size(2000, 784) + 2000 * 4


@pytest.mark.parametrize("s", [1, 3, 8, 32])
def test_bytes_read_per_epoch_follow_eq4(mnist, s):
    engine, X, _ = mnist
    history = train(engine, f"b{s}", precision=s, epochs=2, cache_mb=0)
    expected = weave.epoch_bytes(2000, 784, s)  # 2000 rows: whole groups of 8, no padding
    for epoch in history:
        assert epoch["precision"] == s
        assert epoch["bytes_read"] == expected


def test_low_precision_trains_almost_as_well(mnist):
    engine, _, _ = mnist
    mse = {}
    for s in (1, 4, 32):
        train(engine, f"p{s}", precision=s)
        mse[s] = json.loads(engine.scalar(f"SELECT loom_evaluate('p{s}', 'mn')"))["mse"]
    assert abs(mse[4] - mse[32]) <= 0.02 * mse[32]  # 4 bits: within 2% of 32 bits
    assert mse[1] > 1.1 * mse[32]  # 1 bit: clearly worse


def test_adaptive_schedule_is_recorded(mnist):
    engine, _, _ = mnist
    history = train(engine, "ad", precision="adaptive", epochs=10, cache_mb=0)
    assert [h["precision"] for h in history] == [2, 2, 2, 2, 3, 3, 3, 3, 4, 4]
    assert history[0]["bytes_read"] == weave.epoch_bytes(2000, 784, 2)
    plateau = train(engine, "pl", precision="adaptive-plateau", epochs=12)
    bits = [h["precision"] for h in plateau]
    assert bits[0] == 2 and bits == sorted(bits)


def test_32_bits_match_dense_training_on_the_quantised_data(mnist):
    engine, X, y = mnist
    mins, maxs = weave.column_ranges(X)
    engine.load("mq", weave.values(weave.quantize(X, mins, maxs), 32), y)
    train(engine, "w32", precision=32, epochs=3)
    dense = {
        "model": "linear",
        "epochs": 3,
        "lr": 0.01,
        "lr_schedule": "constant",
        "l2": 0.0,
        "standardize": "none",
        "batch_size": 256,
        "progress": False,
    }
    engine.scalar(f"SELECT loom_train('d32', 'mq', 'y', '{json.dumps(dense)}')")
    coef = {
        n: np.asarray(json.loads(c))
        for n, c in engine.rows("SELECT name, coefficients FROM loom.models")
    }
    assert np.allclose(coef["w32"], coef["d32"], rtol=1e-9, atol=1e-12)
    # and the weave model predicts on raw rows through the stored min-max scaling
    cols = [f"x{i}" for i in range(784)]
    arr = engine.array(cols)
    raw = np.asarray([r[0] for r in engine.rows(f"SELECT loom_predict('w32', {arr}) FROM mn")])
    quantised = np.asarray(
        [r[0] for r in engine.rows(f"SELECT loom_predict('d32', {arr}) FROM mq")]
    )
    assert np.allclose(raw, quantised, atol=1e-6)


def test_default_train_on_an_index_is_as_accurate_as_dense(engine):
    """With every option left out, a linear model trained on an mlweaving index at 32 bits is
    dense's: the index's min–max codes get the same z-score map folded on top.  Its own min–max
    map as the default put the default L2 on columns of small variance (mse ~140x dense's)."""
    rng = np.random.default_rng(3)
    X = np.c_[rng.uniform(0, 10, 2000), rng.uniform(0, 1, 2000)]
    engine.load("lin", X, 3.0 * X[:, 0] + 0.5 * X[:, 1] + 2.0)
    mse = {}
    for fmt in ("dense", "mlweaving"):
        engine.scalar(
            f"SELECT loom_create_index('l_{fmt}', 'lin', 'y', '{{\"format\": \"{fmt}\"}}')"
        )
        opts = json.dumps({"index": f"l_{fmt}", "model": "linear", "epochs": 300})
        engine.scalar(f"SELECT loom_train('m_{fmt}', NULL, 'y', '{opts}')")
        mse[fmt] = json.loads(engine.scalar(f"SELECT loom_evaluate('m_{fmt}', 'lin')"))["mse"]
    assert mse["mlweaving"] <= 1.5 * mse["dense"], mse


def test_bad_precision_unknown_index_and_wrong_format(mnist):
    engine, _, _ = mnist
    for bad in ("0", "33", '"fast"'):
        with pytest.raises(engine.errors, match="precision"):
            engine.scalar(
                f"SELECT loom_train('x', NULL, 'y', '{{\"index\": \"wi\", \"precision\": {bad}}}')"
            )
    with pytest.raises(engine.errors, match="index 'nope' does not exist"):
        engine.scalar("SELECT loom_train('x', NULL, 'y', '{\"index\": \"nope\"}')")
    with pytest.raises(engine.errors, match="applies to any-precision"):
        engine.scalar("SELECT loom_train('x', 'mn', 'y', '{\"precision\": 4}')")
    with pytest.raises(engine.errors, match="multiple of 8"):  # raised while writing …
        engine.scalar(
            "SELECT loom_create_index('w2', 'mn', 'y', "
            '\'{"format": "mlweaving", "batch_size": 12}\')'
        )
    # … after the storage table was created: the transaction took it back with it
    assert (
        engine.scalar(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = 'loom_data' AND table_name = 'w2'"
        )
        == 0
    )
    assert engine.scalar("SELECT count(*) FROM loom.indexes WHERE name = 'w2'") == 0


def test_failed_create_index_leaves_nothing(engine):
    engine.rows("CREATE TABLE mixed AS SELECT 1.5 AS a, CAST('2020-01-01' AS DATE) AS b, 1 AS y")
    before = engine.scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'loom_data'"
    )
    with pytest.raises(engine.errors, match="not numeric or text"):
        engine.scalar(
            "SELECT loom_create_index('bad', 'mixed', 'y', "
            '\'{"format": "mlweaving", "features": ["a", "b"]}\')'
        )
    assert engine.scalar("SELECT count(*) FROM loom.indexes") == 0
    after = engine.scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'loom_data'"
    )
    assert after == before


def _labels_case(engine, y):
    X = np.arange(len(y), dtype=float).reshape(-1, 1)
    engine.load("lb", X, y)
    for fmt in ("dense", "mlweaving"):
        opts = json.dumps({"format": fmt})
        engine.scalar(f"SELECT loom_create_index('l_{fmt}', 'lb', 'y', '{opts}')")


def test_labels_float32_cannot_hold_stay_distinct(engine):
    # 16777216 and 16777217 are one float32: stored as float32 the classes merged (accuracy
    # 0.5 on the source, 1.0 reported on the index)
    y = np.where(np.arange(200) < 100, 16777216.0, 16777217.0)
    _labels_case(engine, y)
    for fmt in ("dense", "mlweaving"):
        opts = json.dumps({"index": f"l_{fmt}", "epochs": 50, "progress": False})
        engine.scalar(f"SELECT loom_train('c_{fmt}', NULL, 'y', '{opts}')")
        ev = json.loads(engine.scalar(f"SELECT loom_evaluate('c_{fmt}', 'lb')"))
        on_index = json.loads(engine.scalar(f"SELECT loom_evaluate_index('c_{fmt}', 'l_{fmt}')"))
        assert ev["accuracy"] == on_index["accuracy"] == 1.0, (fmt, ev, on_index)
        assert on_index["recall"] == 1.0


def test_regression_labels_keep_float64_precision(engine):
    # float32 steps by 8 near 1e8: stored as float32, the index's labels were not the source's
    y = 1e8 + 0.1 * np.arange(200)
    _labels_case(engine, y)
    opts = json.dumps({"index": "l_mlweaving", "model": "linear", "epochs": 300, "progress": False})
    engine.scalar(f"SELECT loom_train('r_w', NULL, 'y', '{opts}')")
    on_source = json.loads(engine.scalar("SELECT loom_evaluate('r_w', 'lb')"))
    on_index = json.loads(engine.scalar("SELECT loom_evaluate_index('r_w', 'l_mlweaving')"))
    # the index's features are 32-bit codes: on a fit this close (z-score, mse ~3e-7) their
    # 2^-32 steps move the mse by ~1e-5 of itself; float32 labels moved it by orders
    for metric in ("mse", "r2"):
        assert on_index[metric] == pytest.approx(on_source[metric], rel=1e-4), metric


# Each engine's one-time shuffle of row numbers 1..n (the default seed, 42), as its layout reads
# a source: row k of the read is the source's row ORDER[engine][k].
ORDER = {
    "duckdb": "SELECT rn FROM range(1, {n} + 1) t(rn) ORDER BY hash(rn, 42), rn",
    "postgres": "SELECT rn FROM pg_catalog.generate_series(1::int8, {n}::int8) rn "
    "ORDER BY pg_catalog.hashint8extended(rn, 42::int8), rn",
}


def _order(engine, n: int) -> np.ndarray:
    return np.asarray([r[0] for r in engine.rows(ORDER[engine.name].format(n=n))]) - 1


def _models(engine, X, y) -> dict[int, tuple]:
    """Coefficients, intercept and each epoch's loss of a default train at 32 and at 4 bits."""
    engine.load("same", X, y)
    engine.scalar("SELECT loom_create_index('same_i', 'same', 'y', '{\"format\": \"mlweaving\"}')")
    out = {}
    for s in (32, 4):
        opts = json.dumps({"index": "same_i", "model": "linear", "precision": s, "progress": False})
        engine.scalar(f"SELECT loom_train('same{s}', NULL, 'y', '{opts}')")
        coef, intercept, history = engine.rows(
            f"SELECT coefficients, intercept, history FROM loom.models WHERE name = 'same{s}'"
        )[0]
        losses = [h["loss"] for h in json.loads(history)]
        out[s] = (np.asarray(json.loads(coef)), json.loads(intercept), losses)
    return out


def test_the_same_minibatches_train_the_same_model_on_both_engines(pg_dsn):
    """The engines shuffle a source with hashes of their own (README: Shuffles differ by
    engine), and an early stop's epoch depends on the minibatches: the default seed's DuckDB
    shuffle of 2,000 MNIST rows stopped after 312 epochs, PostgreSQL's after 163, at the same
    time an epoch.  Stored so that DuckDB reads them in PostgreSQL's order, the rows train
    the same model on both, bit for bit, in as many epochs: the two engines' trains of an
    mlweaving index differ in the order of their rows and in nothing else."""
    from support.engines import DuckEngine, PgEngine

    rng = np.random.default_rng(11)
    X = rng.uniform(0.0, 255.0, size=(1500, 12))
    y = X @ rng.normal(size=12) + rng.normal(size=1500)
    duck, other, pg = DuckEngine(), DuckEngine(), PgEngine(pg_dsn)
    try:
        wanted, duck_reads = _order(pg, len(y)), _order(duck, len(y))
        stored = np.empty(len(y), dtype=np.int64)
        stored[duck_reads] = wanted  # DuckDB's k-th read row holds PostgreSQL's k-th
        on_pg, on_duck = _models(pg, X, y), _models(duck, X[stored], y[stored])
        as_is = _models(other, X, y)  # stored as PostgreSQL stores them: other minibatches
    finally:
        for engine in (duck, other, pg):
            engine.close()
    for s in (32, 4):
        assert np.array_equal(on_duck[s][0], on_pg[s][0]), s
        assert on_duck[s][1:] == on_pg[s][1:], s  # the intercept, every epoch's loss
        assert not np.array_equal(as_is[s][0], on_pg[s][0]), s
