"""pgvector-style SQL regression tests: ``tests/sql/<feature>.sql`` in, expected output out.

Each script runs unchanged three ways; what each prints is pinned in ``tests/sql/expected/``:

``<feature>.duckdb.out``
    ``loomdb sql --duckdb <fresh file> -q --keep-going --echo -f <feature>.sql`` (stdout).
``<feature>.postgres.out``
    psql as pg_regress runs it: ``psql -X -a -q -v ON_ERROR_STOP=0 -v SHOW_CONTEXT=never``
    with the script on standard input (so errors carry no ``psql:file:line:`` prefix) and
    stderr merged into stdout.  psql does not go through loomdb's SQL front-end: there,
    ``CREATE INDEX … USING toc``, ``REINDEX`` and ``DROP INDEX`` reach PostgreSQL and run
    loomdb's index access methods (a server without them skips this run, or fails it in CI).
``<feature>.loomdb-postgres.out``
    ``loomdb sql --dsn DSN -q --keep-going --echo -f <feature>.sql``: the front-end on
    PostgreSQL.

Both PostgreSQL runs get a fresh schema, through ``PGOPTIONS``: ``search_path`` is
``loomsql_<feature>, public``, ``client_min_messages`` is ``warning`` (no progress NOTICEs)
and ``lc_messages`` is ``C``.  Afterwards the schema is dropped, and so is every model and
index the run added to the catalog (the scripts end by dropping theirs; the fixture drops
whatever a failed run left), so other tests sharing the server find it as it was.

Determinism: a script selects only what does not vary between runs and machines — counts,
kinds, formats, class lists, metrics compared with a threshold (``accuracy > 0.95``), never
timings, raw coefficients or loss values; optimiser changes should not move the thresholds.
One thing cannot be selected away: ``CREATE INDEX`` and ``REINDEX INDEX`` print their
summary, with ``"seconds"``; in a one-column result those values are masked and the result
re-aligned (:func:`mask_timings`) before comparing.

Regenerate the expected files deliberately, after reviewing why they changed::

    LOOMDB_REGEN_SQL=1 LOOMDB_TEST_DSN="host=… user=postgres dbname=…" \\
        python -m pytest tests/engines/test_sql_regression.py
    git diff tests/sql/expected/

Every rewritten file is reported as a skip (``-ra`` lists it); regeneration is refused under
CI, and a script without expected files fails rather than creating them.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import DEMO, LOOMDB_SQL, need, sql_env
from loomdb.cli.output import render

SQL = Path(__file__).resolve().parents[1] / "sql"
EXPECTED = SQL / "expected"
SCRIPTS = {p.stem: p for p in SQL.glob("*.sql")}
SCRIPTS["demo"] = DEMO  # the README's demo, pinned the same way
FEATURES = sorted(SCRIPTS)
RUNS = ("duckdb", "postgres", "loomdb-postgres")
PSQL_OPTIONS = ["-X", "-a", "-q", "-v", "ON_ERROR_STOP=0", "-v", "SHOW_CONTEXT=never"]
TIMEOUT_S = 600

_SECONDS = re.compile(r'"seconds": -?[0-9][0-9.eE+-]*')
_RULE = re.compile(r"-+")
_ROW_COUNT = re.compile(r"\(\d+ rows?\)")


def mask_timings(text: str) -> str:
    """``"seconds": <number>`` in a one-column result becomes ``"seconds": (masked)``, and
    the result is re-aligned (its width depended on the number)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and _RULE.fullmatch(lines[i + 1]):
            end = i + 2
            while end < len(lines) and not _ROW_COUNT.fullmatch(lines[end]):
                end += 1
            rows = lines[i + 2 : end]
            if end < len(lines) and any(_SECONDS.search(r) for r in rows):
                cells = [(_SECONDS.sub('"seconds": (masked)', r[1:].rstrip()),) for r in rows]
                out += render([lines[i].strip()], cells).split("\n")[:-1]
                i = end + 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _run(cmd: list[str], *, stdin_path: Path | None = None, env: dict[str, str]) -> str:
    with contextlib.ExitStack() as stack:
        stdin = stack.enter_context(open(stdin_path, "rb")) if stdin_path else None
        done = subprocess.run(
            cmd,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if stdin_path else subprocess.PIPE,
            env=env,
            timeout=TIMEOUT_S,
        )
    out = done.stdout.decode("utf-8")
    err = done.stderr.decode("utf-8", "replace") if done.stderr else ""
    return _ran(cmd, done.returncode, out, err)


def _ran(cmd: list[str], returncode: int, out: str, err: str) -> str:
    """``out``, once the command is seen to have run its script to the end."""
    # loomdb sql --keep-going: 3 when a statement failed (the scripts pin errors on purpose)
    assert returncode in (0, 3), f"{cmd[:6]} exited {returncode}:\n{out[-3000:]}" + err[-3000:]
    return out


def check(feature: str, run: str, actual: str) -> None:
    """Compare with the expected file (or rewrite it under LOOMDB_REGEN_SQL=1)."""
    actual = mask_timings(actual)
    path = EXPECTED / f"{feature}.{run}.out"
    if os.environ.get("LOOMDB_REGEN_SQL"):
        if os.environ.get("CI"):
            pytest.fail("LOOMDB_REGEN_SQL is refused under CI: regenerate locally and commit")
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old != actual:
            EXPECTED.mkdir(parents=True, exist_ok=True)
            path.write_text(actual, encoding="utf-8")
            pytest.skip(f"regenerated {path.relative_to(SQL.parent.parent)}: review git diff")
        return
    if not path.exists():
        pytest.fail(f"no expected output {path.name}: write it with LOOMDB_REGEN_SQL=1")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"expected/{path.name}",
                tofile=f"actual ({run})",
            )
        )
        pytest.fail(f"{feature}.sql on {run} differs from {path.name}:\n{diff}", pytrace=False)


@pytest.mark.parametrize("feature", FEATURES)
def test_duckdb(feature, tmp_path, request):
    if feature == "demo":  # run once for this test and test_cli's (conftest.demo_on_duckdb)
        cmd, done = request.getfixturevalue("demo_on_duckdb")
        check(feature, "duckdb", _ran(cmd, done.returncode, done.stdout, done.stderr))
        return
    out = _run(
        [
            *LOOMDB_SQL,
            "--duckdb",
            str(tmp_path / f"{feature}.duckdb"),
            "-f",
            str(SCRIPTS[feature]),
        ],
        env=sql_env(),
    )
    check(feature, "duckdb", out)


def _catalog(conn) -> tuple[set[str], set[str]]:
    models = {r[0] for r in conn.execute("SELECT name FROM loom.models").fetchall()}
    indexes = {r[0] for r in conn.execute("SELECT name FROM loom.indexes").fetchall()}
    return models, indexes


@contextlib.contextmanager
def pg_sandbox(dsn: str, feature: str) -> Iterator[dict[str, str]]:
    """A fresh schema for one run (yields the environment that selects it); afterwards the
    schema and every model and index the run added are gone."""
    import psycopg

    schema = f"loomsql_{feature}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        models, indexes = _catalog(conn)
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
        conn.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
        options = f"-c search_path={schema},public -c client_min_messages=warning -c lc_messages=C"
        try:
            yield sql_env(PGOPTIONS=options)
        finally:  # the schema first: its CREATE INDEX … USING indexes go with their relations
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
            now_models, now_indexes = _catalog(conn)
            for name in sorted(now_models - models):
                conn.execute("SELECT loom_drop_model(%s)", [name])
            for name in sorted(now_indexes - indexes):
                conn.execute("SELECT loom_drop_index(%s)", [name])


_NATIVE = re.compile(r"USING\s+(mlweaving|toc|dense)\b", re.IGNORECASE)


def need_index_methods(dsn: str, feature: str) -> None:
    """psql runs ``CREATE INDEX … USING toc`` natively: the server needs the access methods
    (built by loomdb pg install where PostgreSQL's server headers are installed)."""
    import psycopg

    if not _NATIVE.search(SCRIPTS[feature].read_text(encoding="utf-8")):
        return
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_am WHERE amname IN ('mlweaving', 'toc', 'dense')"
        ).fetchone()
    if not found or found[0] != 3:
        need("loomdb's index access methods (apt-get install postgresql-server-dev-15)")


@pytest.mark.postgres
@pytest.mark.parametrize("feature", FEATURES)
def test_psql(feature, pg_dsn):
    psql = shutil.which("psql")
    if psql is None:
        need("psql (postgresql-client)")
    assert psql is not None
    need_index_methods(pg_dsn, feature)
    with pg_sandbox(pg_dsn, feature) as env:
        out = _run([psql, *PSQL_OPTIONS, pg_dsn], stdin_path=SCRIPTS[feature], env=env)
    check(feature, "postgres", out)


@pytest.mark.postgres
@pytest.mark.parametrize("feature", FEATURES)
def test_loomdb_sql_on_postgres(feature, pg_dsn):
    with pg_sandbox(pg_dsn, feature) as env:
        out = _run([*LOOMDB_SQL, "--dsn", pg_dsn, "-f", str(SCRIPTS[feature])], env=env)
    check(feature, "loomdb-postgres", out)


def test_keep_going_prints_errors_in_order_and_exits_3(tmp_path):
    script = "SELECT 1 AS a; SELECT loom_train('m', 't', 'y', '{\"epoch\": 1}'); SELECT 2 AS b"
    cmd = [*LOOMDB_SQL, "--duckdb", str(tmp_path / "k.duckdb"), "-c", script]
    done = subprocess.run(cmd, capture_output=True, text=True, env=sql_env(), timeout=TIMEOUT_S)
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    error = lines.index("ERROR:  unknown loom_train option 'epoch'")
    assert lines[error + 1] == "HINT:  did you mean 'epochs'?"
    assert lines.index("SELECT 1 AS a;") < lines.index(" 1") < error < lines.index(" 2")
    # without --keep-going the first error ends the run, on stderr
    plain = [a for a in cmd if a not in ("--keep-going", "--echo")]
    done = subprocess.run(plain, capture_output=True, text=True, env=sql_env(), timeout=TIMEOUT_S)
    assert done.returncode == 3 and " 2" not in done.stdout.splitlines()
    assert "HINT:  did you mean 'epochs'?" in done.stderr


def test_every_expected_file_has_its_script():
    runs = "|".join(re.escape(r) for r in RUNS)
    for path in EXPECTED.glob("*.out"):
        m = re.fullmatch(rf"(.+)\.({runs})\.out", path.name)
        assert m, f"{path.name}: expected <feature>.<{runs}>.out"
        assert m[1] in FEATURES, f"{path.name} has no tests/sql/{m[1]}.sql"


def test_mask_timings_realigns_one_column_results():
    block = render(["loom_reindex('i')"], [('{"rows": 3, "seconds": 0.012345678}',)])
    masked = mask_timings(block)
    assert masked == render(["loom_reindex('i')"], [('{"rows": 3, "seconds": (masked)}',)])
    other = render(["a", "b"], [('{"seconds": 1.5}', 2)])
    assert mask_timings(other) == other  # only one-column results are rewritten
