"""DuckDB as users drive it: errors from worker threads, models never served stale or from
another database, one version per statement, interrupts, read-only files, transactions."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import loomdb
from loomdb.bench.tables import load_duckdb
from support.ctrl_c import ctrl_c_once


def _constant_model(con, name: str, value: float, replace: bool = False) -> None:
    """A linear model that predicts ``value`` (up to training error) for every row."""
    opts = json.dumps({"model": "linear", "replace": replace, "progress": False})
    con.execute(
        f"SELECT loom_train('{name}', 'SELECT x, {value} + 0 * x AS y FROM src', 'y', '{opts}')"
    ).fetchall()


@pytest.fixture
def con():
    c = loomdb.connect(progress=False)
    c.execute(
        "CREATE TABLE src AS SELECT (i % 97)::DOUBLE AS x, (i % 5)::DOUBLE AS z "
        "FROM range(2000) r(i)"
    )
    yield c
    c.close()


@pytest.mark.parametrize("threads", [1, 4])
def test_loomdb_errors_reach_the_caller_from_any_thread(con, threads):
    con.execute(f"SET threads = {threads}")
    con.execute("CREATE TABLE big AS SELECT i::DOUBLE AS x FROM range(300000) r(i)")
    for _ in range(60):
        with pytest.raises(loomdb.LoomNotFoundError, match="model 'nosuch' does not exist"):
            con.execute("SELECT sum(loom_predict('nosuch', [x])) FROM big").fetchall()
        with pytest.raises(loomdb.LoomOptionError, match="unknown loom_train option"):
            con.execute("SELECT loom_train('m', 'src', 'x', '{\"epoch\": 1}')").fetchall()


LATE = (  # the error comes from a vector after the first ones: from a fetch, not execute
    "SELECT i, loom_predict(CASE WHEN i < 9000 THEN 'm' ELSE 'nosuch' END, [x]) AS p "
    "FROM range(10000) r(i), (SELECT i / 10000 AS x)"
)
FETCHES = {
    "fetchall": lambda r: r.fetchall(),
    "fetchmany": lambda r: [r.fetchmany(1000) for _ in range(11)],
    "fetchone": lambda r: [r.fetchone() for _ in range(10001)],
    "fetchnumpy": lambda r: r.fetchnumpy(),
    "to_arrow_table": lambda r: r.to_arrow_table(),
    "to_arrow_reader": lambda r: r.to_arrow_reader(1000).read_all(),
}


@pytest.fixture
def late(con):
    _constant_model(con, "m", 1.0)
    return con


@pytest.mark.filterwarnings("ignore:Arrow output on a DB-API result")
@pytest.mark.parametrize("fetch", FETCHES)
@pytest.mark.parametrize("threads", [1, 4])
def test_an_error_a_fetch_meets_is_the_loom_error(late, fetch, threads):
    # a result streams: DuckDB's InvalidInputException carrying "CarriedError: …" reached the
    # caller from every fetch after the first vectors
    late.execute(f"SET threads = {threads}")
    for con in (late, late.cursor()):
        result = con.execute(LATE)
        assert result is con
        with pytest.raises(loomdb.LoomNotFoundError, match="model 'nosuch' does not exist") as e:
            FETCHES[fetch](result)
        assert e.value.hint and "loom_train" in e.value.hint
        assert con.execute("SELECT 42").fetchall() == [(42,)]  # the connection goes on


RELATION_READS = {
    "fetchall": lambda r: r.fetchall(),
    "to_arrow_table": lambda r: r.to_arrow_table(),
    "to_arrow_reader": lambda r: r.to_arrow_reader(1000).read_all(),
    "iter_rows": lambda r: list(r.iter_rows()),
    "a derived relation": lambda r: r.aggregate("sum(p)").fetchall(),
    "grouped": lambda r: r.group_by("p").agg("count(*)").fetchall(),
    "printed": str,
}


@pytest.mark.parametrize("read", RELATION_READS)
def test_a_relation_raises_the_loom_error_when_it_is_read(late, read):
    # con.sql() returned DuckDB's relation, which runs only when read: outside the translation
    for relation in (late.sql(LATE), late.sql("SELECT 1").query("v", LATE)):
        with pytest.raises(loomdb.LoomNotFoundError, match="model 'nosuch' does not exist"):
            RELATION_READS[read](relation)
    early = late.table("src").project("loom_predict('nosuch', [x]) AS p")
    with pytest.raises(loomdb.LoomNotFoundError):
        RELATION_READS[read](early)


LATE_NOTE = (
    "statement 2 of 2 (SELECT i, loom_predict(CASE WHEN i < 9000 THEN…) failed; statement 1 "
    "before it ran and was committed"
)


@pytest.mark.filterwarnings("ignore:Arrow output on a DB-API result")
@pytest.mark.parametrize("fetch", FETCHES)
def test_a_scripts_last_statement_failing_in_a_fetch_says_what_ran(late, fetch):
    """A script whose last statement failed only when its rows were fetched (a result
    streams) got no note of what had run: ``con.execute`` gave it to an error of the
    statement's start alone, and ``loomdb sql`` (``each``) none."""
    late.execute("CREATE TABLE ran (x INTEGER)")
    with pytest.raises(loomdb.LoomNotFoundError) as caught:
        FETCHES[fetch](late.execute(f"INSERT INTO ran VALUES (1); {LATE}"))
    assert caught.value.__notes__ == [LATE_NOTE]
    with pytest.raises(loomdb.LoomNotFoundError) as caught:
        for cur in late.each(f"INSERT INTO ran VALUES (2); {LATE}"):
            FETCHES[fetch](cur)
    assert caught.value.__notes__ == [LATE_NOTE]
    assert late.execute("SELECT count(*) FROM ran").fetchall() == [(2,)]
    with pytest.raises(loomdb.LoomNotFoundError) as caught:  # a statement of its own: no note
        FETCHES[fetch](late.execute("SELECT 1").execute(LATE))
    assert not getattr(caught.value, "__notes__", None)


@pytest.mark.parametrize(
    "read", ["fetchall", "to_arrow_table", "to_arrow_reader", "iter_rows", "printed"]
)
def test_a_scripts_relation_that_fails_when_read_says_what_ran(late, read):
    """``con.sql`` of a script returns its last statement's relation, which runs when read: an
    error there got no note of what the statements before it had done (one of a relation
    made from it, which runs more than the statement, gets none)."""
    late.execute("CREATE TABLE ran (x INTEGER)")
    relation = late.sql(f"INSERT INTO ran VALUES (1); {LATE}")
    for _ in range(2):  # each read that fails
        with pytest.raises(loomdb.LoomNotFoundError) as caught:
            RELATION_READS[read](relation)
        assert caught.value.__notes__ == [LATE_NOTE]
    assert late.execute("SELECT count(*) FROM ran").fetchall() == [(1,)]
    with pytest.raises(loomdb.LoomNotFoundError) as caught:
        RELATION_READS["a derived relation"](relation)
    assert not getattr(caught.value, "__notes__", None)


def test_a_raw_connections_error_names_the_loom_error_and_its_hint():
    """Where no loomdb connection reads the error back (a raw connection given to register, as
    dbt-duckdb's is), DuckDB's text is what the user sees: it names the LoomError's class and
    carries its hint (it said "CarriedError")."""
    raw = duckdb.connect()
    loomdb.register(raw)
    with pytest.raises(duckdb.Error) as caught:
        raw.execute("SELECT loom_predict('nosuch', [1.0])").fetchall()
    raw.close()
    text = str(caught.value)
    assert "UDF: LoomNotFoundError: model 'nosuch' does not exist (hint: train it" in text
    assert "CarriedError" not in text


def test_a_relation_is_duckdbs_in_every_other_way(late):
    a, b = late.sql("SELECT 1 AS i UNION ALL SELECT 2"), late.sql("SELECT 2 AS i")
    assert isinstance(a.duckdb, duckdb.DuckDBPyRelation)
    assert a.columns == ["i"] and len(a) == 2 and "i" in a
    assert sorted(a.union(b).fetchall()) == [(1,), (2,), (2,)]  # a Relation argument unwrapped
    assert a.join(b.set_alias("b"), "i").fetchall() == [(2,)]
    assert pa.table(a).num_rows == 2 and a["i"].fetchall() == [(1,), (2,)]
    assert late.execute("CREATE TABLE made AS SELECT 1 AS i") is late
    assert late.execute("SELECT count(*) FROM made").fetchone() == (1,)


def test_a_model_of_one_database_is_never_used_in_another(tmp_path):
    for attempt in range(30):
        predictions = []
        for path, value in (
            (tmp_path / f"a{attempt}.duckdb", 1.0),
            (tmp_path / f"b{attempt}.duckdb", 5.0),
        ):
            c = loomdb.connect(str(path), progress=False)
            c.execute("CREATE TABLE src AS SELECT (i % 13)::DOUBLE AS x FROM range(500) r(i)")
            _constant_model(c, "m", value)
            predictions.append(c.execute("SELECT loom_predict('m', [3.0])").fetchall()[0][0])
            c.close()
        assert abs(predictions[0] - 1.0) < 0.1 and abs(predictions[1] - 5.0) < 0.1


def test_a_database_opened_again_serves_its_current_model(tmp_path):
    """Transaction ids start again when a file is opened again in this process: a pin by
    transaction id alone served the first opening's model after a retrain."""
    path = str(tmp_path / "again.duckdb")

    def retrained(value: float) -> float:
        c = loomdb.connect(path, progress=False)
        c.execute(
            "CREATE OR REPLACE TABLE src AS SELECT (i % 13)::DOUBLE AS x FROM range(500) r(i)"
        )
        _constant_model(c, "m", value, replace=True)
        c.close()
        c = loomdb.connect(path, progress=False)
        try:
            return c.execute("SELECT loom_predict('m', [3.0])").fetchall()[0][0]
        finally:
            c.close()

    for value in (1.0, 5.0, 9.0):
        assert abs(retrained(value) - value) < 0.1


def test_copies_of_one_database_file_keep_their_own_models_and_tables(tmp_path):
    """A copy holds the database id of its original; both open at once stay two databases."""
    import shutil

    a_path, b_path = str(tmp_path / "a.duckdb"), str(tmp_path / "b.duckdb")
    a = loomdb.connect(a_path, progress=False)
    a.execute("CREATE TABLE src AS SELECT (i % 13)::DOUBLE AS x FROM range(500) r(i)")
    _constant_model(a, "m", 1.0)
    a.close()
    shutil.copy(a_path, b_path)
    b = loomdb.connect(b_path, progress=False)
    _constant_model(b, "m", 5.0, replace=True)
    a = loomdb.connect(a_path, progress=False)
    try:
        assert abs(a.execute("SELECT loom_predict('m', [3.0])").fetchall()[0][0] - 1.0) < 0.1
        assert abs(b.execute("SELECT loom_predict('m', [3.0])").fetchall()[0][0] - 5.0) < 0.1
        a.execute("CREATE TABLE only_in_a AS SELECT x, x AS y FROM src")  # read by a's train
        _constant_model(a, "m2", 2.0)
        opts = '{"model": "linear", "epochs": 1, "progress": false}'
        a.execute(f"SELECT loom_train('m3', 'only_in_a', 'y', '{opts}')").fetchall()
    finally:
        a.close()
        b.close()


def test_a_streaming_statement_keeps_its_version_however_many_run_meanwhile(con):
    """A connection runs one statement at a time, so its pins last as long as its statement:
    not evicted by statements on other connections (they were after 256)."""
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE big AS SELECT (i % 97)::DOUBLE AS x FROM range(2000000) r(i)")
    _constant_model(con, "m", 1.0)
    result = con.execute("SELECT round(loom_predict('m', [x])) FROM big")
    first = result.fetchmany(5000)
    other = con.cursor()
    _constant_model(other, "m", 5.0, replace=True)
    for _ in range(300):
        assert other.execute("SELECT round(loom_predict('m', [3.0]))").fetchall() == [(5.0,)]
    assert {v for (v,) in first + result.fetchall()} == {1.0}


def test_features_as_a_fixed_size_array_predict_as_a_list_does(con):
    opts = json.dumps({"epochs": 2, "progress": False})
    con.execute(f"SELECT loom_train('m', 'SELECT x, z, x > 40 AS y FROM src', 'y', '{opts}')")
    listed = "SELECT loom_predict_proba('m', {}) FROM src ORDER BY x, z"
    want = con.execute(listed.format("[x, z]")).fetchall()
    for kind in ("DOUBLE[2]", "FLOAT[2]", "INTEGER[2]"):
        got = con.execute(listed.format(f"CAST([x, z] AS {kind})")).fetchall()
        assert got == want, kind
    nulls = "SELECT loom_predict('m', CAST([1, NULL] AS DOUBLE[2])), loom_predict('m', {})"
    assert con.execute(nulls.format("CAST(NULL AS DOUBLE[2])")).fetchall() == [(None, None)]


NOT_NUMBERS = ["DATE '1970-01-11'", "TIMESTAMP '1970-01-01 00:00:01'", "TIME '01:00'", "'abc'"]


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_a_list_of_what_is_not_a_number_is_a_loom_error_in_every_function(con, value):
    # a DATE was scored as its days (10), a TIMESTAMP as microseconds, text raised a raw
    # ValueError; loom_predict_proba and the sparse forms refused them in DuckDB's binder
    opts = json.dumps({"epochs": 2, "progress": False})
    con.execute(f"SELECT loom_train('m', 'SELECT x, x > 40 AS y FROM src', 'y', '{opts}')")
    con.execute(
        f"SELECT loom_train('s', 'SELECT [0] AS i, [x] AS v, x > 40 AS y FROM src', 'y', '{opts}')"
    )
    for call, argument in [
        (f"loom_predict('m', [{value}])", "the features"),
        (f"loom_predict_class('m', [{value}])", "the features"),
        (f"loom_predict_proba('m', [{value}])", "the features"),
        (f"loom_predict_sparse('s', [0], [{value}])", "feature_values"),
        (f"loom_predict_proba_sparse('s', [{value}], [1.0])", "feature_indices"),
    ]:
        with pytest.raises(loomdb.LoomOptionError, match=f"takes {argument} as a LIST of") as e:
            con.execute(f"SELECT {call} FROM src").fetchall()
        assert e.value.hint and "cast" in e.value.hint, call


def test_booleans_are_numbers_0_and_1_in_every_function(con):
    opts = json.dumps({"epochs": 2, "progress": False})
    con.execute(f"SELECT loom_train('m', 'SELECT x, z, x > 40 AS y FROM src', 'y', '{opts}')")
    con.execute(
        f"SELECT loom_train('s', 'SELECT [0] AS i, [x] AS v, x > 40 AS y FROM src', 'y', '{opts}')"
    )
    for form in (
        "loom_predict('m', {})",
        "loom_predict_proba('m', {})",
        "loom_predict_class('m', {})",
    ):
        as_booleans = form.format("[x > 40, z > 2]")
        as_numbers = form.format("[(x > 40)::INTEGER, (z > 2)::DOUBLE]")
        rows = con.execute(f"SELECT {as_booleans}, {as_numbers} FROM src").fetchall()
        assert all(a == b for a, b in rows), form
    sparse = "loom_predict_proba_sparse('s', [0], {})"
    rows = con.execute(
        f"SELECT {sparse.format('[x > 40]')}, {sparse.format('[(x > 40)::DOUBLE]')} FROM src"
    ).fetchall()
    assert all(a == b for a, b in rows)


def test_a_list_of_intervals_is_a_loom_error_not_a_crash():
    # Arrow's to_numpy of an INTERVAL list killed the process with a segmentation fault
    script = (
        "import loomdb\n"
        "con = loomdb.connect(progress=False)\n"
        "con.execute('CREATE TABLE t AS SELECT i / 200 AS x, i % 2 AS y FROM range(200) r(i)')\n"
        "con.execute(\"SELECT loom_train('m', 't', 'y')\").fetchall()\n"
        "try:\n"
        "    con.execute(\"SELECT loom_predict('m', [INTERVAL 1 DAY])\").fetchall()\n"
        "except loomdb.LoomOptionError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "loom_predict takes the features as a LIST of numbers" in done.stdout


def test_a_changed_or_deleted_catalog_row_is_seen_at_once(con):
    _constant_model(con, "m", 2.0)
    before = con.execute("SELECT loom_predict('m', [3.0])").fetchall()[0][0]
    con.execute("UPDATE loom.models SET intercept = '[100.0]' WHERE name = 'm'")
    after = con.execute("SELECT loom_predict('m', [3.0])").fetchall()[0][0]
    assert abs(before - 2.0) < 0.1 and after > 90
    con.execute("DELETE FROM loom.models WHERE name = 'm'")
    with pytest.raises(loomdb.LoomNotFoundError):
        con.execute("SELECT loom_predict('m', [3.0])").fetchall()


def test_one_statement_sees_one_version_while_another_thread_replaces(tmp_path):
    path = str(tmp_path / "race.duckdb")
    con = loomdb.connect(path, progress=False)
    con.execute("CREATE TABLE src AS SELECT (i % 97)::DOUBLE AS x FROM range(2000) r(i)")
    con.execute("CREATE TABLE big AS SELECT (i % 97)::DOUBLE AS x FROM range(400000) r(i)")
    con.execute("SET threads = 4")
    _constant_model(con, "m", 1.0)
    stop = threading.Event()
    failures: list[BaseException] = []

    def replacer() -> None:
        writer = con.cursor()
        value = 1.0
        try:
            while not stop.is_set():
                value = 6.0 - value  # 1, 5, 1, 5 …
                opts = json.dumps({"model": "linear", "replace": True, "progress": False})
                writer.execute(
                    f"SELECT loom_train('m', 'SELECT x, {value} + 0 * x AS y FROM src', 'y', "
                    f"'{opts}')"
                ).fetchall()
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    thread = threading.Thread(target=replacer)
    thread.start()
    try:
        for _ in range(25):
            seen = con.execute("SELECT DISTINCT round(loom_predict('m', [x])) FROM big").fetchall()
            assert len(seen) == 1, f"one statement mixed model versions: {seen}"
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
    con.close()


def test_two_replacing_trains_of_one_name_give_a_loom_error_or_serialise(tmp_path):
    path = str(tmp_path / "replace.duckdb")
    con = loomdb.connect(path, progress=False)
    con.execute("CREATE TABLE src AS SELECT (i % 97)::DOUBLE AS x FROM range(20000) r(i)")
    _constant_model(con, "m", 1.0)
    outcomes: list[BaseException | None] = []

    def train(value: float) -> None:
        cur = con.cursor()
        opts = json.dumps({"model": "linear", "replace": True, "progress": False, "epochs": 30})
        try:
            cur.execute(
                f"SELECT loom_train('m', 'SELECT x, {value} + 0 * x AS y FROM src', 'y', '{opts}')"
            ).fetchall()
            outcomes.append(None)
        except BaseException as e:  # noqa: BLE001 - judged below
            outcomes.append(e)

    threads = [threading.Thread(target=train, args=(v,)) for v in (2.0, 3.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for outcome in outcomes:
        assert outcome is None or (
            isinstance(outcome, loomdb.LoomConflictError) and "model 'm'" in str(outcome)
        ), repr(outcome)
    assert con.execute("SELECT count(*) FROM loom.models WHERE name = 'm'").fetchall() == [(1,)]
    con.close()


class _Says(logging.Handler):
    """Sets ``event`` once a ``loomdb.progress`` message holds ``words``."""

    def __init__(self, words: str, event: threading.Event):
        super().__init__(logging.INFO)
        self.words, self.event = words, event

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.event.set()


def test_interrupt_stops_a_train(caplog):
    """The interrupt is sent once the train says its first epoch ran (no timing assumed: a
    fixed sleep lost the interrupt on a slow machine, sent before the train began, and the
    test then waited for 100,000 epochs)."""
    caplog.set_level(logging.INFO, logger="loomdb.progress")
    training = threading.Event()
    says = _Says("loom_train slow: epoch ", training)
    logging.getLogger("loomdb.progress").addHandler(says)
    con = loomdb.connect()  # progress on: its epochs reach the logger
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 20))
    load_duckdb(con.duckdb, "long", X, (X[:, 0] > 0).astype(float))
    errors: list[BaseException] = []

    def train() -> None:
        try:
            con.execute(
                "SELECT loom_train('slow', 'long', 'y', '{\"epochs\": 100000, \"tol\": 0}')"
            ).fetchall()
        except BaseException as e:  # noqa: BLE001 - judged below
            errors.append(e)

    thread = threading.Thread(target=train)
    thread.start()
    try:
        assert training.wait(timeout=120), f"no epoch said within two minutes: {errors}"
        asked = time.monotonic()
        con.interrupt()
        thread.join(timeout=30)
        stopped = time.monotonic() - asked
    finally:
        logging.getLogger("loomdb.progress").removeHandler(says)
        if thread.is_alive():
            con.interrupt()
            thread.join(timeout=30)
    assert not thread.is_alive() and stopped < 5, f"still running {stopped:.1f} s after interrupt"
    assert errors and isinstance(errors[0], loomdb.LoomInterrupted), errors
    assert con.execute("SELECT count(*) FROM loom.models WHERE name = 'slow'").fetchall() == [(0,)]
    con.close()


CTRL_C_SCRIPT = """
import signal, sys
import loomdb
con = loomdb.connect(sys.argv[1])
con.execute("SET progress_bar_time = 0")  # DuckDB's bar on stdout, drawn every run
con.execute("CREATE TABLE t AS SELECT i::DOUBLE AS a, (i % 2)::DOUBLE AS y FROM range(500000) r(i)")
train = "SELECT loom_train('m', 't', 'y', '{\\"epochs\\": 100000, \\"tol\\": 0}')"
try:
    con.execute(train) if sys.argv[2] == "execute" else con.sql(train).fetchall()
except loomdb.LoomInterrupted as e:
    print("stopped:", e, file=sys.stderr)
print("handler restored:", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      file=sys.stderr)
"""


@pytest.mark.parametrize("run", ["execute", "a relation read"])
def test_ctrl_c_in_a_script_stops_a_train_with_loomdbs_error_and_writes_nothing(tmp_path, run):
    """SIGINT while loom_train runs in a Python script (``con.execute``, or ``con.sql``'s
    relation, which runs when read): LoomInterrupted within a batch, and Python's own handler
    afterwards; it went unseen (KeyboardInterrupt reaches only the main thread, waiting in
    DuckDB) or broke the layout's UDF with a KeyboardInterrupt."""
    path = str(tmp_path / "c.duckdb")
    code, _, rest = ctrl_c_once(
        [sys.executable, "-c", CTRL_C_SCRIPT, path, run], "loom_train m: "
    )  # laying out or training: either must stop
    assert code == 0, rest
    # loomdb's check between batches or DuckDB's interrupt of the statement, whichever first
    assert "stopped: interrupted: the " in rest and " was cancelled" in rest, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert "handler restored: True\n" in rest, rest
    con = loomdb.connect(path, progress=False)
    assert con.execute("SELECT count(*) FROM loom.models").fetchall() == [(0,)]
    con.close()


CTRL_C_READ_SCRIPT = """
import signal, sys
import loomdb
con = loomdb.connect(sys.argv[1])
con.execute("SET progress_bar_time = 0")  # DuckDB's bar on stdout, drawn every run
con.execute("CREATE TABLE t AS SELECT i::DOUBLE AS a, (i % 2)::DOUBLE AS y FROM range(500000) r(i)")
late = ("SELECT i, CASE WHEN i = 150000 THEN loom_train('m', 't', 'y', "
        "'{\\"epochs\\": 100000, \\"tol\\": 0}') END FROM range(200000) r(i)")
rel = con.sql(late)
rows = rel.to_arrow_reader(1000) if sys.argv[2] == "reader" else rel.iter_rows()
print("reading", file=sys.stderr, flush=True)
try:
    for _ in rows:
        pass
except loomdb.LoomInterrupted as e:
    print("stopped:", e, file=sys.stderr)
print("handler restored:", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      file=sys.stderr)
"""


@pytest.mark.parametrize("read", ["reader", "iter_rows"])
def test_ctrl_c_while_a_reader_is_read_stops_the_train_it_runs(tmp_path, read):
    """A relation's ``to_arrow_reader`` and ``iter_rows`` return before their rows are read,
    and the reads ran without the connection's Ctrl-C handler: the train in a later row ran on
    (or Python's KeyboardInterrupt broke it) instead of stopping with LoomInterrupted."""
    path = str(tmp_path / "r.duckdb")
    code, _, rest = ctrl_c_once(
        [sys.executable, "-c", CTRL_C_READ_SCRIPT, path, read], "loom_train m: "
    )
    assert code == 0, rest
    assert "stopped: interrupted: the " in rest and " was cancelled" in rest, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert "handler restored: True\n" in rest, rest


def test_a_relation_read_after_an_interrupt_runs(con):
    """An interrupt stops the statement it meets; a relation's later read was refused too (the
    mark stayed set until the next ``execute``)."""
    rel = con.sql("SELECT loom_train('m', 'src', 'z', '{\"model\": \"linear\", \"epochs\": 2}')")
    con.interrupt()  # nothing running
    assert json.loads(rel.fetchall()[0][0])["model"] == "m"


def test_a_closed_connection_or_its_cursor_says_so_with_a_hint():
    """It was DuckDB's raw ConnectionException ('Connection already closed!')."""
    con = loomdb.connect(progress=False)
    cursor = con.cursor()
    con.close()
    calls = (
        lambda: con.execute("SELECT 1"),
        lambda: con.sql("SELECT 1"),
        lambda: con.table("t"),
        lambda: cursor.execute("SELECT loom_predict('m', [1.0])"),
    )
    for call in calls:
        with pytest.raises(loomdb.LoomStateError, match="connection is closed") as e:
            call()
        assert e.value.hint and "loomdb.connect()" in e.value.hint
        assert isinstance(e.value.__cause__, duckdb.ConnectionException)


def test_a_callers_own_sigint_handler_stays_and_threads_set_none(con):
    import signal

    def own(signum, frame):
        raise AssertionError("not called")

    previous = signal.signal(signal.SIGINT, own)
    try:
        assert con.execute("SELECT 1").fetchall() == [(1,)]
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(con.cursor().execute("SELECT 2")))
    thread.start()
    thread.join(timeout=30)
    assert done and done[0].fetchall() == [(2,)]  # no handler set (only the main thread may)


def test_a_database_that_cannot_be_opened_is_a_loom_error_with_a_hint(tmp_path):
    """It was DuckDB's raw IOException (no hint); DuckDB's error stays as the cause."""
    not_a_database = tmp_path / "notes.duckdb"
    not_a_database.write_text("not a database")
    for path in (str(tmp_path / "no" / "such" / "x.duckdb"), str(not_a_database)):
        with pytest.raises(loomdb.LoomDatabaseError, match="could not open the DuckDB") as e:
            loomdb.connect(path, progress=False)
        assert e.value.hint and "folder that exists" in e.value.hint
        assert isinstance(e.value.__cause__, duckdb.IOException)
    assert not_a_database.read_text() == "not a database"
    assert not (tmp_path / "no").exists()
    with pytest.raises(loomdb.LoomOptionError, match="not recognized") as e:
        loomdb.connect(progress=False, no_such_setting=1)
    assert e.value.hint and "duckdb_settings()" in e.value.hint


def test_a_read_only_database_predicts_and_refuses_writes_clearly(tmp_path):
    path = str(tmp_path / "ro.duckdb")
    con = loomdb.connect(path, progress=False)
    con.execute("CREATE TABLE src AS SELECT (i % 97)::DOUBLE AS x FROM range(2000) r(i)")
    _constant_model(con, "m", 4.0)
    con.close()
    ro = loomdb.connect(path, read_only=True, progress=False)
    assert abs(ro.execute("SELECT loom_predict('m', [1.0])").fetchall()[0][0] - 4.0) < 0.1
    assert json.loads(ro.execute("SELECT loom_model_info('m')").fetchall()[0][0])["kind"]
    with pytest.raises(loomdb.LoomStateError, match="read-only"):
        ro.execute("SELECT loom_train('n', 'src', 'x')").fetchall()
    ro.close()
    fresh = tmp_path / "empty.duckdb"
    loomdb.connect(str(fresh), progress=False).duckdb.execute("SELECT 1").fetchall()
    loomdb.connect(str(fresh), read_only=True, progress=False).close()


def test_a_read_only_database_without_a_catalog_says_so_with_a_hint(tmp_path):
    """It was DuckDB's 'Table with name "loom.models" does not exist', without a hint."""
    path = str(tmp_path / "plain.duckdb")
    plain = duckdb.connect(path)
    plain.execute("CREATE TABLE t AS SELECT 1.0 AS x").fetchall()
    plain.close()
    ro = loomdb.connect(path, read_only=True, progress=False)
    for call in ("loom_predict('m', [1.0])", "loom_model_info('m')"):
        with pytest.raises(loomdb.LoomNotFoundError, match="no loomdb catalog") as e:
            ro.execute(f"SELECT {call}").fetchall()
        assert e.value.hint and "writable" in e.value.hint
    ro.close()
    raw = duckdb.connect(path, read_only=True)
    loomdb.register(raw, progress=False)
    with pytest.raises(duckdb.Error, match="no loomdb catalog.*hint: open it writable"):
        raw.execute("SELECT loom_predict('m', [1.0])").fetchall()
    raw.close()


def test_a_train_inside_an_open_transaction_is_refused(con):
    con.execute("BEGIN")
    with pytest.raises(loomdb.LoomStateError, match="open transaction"):
        con.execute("SELECT loom_train('t', 'src', 'z', '{\"model\": \"linear\"}')").fetchall()
    con.execute("ROLLBACK")
    con.begin()
    with pytest.raises(loomdb.LoomStateError, match="open transaction"):
        con.execute("SELECT loom_create_index('i', 'src', 'z')").fetchall()
    con.rollback()
    con.execute("SELECT loom_train('t', 'src', 'z', '{\"model\": \"linear\"}')").fetchall()
    cursor = con.cursor()  # a cursor of loomdb's connection tracks its own transactions
    cursor.execute("BEGIN")
    with pytest.raises(loomdb.LoomStateError, match="open transaction"):
        cursor.execute("SELECT loom_drop_model('t')").fetchall()
    cursor.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM loom.models").fetchall() == [(1,)]


def test_the_transaction_is_followed_by_what_duckdb_did_not_by_the_first_word(con):
    """The connection took a BEGIN that DuckDB refused (PostgreSQL's ISOLATION LEVEL) for an
    open transaction: a train was then refused "inside an open transaction" that did not
    exist, and a failed script's note said statements DuckDB had committed were not.  It took
    ROLLBACK TO SAVEPOINT (which DuckDB refuses, leaving the transaction open and aborted) for
    the end of the transaction, as if a ROLLBACK had run."""
    train = "SELECT loom_train('t', 'src', 'z', '{\"model\": \"linear\", \"epochs\": 1}')"
    with pytest.raises(duckdb.ParserException):
        con.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
    assert json.loads(con.execute(train).fetchall()[0][0])["model"] == "t"
    con.execute("CREATE TABLE ran (x INTEGER)")
    with pytest.raises(duckdb.Error) as caught:
        con.execute("INSERT INTO ran VALUES (1); SELECT x FROM nosuch_ran")
    assert caught.value.__notes__ == [
        "statement 2 of 2 (SELECT x FROM nosuch_ran) failed; statement 1 before it ran and was "
        "committed"
    ]
    assert con.execute("SELECT count(*) FROM ran").fetchall() == [(1,)]
    con.execute("BEGIN")
    con.execute("INSERT INTO ran VALUES (2)")
    with pytest.raises(duckdb.ParserException):
        con.execute("ROLLBACK TO SAVEPOINT s")
    assert con.state.in_transaction  # still open (and aborted): only ROLLBACK ends it
    with pytest.raises(duckdb.TransactionException, match="aborted"):
        con.execute("SELECT 1")
    con.execute("ROLLBACK")
    assert not con.state.in_transaction
    assert con.execute("SELECT count(*) FROM ran").fetchall() == [(1,)]


def test_progress_reaches_python_users_by_default():
    script = (
        "import loomdb\n"
        "c = loomdb.connect()\n"
        'c.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y '
        'FROM range(100) r(i)")\n'
        "c.execute(\"SELECT loom_train('m', 't', 'y', '{\\\"epochs\\\": 2}')\").fetchall()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "loom_train m: laying out 100 rows of t as dense" in done.stderr


def test_progress_goes_to_logging_when_it_is_configured(caplog):
    caplog.set_level(logging.INFO, logger="loomdb.progress")
    c = loomdb.connect()
    c.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(100) r(i)")
    c.execute("SELECT loom_train('m', 't', 'y', '{\"epochs\": 2, \"tol\": 0}')").fetchall()
    c.close()
    epochs = [r.message for r in caplog.records if "epoch" in r.message]
    assert len(epochs) == 2 and epochs[0].startswith("loom_train m: epoch 1/2")


def test_a_train_says_when_its_rows_exceed_the_cache(caplog):
    caplog.set_level(logging.INFO, logger="loomdb.progress")
    c = loomdb.connect()
    c.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(100) r(i)")
    for cache in (256, 0):
        options = json.dumps({"epochs": 1, "cache_mb": cache, "replace": True})
        c.execute(f"SELECT loom_train('m', 't', 'y', '{options}')").fetchall()
    c.close()
    said = [r.message for r in caplog.records if "cache_mb" in r.message]
    assert said == [
        "loom_train m: the rows take 0.0016 MB, more than cache_mb (0): they go to a temporary "
        'table that every epoch reads back; "cache_mb": 1 or more keeps them in memory'
    ]


def test_stored_payloads_come_as_views_of_arrow_buffers():
    """The storage reader's query: BLOBs are slices of the result's Arrow buffer, not one
    Python ``bytes`` copy each; NULL stays None, an empty BLOB is an empty view."""
    import duckdb

    from loomdb.engines.duckdb.database import DuckDatabase
    from loomdb.engines.duckdb.state import ConnectionState

    raw = duckdb.connect()
    raw.execute("CREATE TABLE t (i INTEGER, b BLOB)")
    raw.execute(
        "INSERT INTO t VALUES (1, 'ab'::BLOB), (2, NULL), (3, ''::BLOB), (4, '\\x00\\xFFz'::BLOB)"
    )
    db = DuckDatabase(raw.cursor(), ConnectionState("test"))
    rows = db.query_blobs("SELECT i, b FROM t WHERE i >= $1 ORDER BY i", [1])
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    views = [r[1] for r in rows]
    assert views[1] is None
    assert [bytes(v) for v in (views[0], views[2], views[3])] == [b"ab", b"", b"\x00\xffz"]
    assert all(isinstance(v, memoryview) for v in (views[0], views[2], views[3]))
    assert views[0].obj is views[3].obj  # one buffer for the column, sliced
    raw.close()


def test_the_default_cache_is_a_quarter_of_duckdbs_memory_limit(caplog):
    """Without ``cache_mb`` a train keeps up to a quarter of ``memory_limit`` in memory,
    records that value, and says so when the rows do not fit it."""
    caplog.set_level(logging.INFO, logger="loomdb.progress")
    c = loomdb.connect()
    xs = ", ".join(f"((i * {j + 3}) % 101)::DOUBLE AS x{j}" for j in range(40))
    c.execute(f"CREATE TABLE t AS SELECT {xs}, (i % 2)::DOUBLE AS y FROM range(100000) r(i)")
    used = {}
    for limit in ("1GB", "100MB"):  # 32.8 MB of rows: they fit a quarter of 1GB, not of 100MB
        c.execute(f"SET memory_limit = '{limit}'")
        options = json.dumps({"epochs": 1, "replace": True})
        c.execute(f"SELECT loom_train('m', 't', 'y', '{options}')").fetchall()
        (record,) = c.execute("SELECT options FROM loom.models WHERE name = 'm'").fetchone()
        used[limit] = json.loads(record)["cache_mb"]
    c.close()
    assert used == {"1GB": 250, "100MB": 25}
    said = [r.message for r in caplog.records if "cache_mb" in r.message]
    assert said == [
        "loom_train m: the rows take 33 MB, more than cache_mb (25): they go to a temporary "
        'table that every epoch reads back; "cache_mb": 33 or more keeps them in memory'
    ]


def test_a_second_loomdb_connection_to_one_file_is_refused_and_a_close_crashes_nothing(tmp_path):
    """DuckDB keeps one set of loomdb's functions per database, freed when the connection
    that made it closes: a second loomdb.connect of an open file was DuckDB's raw "already
    exists", and a raw connection calling loom_predict after the first closed crashed the
    process (a subprocess here, so a crash fails the test rather than the suite).  What it
    saw comes back in a file, not on stdout: DuckDB takes ``python -c`` for an interactive
    session and draws its progress bar there once a statement outlasts
    ``progress_bar_time`` (2 s: a first train compiling its kernels, a loaded machine), so
    the script sets that to 0 to have the bar drawn on every run."""
    said = tmp_path / "said.json"
    script = f"""
import json, duckdb, loomdb
path = {str(tmp_path / "twice.duckdb")!r}
said = []
a = loomdb.connect(path, progress=False)
a.execute("SET progress_bar_time = 0")
a.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(200) r(i)")
a.execute("SELECT loom_train('m', 't', 'y')").fetchall()
try:
    loomdb.connect(path, progress=False)
except loomdb.LoomStateError as e:
    said.append("refused: " + e.hint)
raw = duckdb.connect(path)
a.close()
try:
    raw.execute("SELECT loom_predict('m', [1.0])").fetchall()
except duckdb.Error as e:
    said.append("raw: " + type(e).__name__)
raw.close()
b = loomdb.connect(path, progress=False)
said.append("again: " + str(b.execute("SELECT loom_predict('m', [1.0]) IS NOT NULL").fetchall()))
with open({str(said)!r}, "w") as f:
    json.dump(said, f)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = json.loads(said.read_text())
    assert lines[0].startswith("refused: use that connection"), lines
    assert lines[1:] == ["raw: CatalogException", "again: [(True,)]"], lines


def test_registering_an_equipped_connection_again_keeps_it_as_it_is(tmp_path):
    """``loomdb.register(con.duckdb)`` of a loomdb connection's own DuckDB connection, or a
    raw connection registered twice, failed with DuckDB's "loom_train is not an scalar
    function": the functions were created again where its TEMP macros of those names stood."""
    con = loomdb.connect(str(tmp_path / "r.duckdb"), progress=False)
    con.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(50) r(i)")
    assert loomdb.register(con.duckdb, progress=False) is con.duckdb
    train = "SELECT loom_train('{}', 't', 'y', '{{\"epochs\": 1}}')"
    assert json.loads(con.duckdb.execute(train.format("m1")).fetchall()[0][0])["rows"] == 50
    con.execute("BEGIN")  # the loomdb connection's state is still the one its macros pass
    with pytest.raises(loomdb.LoomStateError, match="inside an open transaction"):
        con.execute(train.format("m2")).fetchall()
    con.execute("ROLLBACK")
    con.close()
    raw = duckdb.connect()
    for _ in range(2):
        loomdb.register(raw, progress=False)
    raw.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(50) r(i)")
    assert json.loads(raw.execute(train.format("m")).fetchall()[0][0])["model"] == "m"
    raw.close()


def test_a_call_after_use_of_another_database_is_refused_not_run_on_loomdbs_tables():
    """USE makes another database the connection's default, which loomdb's own connection,
    whose catalog is in its database, cannot follow: a source named there would have been
    read from loomdb's database's table of that name."""
    c = loomdb.connect(progress=False)
    c.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(100) r(i)")
    c.execute("ATTACH ':memory:' AS other; CREATE TABLE other.t AS SELECT * FROM t LIMIT 10")
    c.execute("USE other")
    with pytest.raises(loomdb.LoomStateError) as info:
        c.execute("SELECT loom_train('m', 't', 'y', '{\"epochs\": 1}')").fetchall()
    assert "default database is 'other' (USE)" in str(info.value)
    assert "other.t" in info.value.hint
    with pytest.raises(loomdb.LoomStateError, match="'other'"):
        c.execute("SELECT loom_train('m', 'SELECT * FROM t', 'y')").fetchall()
    c.execute("USE memory; SELECT loom_train('m', 'other.t', 'y', '{\"epochs\": 1}')").fetchall()
    assert json.loads(c.execute("SELECT loom_evaluate('m', 'other.t')").fetchone()[0])["rows"] == 10
    c.close()


def test_arguments_of_types_no_form_takes_name_the_function_not_its_hidden_twin():
    """DuckDB's binder error named the hidden function a loomdb connection's macro calls
    (loom_drop_model__conn(…, BIGINT)) with the connection's token among the types."""
    c = loomdb.connect(progress=False)
    c.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(100) r(i)")
    c.execute("SELECT loom_train('m', 't', 'y', '{\"epochs\": 1}')").fetchall()
    with pytest.raises(loomdb.LoomOptionError) as info:
        c.execute("SELECT loom_drop_model('m', 1.5)").fetchall()
    assert "loom_drop_model takes no arguments of types (STRING_LITERAL, DECIMAL(2,1))" in str(
        info.value
    )
    assert "__conn" not in str(info.value)
    assert "loom_drop_model(model text, version bigint)" in info.value.hint
    with pytest.raises(loomdb.LoomOptionError, match="loom_weights takes no arguments"):
        c.execute("SELECT * FROM loom_weights(1.5)").fetchall()
    c.close()


def test_a_wrong_number_of_arguments_is_a_loomdb_error_with_the_signature():
    """More or fewer arguments than any form takes was DuckDB's BinderException ("Macro
    loom_rollback() does not support the supplied arguments") on a loomdb connection."""
    c = loomdb.connect(progress=False)
    for sql, told, hint in [
        ("SELECT loom_rollback('m', 1)", "takes 1 argument,", "loom_rollback(model text)"),
        ("SELECT loom_model_info()", "takes 1 argument,", "loom_model_info(model text)"),
        ("SELECT * FROM loom_roc_curve('m')", "takes 2 arguments", "(model text, source text)"),
        ("SELECT loom_simulate('i', '{}', 3)", "takes 1 or 2 arguments", "[, options text])"),
        ("SELECT loom_tune('m')", "takes 3 or 4 arguments", "label text [, options text])"),
    ]:
        with pytest.raises(loomdb.LoomOptionError) as info:
            c.execute(sql).fetchall()
        assert told in str(info.value) and hint in (info.value.hint or ""), sql
    c.close()


def test_a_script_with_a_meta_command_psql_acts_on_is_refused_before_it_runs(con):
    """``con.execute`` of a script dropped its ``\\copy``: the table was made, never filled,
    and the statements after it ran on nothing."""
    script = (
        "CREATE TABLE pts (x integer);\n\\copy pts FROM 'pts.csv' CSV\nSELECT count(*) FROM pts;"
    )
    with pytest.raises(loomdb.LoomError, match=r"line 2: psql's meta-command \\copy pts") as e:
        con.execute(script)
    assert "COPY" in (e.value.hint or "") and "loom_load" in (e.value.hint or "")
    assert con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'pts'"
    ).fetchall() == [(0,)]
