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


@pytest.mark.parametrize("parallel", [1, 2])
def test_cancel_stops_a_train_within_moments(pg_dsn, parallel):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 20))
    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        load_postgres(setup, "cancel_t", X, (X[:, 0] > 0).astype(float))
    worker = psycopg.connect(pg_dsn, autocommit=True)
    pid = worker.info.backend_pid
    training = threading.Event()  # the train's NOTICE of an epoch: it is running
    worker.add_notice_handler(
        lambda notice: "cancel_m: epoch " in (notice.message_primary or "") and training.set()
    )
    errors: list[BaseException] = []

    def train() -> None:
        try:
            worker.execute(
                "SELECT loom_train('cancel_m', 'cancel_t', 'y', "
                f'\'{{"epochs": 100000, "tol": 0, "parallel": {parallel}}}\')'
            )
        except BaseException as e:  # noqa: BLE001 - judged below
            errors.append(e)

    thread = threading.Thread(target=train)
    thread.start()
    # no timing assumed: a cancel sent before the statement began (a fixed sleep on a slow
    # machine) was lost, and the train ran its 100,000 epochs
    started = training.wait(timeout=120)
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        asked = time.monotonic()
        other.execute("SELECT pg_cancel_backend(%s)", [pid])
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
        worker.execute(
            "SELECT loom_train('cancel_m', 'cancel_t', 'y', "
            f'\'{{"epochs": 100000, "tol": 0, "parallel": {parallel}}}\')'
        )
    assert worker.execute("SELECT count(*) FROM loom.models").fetchone() == (0,)  # still usable
    worker.close()


def test_a_terminated_backend_ends_while_its_shards_run_in_threads(pg_dsn):
    """pg_terminate_backend during a parallel train whose shards run in threads of the backend
    (the epochs are kept in memory): the backend process ends within moments, its threads with
    it, and the server goes on."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20000, 20))
    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        load_postgres(setup, "term_t", X, (X[:, 0] > 0).astype(float))
    worker = psycopg.connect(pg_dsn, autocommit=True)
    pid = worker.info.backend_pid
    training = threading.Event()
    worker.add_notice_handler(
        lambda notice: "term_m: epoch 2" in (notice.message_primary or "") and training.set()
    )
    errors: list[BaseException] = []

    def train() -> None:
        try:
            worker.execute(
                "SELECT loom_train('term_m', 'term_t', 'y', "
                '\'{"epochs": 100000, "tol": 0, "parallel": 2}\')'
            )
        except BaseException as e:  # noqa: BLE001 - judged below
            errors.append(e)

    thread = threading.Thread(target=train)
    thread.start()
    started = training.wait(timeout=120)
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        alive = True
        while alive and time.monotonic() < deadline:
            alive = other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone() != (0,)
            time.sleep(0.1)
        assert started and not alive, f"backend {pid} still there 10 s after its termination"
        assert other.execute(
            "SELECT count(*) FROM loom.models WHERE name = 'term_m'"
        ).fetchone() == (0,)
    thread.join(timeout=30)
    assert not thread.is_alive() and errors and isinstance(errors[0], psycopg.OperationalError)
    worker.close()
