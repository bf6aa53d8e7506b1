"""Reading the next page ahead (store/read_ahead.py, storage.Reader.read): the next query runs
while the caller holds this page, results come in order, an error where its result would be,
and nothing runs after the reader is closed; through DuckDB, a train reads the same minibatches
with it as without it, a damaged page is still refused, and a call's cursor closes only once
the statement on it has ended."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

import loomdb
from loomdb.engines.duckdb.database import DuckDatabase
from loomdb.engines.duckdb.state import ConnectionState
from loomdb.errors import LoomFormatError
from loomdb.store import read_ahead, storage

WAIT_S = 10  # a bound on waiting for another thread: a failure, never a hang


def test_the_next_call_runs_while_the_caller_holds_a_result():
    started = [threading.Event() for _ in range(3)]

    def call(i):
        def run():
            started[i].set()
            return i

        return run

    results = read_ahead.ahead(call(i) for i in range(3))
    assert next(results) == 0
    assert started[1].wait(WAIT_S)  # asked for while result 0 is held: it runs meanwhile
    assert list(results) == [1, 2]


def test_an_error_comes_where_its_result_would_have():
    def fail():
        raise LoomFormatError("page 1 is damaged")

    results = read_ahead.ahead([lambda: "page 0", fail, lambda: "page 2"])
    assert next(results) == "page 0"
    with pytest.raises(LoomFormatError, match="page 1 is damaged"):
        next(results)


def test_closing_waits_for_the_call_under_way_and_starts_no_other():
    release, finished, calls = threading.Event(), threading.Event(), []

    def slow():
        calls.append("slow")
        release.wait(WAIT_S)
        finished.set()
        return "slow"

    def never():
        calls.append("never")
        return "never"

    results = read_ahead.ahead([lambda: "first", slow, never])
    assert next(results) == "first"
    threading.Timer(0.05, release.set).start()
    results.close()  # returns once the call under way has
    assert finished.is_set() and calls == ["slow"]


def _index(con, rows: int = 4000) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(rows, 5))
    y = (X @ rng.normal(size=5) > 0).astype(float)
    values = ", ".join(f"({', '.join(map(repr, x))}, {t})" for x, t in zip(X.tolist(), y))
    cols = ", ".join(f"x{i} DOUBLE" for i in range(5))
    con.execute(f"CREATE TABLE src ({cols}, y DOUBLE)")
    con.execute(f"INSERT INTO src VALUES {values}")
    opts = json.dumps({"format": "dense", "batch_size": 100, "seed": 1})
    con.execute(f"SELECT loom_create_index('ix', 'src', 'y', '{opts}')")


def _train(con, name: str) -> list[list[float]]:
    opts = {"index": "ix", "epochs": 3, "cache_mb": 0, "progress": False}
    con.execute(f"SELECT loom_train('{name}', NULL, 'y', '{json.dumps(opts)}')")
    info = json.loads(con.execute(f"SELECT loom_model_info('{name}')").fetchone()[0])
    return [info["coefficients"], [h["loss"] for h in info["history"]]]


def test_a_train_reads_the_same_minibatches_ahead_as_in_turn(monkeypatch):
    con = loomdb.connect(":memory:", progress=False)
    _index(con)
    monkeypatch.setattr(storage, "PAGE_BYTES", 6 * 100 * 5 * 8)  # 3 minibatches a page
    threads: set[str] = set()
    query_blobs = DuckDatabase.query_blobs

    def recorded(self, sql, params=()):
        threads.add(threading.current_thread().name)
        return query_blobs(self, sql, params)

    monkeypatch.setattr(DuckDatabase, "query_blobs", recorded)
    ahead = _train(con, "ahead")
    assert any(name.startswith("loomdb-read-ahead") for name in threads)
    monkeypatch.setattr(DuckDatabase, "concurrent_reads", False)
    threads.clear()
    in_turn = _train(con, "in_turn")
    assert not any(name.startswith("loomdb-read-ahead") for name in threads)
    assert ahead == in_turn  # bit for bit: the same minibatches in the same order


def test_a_damaged_page_read_ahead_is_refused(monkeypatch):
    con = loomdb.connect(":memory:", progress=False)
    _index(con)
    monkeypatch.setattr(storage, "PAGE_BYTES", 6 * 100 * 5 * 8)
    con.execute("DELETE FROM loom_data.ix WHERE batch = 31")  # in the eleventh page
    with pytest.raises(LoomFormatError, match="minibatch 31 is missing"):
        _train(con, "m")


class BlockingCursor:
    """A cursor whose statement runs until ``release`` is set; it records what happened."""

    def __init__(self) -> None:
        self.running, self.release, self.events = threading.Event(), threading.Event(), []

    def sql(self, sql, params=None):
        self.running.set()
        self.release.wait(WAIT_S)
        self.events.append("statement done")
        return SimpleNamespace(to_arrow_table=lambda: pa.table({"batch": [0]}))

    def close(self) -> None:
        self.events.append("closed")


def test_a_cursor_closes_only_once_the_statement_on_it_has_ended():
    cursor = BlockingCursor()
    db = DuckDatabase(cursor, ConnectionState("test"))
    reading = threading.Thread(target=db.query_blobs, args=("SELECT 1",))
    reading.start()
    assert cursor.running.wait(WAIT_S)
    closing = threading.Thread(target=db.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waits for the statement
    cursor.release.set()
    reading.join(WAIT_S)
    closing.join(WAIT_S)
    assert cursor.events == ["statement done", "closed"]
