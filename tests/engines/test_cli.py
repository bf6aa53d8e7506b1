"""``loomdb sql`` and ``sql/demo.sql`` on both engines, and psql on the same script."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import sql_env
from support.ctrl_c import ctrl_c_once

LOOMDB = [sys.executable, "-m", "loomdb.cli.main"]


def run(args, **kw):
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_demo_runs_twice_on_one_database_with_the_same_output(demo_on_duckdb):
    """The demo cleans up after itself (its output is pinned by test_sql_regression).  The
    first run is the one test_sql_regression pins (conftest.demo_on_duckdb, run once for
    both: the demo is the suite's slowest script); the same command runs again on its file."""
    demo, done = demo_on_duckdb
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    first = done.stdout
    assert "compression_ratio" in first and "digits_fpga" in first
    second = run(demo, env=sql_env())
    # --echo: the first "rows_loaded" is the loading statement's text, after the clean-up's
    assert "main.predict_digits_dense" in second.partition("rows_loaded")[0]  # dropped, redeployed
    assert "main.predict_digits_dense" not in first.partition("rows_loaded")[0]
    assert second.partition("rows_loaded")[2] == first.partition("rows_loaded")[2]


@pytest.mark.postgres
def test_create_index_statement_through_loomdb_sql(pg_dsn, tmp_path):
    script = """
    DROP TABLE IF EXISTS pts;
    CREATE TABLE pts AS SELECT CAST(i AS DOUBLE PRECISION) AS a,
                               CAST(i % 7 AS DOUBLE PRECISION) AS b,
                               CAST(i % 2 AS INTEGER) AS y
                        FROM generate_series(1, 200) AS g(i);
    CREATE INDEX pts_ix ON pts USING dense (a, b) WITH (label = y, batch_size = 50);
    SELECT name, format, rows, batches FROM loom.indexes;
    REINDEX INDEX pts_ix;
    SELECT loom_train('pm', NULL, 'y', '{"index": "pts_ix", "epochs": 2}') IS NOT NULL AS trained;
    DROP INDEX pts_ix;
    SELECT loom_drop_model('pm') IS NOT NULL AS cleaned;
    SELECT count(*) AS left_over FROM loom.indexes WHERE name = 'pts_ix';
    """
    try:
        for out in on_both_engines(script, pg_dsn, tmp_path):
            assert re.search(r"pts_ix\s*\|\s*dense\s*\|\s*200\s*\|\s*4", out)
            assert out.rstrip().splitlines()[-2].strip() == "0"
    finally:  # public.pts would be what another test's unqualified pts finds on its path
        run([*LOOMDB, "sql", "--dsn", pg_dsn, "-c", "DROP TABLE IF EXISTS public.pts"])


def on_both_engines(script: str, dsn: str, tmp_path) -> list[str]:
    """``loomdb sql -c script`` on PostgreSQL and on DuckDB (generate_series → range)."""
    duck = re.sub(
        r"generate_series\((\d+), (\d+)\)", lambda m: f"range({m[1]}, {int(m[2]) + 1})", script
    )
    return [
        run([*LOOMDB, "sql", "--dsn", dsn, "-c", script]),
        run([*LOOMDB, "sql", "--duckdb", str(tmp_path / "x.duckdb"), "-c", duck]),
    ]


def test_errors_exit_non_zero_with_hint(tmp_path):
    done = subprocess.run(
        [
            *LOOMDB,
            "sql",
            "--duckdb",
            str(tmp_path / "e.duckdb"),
            "-c",
            "SELECT loom_train('m', 'nosuch', 'y', '{\"epoch\": 1}')",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "ERROR:  unknown loom_train option 'epoch'" in done.stderr
    assert "HINT:  did you mean 'epochs'?" in done.stderr
    assert "[loomdb error" not in done.stderr and "CarriedError" not in done.stderr


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(tmp_path):
    sql = (
        "CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(100) r(i);"
        "SELECT loom_train('m', 't', 'y', '{\"epochs\": 3}')"
    )
    done = subprocess.run(
        [*LOOMDB, "sql", "--duckdb", str(tmp_path / "p.duckdb"), "-c", sql],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "epoch" in line]
    assert len(lines) == 3 and lines[0].startswith("loom_train m: epoch 1/3, loss ")


@pytest.mark.postgres
def test_mlweaving_ddl_and_doppiodb_forms_through_loomdb_sql(pg_dsn, tmp_path):
    script = """
    DROP TABLE IF EXISTS t1;
    CREATE TABLE t1 AS SELECT CAST(i % 10 AS DOUBLE PRECISION) / 10 AS a,
                              CAST(i % 7 AS DOUBLE PRECISION) / 7 AS b,
                              CAST(i % 2 AS DOUBLE PRECISION) AS y
                       FROM generate_series(1, 256) AS g(i);
    CREATE INDEX w ON create_mlweaving('t1');
    CREATE INDEX m ON train_mlweaving('t1', 3, 4);
    SELECT count(*) AS inferred, count(prediction) AS predicted
      FROM (SELECT * FROM infer_mlweaving(m, 't1', 2)) AS q;
    CREATE INDEX w2 ON t1 USING mlweaving (a, b) WITH (label = y, batch_size = 64);
    SELECT name, format FROM loom.indexes ORDER BY name;
    DROP INDEX w;
    DROP INDEX w2;
    SELECT loom_drop_model('m') IS NOT NULL AS cleaned;
    SELECT count(*) AS indexes_left FROM loom.indexes WHERE name IN ('w', 'w2');
    """
    for out in on_both_engines(script, pg_dsn, tmp_path):
        assert re.search(r"256\s*\|\s*256", out), out
        assert re.search(r"w2\s*\|\s*mlweaving", out)
        assert out.rstrip().splitlines()[-2].strip() == "0"


def failed(args, **kw) -> subprocess.CompletedProcess:
    """A ``loomdb`` command that must fail as a user error: non-zero, no traceback."""
    done = subprocess.run([*LOOMDB, *args], capture_output=True, text=True, timeout=120, **kw)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_script_that_cannot_be_read_is_an_error_with_a_hint(tmp_path):
    (tmp_path / "latin1.sql").write_bytes(b"SELECT '\xe9t\xe9';")
    for script, problem in [
        ("nosuch.sql", "nosuch.sql does not exist"),
        (".", "is a folder, not a file"),
        ("latin1.sql", "latin1.sql is not UTF-8 text"),
    ]:
        done = failed(["sql", "--duckdb", ":memory:", "-f", script], cwd=tmp_path)
        assert f"loomdb: error: the SQL script {script} " in done.stderr
        assert problem in done.stderr
        assert "hint: give the path of a readable UTF-8 text file" in done.stderr


def test_a_duckdb_file_that_cannot_be_opened_is_an_error_with_a_hint(tmp_path):
    (tmp_path / "a.svm").write_text("1 1:0.5\n")
    missing_folder = str(tmp_path / "nosuch" / "x.duckdb")
    for args in [
        ["sql", "--duckdb", missing_folder, "-c", "SELECT 1"],
        ["load", "libsvm", str(tmp_path / "a.svm"), "t", "--duckdb", missing_folder],
        ["plot", "m", "--duckdb", str(tmp_path / "a.svm"), "-o", str(tmp_path / "m.png")],
    ]:
        done = failed(args)
        assert "could not open the DuckDB database" in done.stderr
        assert "check --duckdb" in done.stderr
    assert not (tmp_path / "nosuch").exists()


def test_a_server_that_cannot_be_reached_is_an_error_with_a_hint():
    done = failed(["sql", "--dsn", "host=127.0.0.1 port=1 connect_timeout=5", "-c", "SELECT 1"])
    assert done.returncode == 1, done.stderr  # as loomdb load and plot: no statement ran
    assert "loomdb: error: could not connect to PostgreSQL" in done.stderr
    assert "hint: check --dsn" in done.stderr


def test_a_script_on_standard_input_runs(tmp_path):
    for how in ([], ["-f", "-"]):
        done = subprocess.run(
            [*LOOMDB, "sql", "--duckdb", ":memory:", *how],
            input="SELECT 40 + 2 AS answer;",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["answer", "--------", "42", "(1", "row)"]


def test_ctrl_c_stops_a_train_with_loomdbs_error_and_writes_nothing(tmp_path):
    """SIGINT while loom_train's epochs run: stopped within a batch with LoomInterrupted
    (exit 3); it was not seen at all (KeyboardInterrupt reaches only the main thread)."""
    import loomdb

    path = str(tmp_path / "c.duckdb")
    sql = (
        "CREATE TABLE t AS SELECT i::DOUBLE AS a, (i % 2)::DOUBLE AS y FROM range(500000) r(i);"
        "SELECT loom_train('m', 't', 'y', '{\"epochs\": 100000, \"tol\": 0}')"
    )
    code, _, rest = ctrl_c_once([*LOOMDB, "sql", "--duckdb", path, "-c", sql], ": epoch ")
    assert code == 3, rest
    # loomdb's check between batches ("the call was cancelled") or DuckDB's own interrupt of
    # the statement ("the statement was cancelled"), whichever the signal met first
    assert "ERROR:  interrupted: the " in rest and " was cancelled" in rest, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    con = loomdb.connect(path)
    assert con.execute("SELECT count(*) FROM loom.models").fetchall() == [(0,)]
    con.close()


def test_ctrl_c_outside_a_statement_exits_130_without_a_traceback(monkeypatch, capsys):
    from loomdb.cli import main, run_sql

    def pressed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_sql, "run_script", pressed)
    assert main.main(["sql", "--dsn", "host=x", "-c", "SELECT 1"]) == 130
    assert capsys.readouterr().err == "loomdb: interrupted\n"


def fails(args) -> str:
    """``loomdb sql`` that must fail (exit 3): its standard error."""
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stderr


@pytest.mark.postgres
def test_a_failed_script_names_its_statement_and_says_what_ran_before_it(pg_dsn, tmp_path):
    """A script that failed mid-way gave the failing statement's error alone: which statement
    it was, and that those before it ran (and were committed), was not said."""
    commands = {
        "postgres": [*LOOMDB, "sql", "-q", "--dsn", pg_dsn],
        "duckdb": [*LOOMDB, "sql", "-q", "--duckdb", str(tmp_path / "ran.duckdb")],
    }
    committed = (
        "CONTEXT:  statement 4 of 5 (SELECT x FROM nosuch_ran) failed; statements 1–3 before "
        "it ran and were committed; statement 5 did not run"
    )
    aborted = (
        "CONTEXT:  statement 3 of 3 (SELECT x FROM nosuch_ran) failed; statements 1–2 ran in "
        "the transaction statement 1 began, not committed: the error aborted it (ROLLBACK ends it)"
    )
    try:
        for name, command in commands.items():
            script = (
                "DROP TABLE IF EXISTS ran; CREATE TABLE ran (x INTEGER); "
                "INSERT INTO ran VALUES (1); SELECT x FROM nosuch_ran; INSERT INTO ran VALUES (2)"
            )
            assert committed in fails([*command, "-c", script]), name
            assert committed in fails([*command, "-e", "-c", script]), name  # one by one
            transaction = "BEGIN; INSERT INTO ran VALUES (3); SELECT x FROM nosuch_ran"
            assert aborted in fails([*command, "-c", transaction]), name
            count = run([*command, "-c", "SELECT count(*) AS n FROM ran"])
            assert count.splitlines()[2].strip() == "1", (name, count)  # as the notes said
    finally:
        run([*commands["postgres"], "-c", "DROP TABLE IF EXISTS public.ran"])


def _reader_goes_away(args):
    """Run ``loomdb args``, read its first line and close the pipe (``| head -1``)."""
    child = subprocess.Popen(
        [*LOOMDB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.readline()
    child.stdout.close()
    err = child.stderr.read()
    return child.wait(timeout=120), err


@pytest.mark.parametrize("engine_name", ["duckdb", "postgres"])
def test_a_reader_that_stops_early_ends_the_command_quietly(engine_name, request):
    """``loomdb sql … | head -1``: the results past what the pipe holds have no reader. The
    command stops without a traceback and exits 141, as a command SIGPIPE ends does, so a
    pipeline with pipefail still sees that not everything was printed."""
    if engine_name == "duckdb":
        where, rows = ["--duckdb", ":memory:"], "SELECT * FROM range(300000)"
    else:
        where = ["--dsn", request.getfixturevalue("pg_dsn")]
        rows = "SELECT * FROM pg_catalog.generate_series(1, 300000)"
    for args in (["-c", f"SELECT 1; {rows}"], ["-e", "-c", f"SELECT 1; {rows}; SELECT 2"]):
        code, err = _reader_goes_away(["sql", *where, "-q", *args])
        assert code == 141 and "Traceback" not in err and "Exception" not in err, err


def test_a_duckdb_database_that_would_not_outlive_the_command_is_refused(tmp_path, capsys):
    """``--duckdb ""`` (an unset shell variable) opened an in-memory database: ``loomdb load``
    reported its rows loaded and lost them as it ended, ``loomdb sql`` ran a script whose
    writes went nowhere. An empty path is refused by every command, and ``loomdb load`` also
    refuses ``:memory:``, where nothing it loads would be kept."""
    from loomdb.cli.main import main

    for argv in (
        ["sql", "--duckdb", "", "-c", "CREATE TABLE kept (x integer)"],
        ["load", "sample", "iris", "iris", "--duckdb", ""],
        ["plot", "m", "--duckdb", "", "-o", str(tmp_path / "m.png")],
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert "--duckdb is empty" in err and "database file" in err, err
    assert main(["load", "sample", "iris", "iris", "--duckdb", ":memory:"]) == 1
    err = capsys.readouterr().err
    assert "lost when the command ends" in err and "hint: " in err, err


@pytest.mark.parametrize("engine_name", ["duckdb", "postgres"])
def test_a_script_saved_with_a_byte_order_mark_runs_on_both_engines(engine_name, request, tmp_path):
    """Editors on Windows save UTF-8 with a BOM (and CRLF line ends): DuckDB's parser skipped
    it, PostgreSQL's read it as part of the first word (syntax error at "\\ufeffSELECT")."""
    if engine_name == "duckdb":
        where = ["--duckdb", ":memory:"]
    else:
        where = ["--dsn", request.getfixturevalue("pg_dsn")]
    script = tmp_path / "bom.sql"
    script.write_bytes("\ufeffSELECT 1 AS first_one;\r\nSELECT 2 AS second_one;\r\n".encode())
    for source in (["-f", str(script)], ["-e", "-f", str(script)], ["-f", "-"]):
        done = subprocess.run(
            [*LOOMDB, "sql", *where, "-q", *source],
            input=script.read_text(encoding="utf-8"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "first_one" in done.stdout and "second_one" in done.stdout
        assert "\ufeff" not in done.stdout


@pytest.mark.parametrize("where", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_meta_command_psql_acts_on_is_refused_before_the_script_runs(where, request, tmp_path):
    """psql's meta-commands were all dropped: the \\c was skipped, and the statement after it
    made its table in the database the script began on."""
    if where == "duckdb":
        target = ["--duckdb", str(tmp_path / "m.duckdb")]
    else:
        target = ["--dsn", request.getfixturevalue("pg_dsn")]
    script = tmp_path / "s.sql"
    script.write_text(
        "CREATE TABLE meta_before (x integer);\n\\c otherdb\nCREATE TABLE meta_after (x integer);\n"
    )
    for how in ([], ["-e"], ["--keep-going"]):
        err = fails([*LOOMDB, "sql", *target, "-f", str(script), *how])
        assert "ERROR:  line 2: psql's meta-command \\c otherdb is not run by loomdb" in err, err
        assert "HINT:  run one script per database" in err
    made = "SELECT count(*) AS made FROM information_schema.tables WHERE table_name LIKE 'meta_%'"
    assert run([*LOOMDB, "sql", *target, "-c", made]).split()[2] == "0"


def test_a_meta_command_that_only_shows_something_leaves_its_statement_whole(tmp_path):
    """A meta-command line ended the statement it stood in: ``DELETE FROM t`` ran alone."""
    script = (
        "CREATE TABLE t AS SELECT x FROM range(3) r(x);\n"
        "\\timing on\nDELETE FROM t\n\\echo deleting one row\nWHERE x = 1;\n"
        "SELECT count(*) AS kept FROM t;"
    )
    out = run([*LOOMDB, "sql", "--duckdb", str(tmp_path / "d.duckdb"), "-c", script])
    assert out.split()[-3] == "2", out  # the last result: kept / ---- / 2 / (1 row)
