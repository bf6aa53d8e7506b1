"""Distributed training through SQL on both engines (distributed/): on a 2-worker-process
LocalCluster this module starts once (the PostgreSQL server's driver connects to it as to any
scheduler), on a ``local:2`` cluster the train starts and closes itself (inside the PostgreSQL
backend too), in process (``inprocess``, the reference), and against refusals.

With ``compress: none`` a run on two workers equals ``inprocess`` on the same steps, which
with one minibatch a step equals the trainer's own Adam; every codec trains a LIBSVM source of
2^21 hashed columns to the loss of uncompressed Adam; the catalog records the workers, the
bytes each way and the compression ratio achieved.  No assertion reads a clock.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

import loomdb
from loomdb.codecs import array_json
from support.engines import readable_dir

pytestmark = pytest.mark.postgres

distributed = pytest.importorskip("distributed")
COMMON = {"epochs": 3, "tol": 0, "progress": False, "seed": 3}


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread each, shared by the module's tests."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
    ) as c, distributed.Client(c, set_as_default=False) as client:  # fmt: skip
        yield c, client


@pytest.fixture
def address(cluster):
    c, client = cluster
    client.wait_for_workers(2, timeout=60)  # a test that killed one waits for its nanny
    return c.scheduler_address


def train(engine, model, source, options, label="y"):
    opts = json.dumps({**COMMON, **options})
    src, lab = (f"'{v}'" if v is not None else "NULL" for v in (source, label))
    return json.loads(engine.scalar(f"SELECT loom_train('{model}', {src}, {lab}, '{opts}')"))


def coefficients(engine, model):
    raw = engine.scalar(f"SELECT coefficients FROM loom.models WHERE name = '{model}'")
    value = json.loads(raw, object_hook=array_json.hook)
    if isinstance(value, dict):  # a sparse model: by source column
        full = np.zeros((value["width"], np.asarray(value["coef"]).shape[1]))
        full[value["index"]] = value["coef"]
        return full
    return np.asarray(value)


def record(engine, model):
    options, history, report = engine.rows(
        f"SELECT options, history, report FROM loom.models WHERE name = '{model}'"
    )[0]
    return json.loads(options), json.loads(history), json.loads(report) if report else None


def dense_table(engine, name="dt", n=1500, m=6, classes=2):
    rng = np.random.default_rng(11)
    X = rng.normal(size=(n, m))
    score = X @ rng.normal(size=m) + 0.3 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    engine.load(name, X, y.astype(float))
    return name


def test_two_workers_without_compression_equal_the_inprocess_reference(engine, address):
    src = dense_table(engine, classes=3)  # one-vs-rest: keys carry the class
    train(engine, "ref", src, {"cluster": "inprocess", "compress": "none", "step_batches": 2})
    got = train(engine, "two", src, {"cluster": address, "compress": "none"})
    assert np.allclose(
        coefficients(engine, "two"), coefficients(engine, "ref"), rtol=1e-9, atol=1e-12
    )
    options, history, report = record(engine, "two")
    assert options["cluster"] == address and options["compress"] == "none"
    assert options["optimizer"] == "adam" and options["workers"] == 2
    assert options["step_batches"] == 2
    assert report["bytes_to_driver"] == sum(h["bytes_to_driver"] for h in history) > 0
    assert report["bytes_to_workers"] == sum(h["bytes_to_workers"] for h in history) > 0
    assert history[0]["bytes_read"] == report["partition_bytes"] > 0
    assert all(h["bytes_read"] == 0 for h in history[1:])  # partitioned once
    assert got["rows"] == 1500 and history[0]["steps"] == 3  # 6 minibatches, 2 a step
    again = train(engine, "two2", src, {"cluster": address, "compress": "none"})
    assert again["loss"] == got["loss"]  # reproducible with a fixed seed


def test_inprocess_with_one_minibatch_a_step_is_the_trainers_adam(engine):
    src = dense_table(engine)
    plain = train(engine, "plain", src, {"optimizer": "adam", "l1": 1e-4})
    one = train(engine, "one", src, {"cluster": "inprocess", "compress": "none", "l1": 1e-4})
    assert one["loss"] == pytest.approx(plain["loss"], rel=1e-12)
    assert np.allclose(
        coefficients(engine, "one"), coefficients(engine, "plain"), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("where", ["inprocess", "dask"])
def test_a_step_too_large_restarts_smaller_as_in_one_process(engine, where, request):
    """Margins that overflow at too large a given lr make a worker's gradient non-finite,
    which no codec encodes: the train restarts at a smaller step, as the trainer does."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 3)) * 1e150
    engine.load("wide", X, rng.normal(size=400))
    opts = {"model": "linear", "standardize": "none", "lr": 1e10, "epochs": 2}
    plain = train(engine, "plain", "wide", {**opts, "optimizer": "adam"})
    cluster = "inprocess" if where == "inprocess" else request.getfixturevalue("address")
    dist = {"cluster": cluster, "compress": "none", "step_batches": 1}  # plain Adam's steps
    got = train(engine, "dist", "wide", {**opts, **dist})
    assert plain["restarts"] == got["restarts"] >= 1
    if where == "dask":  # handled, so no worker logs it as a failed task (an ERROR)
        logs = request.getfixturevalue("cluster")[1].get_worker_logs()
        assert not [text for log in logs.values() for _, text in log if "Compute Failed" in text]
    assert got["loss"] == pytest.approx(plain["loss"], rel=1e-9)
    _, history, report = record(engine, "dist")
    assert "non-finite" in history[0]["reason"]
    epochs = [h for h in history if "epoch" in h]  # the kept run's
    assert epochs[0]["bytes_read"] == report["partition_bytes"] > 0
    assert report["bytes_to_driver"] == sum(h["bytes_to_driver"] for h in epochs) > 0


def test_after_a_restart_the_report_counts_the_kept_run(engine):
    """Two minibatches a step: the first run completes an epoch before its loss explodes;
    the report and the history are both of the run kept, the partition in its first epoch."""
    rng = np.random.default_rng(2)
    engine.load("wide", rng.normal(size=(400, 3)) * 1e150, rng.normal(size=400))
    opts = {"model": "linear", "standardize": "none", "lr": 1e10, "epochs": 2}
    train(engine, "dist", "wide", {**opts, "cluster": "inprocess", "step_batches": 2})
    _, history, report = record(engine, "dist")
    assert "exploded" in history[0]["reason"]  # after a whole epoch
    epochs = [h for h in history if "epoch" in h]
    assert epochs[0]["bytes_read"] == report["partition_bytes"] > 0
    for name in ("bytes_to_driver", "bytes_to_workers", "gradient_bytes"):
        assert report[name] == sum(h[name] for h in epochs) > 0


def crosses(engine, name="xs", rows=600):
    """A LIBSVM file of ``rows`` rows over 40 features, loaded with hashed pairwise crosses
    (cross_bits 20: 2^21 columns)."""
    rng = np.random.default_rng(5)
    w = rng.normal(size=40)
    lines = []
    for _ in range(rows):
        cols = np.sort(rng.choice(40, size=7, replace=False))
        vals = rng.integers(1, 4, size=7)
        label = int(vals @ w[cols] + rng.normal() > 0)
        lines.append(f"{label} " + " ".join(f"{c + 1}:{v}" for c, v in zip(cols, vals)))
    path = readable_dir() / f"{name}.svm"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o644)
    opts = json.dumps({"replace": True, "cross_bits": 20})
    engine.scalar(f"SELECT loom_load('libsvm', '{path}', '{name}', '{opts}')")
    return name


@pytest.mark.parametrize("compress", ["none", "zipml8", "zipml16", "sketchml"])
def test_each_codec_trains_hashed_crosses_past_two_to_the_twenty(engine, address, compress):
    src = crosses(engine)
    opts = {"format": "toc", "epochs": 4, "batch_size": 64}
    local = train(engine, "local", src, {**opts, "optimizer": "adam"}, label="label")
    got = train(engine, "dist", src, {**opts, "cluster": address, "compress": compress}, "label")
    assert got["features"] == local["features"] > 2**20
    assert got["stored_coefficients"] == local["stored_coefficients"] > 40  # crosses held
    # the same steps as the local run but two minibatches each; lossy codecs stay close
    assert got["loss"] < 0.69 and abs(got["loss"] - local["loss"]) < 0.1
    _, history, report = record(engine, "dist")
    assert report["compress"] == compress
    if compress != "none":
        none = train(engine, "none", src, {**opts, "cluster": address, "compress": "none"}, "label")
        assert none["loss"] == pytest.approx(got["loss"], rel=0.05)


def test_compress_model_sends_the_model_through_the_codec(engine, address):
    src = dense_table(engine)
    raw = train(engine, "raw", src, {"cluster": address, "compress": "none"})
    packed = train(
        engine, "zip", src, {"cluster": address, "compress": "none", "compress_model": "zipml16"}
    )
    _, h_raw, _ = record(engine, "raw")
    _, h_zip, _ = record(engine, "zip")
    assert h_zip[0]["bytes_to_workers"] != h_raw[0]["bytes_to_workers"]
    assert packed["loss"] == pytest.approx(raw["loss"], rel=1e-3)


@pytest.mark.parametrize(
    "options, says",
    [
        ({"compress": "none"}, "applies to distributed training only"),
        ({"cluster": "inprocess", "backend": "fpga-sim"}, "backend 'fpga-sim'"),
        ({"cluster": "inprocess", "optimizer": "nesterov"}, "'nesterov'"),
        ({"cluster": "local:0"}, "'cluster' option must be"),
        ({"cluster": "http://evil:80"}, "'cluster' option must be"),
        ({"cluster": "inprocess", "compress": "gzip"}, "'compress' option must be"),
        ({"cluster": "inprocess", "dsn": "host=x"}, "'dsn'"),
        ({"cluster": "inprocess", "cache_mb": 8}, "'cache_mb'"),
        ({"cluster": "inprocess", "skip": "random", "skip_fraction": 0.5}, "'skip'"),
        ({"cluster": "inprocess", "scans": "adaptive"}, "'scans'"),
        ({"cluster": "inprocess", "step_timeout_s": 5}, "'step_timeout_s' bounds the wait"),
        ({"cluster": "local:2", "step_timeout_s": 0}, "'step_timeout_s' option must be"),
        ({"cluster": "local:2", "step_timeout_s": "10"}, "'step_timeout_s' option must be"),
        ({"step_timeout_s": 10}, "applies to distributed training only"),
    ],
)
def test_what_the_distributed_path_cannot_honour_is_refused(engine, options, says):
    src = dense_table(engine)
    with pytest.raises(engine.errors) as info:
        train(engine, "refused", src, options)
    assert says in str(info.value)
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'refused'") == 0


def test_a_distributed_train_records_no_cache_mb(engine):
    """'cache_mb' is refused with a cluster (the workers keep their partitions whole), yet the
    catalog recorded the engine's default as the value used: a train records what it used,
    and its recorded options with the cluster, given again, are not refused for it."""
    src = dense_table(engine)
    train(engine, "serial", src, {"optimizer": "adam"})
    assert "cache_mb" in record(engine, "serial")[0]  # a serial train's cache is recorded
    train(engine, "dist", src, {"cluster": "inprocess", "compress": "none"})
    options = record(engine, "dist")[0]
    assert options["cluster"] == "inprocess" and "cache_mb" not in options
    again = {k: options[k] for k in ("cluster", "compress", "cache_mb") if k in options}
    train(engine, "again", src, again)


def test_the_driver_keeps_no_rows_whatever_cache_mbs_default(engine, caplog):
    """'cache_mb' is refused with a cluster and not recorded, so the driver's layout of a
    source does not depend on the engine's default: the rows go to a temporary table it
    reads once to partition them (it had kept them in memory up to the default, and beyond
    it advised the refused 'cache_mb')."""
    caplog.set_level(logging.INFO, logger="loomdb.progress")
    rows = 200_000 if engine.name == "duckdb" else 1500  # 11.2 MB: DuckDB's default below
    if engine.name == "duckdb":  # a connection that reports progress, cache_mb's default 10
        engine.con.close()
        engine.con = loomdb.connect()
        engine.rows("SET memory_limit = '40MB'")
    src = dense_table(engine, n=rows)
    opts = {"cluster": "inprocess", "compress": "none", "progress": True, "epochs": 1}
    got = train(engine, "dist", src, opts)
    said = getattr(engine, "notices", None)
    said = [r.getMessage() for r in caplog.records] if said is None else said
    assert not [m for m in said if "cache_mb" in m]
    assert [m for m in said if "temporary table that the driver reads once" in m]
    assert got["rows"] == rows and "cache_mb" not in record(engine, "dist")[0]


def _slow_compute(seconds: float) -> None:
    """On a worker: every share's step takes ``seconds`` more (a worker alive but hung)."""
    import time

    from loomdb.distributed import worker

    original = worker.compute

    def slow(*args):
        time.sleep(seconds)
        return original(*args)

    slow.original = original  # type: ignore[attr-defined]
    worker.compute = slow


def _restore_compute() -> None:
    from loomdb.distributed import worker

    worker.compute = getattr(worker.compute, "original", worker.compute)


def test_a_worker_that_hangs_fails_the_train_after_step_timeout_s(engine, address, cluster):
    """A worker that stops answering without dying stays in the scheduler; the driver waits
    'step_timeout_s' for a step's share, then fails clearly and stores nothing."""
    src = dense_table(engine)
    train(engine, "answered", src, {"cluster": address, "step_timeout_s": 30})  # imports done
    assert record(engine, "answered")[0]["step_timeout_s"] == 30
    client = cluster[1]
    hung = sorted(client.scheduler_info()["workers"])[0]
    client.run(_slow_compute, 8.0, workers=[hung])
    try:
        with pytest.raises(engine.errors) as info:
            train(engine, "hung", src, {"cluster": address, "step_timeout_s": 2})
    finally:
        client.run(_restore_compute, workers=[hung])
    assert f"{hung} did not answer within 2 s" in str(info.value)
    assert "step_timeout_s" in hint_of(info.value)
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'hung'") == 0


def test_an_adaptive_precision_is_refused(engine):
    src = dense_table(engine)
    with pytest.raises(engine.errors) as info:
        train(
            engine,
            "w",
            src,
            {"format": "mlweaving", "precision": "adaptive", "cluster": "inprocess"},
        )
    assert "changes it between epochs" in str(info.value)
    fixed = train(engine, "w", src, {"format": "mlweaving", "precision": 6, "cluster": "inprocess"})
    assert fixed["epochs"] == 3


def hint_of(error: BaseException) -> str:
    """An error's hint: PostgreSQL's HINT field, DuckDB's message (LoomError's str has it)."""
    diag = getattr(error, "diag", None)
    return (getattr(diag, "message_hint", None) or "") if diag is not None else str(error)


def spawned_children(engine) -> list[str]:
    """Command lines of the Dask worker processes (multiprocessing spawn children) of the
    process running the engine's SQL: this one, or the PostgreSQL backend."""
    pid = engine.scalar("SELECT pg_backend_pid()") if engine.name == "postgres" else os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if ppid == pid and "spawn_main" in cmd:
            found.append(cmd)
    return found


def threads() -> list[str]:
    """This process's threads, less distributed's process-wide pools (made once, reused) and
    the stand-ins Python names ``Dummy-N`` for DuckDB's own threads that ran a UDF."""
    shared = ("Dask-Offload", "Dask-Callback-Thread", "Dummy-")
    return sorted(t.name for t in threading.enumerate() if not t.name.startswith(shared))


def test_a_local_cluster_started_for_the_train_reaches_single_process_adam(engine):
    """``local:2``: the train starts two worker processes (children of the PostgreSQL
    backend there), trains with SketchML to about the loss of plain Adam, records what it
    sent, and leaves no worker process or cluster thread behind."""
    src = crosses(engine)
    opts = {"format": "toc", "epochs": 4, "batch_size": 64}
    plain = train(engine, "plain", src, {**opts, "optimizer": "adam"}, label="label")
    before, running = spawned_children(engine), threads()  # the module's cluster, if started
    opts.update(cluster="local:2", compress="sketchml", step_batches=1)
    got = train(engine, "sk", src, opts, "label")
    options, history, report = record(engine, "sk")
    assert options["cluster"] == "local:2" and options["workers"] == 2
    assert report["workers"] == report["workers_left"] == 2 and report["lost_workers"] == 0
    assert report["bytes_to_driver"] == sum(h["bytes_to_driver"] for h in history) > 0
    assert report["gradient_bytes"] == sum(h["gradient_bytes"] for h in history) > 0
    assert report["compression_ratio"] == pytest.approx(
        report["gradient_raw_bytes"] / report["gradient_bytes"], rel=1e-4
    )
    # SketchML §5 (Table 2): uncompressed Adam's loss, after more epochs than these 4 over
    # 600 rows; here within 10%, in fewer bytes
    assert report["compression_ratio"] > 1.0
    assert got["loss"] == pytest.approx(plain["loss"], rel=0.1)
    assert spawned_children(engine) == before
    if engine.name == "duckdb":  # the cluster's threads end with it
        assert threads() == running


def test_uncompressed_with_one_minibatch_a_step_is_plain_adam(engine, address):
    src = crosses(engine)
    opts = {"format": "toc", "epochs": 4, "batch_size": 64}
    plain = train(engine, "plain", src, {**opts, "optimizer": "adam"}, label="label")
    opts.update(cluster=address, compress="none", step_batches=1)
    got = train(engine, "raw", src, opts, "label")
    _, history, report = record(engine, "raw")
    assert got["loss"] == pytest.approx(plain["loss"], rel=1e-9)
    assert report["compression_ratio"] == 1.0 == history[-1]["compression_ratio"]
    assert report["gradient_raw_bytes"] == sum(h["gradient_raw_bytes"] for h in history)


def test_an_unreachable_scheduler_is_a_clear_error(engine):
    src = dense_table(engine)
    with pytest.raises(engine.errors) as info:
        train(engine, "nowhere", src, {"cluster": "tcp://127.0.0.1:1"})
    assert "could not reach the Dask scheduler at tcp://127.0.0.1:1" in str(info.value)
    assert "'local:N' starts a cluster" in hint_of(info.value)
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'nowhere'") == 0


@pytest.mark.parametrize("scheme, says", [("tcp", "did not answer"), ("tls", "TLS")])
def test_a_listener_that_is_no_scheduler_is_a_clear_error(engine, scheme, says, monkeypatch):
    """A port something else holds (it accepts, says nothing: Dask's client would wait for
    its handshake forever), and tls:// without Dask's TLS settings, fail with the reason."""
    if engine.name == "duckdb":  # the probe runs in this process: the same path with a wait
        # of 1 s, not 10 (PostgreSQL's backend, out of reach, still waits the real HANDSHAKE_S)
        from loomdb.distributed import cluster

        monkeypatch.setattr(cluster, "HANDSHAKE_S", 1)
    src = dense_table(engine)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"{scheme}://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(engine.errors) as info:
            train(engine, "mute", src, {"cluster": address})
    assert f"could not reach the Dask scheduler at {address}" in str(info.value)
    assert says in str(info.value) and "running Dask scheduler" in hint_of(info.value)
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'mute'") == 0


SCRIPT = """
import loomdb
con = loomdb.connect(progress=False)
con.execute("CREATE TABLE t AS SELECT range::DOUBLE AS x, (range % 2)::DOUBLE AS y FROM range(50)")
try:
    con.execute(\"\"\"SELECT loom_train('m', 't', 'y', '{"cluster": "local:1"}')\"\"\").fetchall()
except loomdb.LoomError as e:
    print(type(e).__name__, e)
"""


def test_a_local_cluster_that_cannot_start_is_a_clear_error(engine, tmp_path):
    """A DuckDB script without the ``__main__`` guard: the spawned workers import it and
    cannot start (multiprocessing refuses); the train says so, with the guard as the hint."""
    if engine.name != "duckdb":
        pytest.skip("a Python script's own process: DuckDB's (the PostgreSQL backend spawns)")
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT)
    python_dir = os.path.dirname(os.path.dirname(loomdb.__file__))
    env = {**os.environ, "PYTHONPATH": python_dir}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("LoomStateError could not start a local Dask cluster")
    assert "if __name__ == '__main__':" in done.stdout


def test_an_unknown_codec_names_the_codecs(engine):
    src = dense_table(engine)
    with pytest.raises(engine.errors) as info:
        train(engine, "unknown", src, {"cluster": "local:2", "compress": "lz4"})
    assert "'compress' option must be 'none', 'keys', 'zipml8'" in str(info.value)
    assert "sketchml" in str(info.value) and hint_of(info.value)


def test_workers_read_their_partition_from_postgresql_with_dsn(engine, address, request):
    """``dsn``: each worker reads its minibatches of a committed index itself (through
    ``store.storage.Reader``, which checks every row), and trains as when the driver sends
    them."""
    if engine.name != "postgres":
        pytest.skip("'dsn' is PostgreSQL's (DuckDB refuses it: test above)")
    src = dense_table(engine)
    engine.scalar(f"SELECT loom_create_index('dix', '{src}', 'y', '{{\"seed\": 3}}')")
    opts = {"index": "dix", "cluster": address, "compress": "none"}
    sent = train(engine, "sent", None, opts, None)
    read = train(engine, "read", None, {**opts, "dsn": request.getfixturevalue("pg_dsn")}, None)
    assert read["loss"] == sent["loss"]
    options, _, report = record(engine, "read")
    assert options["dsn"] and report["partition_bytes"] > 0


def test_a_tunes_trials_keep_the_dsn_without_its_password(engine, address, request):
    """The trials of a ``loom_tune`` on a cluster with ``dsn`` record it as the model does."""
    if engine.name != "postgres":
        pytest.skip("'dsn' is PostgreSQL's")
    src = dense_table(engine)
    engine.scalar(f"SELECT loom_create_index('tix', '{src}', 'y', '{{\"seed\": 3}}')")
    dsn = request.getfixturevalue("pg_dsn") + " password=sekrit"  # trust: not checked
    opts = {**COMMON, "index": "tix", "cluster": address, "compress": "none", "dsn": dsn}
    opts.update(lr=[0.01, 0.1], validation_fraction=0.2)
    engine.scalar(f"SELECT loom_tune('tuned', NULL, NULL, '{json.dumps(opts)}')")
    kept = engine.rows("SELECT options FROM loom_trials('tuned')")
    assert len(kept) == 2 and all("password=***" in json.loads(o)["dsn"] for (o,) in kept)
    assert "sekrit" not in engine.scalar("SELECT options FROM loom.models WHERE name = 'tuned'")
