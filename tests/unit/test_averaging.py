"""Parallel epochs without a database: Bismarck's shards and their row-weighted average
(learn/averaging), the threads that run them (learn/shard_threads), the bytes they cross
processes in (learn/shard_state) and PostgreSQL's aggregate functions run in-process
(engines/postgres/epoch_aggregate) — all against the serial trainer and a from-scratch
reference."""

from __future__ import annotations

import numpy as np
import pytest

from loomdb.accel.cpu import CpuBackend
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.learn import averaging, shard_state
from loomdb.learn.optimizers import OPTIMIZERS
from loomdb.learn.shard_threads import ThreadedShards
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.seams import Batch
from support.arrays import problem


class NumberedSource:
    """Minibatches numbered as a layout numbers them."""

    def __init__(self, X, y, batch_size=16):
        self.X, self.y, self.bs = X, y, batch_size

    def train_batches(self, epoch, precision):
        for n, i in enumerate(range(0, len(self.y), self.bs)):
            X = self.X[i : i + self.bs]
            yield Batch(X, self.y[i : i + self.bs], number=n, nbytes=X.nbytes)

    def validation_batches(self, precision):
        return ()


def _data(rows=200, features=5, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(2, 3, size=(rows, features))
    score = X @ rng.normal(size=(features, classes))
    return X, np.argmax(score, axis=1).astype(float)


def _fit(X, y, cfg, shards=None, batch_size=16, method="zscore"):
    classes = sorted(set(y.tolist())) if cfg.kind != "linear" else []
    source, prob = NumberedSource(X, y, batch_size), problem(X, classes, method, y)
    if shards is None:
        return fit(source, prob, cfg, CpuBackend())
    with ThreadedShards(source, prob, cfg, shards) as runner:
        return fit(source, prob, cfg, CpuBackend(), runner=runner)


@pytest.mark.parametrize("optimizer", ["sgd", "nesterov", "adam"])
@pytest.mark.parametrize("kind,classes", [("logistic", 2), ("logistic", 3), ("linear", 2)])
def test_one_shard_is_the_serial_loop_bit_for_bit(optimizer, kind, classes):
    X, y = _data(classes=classes)
    cfg = TrainConfig(kind=kind, epochs=6, optimizer=optimizer, lr=0.05, l1=1e-3)
    serial, h1 = _fit(X, y, cfg)
    sharded, h2 = _fit(X, y, cfg, shards=1)
    assert np.array_equal(serial.W, sharded.W) and np.array_equal(serial.b, sharded.b)
    assert [e["loss"] for e in h1] == [e["loss"] for e in h2]
    assert all(e["shards"] == 1 for e in h2)


def _reference(X, y, shards, epochs, lr, batch_size):
    """Bismarck from scratch: plain SGD on the logistic loss (no scaling, no penalty) over each
    shard's minibatches j, j + n, … from the epoch's model, then the row-weighted average."""
    w, b = np.zeros(X.shape[1]), 0.0
    starts = list(range(0, len(y), batch_size))
    widest = min(batch_size, len(y))
    for _ in range(epochs):
        models, counts = [], []
        for j in range(shards):
            wj, bj, rows = w.copy(), b, 0
            for i in starts[j::shards]:
                Xb, yb = X[i : i + batch_size], y[i : i + batch_size]
                g = (1 / (1 + np.exp(-(Xb @ wj + bj))) - yb) / widest
                wj, bj, rows = wj - lr * (Xb.T @ g), bj - lr * g.sum(), rows + len(yb)
            models.append((wj, bj))
            counts.append(rows)
        total = sum(counts)
        w = sum(c / total * m[0] for c, m in zip(counts, models))
        b = sum(c / total * m[1] for c, m in zip(counts, models))
    return w, b


@pytest.mark.parametrize("shards", [2, 3, 5])
def test_shards_average_the_models_they_train_weighted_by_rows(shards):
    X, y = _data(rows=203)  # a short last minibatch: shards train different row counts
    cfg = TrainConfig(
        kind="logistic", epochs=4, optimizer="sgd", lr=0.1, lr_schedule="constant", l2=0.0
    )
    model, _ = _fit(X, y, cfg, shards=shards, method="none")
    w, b = _reference(X, y, shards, 4, 0.1, 16)
    assert np.allclose(model.W[:, 0], w, rtol=1e-12, atol=1e-14)
    assert model.b[0] == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("optimizer", ["sgd", "nesterov", "adam"])
def test_a_parallel_train_is_reproducible_and_differs_from_serial(optimizer):
    X, y = _data(rows=300, classes=3)
    cfg = TrainConfig(kind="logistic", epochs=5, optimizer=optimizer, lr=0.05)
    first, h1 = _fit(X, y, cfg, shards=3)
    again, h2 = _fit(X, y, cfg, shards=3)
    serial, _ = _fit(X, y, cfg)
    assert np.array_equal(first.W, again.W) and np.array_equal(first.b, again.b)
    assert [e["loss"] for e in h1] == [e["loss"] for e in h2]
    assert not np.array_equal(first.W, serial.W)
    assert all(e["shards"] == 3 and 1 <= e["workers"] <= 3 for e in h1)
    assert sum(e["rows"] for e in h1) == 5 * 300


def _result(shard, W, rows, v, s, count, t):
    state = {"vW": np.array(v), "vb": np.zeros(1), "sW": np.array(s), "sb": np.zeros(1)}
    state.update(count=count, t=t, tmax=None)
    return averaging.ShardResult(shard, np.array(W), np.zeros(1), state, loss=1.0, rows=rows)


def test_merge_weighs_by_rows_sums_the_iterate_sums_and_keeps_shard_order():
    cfg = TrainConfig(kind="logistic", optimizer="nesterov")
    X, y = _data()
    prob = problem(X, [0.0, 1.0])
    opt = OPTIMIZERS["nesterov"]((1, 1))
    start = averaging.Start.of(prob, cfg, np.zeros((1, 1)), np.zeros(1), opt, 0.1, 16)
    results = [
        _result(1, [[8.0]], 1, [[4.0]], [[1.0]], 2, 9),
        _result(0, [[4.0]], 3, [[0.0]], [[2.0]], 3, 10),
    ]
    W, b = np.zeros((1, 1)), np.zeros(1)
    totals = averaging.merge(results, start, W, b, opt)
    assert W[0, 0] == 5.0 and opt.vW[0, 0] == 1.0  # 3/4·4 + 1/4·8; 3/4·0 + 1/4·4
    assert opt.sW[0, 0] == 3.0 and opt.count == 5 and opt.t == 10
    assert totals["rows"] == 4 and totals["loss"] == 2.0 and totals["shards"] == 2
    again = np.zeros((1, 1))
    averaging.merge(list(reversed(results)), start, again, b, opt)
    assert again.tobytes() == W.tobytes()


def test_a_diverging_shard_restarts_the_train_with_a_smaller_step():
    X, y = _data()
    cfg = TrainConfig(kind="linear", epochs=3, optimizer="sgd", lr=1e200, safe_lr=0.01)
    model, history = _fit(X, X @ np.arange(5.0), cfg, shards=2)
    assert history[0]["restart"] == 1 and "shard" in history[0]["reason"]
    assert np.isfinite(model.W).all()


def test_a_start_refuses_an_optimizer_it_cannot_carry():
    X, y = _data()
    cfg = TrainConfig(kind="logistic", optimizer="lbfgs")
    with pytest.raises(LoomOptionError, match="lbfgs"):
        averaging.Start.of(problem(X, [0.0, 1.0]), cfg, np.zeros((5, 1)), np.zeros(1), None, 1, 1)


@pytest.mark.parametrize("backend", ["gpu", "fpga-sim"])
def test_parallel_refuses_a_backend_the_shards_cannot_run(monkeypatch, backend):
    """The shards compute with the cpu backend: another backend is refused, not dropped (the
    engine tests cannot reach the gpu case where CuPy is missing; this fakes it present)."""
    from types import SimpleNamespace

    from loomdb.functions import train_parallel

    fake = SimpleNamespace(name=backend)
    if backend == "fpga-sim":
        fake.run_epoch = lambda *a: None
    monkeypatch.setattr(train_parallel.registry, "get", lambda name: fake)
    with pytest.raises(LoomOptionError, match=f"'{backend}'") as info:
        train_parallel.check_options({"parallel": 2, "backend": backend})
    assert "parallel" in info.value.hint
    train_parallel.check_options({"parallel": 1, "backend": backend})  # serial: its own loop


def test_postgres_shards_of_a_format_bound_to_its_index_run_in_threads():
    """pcr reads with its index's image settings, which the workers' job does not carry: on an
    engine with parallel workers its shards run in threads of the process, kept or not; another
    format's epochs choose between threads and the workers (``KeptOrWorkers``)."""
    from types import SimpleNamespace

    from loomdb.functions import train_parallel
    from loomdb.store.formats.dense import DenseFormat
    from loomdb.store.formats.pcr import PcrFormat

    db = SimpleNamespace(run_shards=None, check_interrupt=lambda: None)
    epochs = SimpleNamespace(train_stop=4)
    for fmt, runs in ((PcrFormat, ThreadedShards), (DenseFormat, train_parallel.KeptOrWorkers)):
        laid = SimpleNamespace(relation="r", fmt=fmt.__new__(fmt))
        with train_parallel.runner(db, {"parallel": 2}, laid, epochs, None, None) as runner:
            assert type(runner) is runs


def test_shard_state_round_trips_and_refuses_every_truncation():
    records = [
        ({"a": 1, "b": [1.5, None], "c": "x"}, {"W": np.arange(6.0).reshape(3, 2)}),
        ({}, {"v": np.array([-0.0, np.inf]), "e": np.zeros((0, 4)), "s": np.array(2.0)}),
    ]
    blob = shard_state.pack(records)
    back = shard_state.unpack(blob)
    assert [r[0] for r in back] == [r[0] for r in records]
    for (_, mine), (_, theirs) in zip(records, back):
        assert mine.keys() == theirs.keys()
        assert all(mine[k].tobytes() == theirs[k].tobytes() for k in mine)
    for cut in range(len(blob)):
        with pytest.raises(LoomFormatError):
            shard_state.unpack(blob[:cut])
    with pytest.raises(LoomFormatError, match="follow"):
        shard_state.unpack(blob + b"\0")


@pytest.mark.parametrize(
    "header",
    [b"[1]", b'[{"scalars": {}, "arrays": [["W", [2147483647, 2147483647]]]}]', b"{", b'"x"'],
)
def test_shard_state_refuses_hostile_headers(header):
    blob = shard_state.HEAD.pack(b"LE", 1, 0, len(header)) + header
    with pytest.raises(LoomFormatError):
        shard_state.unpack(blob)
    with pytest.raises(LoomFormatError):
        shard_state.unpack(None)


# -- PostgreSQL's aggregate, run in this process ------------------------------------------------


class FakePlpy:
    """What the aggregate uses of PL/Python's ``plpy``: its ``Error``, which loomdb subclasses
    and raises with the error's SQLSTATE, detail and hint set on it (``raise_error``)."""

    class Error(Exception):
        pass


def _layout(X, y, fmt_name, batch_size=16):
    """Minibatches stored as a storage table holds them: (batch, part, rows, version, payload,
    checksum) rows, and a Layout reading them back in order."""
    from loomdb.seams import IndexInfo
    from loomdb.store import formats, layout, storage
    from support.arrays import stats_of

    fmt = formats.get(fmt_name)
    stats = {k: v.tolist() for k, v in stats_of(X).items()}
    encode = fmt.encoder(stats, {})
    uid = "ab" * 16
    rows: list[tuple] = []
    for n, i in enumerate(range(0, len(y), batch_size)):
        parts = [fmt.encode_labels(y[i : i + batch_size]), *encode(X[i : i + batch_size])]
        rows += storage.rows_of(uid, n, len(y[i : i + batch_size]), fmt.version, parts)
    info = IndexInfo(
        name="ix",
        source="t",
        label="y",
        columns=[f"x{j}" for j in range(X.shape[1])],
        format=fmt.name,
        format_version=fmt.version,
        options={},
        stats=stats,
        label_counts={},
        rows=len(y),
        skipped=0,
        batches=n + 1,
        bytes=0,
        source_signature="",
        uid=uid,
    )
    return layout.Layout(info, fmt, layout.MemoryRows(rows).read, relation="ix"), rows


class AggregateDb:
    """``run_shards`` as PostgreSQL runs it: each shard's minibatches, whole and in order, ``run``
    at a time (None: as the caller asks) through loom._epoch_step in some process; the partial
    states combined in arrival order."""

    def __init__(self, rows, arrival, run=None):
        self.rows, self.arrival, self.run = rows, arrival, run
        self.check_interrupt = lambda: None

    def run_shards(self, relation, owner, shards, stop, parts, job, run):
        from loomdb.engines.postgres import epoch_aggregate as agg

        plpy, run = FakePlpy(), self.run or run
        states = []
        for j in self.arrival(shards):
            state = None
            mine = list(range(j, stop, shards))
            for at in range(0, len(mine), run):
                columns = _epoch_rows(self.rows, *mine[at : at + run], parts=parts)
                state = agg.call(plpy, "step", state, j, *columns, job)
            states.append(state)
        out = states[0]
        for other in states[1:]:
            out = agg.call(plpy, "combine", out, other)
        return out


def _fit_on(laid, runner_for, cfg, X, y):
    from loomdb.store.epochs import Epochs

    epochs = Epochs(laid, 0.0, 1 << 30)
    prob = problem(X, sorted(set(y.tolist())), "zscore", y)
    with runner_for(epochs, prob) as runner:
        return fit(epochs, prob, cfg, CpuBackend(), runner=runner)


@pytest.mark.parametrize("fmt", ["dense", "toc", "mlweaving"])
@pytest.mark.parametrize("optimizer", ["sgd", "nesterov"])
def test_postgres_aggregate_trains_what_the_threads_train(fmt, optimizer):
    from loomdb.functions.train_parallel import DatabaseShards

    X, y = _data(rows=150, classes=3)
    X = np.round(X)  # values TOC compresses
    laid, rows = _layout(X, y, fmt)
    cfg = TrainConfig(kind="logistic", epochs=4, optimizer=optimizer, lr=0.05)
    threads, h1 = _fit_on(laid, lambda e, p: ThreadedShards(e, p, cfg, 3), cfg, X, y)
    for arrival, run in ((lambda n: range(n), 1), (lambda n: reversed(range(n)), None)):
        db = AggregateDb(rows, arrival, run)  # a minibatch per call, or runs of them

        def runner(e, p, db=db):
            return _held(DatabaseShards(db, laid, e.train_stop, 3, p, cfg))

        aggregate, h2 = _fit_on(laid, runner, cfg, X, y)
        assert np.array_equal(aggregate.W, threads.W) and np.array_equal(aggregate.b, threads.b)
        assert [e["loss"] for e in h1] == [e["loss"] for e in h2]
        assert h2[-1]["bytes_read"] == sum(len(r[4]) for r in rows)


class _held:
    """A runner that needs no threads, as a context manager (train_parallel.runner's shape)."""

    def __init__(self, runner):
        self.runner = runner

    def __enter__(self):
        return self.runner

    def __exit__(self, *exc):
        return None


def _epoch_rows(rows, *batches, parts=1):
    """One row of the epoch's statement: the arrays of ``batches``' stored rows (batch, rows,
    part, version, payload, checksum) in (minibatch, part) order."""
    mine = sorted(r for r in rows if r[0] in batches and r[1] <= parts)
    return [[r[k] for r in mine] for k in (0, 2, 1, 3, 4, 5)]


def _job(X, y, laid, shards=2):
    from loomdb.engines.postgres.epoch_aggregate import READ

    cfg = TrainConfig(kind="logistic", optimizer="sgd")
    prob = problem(X, [0.0, 1.0])
    start = averaging.Start.of(prob, cfg, np.zeros((X.shape[1], 1)), np.zeros(1), None, 0.1, 16)
    read = {
        "format": "dense",
        "n_features": X.shape[1],
        "precision": 32,
        "parts": 1,
        "uid": laid.info.uid,
        "version": laid.fmt.version,
        "index": "ix",
        "shards": shards,
    }
    assert read.keys() == READ.keys()
    return shard_state.pack([start.to_record({"read": read})])


def test_the_aggregate_refuses_damaged_and_misordered_minibatches():
    from loomdb.engines.postgres import epoch_aggregate as agg

    X, y = _data(rows=160, classes=2)
    laid, rows = _layout(X, y, "dense")
    job, plpy = _job(X, y, laid), FakePlpy()
    state = agg.call(plpy, "step", None, 0, *_epoch_rows(rows, 0), job)
    with pytest.raises(FakePlpy.Error, match="minibatch 2 is missing") as info:
        agg.call(plpy, "step", state, 0, *_epoch_rows(rows, 4), job)
    assert info.value.sqlstate == "XX001" and "loom_reindex('ix')" in info.value.hint
    with pytest.raises(FakePlpy.Error, match="minibatch 4 is missing"):  # inside a run
        agg.call(plpy, "step", state, 0, *_epoch_rows(rows, 2, 6), job)
    later = agg.call(plpy, "step", state, 0, *_epoch_rows(rows, 2, 4), job)  # a run of two
    with pytest.raises(FakePlpy.Error, match="minibatch 2 appears twice"):
        agg.call(plpy, "step", later, 0, *_epoch_rows(rows, 2), job)
    batches, rows_, parts, versions, payloads, checksums = _epoch_rows(rows, 2)
    payloads[1] = payloads[1][:-1] + b"\1"
    with pytest.raises(FakePlpy.Error, match="part 1 does not match its checksum"):
        agg.call(plpy, "step", state, 0, batches, rows_, parts, versions, payloads, checksums, job)
    columns = [batches, rows_, parts, versions, payloads, checksums]
    with pytest.raises(FakePlpy.Error, match="missing or repeated part"):  # part 1 left out
        agg.call(plpy, "step", state, 0, *[c[:1] for c in columns], job)
    with pytest.raises(FakePlpy.Error, match="short column"):  # columns of unlike lengths
        agg.call(plpy, "step", state, 0, batches, *[c[1:] for c in columns[1:]], job)
    with pytest.raises(FakePlpy.Error, match="split between two processes"):
        agg.call(plpy, "combine", state, state)
    with pytest.raises(FakePlpy.Error, match="malformed parallel epoch"):
        agg.call(plpy, "step", None, 0, *_epoch_rows(rows, 0), job[:-8])
    with pytest.raises(FakePlpy.Error, match="shard 2 of 2"):
        agg.call(plpy, "step", None, 2, *_epoch_rows(rows, 0), job)


def _forged(job, edit):
    """``job`` with its start's scalars and arrays changed by ``edit(scalars, arrays)``."""
    [(scalars, arrays)] = shard_state.unpack(job)
    scalars, arrays = dict(scalars), {k: np.array(v) for k, v in arrays.items()}
    edit(scalars, arrays)
    return shard_state.pack([(scalars, arrays)])


def _forged_batch(uid, features, rows=1, labels=None):
    """One dense minibatch of ``features`` columns, with checksums its forger computed."""
    from loomdb.codecs import dense
    from loomdb.store import storage

    y = np.zeros((rows if labels is None else labels, 1))
    parts = [bytes(dense.encode(y)), bytes(dense.encode(np.ones((rows, features))))]
    crcs = [storage.checksum(uid, 0, p, rows, 1, blob) for p, blob in enumerate(parts)]
    return [0, 0], [rows, rows], [0, 1], [1, 1], parts, crcs


def _read(**changes):
    def edit(scalars, arrays):
        scalars["read"] = {**scalars["read"], **changes}

    return edit


def _set(name, value):
    def edit(scalars, arrays):
        (arrays if isinstance(value, np.ndarray) else scalars)[name] = value

    return edit


@pytest.mark.parametrize(
    "edit,message",
    [
        (_read(n_features=8), "minibatches of 8 features for a model of 5"),
        (_set("W", np.zeros((8, 1))), "shift of shape"),
        (_set("W", np.zeros((5, 2))), "a model of 2 columns for 2 classes"),
        (_set("W", np.zeros(5)), "a model of shape"),
        (_set("b", np.zeros(3)), "b of shape"),
        (_set("class_weights", np.ones(7)), "class_weights of shape"),
        (_set("classes", [1.0, 0.0]), "increasing"),
        (_set("classes", ["a", "b"]), "finite numbers"),
        (_set("lr", "0.1"), "lr, l1 or l2"),
        (_set("widest", -1), "widest"),
        (_set("optimizer", "nesterov"), "optimizer state"),  # its vW, vb, t, tmax absent
        (_set("state.shape", 3), "optimizer state"),
        (_read(format="pcr"), "cannot train in parallel workers"),
        (_read(precision=0), "precision 0"),
        (_read(parts=2), "2 parts at precision 32"),
        (_read(version=9), "format version 9"),
        (_read(shards=10**9), "shards"),
    ],
)
def test_the_aggregate_refuses_a_forged_job_before_any_step(edit, message):
    """loom._epoch_step is executable by loomdb_user (parallel workers run as the caller), who
    writes the job and can compute the checksums: a row wider than the job's model made the
    compiled step write past its gradient (a 2,000,000-feature row killed the server)."""
    from loomdb.engines.postgres import epoch_aggregate as agg

    X, y = _data(rows=32, classes=2)
    laid, rows = _layout(X, y, "dense")
    job, plpy = _forged(_job(X, y, laid), edit), FakePlpy()
    with pytest.raises(FakePlpy.Error, match="malformed parallel epoch") as info:
        agg.call(plpy, "step", None, 0, *_epoch_rows(rows, 0), job)
    assert message in str(info.value) and info.value.hint == shard_state.HINT


def test_the_aggregate_refuses_a_forged_wide_row_and_a_forged_state():
    from loomdb.engines.postgres import epoch_aggregate as agg

    X, y = _data(rows=32, classes=2)
    laid, rows = _layout(X, y, "dense")
    job, plpy, uid = _job(X, y, laid), FakePlpy(), laid.info.uid
    wide = _forged_batch(uid, 2_000_000)  # the tester's row, against a model of 5 features
    with pytest.raises(FakePlpy.Error, match=r"holds \(1, 2000000\), not \(1, 5\)") as info:
        agg.call(plpy, "step", None, 0, *wide, job)
    assert "REINDEX" in info.value.hint  # the decoders' refusals had no HINT
    job_wide = _forged(job, _read(n_features=2_000_000))  # and a job that agrees with the row
    with pytest.raises(FakePlpy.Error, match="2000000 features for a model of 5"):
        agg.call(plpy, "step", None, 0, *wide, job_wide)
    with pytest.raises(FakePlpy.Error, match="2 labels for 1 rows") as info:
        agg.call(plpy, "step", None, 0, *_forged_batch(uid, 5, labels=2), job)
    assert "REINDEX" in info.value.hint
    state = agg.call(plpy, "step", None, 0, *_epoch_rows(rows, 0), job)
    for name, value in (("W", np.zeros((9, 1))), ("b", np.zeros(4)), ("rows", -1)):
        forged = _forged(state, _set(name, value))
        with pytest.raises(FakePlpy.Error, match="malformed parallel epoch result"):
            agg.call(plpy, "step", forged, 0, *_epoch_rows(rows, 2), job)
    assert agg.call(plpy, "step", state, 0, *_epoch_rows(rows, 2), job)  # the real one goes on
