"""Two sessions writing the same model or index at once, on both engines: PostgreSQL's are two
connections, DuckDB's two cursors of one connection (one loomdb connection per database file
in a process).  Each race ends in a correct answer or a loomdb error naming what collided —
never a raw engine error, a damaged-index verdict, or a catalog no serial order could leave.

The collisions are forced, never timed: on PostgreSQL the first session holds its work in an
open transaction until the second is seen waiting on a lock (``pg_stat_activity``); on DuckDB,
whose transactions never wait, a seam holds each session at the point where its write is made
but not committed, until the other has got there too.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pytest

import loomdb
from loomdb.store import catalog, layout

WAIT_S = 120


def _load(engine, rows: int = 4000) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(rows, 3))
    engine.load("t", X, (X[:, 0] - X[:, 2] > 0).astype(float), ["a", "b", "c"])


class Session:
    """One more session on ``engine``'s database: ``run`` gives a statement's value or the
    error it raised (DuckDB: loomdb's; PostgreSQL: psycopg's, the SQLSTATE telling which)."""

    def __init__(self, engine, request, autocommit: bool = True):
        self.engine = engine
        if engine.name == "duckdb":
            self.con: Any = engine.con.cursor()
            self.pid = None
        else:
            self.con = psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=autocommit)
            self.con.execute("SET search_path = loomtest, public")
            self.pid = self.con.execute("SELECT pg_backend_pid()").fetchone()[0]
            if not autocommit:
                self.con.commit()

    def run(self, sql: str) -> Any:
        try:
            return self.con.execute(sql).fetchall()[0][0]
        except (loomdb.LoomError, psycopg.Error) as e:
            return e

    def close(self) -> None:
        self.con.close()


def _waits_on_a_lock(engine, pid: int) -> bool:
    rows = engine.rows(f"SELECT wait_event_type FROM pg_stat_activity WHERE pid = {pid}")
    return bool(rows) and rows[0][0] == "Lock"


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    return thread, out


def _when_waiting(engine, session: Session, thread: threading.Thread) -> None:
    """Return once ``session`` (in ``thread``) waits on a lock; fail if it never does."""
    deadline = time.monotonic() + WAIT_S
    while thread.is_alive() and not _waits_on_a_lock(engine, session.pid):
        assert time.monotonic() < deadline, "the second session never waited on a lock"
        time.sleep(0.02)


@contextmanager
def _held_after(
    monkeypatch, seams: list[tuple[Any, str]], parties: int
) -> Iterator[threading.Barrier]:
    """DuckDB: every call of a seam's ``module.function`` waits, once it has run, until
    ``parties`` calls have run (each in its own uncommitted transaction), so that they commit
    together.  A party whose call ends without passing a seam (refused before) aborts the
    barrier, which lets the others go on."""
    barrier = threading.Barrier(parties, timeout=WAIT_S)
    for module, function in seams:
        original = getattr(module, function)

        def held(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            try:
                return _original(*args, **kwargs)
            finally:
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait()

        monkeypatch.setattr(module, function, held)
    yield barrier


def _both(engine, request, monkeypatch, first_sql: str, second_sql: str, seams: list) -> list:
    """``first_sql`` and ``second_sql`` run at once in two sessions, both past the point where
    each writes, neither committed: what each gave."""
    first, second = Session(engine, request, autocommit=False), Session(engine, request)
    try:
        if engine.name == "duckdb":
            with _held_after(monkeypatch, seams, parties=2) as barrier:

                def run(session: Session, sql: str) -> Any:
                    try:
                        return session.run(sql)
                    finally:
                        barrier.abort()  # passed by both already, or never to be by this one

                a, got_a = _in_thread(lambda: run(first, first_sql))
                b, got_b = _in_thread(lambda: run(second, second_sql))
                a.join(), b.join()
            return [got_a[0], got_b[0]]
        got_a = [first.run(first_sql)]
        b, got_b = _in_thread(lambda: second.run(second_sql))
        _when_waiting(engine, second, b)
        first.con.commit()
        b.join()
        return [got_a[0], got_b[0]]
    finally:
        first.close(), second.close()


def _after_a_commit(engine, request, first_sql: str, second: Session, second_sql: str) -> list:
    """PostgreSQL: ``first_sql`` runs in a session of its own and is not committed until
    ``second_sql`` (on ``second``, in a thread) waits on its lock; what ``second_sql`` gave."""
    first = Session(engine, request, autocommit=False)
    first.run(first_sql)  # not committed yet
    thread, got = _in_thread(lambda: second.run(second_sql))
    _when_waiting(engine, second, thread)
    first.con.commit()
    first.close()
    thread.join()
    return got


def _names(error: Any, *words: str) -> bool:
    text = str(error)
    return all(w in text for w in words)


def _is_loom_error(engine, error: Any) -> bool:
    if engine.name == "duckdb":
        return isinstance(error, loomdb.LoomError) and error.hint is not None
    return isinstance(error, psycopg.Error) and error.diag.message_hint is not None


def _one_made_one_refused(out: list) -> list:
    """The refused one of two calls' results (a summary's text, or an error), after checking
    that exactly one call made what it was asked for."""
    refused = [o for o in out if not isinstance(o, str)]
    assert len(refused) == 1 and len(out) == 2, out
    return refused


def test_two_first_trains_of_one_name_end_in_one_model_and_an_error_naming_it(
    engine, request, monkeypatch
):
    _load(engine)
    train = "SELECT loom_train('m', 't', 'y', '{\"epochs\": 2, \"progress\": false}')"
    out = _both(engine, request, monkeypatch, train, train, [(catalog, "put_model")])
    refused = _one_made_one_refused(out)
    assert _is_loom_error(engine, refused[0]) and _names(refused[0], "model", "'m'"), refused
    assert engine.rows("SELECT name, version FROM loom.models") == [("m", 1)]
    assert engine.rows("SELECT count(*) FROM loom.model_versions") == [(0,)]


def _index_tables(engine) -> list[str]:
    if engine.name == "duckdb":
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'loom_data'"
    else:
        sql = "SELECT relname FROM pg_class WHERE relnamespace = 'loom_data'::regnamespace"
        sql += " AND relkind = 'r'"
    return sorted(r[0] for r in engine.rows(sql))


def test_two_builds_of_one_index_name_keep_one_and_say_the_other_collided(
    engine, request, monkeypatch
):
    _load(engine)
    build = "SELECT loom_create_index('ix', 't', 'y', '{\"format\": \"dense\"}')"
    out = _both(engine, request, monkeypatch, build, build, [(layout, "_record_fingerprint")])
    refused = _one_made_one_refused(out)
    assert _is_loom_error(engine, refused[0]), refused
    assert _names(refused[0], "index 'ix'", "another session"), refused
    assert engine.rows("SELECT name FROM loom.indexes") == [("ix",)]
    assert _index_tables(engine) == ["ix"]  # no staged table left behind
    opts = json.dumps({"index": "ix", "epochs": 1, "progress": False})
    assert json.loads(engine.scalar(f"SELECT loom_train('m', 't', 'y', '{opts}')"))["model"] == "m"


def _is_conflict(engine, error: Any) -> bool:
    if engine.name == "duckdb":
        return isinstance(error, loomdb.LoomConflictError) and error.hint is not None
    return isinstance(error, psycopg.Error) and error.sqlstate == "40001"


def _catalog(engine) -> tuple[list, list]:
    return (
        engine.rows("SELECT name, version FROM loom.models ORDER BY 1, 2"),
        engine.rows("SELECT name, version FROM loom.model_versions ORDER BY 1, 2"),
    )


REPLACE = (
    "SELECT loom_train('m', 't', 'y', '{\"epochs\": 2, \"replace\": true, \"progress\": false}')"
)
DROP = "SELECT loom_drop_model('m')"
#: what a drop and a retrain of model 'm' (versions 1 and 2) may leave: both ran, the retrain
#: first or the drop first (a new model: version 1); or one alone, the other refused
SERIAL = [([], []), ([("m", 1)], []), ([("m", 3)], [("m", 1), ("m", 2)])]


@pytest.mark.parametrize("retrain_first", [True, False], ids=["retrain-first", "drop-first"])
def test_a_drop_and_a_retrain_of_one_model_at_once_end_as_one_after_the_other(
    engine, request, monkeypatch, retrain_first
):
    _load(engine)
    engine.rows(REPLACE), engine.rows(REPLACE)  # versions 1 and 2
    first, second = (REPLACE, DROP) if retrain_first else (DROP, REPLACE)
    seams = [(catalog, "put_model"), (catalog, "drop_model")]
    out = _both(engine, request, monkeypatch, first, second, seams)
    for outcome in out:
        assert isinstance(outcome, str) or _is_conflict(engine, outcome), out
    assert _catalog(engine) in SERIAL, (out, _catalog(engine))


def test_a_train_on_an_index_another_session_rebuilds_reads_one_whole_index(
    engine, request, monkeypatch
):
    """The train reads the index's catalog row and then its storage table: a rebuild
    committed in between must not pair the old row with the new table (whose checksums are
    over the new index's identity: the train said the index was damaged)."""
    _load(engine, rows=20000)
    engine.rows("SELECT loom_create_index('ix', 't', 'y', '{\"format\": \"mlweaving\"}')")
    trainer = Session(engine, request)
    try:
        if engine.name == "duckdb":
            got = _rebuilt_while_duckdb_trains(engine, trainer, monkeypatch)
        else:
            rebuild = "SELECT loom_reindex('ix')"
            got = _after_a_commit(engine, request, rebuild, trainer, TRAIN_ON_IX)
    finally:
        trainer.close()
    assert isinstance(got[0], str), got
    assert json.loads(got[0])["model"] == "m"


TRAIN_ON_IX = (
    "SELECT loom_train('m', 't', 'y', '{\"index\": \"ix\", \"epochs\": 2, \"progress\": false}')"
)


def _rebuilt_while_duckdb_trains(engine, trainer: Session, monkeypatch) -> list[Any]:
    """DuckDB: the train (in a thread) is held once it has read the index's catalog row and
    checked it fresh (a rebuild checks none) until the rebuild (here) has committed; what
    the train gave."""
    read, rebuilt = threading.Event(), threading.Event()
    original = layout.check_fresh

    def held(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        read.set()
        assert rebuilt.wait(WAIT_S)

    monkeypatch.setattr(layout, "check_fresh", held)
    thread, got = _in_thread(lambda: trainer.run(TRAIN_ON_IX))
    assert read.wait(WAIT_S), got
    engine.rows("SELECT loom_reindex('ix')")
    rebuilt.set()
    thread.join()
    return got


def test_a_build_if_not_exists_gives_the_index_another_session_built_meanwhile(
    engine, request, monkeypatch
):
    _load(engine)
    build = "SELECT loom_create_index('ix', 't', 'y', '{\"format\": \"dense\"}')"
    lenient = build.replace('"dense"', '"dense", "if_not_exists": true')
    second = Session(engine, request)
    try:
        if engine.name == "duckdb":
            got = _built_while_duckdb_builds(engine, second, lenient, build, monkeypatch)
        else:
            got = _after_a_commit(engine, request, build, second, lenient)
    finally:
        second.close()
    assert isinstance(got[0], str), got
    assert json.loads(got[0])["name"] == "ix"
    assert engine.rows("SELECT name FROM loom.indexes") == [("ix",)]
    assert _index_tables(engine) == ["ix"]


def _built_while_duckdb_builds(engine, second: Session, lenient: str, build: str, monkeypatch):
    """DuckDB: ``lenient`` (in a thread) is held once it has laid its rows out until
    ``build`` (here) has run and committed; what ``lenient`` gave."""
    laid, built = threading.Event(), threading.Event()
    original = layout._record_fingerprint

    def held(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        if not laid.is_set():  # the first build to get here: the thread's
            laid.set()
            assert built.wait(WAIT_S)

    monkeypatch.setattr(layout, "_record_fingerprint", held)
    thread, got = _in_thread(lambda: second.run(lenient))
    assert laid.wait(WAIT_S), got
    engine.rows(build)
    built.set()
    thread.join()
    return got


def test_a_rebuild_meeting_a_drop_of_its_index_does_not_bring_it_back(engine, request, monkeypatch):
    _load(engine)
    engine.rows("SELECT loom_create_index('ix', 't', 'y', '{\"format\": \"dense\"}')")
    rebuild, drop = "SELECT loom_reindex('ix')", "SELECT loom_drop_index('ix')"
    second = Session(engine, request)
    try:
        if engine.name == "duckdb":
            got = _built_while_duckdb_builds(engine, second, rebuild, drop, monkeypatch)
        else:
            got = _after_a_commit(engine, request, drop, second, rebuild)
    finally:
        second.close()
    assert _is_loom_error(engine, got[0]) and _names(got[0], "index 'ix'"), got
    assert engine.rows("SELECT name FROM loom.indexes") == []
    assert _index_tables(engine) == []


def test_a_deploy_and_a_drop_of_one_model_at_once_leave_no_function_of_a_dropped_model(
    engine, request, monkeypatch
):
    _load(engine)
    engine.rows(REPLACE)
    seams = [(catalog, "drop_model"), (catalog, "put_deployment")]
    out = _both(engine, request, monkeypatch, DROP, "SELECT loom_deploy('m')", seams)
    for outcome in out:
        assert isinstance(outcome, str) or _is_loom_error(engine, outcome), out
    if engine.rows("SELECT name FROM loom.models") == []:
        assert engine.rows("SELECT function FROM loom.deployments") == [], out
        assert _functions_named(engine, "predict_m") == 0, out


def _functions_named(engine, name: str) -> int:
    if engine.name == "duckdb":
        sql = f"SELECT count(*) FROM duckdb_functions() WHERE function_name = '{name}'"
    else:
        sql = f"SELECT count(*) FROM pg_proc WHERE proname = '{name}'"
    return int(engine.scalar(sql))
