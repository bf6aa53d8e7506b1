"""``{"parallel": n}`` through SQL on both engines: reproducible, recorded, within 1% of the
serial loss at convergence on real and synthetic data, refused where it cannot be honoured,
checked like every read; in threads of the process while the epoch's minibatches are kept in
memory; and in PostgreSQL, for an epoch too large to keep, planned as a parallel append of
whole shards under a partial aggregate that parallel workers run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.datasets import load_a9a

pytestmark = pytest.mark.postgres


def _train(engine, options, source="'t'", label="y", name="m"):
    opts = json.dumps({"replace": True, **options})
    return json.loads(engine.scalar(f"SELECT loom_train('{name}', {source}, '{label}', '{opts}')"))


def _model(engine, name="m"):
    row = engine.rows(
        f"SELECT coefficients, intercept, options, history FROM loom.models WHERE name = '{name}'"
    )[0]
    values = [json.loads(v) if isinstance(v, str) else v for v in row]
    return np.asarray(values[0]), np.asarray(values[1]), values[2], values[3]


@pytest.fixture
def digits(engine):
    engine.scalar("SELECT loom_load('sample', 'digits', 'digits')")
    return engine


@pytest.fixture
def synthetic(engine):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 5, size=(1500, 8)).astype(float)
    engine.load("t", X, (X @ rng.normal(size=8) + rng.normal(size=1500) > 4).astype(float))
    return engine


@pytest.mark.parametrize("fmt", ["dense", "toc"])
def test_a_parallel_train_is_reproducible_and_says_so(digits, fmt):
    engine, opts = digits, {"format": fmt, "parallel": 2, "epochs": 15, "batch_size": 64}
    _train(engine, opts, "'digits'", "digit")
    W1, b1, options, history = _model(engine)
    _train(engine, opts, "'digits'", "digit")
    W2, b2, _, _ = _model(engine)
    assert np.array_equal(W1, W2) and np.array_equal(b1, b2)
    assert options["parallel"] == 2 and options["format"] == fmt
    # kept in memory (cache_mb): a thread per shard, every epoch, on both engines
    assert all(e["shards"] == 2 and e["workers"] == 2 for e in history)
    assert all(e["shards_in"] == "threads" for e in history)
    _train(engine, {**opts, "parallel": 1}, "'digits'", "digit")
    one, one_b, options, history = _model(engine)
    assert options["parallel"] == 1 and "shards" not in history[-1]
    assert not np.array_equal(one, W1)
    _train(engine, {k: v for k, v in opts.items() if k != "parallel"}, "'digits'", "digit")
    serial, serial_b, options, _ = _model(engine)  # parallel 1 is the serial loop, bit for bit
    assert options["parallel"] == 1
    assert np.array_equal(one, serial) and np.array_equal(one_b, serial_b)


def _within(engine, source, label, fmt, shards, percent=1.0):
    """The parallel train's final loss is at most ``percent`` above the serial one's (it may
    end lower: a serial train that stops on ``tol`` can stop above the optimum)."""
    base = _train(engine, {"format": fmt, "seed": 5}, source, label)
    par = _train(engine, {"format": fmt, "seed": 5, "parallel": shards}, source, label)
    assert (par["loss"] / base["loss"] - 1) * 100 < percent, (base["loss"], par["loss"])
    return base, par


@pytest.mark.parametrize("fmt", ["dense", "toc"])
def test_at_convergence_the_loss_is_within_one_percent_of_serial(digits, fmt):
    _within(digits, "'digits'", "digit", fmt, 2)  # 10 classes, one-vs-rest, 1797 rows


@pytest.mark.parametrize("fmt", ["dense", "toc"])
@pytest.mark.parametrize("shards", [2, 3])
def test_synthetic_loss_is_within_one_percent_of_serial(synthetic, fmt, shards):
    _within(synthetic, "'t'", "y", fmt, shards)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["dense", "toc"])
def test_a9a_loss_is_within_one_percent_of_serial(engine, datasets, fmt):
    X, y = load_a9a(datasets)
    engine.load("a9a", X, (y > 0).astype(float))
    _within(engine, "'a9a'", "y", fmt, 2)


def test_an_index_and_a_scratch_layout_train_the_same_shards(synthetic):
    engine = synthetic
    engine.scalar("SELECT loom_create_index('tix', 't', 'y', '{\"seed\": 9, \"batch_size\": 100}')")
    opts = {"parallel": 3, "epochs": 5, "seed": 9, "batch_size": 100}
    _train(engine, opts)
    scratch = _model(engine)[0]
    _train(engine, {"index": "tix", "parallel": 3, "epochs": 5}, "NULL")
    assert np.array_equal(_model(engine)[0], scratch)
    if engine.name == "postgres":  # the shared scratch table went with the call
        left = "SELECT count(*) FROM pg_tables WHERE schemaname = 'loom_data' AND tablename ~ '\\$'"
        assert engine.scalar(left) == 0


@pytest.mark.parametrize(
    "options,message",
    [
        ({"backend": "fpga-sim", "format": "mlweaving"}, "runs whole epochs"),
        ({"parallel": 7, "batch_size": 256}, "at least 7 training minibatches"),
        ({"parallel": 4, "validation_fraction": 0.5, "batch_size": 300}, "at least 4"),
        ({"parallel": 0}, "'parallel' option must be an integer from 1 to 64; got 0"),
        ({"parallel": 65}, "integer from 1 to 64; got 65"),
        ({"parallel": 1.5}, "integer from 1 to 64; got 1.5"),
        ({"parallel": "2"}, "integer from 1 to 64"),
        ({"parallel": True}, "integer from 1 to 64; got true"),
        ({"skip": "random", "skip_fraction": 0.5}, "skip 'random' chooses each minibatch's rows"),
    ],
)
def test_what_the_shards_cannot_honour_is_refused(synthetic, options, message):
    engine = synthetic
    with pytest.raises(engine.errors, match=message):
        _train(engine, {"parallel": 2, **options})
    assert engine.scalar("SELECT count(*) FROM loom.models") == 0


DAMAGE = {
    "missing part": "DELETE FROM loom_data.pc WHERE batch = 1 AND part = 1",
    "missing batch": "DELETE FROM loom_data.pc WHERE batch = 2",
    "duplicated": "INSERT INTO loom_data.pc SELECT * FROM loom_data.pc WHERE batch = 1",
    "altered": "UPDATE loom_data.pc SET payload = payload || payload WHERE batch = 3 AND part = 1",
    "null": "UPDATE loom_data.pc SET payload = NULL WHERE batch = 0 AND part = 0",
    "fewer rows": "UPDATE loom_data.pc SET rows = rows - 1 WHERE batch = 1",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_parallel_epochs_check_every_minibatch(synthetic, damage):
    engine = synthetic
    engine.scalar("SELECT loom_create_index('pc', 't', 'y', '{\"batch_size\": 300}')")
    engine.rows(DAMAGE[damage])
    with pytest.raises(engine.errors) as info:  # lr given: nothing else reads the index first
        _train(engine, {"index": "pc", "parallel": 2, "lr": 0.1, "cache_mb": 0}, "NULL")
    assert "index 'pc' is damaged" in str(info.value)
    assert "loom_reindex('pc')" in str(info.value)


# -- PostgreSQL: the plan and its workers -----------------------------------------------------


@pytest.fixture
def pg(pg_dsn):
    from support.engines import PgEngine

    engine = PgEngine(pg_dsn)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(640, 5))
    engine.load("t", X, (X[:, 0] > 0).astype(float))
    engine.scalar("SELECT loom_create_index('pix', 't', 'y', '{\"batch_size\": 64}')")
    yield engine
    engine.close()


def _epoch_statement(engine, shards, index="pix", stop=10):
    from loomdb.engines.postgres import parallel_epochs
    from loomdb.learn import averaging, shard_state
    from loomdb.learn.optimizers import OPTIMIZERS
    from loomdb.learn.problem import Problem
    from loomdb.learn.scaling import Scaling
    from loomdb.learn.trainer import TrainConfig

    uid = engine.scalar(f"SELECT uid FROM loom.indexes WHERE name = '{index}'")
    prob = Problem([f"x{i}" for i in range(5)], Scaling("none", np.zeros(5), np.ones(5)), [0, 1])
    W, b = np.zeros((5, 1)), np.zeros(1)
    cfg = TrainConfig(kind="logistic", optimizer="nesterov")
    start = averaging.Start.of(prob, cfg, W, b, OPTIMIZERS["nesterov"]((5, 1)), 0.1, 64)
    read = {
        "format": "dense",
        "n_features": 5,
        "precision": 32,
        "parts": 1,
        "uid": uid,
        "version": 1,
        "index": index,
        "shards": shards,
    }
    job = shard_state.pack([start.to_record({"read": read})])
    sql = parallel_epochs.query(f'loom_data."{index}"', shards, stop, 1, job, 2)  # runs of 2
    return parallel_epochs.settings(shards, stop, 1), sql


def _nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("shards", [2, 3])
def test_postgres_plans_whole_shards_into_parallel_workers(pg, shards):
    settings, sql = _epoch_statement(pg, shards)
    pg.rows('ANALYZE loom_data."pix"')  # as loom_train does before its first epoch
    with pg.conn.transaction():
        for name, value in settings.items():
            pg.rows(f"SELECT set_config('{name}', '{value}', true)")
        plan = pg.scalar(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")[0]["Plan"]
    nodes = list(_nodes(plan))
    kinds = [(n["Node Type"], n.get("Partial Mode"), n.get("Parallel Aware")) for n in nodes]
    assert kinds[:4] == [
        ("Aggregate", "Finalize", False),
        ("Gather", None, False),
        ("Aggregate", "Partial", False),
        ("Append", None, True),
    ]
    gather = nodes[1]
    assert gather["Workers Planned"] == shards - 1
    assert gather["Workers Launched"] == shards - 1
    scans = [n for n in nodes if n["Node Type"] == "Seq Scan"]
    assert len(scans) == shards and not any(n["Parallel Aware"] for n in scans)


def test_a_shards_sort_stays_in_memory_whatever_the_sessions_work_mem(pg):
    """The sort under a shard's groups holds all the shard's stored rows: the statement sets
    ``work_mem`` to hold them, so a session's small setting does not spill it to disk (with
    the default 4 MB a 5M-row dense shard spilled 2 MB every epoch)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4000, 5))
    pg.load("w", X, (X[:, 1] > 0).astype(float))
    pg.scalar("SELECT loom_create_index('wix', 'w', 'y', '{\"batch_size\": 2}')")
    settings, sql = _epoch_statement(pg, 2, "wix", 2000)  # 2,000 stored rows a shard
    pg.rows('ANALYZE loom_data."wix"')
    pg.rows("SET work_mem = '64kB'")
    with pg.conn.transaction():
        for name, value in settings.items():
            pg.rows(f"SELECT set_config('{name}', '{value}', true)")
        plan = pg.scalar(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")[0]["Plan"]
    sorts = [n for n in _nodes(plan) if n["Node Type"] == "Sort"]
    spaces = [s.get("Sort Space Type") for n in sorts for s in [n, *n.get("Workers", [])]]
    assert len(sorts) == 2 and "Disk" not in spaces and spaces.count("Memory") == 2, spaces
    assert pg.scalar("SELECT current_setting('work_mem')") == "64kB"


def test_shards_run_in_the_workers_and_the_model_does_not_care_who_ran_them(pg):
    """With the leader out of the plan (3 shards: 2 workers), the workers run every shard: the
    aggregate's PL/Python imports loomdb in them; and who ran what never changes the model."""
    from loomdb.learn import shard_state

    settings, sql = _epoch_statement(pg, 3)
    pg.rows('ANALYZE loom_data."pix"')
    with pg.conn.transaction():
        for name, value in {**settings, "parallel_leader_participation": "off"}.items():
            pg.rows(f"SELECT set_config('{name}', '{value}', true)")
        state = pg.scalar(sql)
        leader = pg.scalar("SELECT pg_backend_pid()")
    records = shard_state.unpack(state)
    assert sorted(r[0]["shard"] for r in records) == [0, 1, 2]
    assert all(int(r[0]["worker"].split(":")[0]) != leader for r in records)
    opts = {"index": "pix", "parallel": 3, "epochs": 4, "cache_mb": 0}  # 0: in the workers
    _train(pg, opts, "NULL")
    shared = _model(pg)[0]
    pg.rows("SET parallel_leader_participation = off")
    _train(pg, opts, "NULL")
    assert np.array_equal(_model(pg)[0], shared)


def test_a_workers_error_reads_as_the_leaders(pg):
    """A damaged minibatch found in a parallel worker (the leader out of the plan) comes back
    as the same error a serial train gives: ``loomdb: …``, its SQLSTATE and hint, without the
    ``plpy.Error`` the worker's PL/Python would otherwise put before it."""
    import psycopg

    from loomdb.errors import LoomFormatError

    pg.rows('UPDATE loom_data."pix" SET payload = payload || payload WHERE batch = 3 AND part = 1')
    pg.rows("SET parallel_leader_participation = off")
    with pytest.raises(psycopg.Error) as info:
        _train(pg, {"index": "pix", "parallel": 2, "lr": 0.1, "cache_mb": 0}, "NULL")
    diag = info.value.diag
    assert diag.message_primary == (
        "loomdb: index 'pix' is damaged: minibatch 3 part 1 does not match its checksum"
    )
    assert diag.sqlstate == LoomFormatError.sqlstate and "loom_reindex('pix')" in diag.message_hint


def test_the_planner_settings_are_put_back_inside_a_transaction(pg):
    with pg.conn.transaction():
        before = pg.rows("SELECT current_setting('enable_hashagg'), current_setting('work_mem')")
        _train(pg, {"index": "pix", "parallel": 2, "epochs": 2, "cache_mb": 0}, "NULL")
        after = pg.rows("SELECT current_setting('enable_hashagg'), current_setting('work_mem')")
        workers = pg.scalar("SELECT current_setting('max_parallel_workers_per_gather')")
    assert before == after and workers == pg.scalar(
        "SELECT current_setting('max_parallel_workers_per_gather')"
    )


def test_fewer_workers_than_shards_are_recorded_as_used(pg):
    """A server that launches fewer workers than asked (none here: max_parallel_workers = 0)
    still trains every shard — the leader runs the rest — and the history says how many
    processes actually ran them; the model is the same (Bismarck §3.3: the merge is the shards'
    row-weighted average, whoever ran them)."""
    opts = {"index": "pix", "parallel": 3, "epochs": 3, "cache_mb": 0}  # 0: in the workers
    _train(pg, opts, "NULL")
    W, b, _, history = _model(pg)
    assert all(e["shards"] == 3 and 1 <= e["workers"] <= 3 for e in history)
    assert all(e["shards_in"] == "processes" for e in history)
    pg.rows("SET max_parallel_workers = 0")
    try:
        _train(pg, opts, "NULL")
    finally:
        pg.rows("RESET max_parallel_workers")
    W0, b0, options, history = _model(pg)
    assert options["parallel"] == 3
    assert all(e["shards"] == 3 and e["workers"] == 1 for e in history)
    assert np.array_equal(W0, W) and np.array_equal(b0, b)


def test_postgres_runs_kept_epochs_in_threads_and_others_in_workers(pg):
    """An epoch whose minibatches the backend keeps (``cache_mb``) runs in threads of the
    backend; one known too large to keep, in the server's parallel workers (each a new process
    that reads its shard from the table); an epoch found too large while it is read (the first)
    in threads, the rest in workers — and where the shards ran never changes the model."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(24000, 5))
    pg.load("big", X, (X[:, 2] > 0).astype(float))
    pg.scalar("SELECT loom_create_index('bix', 'big', 'y', '{\"batch_size\": 500}')")
    stored = pg.scalar("SELECT bytes FROM loom.indexes WHERE name = 'bix'")
    assert 1 << 20 < stored < 2 << 20  # between one and two cache_mb of 1: tried, not kept
    models, places = [], []
    for cache in (256, 0, 1):
        _train(pg, {"index": "bix", "parallel": 2, "epochs": 3, "cache_mb": cache}, "NULL")
        W, b, options, history = _model(pg)
        models.append((W, b))
        places.append([e["shards_in"] for e in history])
        assert options["cache_mb"] == cache and all(e["shards"] == 2 for e in history)
    assert places == [["threads"] * 3, ["processes"] * 3, ["threads", "processes", "processes"]]
    for W, b in models[1:]:
        assert np.array_equal(W, models[0][0]) and np.array_equal(b, models[0][1])
