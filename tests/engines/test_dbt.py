"""The dbt example (examples/dbt) run by real dbt-core on both engines: dbt-duckdb with loomdb's
plugin (``loomdb.dbt``) and dbt-postgres against the session's server.

``dbt deps`` installs the package in dbt/loomdb, ``dbt build`` seeds iris, builds the features,
trains the model (a post-hook after the training rows commit), predicts with the UDF and with the
compiled expression, evaluates, and runs the data tests; ``dbt run-operation`` trains and drops a
model.  A training hook moved inside the model's transaction trains there on PostgreSQL and is
refused on DuckDB, where loom_train commits on a connection of its own.  dbt runs from the
environment ``LOOMDB_DBT`` names (scripts/setup.sh makes one), else beside this Python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import loomdb
from conftest import need
from support.roles import connect, names, two_roles

ROOT = Path(__file__).resolve().parents[2]
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def test_train_on_a_registered_connection_commits_on_its_own():
    """What the dbt package relies on (README, "dbt"): on a connection equipped with
    loomdb.register, as dbt-duckdb's is, loom_train inside an open transaction reads the
    committed rows and commits on its own, so a rollback keeps the model."""
    con = duckdb.connect()
    loomdb.register(con, progress=False)
    con.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(40) r(i)")
    con.execute("BEGIN")
    con.execute("INSERT INTO t SELECT i::DOUBLE, 1.0 FROM range(40, 100) r(i)")
    [(summary,)] = con.execute("SELECT loom_train('m', 't', 'y')").fetchall()
    con.execute("ROLLBACK")
    assert json.loads(summary)["rows"] == 40  # not the 60 uncommitted rows
    assert con.execute("SELECT count(*) FROM loom.models WHERE name = 'm'").fetchall() == [(1,)]
    # the DuckDB form of loomdb.train: refused inside a transaction, nothing trained
    con.execute("BEGIN")
    with pytest.raises(duckdb.TransactionException, match="within a transaction"):
        con.execute("begin transaction; select loom_train('m2', 't', 'y'); commit")
    con.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM loom.models WHERE name = 'm2'").fetchall() == [(0,)]


def dbt_executable() -> Path:
    named = os.environ.get("LOOMDB_DBT")
    candidates = [Path(named)] if named else [Path(sys.executable).parent / "dbt"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path.absolute()  # the project runs in its own folder
    need(
        f"dbt (looked for {', '.join(map(str, candidates))}; "
        "pip install 'loomdb[dbt]', or set LOOMDB_DBT to a dbt executable)"
    )
    raise AssertionError("unreachable")


class Project:
    """A copy of examples/dbt and dbt/loomdb (same relative layout) run with one target."""

    def __init__(self, where: Path, target: str, env: dict[str, str]):
        shutil.copytree(ROOT / "examples" / "dbt", where / "examples" / "dbt")
        shutil.copytree(ROOT / "dbt" / "loomdb", where / "dbt" / "loomdb")
        self.dir = where / "examples" / "dbt"
        self.target = target
        self.schema = env["LOOMDB_DBT_SCHEMA"]
        self.model = f"iris_{uuid.uuid4().hex[:10]}"
        self.env = {
            **os.environ,
            **env,
            # the loomdb this test imports, whichever environment dbt runs from
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(Path(loomdb.__file__).parents[1]), os.environ.get("PYTHONPATH")])
            ),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "DBT_USE_COLORS": "false",
        }
        self.command = str(dbt_executable())

    def dbt(self, *args: str, ok: bool = True) -> str:
        vars_ = json.dumps({"loomdb_model": self.model})
        done = subprocess.run(
            [self.command, *args, "--profiles-dir", str(self.dir), "--target", self.target]
            + ([] if args[0] == "deps" else ["--vars", vars_]),
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        out = done.stdout + done.stderr
        assert (done.returncode == 0) == ok, (
            f"dbt {' '.join(args)}: exit {done.returncode}\n{out[-5000:]}"
        )
        return out

    def hook_inside_transaction(self, inside: bool) -> None:
        config = self.dir / "dbt_project.yml"
        was, now = ("false", "true") if inside else ("true", "false")
        text = config.read_text()
        assert f"transaction: {was}" in text
        config.write_text(text.replace(f"transaction: {was}", f"transaction: {now}"))


def check_project(project: Project, query) -> None:
    """Build the example, check what it made, then the hook inside the transaction and the
    run-operations; ``query(sql)`` reads the database dbt wrote."""
    out = project.dbt("deps")
    assert "Installed from <local @ ../../dbt/loomdb>" in out
    out = project.dbt("build")
    assert "PASS=12 WARN=0 ERROR=0 SKIP=0" in out

    [(source, rows, kind, uid)] = query(
        f"SELECT source, rows_processed, kind, uid FROM loom.models WHERE name = '{project.model}'"
    )
    assert source.endswith('"iris_training"') and rows == 120 and kind == "logistic"
    predictions = query(
        "SELECT id, species_id, predicted_id, predicted_id_native, confidence "
        "FROM iris_predictions ORDER BY id"
    )
    assert [p[0] for p in predictions] == list(range(5, 151, 5))  # the holdout rows
    assert all(p[2] in (0, 1, 2) and p[2] == p[3] and 0 < p[4] <= 1 for p in predictions)
    correct = sum(p[1] == p[2] for p in predictions)
    [(accuracy, evaluated)] = query("SELECT accuracy, rows_evaluated FROM iris_metrics")
    assert evaluated == 30 and accuracy == pytest.approx(correct / 30) and accuracy >= 0.85

    # A training hook inside the model's transaction: PostgreSQL trains there (it sees the
    # uncommitted rows and would roll back with them); DuckDB refuses, the model untouched.
    project.hook_inside_transaction(True)
    out = project.dbt("run", "-s", "iris_training", ok=project.target == "postgres")
    [(after,)] = query(f"SELECT uid FROM loom.models WHERE name = '{project.model}'")
    if project.target == "duckdb":
        assert "cannot start a transaction within a transaction" in out
        assert after == uid
        project.hook_inside_transaction(False)  # back after the commit: retrains (replace)
        project.dbt("run", "-s", "iris_training")
        [(after, rows)] = query(
            f"SELECT uid, rows_processed FROM loom.models WHERE name = '{project.model}'"
        )
        assert rows == 120
    assert after != uid

    other = f"{project.model}_op"
    args = {"model": other, "relation": f"{project.schema}.iris_training", "label": "species_id"}
    out = project.dbt("run-operation", "loomdb.run_train", "--args", json.dumps(args))
    assert f'"model": "{other}"' in out and '"rows": 120' in out
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{other}'") == [(1,)]
    project.dbt("run-operation", "loomdb.drop_model", "--args", json.dumps({"model": other}))
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{other}'") == [(0,)]


@pytest.mark.slow
def test_example_project_on_duckdb(tmp_path):
    path = tmp_path / "example.duckdb"
    project = Project(
        tmp_path, "duckdb", {"LOOMDB_DBT_DUCKDB_PATH": str(path), "LOOMDB_DBT_SCHEMA": "main"}
    )

    def query(sql: str) -> list[tuple]:
        with duckdb.connect(str(path), read_only=True) as con:
            return con.execute(sql).fetchall()

    check_project(project, query)


def pg_env(pg_dsn: str, schema: str) -> dict[str, str]:
    """The example's postgres target pointed at the session's server, building in ``schema``."""
    params = conninfo_to_dict(pg_dsn)
    return {
        "PGHOST": str(params.get("host", "localhost")),
        "PGPORT": str(params.get("port", 5432)),
        "PGUSER": str(params.get("user", "postgres")),
        "PGPASSWORD": str(params.get("password", "")),
        "PGDATABASE": str(params.get("dbname", "postgres")),
        "LOOMDB_DBT_SCHEMA": schema,
    }


@pytest.mark.slow
@pytest.mark.postgres
def test_example_project_on_postgres(tmp_path, pg_dsn):
    env = pg_env(pg_dsn, f"loomdb_dbt_{uuid.uuid4().hex[:10]}")
    project = Project(tmp_path, "postgres", env)
    schema = project.schema
    conn = psycopg.connect(pg_dsn, autocommit=True)

    def query(sql: str) -> list[tuple]:
        conn.execute(f'SET search_path = "{schema}", public')
        return conn.execute(sql).fetchall()

    try:
        check_project(project, query)
    finally:
        conn.execute(
            "SELECT loom_drop_model(name) FROM loom.models WHERE name = ANY(%s)",
            [[project.model, f"{project.model}_op"]],
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request, tmp_path) -> Iterator[tuple[str, dict[str, str], Callable[[str], list[tuple]]]]:
    """A fresh place for the example on each engine: (the target, its dbt environment,
    ``query(sql)``);
    the loomdb models made there are dropped afterwards."""
    if request.param == "duckdb":
        path = tmp_path / "example.duckdb"

        def query(sql: str) -> list[tuple]:  # between dbt's runs, which open the file themselves
            con = loomdb.connect(str(path), progress=False)
            try:
                return con.execute(sql).fetchall()
            finally:
                con.close()

        yield "duckdb", {"LOOMDB_DBT_DUCKDB_PATH": str(path), "LOOMDB_DBT_SCHEMA": "main"}, query
        return
    env = pg_env(request.getfixturevalue("pg_dsn"), f"loomdb_dbt_{uuid.uuid4().hex[:10]}")
    conn = psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True)
    try:
        yield "postgres", env, lambda sql: conn.execute(sql).fetchall()  # type: ignore[arg-type]
    finally:
        for kind, table in (("model", "models"), ("index", "indexes")):
            conn.execute(
                f"SELECT loom_drop_{kind}(name) FROM loom.{table} WHERE name LIKE %s",  # type: ignore[arg-type]
                [f"{env['LOOMDB_DBT_SCHEMA']}%"],
            )
        conn.execute(f'DROP SCHEMA IF EXISTS "{env["LOOMDB_DBT_SCHEMA"]}" CASCADE')  # type: ignore[arg-type]
        conn.close()


def test_evaluate_test_refuses_a_bound_that_is_not_a_number(target, tmp_path):
    """The evaluate data test's min_value read as a float: a word was 0.0, so the test passed
    whatever the model's accuracy; it is refused when the test compiles."""
    project = Project(tmp_path, target[0], target[1])
    project.dbt("deps")
    for bound in ("high", "nan", "true"):
        (project.dir / "models" / "bounds.yml").write_text(
            "version: 2\nmodels:\n  - name: iris_holdout\n    data_tests:\n"
            "      - loomdb.evaluate:\n          arguments: {loomdb_model: m, metric: accuracy, "
            f"min_value: {bound}}}\n"
        )
        out = project.dbt("compile", "-s", "iris_holdout", ok=False)
        assert "loomdb.evaluate: min_value must be a finite number, got" in out, out[-3000:]


def test_train_options_as_json_text_or_refused(target, tmp_path):
    """run_train's options given as loom_train's JSON text are honoured; what is neither a
    mapping nor a JSON object is refused with what was wrong (it failed in Python's dict.update)."""
    name, env, query = target
    project = Project(tmp_path, name, env)
    project.model = f"{env['LOOMDB_DBT_SCHEMA']}_m"
    project.dbt("deps")
    project.dbt("seed")
    relation = (
        f"select sepal_length, sepal_width, petal_width, petal_length from {project.schema}.iris"
    )
    args = {"model": project.model, "relation": relation, "label": "petal_length"}
    options = {"model": "linear", "epochs": 3, "seed": 11}
    given = json.dumps({**args, "options": json.dumps(options)})
    out = project.dbt("run-operation", "loomdb.run_train", "--args", given)
    [(kind, stored)] = query(
        f"SELECT kind, options FROM loom.models WHERE name = '{project.model}'"
    )
    assert kind == "linear" and '"epochs": 3' in out
    assert json.loads(stored)["epochs"] == 3 and json.loads(stored)["seed"] == 11
    for bad in ("[1]", "not json", [1]):
        given = json.dumps({**args, "options": bad})
        out = project.dbt("run-operation", "loomdb.run_train", "--args", given, ok=False)
        assert "loomdb.train: options must be a mapping of the function's options" in out, out[
            -3000:
        ]
    [(still,)] = query(f"SELECT kind FROM loom.models WHERE name = '{project.model}'")
    assert still == "linear"


#: operators whose pg_catalog version needs a cast of what the macros (or the example) give
#: them, planted by another role: (operator, left, right, the function's body)
TRAPS = [
    ("<", "double precision", "numeric", "$1 OPERATOR(pg_catalog.<) $2::float8"),
    (">", "double precision", "numeric", "$1 OPERATOR(pg_catalog.>) $2::float8"),
    ("->>", "json", "json", "$1 OPERATOR(pg_catalog.->>) ($2 OPERATOR(pg_catalog.#>>) '{}')"),
    # the example's species (a seed column) against its names
    ("=", "character varying", "character varying", "$1::text OPERATOR(pg_catalog.=) $2::text"),
    # accepted_values' constants against the predictions
    ("=", "double precision", "integer", "$1 OPERATOR(pg_catalog.=) $2::float8"),
]

#: loomdb's functions the package calls, as lookalikes of the same signature another role puts
#: in a schema earlier on the search_path: (name, arguments, returns)
LOOKALIKES = [
    ("loom_train", "text, text, text, text", "text"),
    ("loom_predict", "text, double precision[]", "double precision"),
    ("loom_predict_proba", "text, double precision[]", "double precision"),
    ("loom_predict_sql", "text", "text"),
    ("loom_predict_proba_sql", "text", "text"),
    ("loom_evaluate", "text, text, text", "text"),
    ("loom_drop_model", "text, bigint", "text"),
]


def plant(as_bob: psycopg.Connection, schema: str, pg_dsn: str) -> None:
    """Another role's functions and operators where dbt's role would find them by name: in
    ``schema``, first on its search_path, and (an overload leaning on no default) in public."""
    as_bob.execute("CREATE TABLE ran (who text, what text)")
    as_bob.execute("GRANT INSERT ON ran TO PUBLIC")

    def record(what: str) -> str:
        return f"INSERT INTO {schema}.ran VALUES (current_user, '{what}')"

    # beside loomdb's own loom_evaluate(text, text, text DEFAULT '{}') and loom_drop_model(text,
    # bigint DEFAULT …) in public, where schemas are writable by all up to PostgreSQL 14: a
    # call leaning on the default was ambiguous (or bob's, were his schema first)
    with psycopg.connect(f"{pg_dsn} user=postgres", autocommit=True) as admin:
        admin.execute(f"GRANT CREATE ON SCHEMA public TO {as_bob.info.user}")  # type: ignore[arg-type]
    for name, args in (("loom_evaluate", "text, text"), ("loom_drop_model", "text")):
        as_bob.execute(
            f"CREATE FUNCTION public.{name}({args}) RETURNS text LANGUAGE plpgsql "  # type: ignore[arg-type]
            f"AS $$ BEGIN {record(name)}; RETURN NULL; END $$"
        )
    for name, args, returns in LOOKALIKES:
        as_bob.execute(
            f"CREATE FUNCTION {schema}.{name}({args}) RETURNS {returns} LANGUAGE plpgsql "  # type: ignore[arg-type]
            f"AS $$ BEGIN {record(name)}; RETURN NULL; END $$"
        )
    for i, (op, left, right, body) in enumerate(TRAPS):
        returns = "text" if op == "->>" else "boolean"
        as_bob.execute(
            f"CREATE FUNCTION trap_op{i}({left}, {right}) RETURNS {returns} "  # type: ignore[arg-type]
            f"LANGUAGE plpgsql AS $$ BEGIN {record(f'operator {op}')}; RETURN {body}; END $$"
        )
        as_bob.execute(
            f"CREATE OPERATOR {op} (LEFTARG = {left}, RIGHTARG = {right}, "  # type: ignore[arg-type]
            f"FUNCTION = trap_op{i})"
        )


@pytest.mark.slow
@pytest.mark.postgres
def test_macros_run_no_role_operator_on_postgres(tmp_path, pg_dsn):
    """The package's SQL (loomdb's functions, metrics out of loom_evaluate's JSON, the evaluate
    data test's bound) and the example's with another role's exact-match operators and
    lookalike loom_* functions in a schema first on the dbt role's search_path, where that role
    may create (CVE-2018-1058's pattern): none of them is run, by the build, a training
    run-operation or drop_model."""
    alice, bob, schema = names("dbtsp")
    with two_roles(pg_dsn, alice, bob, schema, ("models", "model_versions", "deployments")) as (
        _,
        as_bob,
    ):
        plant(as_bob, schema, pg_dsn)
        env = {
            **pg_env(pg_dsn, schema),
            "PGUSER": alice,
            "PGOPTIONS": f"-c search_path={schema},public",
        }
        project = Project(tmp_path, "postgres", env)
        project.model = f"{schema}_m"
        project.dbt("deps")
        out = project.dbt("build")
        assert "ERROR=0" in out
        other = f"{schema}_op"
        args = {"model": other, "relation": f"{schema}.iris_training", "label": "species_id"}
        out = project.dbt("run-operation", "loomdb.run_train", "--args", json.dumps(args))
        assert '"rows": 120' in out
        project.dbt("run-operation", "loomdb.drop_model", "--args", json.dumps({"model": other}))
        assert as_bob.execute("SELECT * FROM ran").fetchall() == []
        as_alice = connect(pg_dsn, alice, schema)
        try:
            [(accuracy,)] = as_alice.execute("SELECT accuracy FROM iris_metrics").fetchall()
            assert accuracy >= 0.85
            assert as_alice.execute(
                "SELECT count(*) FROM loom.models WHERE name = %s", [other]
            ).fetchall() == [(0,)]
            # the traps work where a query names them
            as_alice.execute("SELECT 0.5::float8 < 0.9, loom_predict_sql('m')")
        finally:
            as_alice.close()
        ran = as_bob.execute("SELECT who, what FROM ran ORDER BY what").fetchall()
        assert ran == [(alice, "loom_predict_sql"), (alice, "operator <")]


def test_train_on_an_index_with_no_relation(target, tmp_path):
    """loom_train's source is NULL when it trains on an index: the relation none reached it as
    the text 'None', which no index was built on."""
    name, env, query = target
    project = Project(tmp_path, name, env)
    project.dbt("deps")
    project.dbt("build", "-s", "+iris_training", "--exclude", "test_type:data")
    index, model = f"{project.schema}_ix", f"{project.schema}_on_ix"
    query(f"SELECT loom_create_index('{index}', '{project.schema}.iris_training', 'species_id')")
    args = {"model": model, "relation": None, "label": "species_id", "options": {"index": index}}
    out = project.dbt("run-operation", "loomdb.run_train", "--args", json.dumps(args))
    assert '"rows": 120' in out
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{model}'") == [(1,)]


def test_evaluate_passes_its_options(target, tmp_path):
    """loomdb.evaluate and the evaluate data test hand loom_evaluate its options (they took
    none: loom_evaluate's split or scans could not be given from dbt)."""
    name, env, _ = target
    project = Project(tmp_path, name, env)
    project.dbt("deps")
    (project.dir / "models" / "evaluated.yml").write_text(
        "version: 2\nmodels:\n  - name: iris_holdout\n    data_tests:\n"
        "      - loomdb.evaluate:\n          arguments:"
        " {loomdb_model: \"{{ var('loomdb_model') }}\","
        " metric: accuracy, min_value: 0.5, options: {nope: 1}}\n"
    )
    out = project.dbt("build", "-s", "+iris_training", "iris_holdout", ok=False)
    assert "unknown loom_evaluate option 'nope'" in out, out[-3000:]


def test_predict_refuses_no_columns(target, tmp_path):
    """loomdb.predict over no columns (or a mapping, or a number) is refused when the model
    compiles; an empty list became ARRAY[], which PostgreSQL cannot type."""
    project = Project(tmp_path, target[0], target[1])
    project.dbt("deps")
    for columns in ("[]", "{'sepal_length': 1}", "4"):
        (project.dir / "models" / "scored.sql").write_text(
            f"select {{{{ loomdb.predict('m', {columns}) }}}} as p from {{{{ ref('iris') }}}}"
        )
        out = project.dbt("compile", "-s", "scored", ok=False)
        assert "loomdb: columns must be a non-empty list of column names" in out, out[-3000:]


def test_an_empty_run_skips_training(target, tmp_path):
    """``dbt run --empty`` builds every model without rows; the training post-hook failed on
    its empty relation ("nothing to learn from"). It logs that it skips training and leaves
    the model trained before as it was."""
    name, env, query = target
    project = Project(tmp_path, name, env)
    project.model = f"{env['LOOMDB_DBT_SCHEMA']}_m"
    project.dbt("deps")
    project.dbt("build", "-s", "+iris_training", "--exclude", "test_type:data")
    [(uid, rows)] = query(
        f"SELECT uid, rows_processed FROM loom.models WHERE name = '{project.model}'"
    )
    assert rows == 120
    out = project.dbt("run", "--empty", "-s", "+iris_training")
    assert f"loomdb: --empty: not training {project.model}" in out
    assert query(f"SELECT uid FROM loom.models WHERE name = '{project.model}'") == [(uid,)]
    project.dbt("run", "-s", "+iris_training")  # without --empty the hook trains again
    [(again,)] = query(f"SELECT uid FROM loom.models WHERE name = '{project.model}'")
    assert again != uid


def test_an_empty_build_on_a_fresh_database(target, tmp_path):
    """``dbt build --empty`` where no model was ever trained: every model builds without rows
    and every test passes. The evaluate data test failed (no metric: loom_evaluate found no
    model) and iris_predictions could not compile (loom_predict_sql found no model); now the
    package logs what it skips, predictions have no rows and the metrics are NULL."""
    name, env, query = target
    project = Project(tmp_path, name, env)
    project.model = f"{env['LOOMDB_DBT_SCHEMA']}_m"
    project.dbt("deps")
    out = project.dbt("build", "--empty")
    assert "PASS=12 WARN=0 ERROR=0 SKIP=0" in out, out[-5000:]
    for skipped in (
        f"not training {project.model}",
        f"not compiling {project.model}",
        f"not evaluating {project.model}",
        f"the evaluate test of {project.model} passes unevaluated",
    ):
        assert f"loomdb: --empty: {skipped}" in out
    schema = f'"{project.schema}"'
    assert query(f"SELECT count(*) FROM {schema}.iris_predictions") == [(0,)]
    assert query(f"SELECT accuracy, metrics FROM {schema}.iris_metrics") == [(None, None)]
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{project.model}'") == [(0,)]


def test_evaluate_test_honours_a_where_config(target, tmp_path):
    """The evaluate data test with dbt's ``where`` config, which makes the tested relation a
    subquery with an alias: loom_evaluate refused it ("source must be a table name or exactly
    one SELECT statement"); it evaluates the rows the ``where`` keeps."""
    project = Project(tmp_path, target[0], target[1])
    project.dbt("deps")
    project.dbt("build", "-s", "+iris_training", "+iris_holdout", "--exclude", "test_type:data")
    for where, ok in (("species_id = 0", True), ("species_id >= 0", False)):
        (project.dir / "models" / "where.yml").write_text(
            "version: 2\nmodels:\n  - name: iris_holdout\n    data_tests:\n"
            "      - loomdb.evaluate:\n          arguments:"
            " {loomdb_model: \"{{ var('loomdb_model') }}\", metric: rows, min_value: 10,"
            f' max_value: 10}}\n          config: {{where: "{where}"}}\n'
        )
        out = project.dbt("test", "-s", "iris_holdout", ok=ok)
        # the 10 holdout rows of one species; all 30 are out of bounds, a failure, not an error
        assert ("PASS=1" if ok else "FAIL 1 loomdb_evaluate_iris_holdout") in out, out[-3000:]


@pytest.fixture
def without_loomdb(request, tmp_path) -> Iterator[tuple[str, dict[str, str]]]:
    """A place for the example without loomdb: (the target, its dbt environment). DuckDB: the
    profile without loomdb's plugin; PostgreSQL: a database where the extension is not made."""
    if request.param == "duckdb":
        yield "duckdb", {"LOOMDB_DBT_DUCKDB_PATH": str(tmp_path / "x.duckdb")}
        return
    pg_dsn = request.getfixturevalue("pg_dsn")
    dbname = f"noloomdb_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{pg_dsn} user=postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')  # type: ignore[arg-type]
    try:
        yield "postgres", {**pg_env(pg_dsn, "loomdb_example"), "PGDATABASE": dbname}
    finally:
        with psycopg.connect(f"{pg_dsn} user=postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "without_loomdb",
    ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
def test_a_database_without_loomdb_is_named(without_loomdb, tmp_path):
    """A model calling loomdb's functions where loomdb is missing is refused when it compiles,
    saying what to add, rather than with the engine's "function does not exist"."""
    target, env = without_loomdb
    project = Project(tmp_path, target, {"LOOMDB_DBT_SCHEMA": "main", **env})
    if target == "duckdb":
        profiles = project.dir / "profiles.yml"
        plugin = "      plugins:\n        - module: loomdb.dbt"
        assert plugin in profiles.read_text()
        profiles.write_text(profiles.read_text().replace(plugin, "      plugins: []  #"))
    project.dbt("deps")
    (project.dir / "models" / "scored.sql").write_text(
        "select {{ loomdb.predict('m', ['1']) }} as p"
    )
    out = project.dbt("compile", "-s", "scored", ok=False)
    expected = {
        "duckdb": "loomdb: loom_predict is not registered on dbt's DuckDB connection (hint: add "
        "loomdb's plugin to the profile's output",
        "postgres": "loomdb: the loomdb extension is not installed in this database, so "
        "loom_predict cannot be called (hint: a superuser runs loomdb pg install",
    }
    assert expected[target] in out, out[-3000:]


def test_an_ephemeral_relation_is_refused_when_it_compiles(target, tmp_path):
    """loomdb.evaluate, the evaluate data test (with and without a ``where`` config) and
    loomdb.train given an ephemeral model: it renders as the CTE name ``__dbt__cte__…``, which
    loom_evaluate's and loom_train's own queries cannot see, so loomdb answered that no such
    relation exists. Each is refused before it runs, naming the model and what to do."""
    name, env, query = target
    project = Project(tmp_path, name, env)
    project.model = f"{env['LOOMDB_DBT_SCHEMA']}_m"
    project.dbt("deps")
    project.dbt("seed")
    models = project.dir / "models"
    (models / "holdout_cte.sql").write_text(
        "{{ config(materialized='ephemeral') }}\nselect * from {{ ref('iris_holdout') }}\n"
    )
    (models / "cte_metrics.sql").write_text(
        "select {{ loomdb.evaluate(var('loomdb_model'), ref('holdout_cte')) }} as metrics\n"
    )
    hook = "loomdb.train(var('loomdb_model'), ref('holdout_cte'), 'species_id')"
    (models / "cte_trained.sql").write_text(
        f'{{{{ config(post_hook={{"sql": "{{{{ {hook} }}}}", "transaction": false}}) }}}}\n'
        "select * from {{ ref('holdout_cte') }}\n"
    )
    refused = "is an ephemeral model (a CTE of this query's), which {} cannot read"
    hint = "materialize holdout_cte as a view or table"
    out = project.dbt("compile", "-s", "cte_metrics", ok=False)
    assert f"loomdb.evaluate: holdout_cte {refused.format('loom_evaluate')}" in out, out[-3000:]
    assert hint in out
    out = project.dbt("run", "-s", "+cte_trained", ok=False)
    assert f"loomdb.train: holdout_cte {refused.format('loom_train')}" in out, out[-3000:]
    assert hint in out
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{project.model}'") == [(0,)]
    for config in ("", '\n          config: {where: "species_id = 0"}'):
        (models / "cte_tested.yml").write_text(
            "version: 2\nmodels:\n  - name: holdout_cte\n    data_tests:\n"
            "      - loomdb.evaluate:\n          arguments:"
            f" {{loomdb_model: m, metric: rows, min_value: 1}}{config}\n"
        )
        out = project.dbt("test", "-s", "holdout_cte", ok=False)
        assert f"loomdb.evaluate: holdout_cte {refused.format('loom_evaluate')}" in out, out[-3000:]


def test_a_sampled_ref_is_trained_predicted_and_evaluated(target, tmp_path):
    """``dbt run --sample`` renders a ref to a model with an ``event_time`` as a subquery with an
    alias, ``(select … where seen_at >= …) _dbt_et_filter_subq_timed``: loom_evaluate and
    loom_train refused it as their source ("exactly one SELECT statement"). loomdb.evaluate,
    loomdb.train and loomdb.predict each read the rows the sample window keeps."""
    name, env, query = target
    project = Project(tmp_path, name, env)
    project.model = f"{env['LOOMDB_DBT_SCHEMA']}_m"
    sampled = f"{env['LOOMDB_DBT_SCHEMA']}_sampled"
    project.dbt("deps")
    project.dbt("build", "-s", "+iris_training", "--exclude", "test_type:data")
    models = project.dir / "models"
    # the even ids inside the window, the odd ones a year before it
    (models / "timed.sql").write_text(
        "{{ config(event_time='seen_at') }}\n"
        "select id, sepal_length, sepal_width, petal_length, petal_width, species_id,\n"
        "  case when id % 2 = 0 then cast('2024-01-10' as timestamp)\n"
        "       else cast('2023-01-10' as timestamp) end as seen_at\n"
        "from {{ ref('iris_features') }}\n"
    )
    (models / "sampled_metrics.sql").write_text(
        "-- depends_on: {{ ref('iris_training') }}\n"
        "select {{ loomdb.metric(loomdb.evaluate(var('loomdb_model'), ref('timed')), 'rows') }}"
        " as rows_evaluated\n"
    )
    features = "['sepal_length', 'sepal_width', 'petal_length', 'petal_width']"
    (models / "sampled_predictions.sql").write_text(
        "-- depends_on: {{ ref('iris_training') }}\n"
        f"select id, {{{{ loomdb.predict(var('loomdb_model'), {features}) }}}} as p"
        " from {{ ref('timed') }}\n"
    )
    hook = f"loomdb.train('{sampled}', ref('timed'), 'species_id', {{'features': {features}}})"
    (models / "sampled_training.sql").write_text(
        f'{{{{ config(post_hook={{"sql": "{{{{ {hook} }}}}", "transaction": false}}) }}}}\n'
        "select count(*) as n from {{ ref('timed') }}\n"
    )
    project.dbt("run", "-s", "timed")
    window = json.dumps({"start": "2024-01-01", "end": "2024-02-01"})
    project.dbt(
        "run",
        "-s",
        "sampled_metrics",
        "sampled_predictions",
        "sampled_training",
        "--sample",
        window,
    )
    schema = f'"{project.schema}"'
    even = [(i,) for i in range(2, 151, 2)]
    assert query(f"SELECT id FROM {schema}.sampled_predictions ORDER BY id") == even
    assert query(f"SELECT rows_evaluated FROM {schema}.sampled_metrics") == [(75,)]
    assert query(f"SELECT n FROM {schema}.sampled_training") == [(75,)]
    assert query(f"SELECT rows_processed FROM loom.models WHERE name = '{sampled}'") == [(75,)]
