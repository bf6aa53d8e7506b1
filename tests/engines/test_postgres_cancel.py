"""PostgreSQL: a cancel (pg_cancel_backend, statement_timeout) stops a train promptly, even in
epochs that read nothing from the database (the batches are cached in memory), and when the
epochs' shards run in threads of the backend (``parallel``)."""

from __future__ import annotations

import threading
import time

import numpy as np
import psycopg
import pytest

from loomdb.bench.tables import load_postgres

pytestmark = pytest.mark.postgres


class Training:
    """``loom_train`` of ``model`` over a fresh 20,000-row table for 100,000 epochs, run on a
    connection of its own (``worker``) in a thread; ``said`` is set once a NOTICE of the train
    holds ``notice`` (it is running: no timing assumed — a cancel sent before the statement
    began, after a fixed sleep on a slow machine, was lost and the train ran its epochs)."""

    def __init__(self, pg_dsn: str, model: str, notice: str, parallel: int) -> None:
        X = np.random.default_rng(0).normal(size=(20000, 20))
        with psycopg.connect(pg_dsn, autocommit=True) as setup:
            load_postgres(setup, f"{model}_t", X, (X[:, 0] > 0).astype(float))
        self.worker = psycopg.connect(pg_dsn, autocommit=True)
        self.pid = self.worker.info.backend_pid
        self.said = threading.Event()
        self.worker.add_notice_handler(
            lambda n: f"{model}: {notice}" in (n.message_primary or "") and self.said.set()
        )
        self.sql = (
            f"SELECT loom_train('{model}', '{model}_t', 'y', "
            f'\'{{"epochs": 100000, "tol": 0, "parallel": {parallel}}}\')'
        )
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._train)
        self.thread.start()

    def _train(self) -> None:
        try:
            self.worker.execute(self.sql)
        except BaseException as e:  # noqa: BLE001 - judged by the tests
            self.errors.append(e)


@pytest.mark.parametrize("parallel", [1, 2])
def test_cancel_stops_a_train_within_moments(pg_dsn, parallel):
    run = Training(pg_dsn, "cancel_m", "epoch ", parallel)
    worker, thread, errors = run.worker, run.thread, run.errors
    started = run.said.wait(timeout=120)
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        asked = time.monotonic()
        other.execute("SELECT pg_cancel_backend(%s)", [run.pid])
    thread.join(timeout=30)
    stopped = time.monotonic() - asked
    assert started, f"no epoch said within two minutes: {errors}"
    assert not thread.is_alive() and stopped < 5, f"still running {stopped:.1f} s after cancel"
    assert errors and isinstance(errors[0], psycopg.errors.QueryCanceled), errors
    assert worker.execute(
        "SELECT count(*) FROM loom.models WHERE name = 'cancel_m'"
    ).fetchone() == (0,)
    with pytest.raises(psycopg.errors.QueryCanceled):
        worker.execute("SET statement_timeout = '1500ms'")
        worker.execute(run.sql)
    assert worker.execute("SELECT count(*) FROM loom.models").fetchone() == (0,)  # still usable
    worker.close()


def test_a_terminated_backend_ends_while_its_shards_run_in_threads(pg_dsn):
    """pg_terminate_backend during a parallel train whose shards run in threads of the backend
    (the epochs are kept in memory): the backend process ends within moments, its threads with
    it, and the server goes on."""
    run = Training(pg_dsn, "term_m", "epoch 2", 2)
    worker, thread, errors = run.worker, run.thread, run.errors
    started = run.said.wait(timeout=120)
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [run.pid])
        deadline = time.monotonic() + 10
        alive = True
        while alive and time.monotonic() < deadline:
            alive = other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [run.pid]
            ).fetchone() != (0,)
            time.sleep(0.1)
        assert started and not alive, f"backend {run.pid} still there 10 s after its termination"
        assert other.execute(
            "SELECT count(*) FROM loom.models WHERE name = 'term_m'"
        ).fetchone() == (0,)
    thread.join(timeout=30)
    assert not thread.is_alive() and errors and isinstance(errors[0], psycopg.OperationalError)
    worker.close()
