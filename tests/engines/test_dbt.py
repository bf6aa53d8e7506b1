"""The dbt example (examples/dbt) run by real dbt-core on both engines: dbt-duckdb with loomdb's
plugin (``loomdb.dbt``) and dbt-postgres against the session's server.

On each engine one copy of the example is built the way the README runs it, from the command
line (``dbt deps`` installs the package in dbt/loomdb, ``dbt build`` seeds iris, builds the
features, trains the model in a post-hook after the training rows commit, predicts with the UDF
and with the compiled expression, evaluates, and runs the data tests); the tests then run dbt in
that project (``run-operation`` trains and drops a model, a training hook moved inside the
model's transaction trains there on PostgreSQL and is refused on DuckDB, where loom_train
commits on a connection of its own), each adding the models and data tests it needs and
removing them after.  A test that needs a database of its own (an empty build on a fresh one,
one without loomdb, another role's traps) gets a copy of the example with the package dbt deps
installed once.  dbt runs from the environment ``LOOMDB_DBT`` names (scripts/setup.sh makes
one), else beside this Python: the example's deps and build as its executable, every other run
as that dbt's own command line in a process forked from one that imported dbt once
(tests/support/dbt_warm.py), which saves dbt's start-up (2-3 s a run).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import loomdb
from conftest import need
from support.roles import connect, names, two_roles

ROOT = Path(__file__).resolve().parents[2]
WARM = ROOT / "tests" / "support" / "dbt_warm.py"
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
TIMEOUT = 300  # seconds for one dbt run
ENGINES = ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]

Query = Callable[[str], list[tuple]]


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


def dbt_python(dbt: Path) -> Path | None:
    """The Python a dbt script runs with (its ``#!`` line, else the one beside it), or None."""
    line = dbt.read_bytes()[:1024].split(b"\n", 1)[0].decode(errors="replace")
    words = line[2:].split() if line.startswith("#!") else []
    if len(words) > 1 and Path(words[0]).name == "env":
        words = [shutil.which(words[1]) or ""]
    for python in ([Path(words[0])] if words and words[0] else []) + [dbt.parent / "python"]:
        if python.name.startswith("python") and python.is_file():
            return python
    return None


def dbt_env(env: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        **env,
        # the loomdb this test imports, whichever environment dbt runs from
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(loomdb.__file__).parents[1]), os.environ.get("PYTHONPATH")])
        ),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
    }


class Warm:
    """dbt's command line with its imports done once (tests/support/dbt_warm.py): each run a
    forked process of its own, as from a shell."""

    def __init__(self, python: Path, where: Path):
        self.out = where / "dbt.out"
        self.alive = True
        self.proc = subprocess.Popen(
            [str(python), str(WARM)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=where,
            env=dbt_env({}),
            text=True,
            start_new_session=True,  # its runs with it: stopped together after a timeout
        )

    def run(
        self, args: list[str], cwd: Path, env: dict[str, str], warm: bool = False
    ) -> tuple[int, str]:
        """(exit status, output) of ``dbt args`` in ``cwd``; ``warm``: a parse in the runner
        itself, so that every later run finds what dbt makes on its first."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"args": args, "cwd": str(cwd), "env": env, "out": str(self.out), "warm": warm}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        if not line:  # the later runs go to dbt's executable
            self.close(wait=0.1)
            said = self.out.read_text(errors="replace")[-3000:]
            raise AssertionError(f"dbt {' '.join(args)}: no answer from the runner\n{said}")
        return json.loads(line)["rc"], self.out.read_text(errors="replace")

    def close(self, wait: float = 30) -> None:
        """Stop the runner: at the end of its input, or with its process group (its run) after
        ``wait`` seconds."""
        self.alive = False
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="module")
def dbt_warm(tmp_path_factory) -> Iterator[Warm | None]:
    """The forking runner, where dbt is a Python script (else every run is the executable's);
    stopped after this module's tests."""
    python = dbt_python(dbt_executable())
    if python is None:
        yield None
        return
    warm = Warm(python, tmp_path_factory.mktemp("dbt-warm"))
    try:
        yield warm
    finally:
        warm.close()


class Project:
    """A copy of examples/dbt and dbt/loomdb (same relative layout) run with one target;
    ``packages``: a project whose dbt deps's result (dbt_packages, package-lock.yml) it takes."""

    def __init__(
        self,
        where: Path,
        target: str,
        env: dict[str, str],
        warm: Warm | None,
        packages: Project | None = None,
    ):
        shutil.copytree(ROOT / "examples" / "dbt", where / "examples" / "dbt")
        shutil.copytree(ROOT / "dbt" / "loomdb", where / "dbt" / "loomdb")
        self.dir = where / "examples" / "dbt"
        if packages is not None:
            shutil.copytree(packages.dir / "dbt_packages", self.dir / "dbt_packages", symlinks=True)
            shutil.copy(packages.dir / "package-lock.yml", self.dir)
        self.target = target
        self.schema = env["LOOMDB_DBT_SCHEMA"]
        self.model = f"{self.schema}_m"
        self.env = dbt_env(env)
        self.warm = warm
        self.command = str(dbt_executable())

    def dbt(self, *args: str, ok: bool = True, cli: bool = False) -> str:
        """dbt's output; ``cli``: the dbt executable itself, as a user runs it."""
        argv = [*args, "--profiles-dir", str(self.dir), "--target", self.target]
        if args[0] != "deps":
            argv += ["--vars", json.dumps({"loomdb_model": self.model})]
        if cli or self.warm is None or not self.warm.alive:
            done = subprocess.run(
                [self.command, *argv],
                cwd=self.dir,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            code, out = done.returncode, done.stdout + done.stderr
        else:
            code, out = self.warm.run(argv, self.dir, self.env)
        assert (code == 0) == ok, f"dbt {' '.join(args)}: exit {code}\n{out[-5000:]}"
        return out

    @contextmanager
    def hook_inside_transaction(self) -> Iterator[None]:
        """The example's training hook inside the model's transaction, then back outside."""
        config = self.dir / "dbt_project.yml"
        text = config.read_text()
        assert "transaction: false" in text
        config.write_text(text.replace("transaction: false", "transaction: true"))
        try:
            yield
        finally:
            config.write_text(text)

    @contextmanager
    def files(self, written: dict[str, str]) -> Iterator[None]:
        """Files written into the project (paths relative to it), removed afterwards."""
        paths = [self.dir / name for name in written]
        try:
            for path, text in zip(paths, written.values()):
                path.write_text(text)
            yield
        finally:
            for path in paths:
                path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def packages(tmp_path_factory, dbt_warm) -> Project:
    """A copy of the example where dbt deps ran: the package the other copies take. Its parse
    primes the forking runner."""
    where = tmp_path_factory.mktemp("dbt-packages")
    env = {"LOOMDB_DBT_DUCKDB_PATH": str(where / "unused.duckdb"), "LOOMDB_DBT_SCHEMA": "main"}
    project = Project(where, "duckdb", env, dbt_warm)
    project.dbt("deps")
    if dbt_warm is not None:
        argv = ["parse", "--profiles-dir", str(project.dir), "--target", "duckdb"]
        code, out = dbt_warm.run(argv, project.dir, project.env, warm=True)
        assert code == 0, f"dbt parse: exit {code}\n{out[-5000:]}"
    return project


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


@contextmanager
def database(request, engine: str, where: Path) -> Iterator[tuple[dict[str, str], Query]]:
    """A fresh place for the example on ``engine``: (its dbt environment, ``query(sql)``); on
    PostgreSQL a schema of its own (``query`` finds its tables first), dropped afterwards with
    the loomdb models and indexes named after it."""
    if engine == "duckdb":
        path = where / "example.duckdb"

        def query(sql: str) -> list[tuple]:  # between dbt's runs, which open the file themselves
            con = loomdb.connect(str(path), progress=False)
            try:
                return con.execute(sql).fetchall()
            finally:
                con.close()

        yield {"LOOMDB_DBT_DUCKDB_PATH": str(path), "LOOMDB_DBT_SCHEMA": "main"}, query
        return
    env = pg_env(request.getfixturevalue("pg_dsn"), f"loomdb_dbt_{uuid.uuid4().hex[:10]}")
    schema = env["LOOMDB_DBT_SCHEMA"]
    conn = psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True)
    conn.execute(f'SET search_path = "{schema}", public')  # type: ignore[arg-type]
    try:
        yield env, lambda sql: conn.execute(sql).fetchall()  # type: ignore[arg-type]
    finally:
        for kind, table in (("model", "models"), ("index", "indexes")):
            conn.execute(
                f"SELECT loom_drop_{kind}(name) FROM loom.{table} WHERE name LIKE %s",  # type: ignore[arg-type]
                [f"{schema}%"],
            )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
        conn.close()


@dataclass
class Site:
    """The example built on one engine: its project, ``query(sql)`` on the database dbt wrote,
    and what ``dbt deps`` and ``dbt build`` said."""

    project: Project
    query: Query
    said: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module", params=ENGINES)
def built(request, tmp_path_factory, packages) -> Iterator[Site]:
    """The example on each engine, built from dbt's command line as the README runs it."""
    where = tmp_path_factory.mktemp(f"dbt-{request.param}")
    with database(request, request.param, where) as (env, query):
        project = Project(where, request.param, env, packages.warm)
        said = {"deps": project.dbt("deps", cli=True), "build": project.dbt("build", cli=True)}
        yield Site(project, query, said)


@pytest.fixture(params=ENGINES)
def fresh(request, tmp_path, packages) -> Iterator[Site]:
    """The example on each engine in a database of its own, not built."""
    with database(request, request.param, tmp_path) as (env, query):
        yield Site(Project(tmp_path, request.param, env, packages.warm, packages), query)


@pytest.mark.slow
def test_example_project(built):
    """``dbt deps && dbt build`` from the command line, what the build made, then the hook
    inside the transaction and the run-operations."""
    project, query = built.project, built.query
    assert "Installed from <local @ ../../dbt/loomdb>" in built.said["deps"]
    assert "PASS=12 WARN=0 ERROR=0 SKIP=0" in built.said["build"]

    [(source, rows, kind, uid)] = query(
        f"SELECT source, rows_processed, kind, uid FROM loom.models WHERE name = '{project.model}'"
    )
    assert source.endswith('"iris_training"') and rows == 120 and kind == "logistic"
    predictions = query(
        "SELECT id, species_id, predicted_id, predicted_id_native, confidence "
        f'FROM "{project.schema}".iris_predictions ORDER BY id'
    )
    assert [p[0] for p in predictions] == list(range(5, 151, 5))  # the holdout rows
    assert all(p[2] in (0, 1, 2) and p[2] == p[3] and 0 < p[4] <= 1 for p in predictions)
    correct = sum(p[1] == p[2] for p in predictions)
    [(accuracy, evaluated)] = query(
        f'SELECT accuracy, rows_evaluated FROM "{project.schema}".iris_metrics'
    )
    assert evaluated == 30 and accuracy == pytest.approx(correct / 30) and accuracy >= 0.85

    # A training hook inside the model's transaction: PostgreSQL trains there (it sees the
    # uncommitted rows and would roll back with them); DuckDB refuses, the model untouched.
    with project.hook_inside_transaction():
        out = project.dbt("run", "-s", "iris_training", ok=project.target == "postgres")
    [(after,)] = query(f"SELECT uid FROM loom.models WHERE name = '{project.model}'")
    if project.target == "duckdb":
        assert "cannot start a transaction within a transaction" in out
        assert after == uid
        project.dbt("run", "-s", "iris_training")  # back after the commit: retrains (replace)
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


def test_evaluate_test_refuses_a_bound_that_is_not_a_number(built):
    """The evaluate data test's min_value read as a float: a word was 0.0, so the test passed
    whatever the model's accuracy; it is refused when the test compiles (when dbt parses it:
    one bound a run)."""
    project = built.project
    for bound in ("high", "nan", "true"):
        bounds = (
            "version: 2\nmodels:\n  - name: iris_holdout\n    data_tests:\n"
            "      - loomdb.evaluate:\n          arguments: {loomdb_model: m, metric: accuracy, "
            f"min_value: {bound}}}\n"
        )
        with project.files({"models/bounds.yml": bounds}):
            out = project.dbt("compile", "-s", "iris_holdout", ok=False)
        assert "loomdb.evaluate: min_value must be a finite number, got" in out, out[-3000:]


def test_train_options_as_json_text_or_refused(built):
    """run_train's options given as loom_train's JSON text are honoured; what is neither a
    mapping nor a JSON object is refused with what was wrong (it failed in Python's dict.update)."""
    project, query = built.project, built.query
    model = f"{project.schema}_options"
    relation = (
        f"select sepal_length, sepal_width, petal_width, petal_length from {project.schema}.iris"
    )
    args = {"model": model, "relation": relation, "label": "petal_length"}
    options = {"model": "linear", "epochs": 3, "seed": 11}
    given = json.dumps({**args, "options": json.dumps(options)})
    out = project.dbt("run-operation", "loomdb.run_train", "--args", given)
    [(kind, stored)] = query(f"SELECT kind, options FROM loom.models WHERE name = '{model}'")
    assert kind == "linear" and '"epochs": 3' in out
    assert json.loads(stored)["epochs"] == 3 and json.loads(stored)["seed"] == 11
    for bad in ("[1]", "not json", [1]):
        given = json.dumps({**args, "options": bad})
        out = project.dbt("run-operation", "loomdb.run_train", "--args", given, ok=False)
        assert "loomdb.train: options must be a mapping of the function's options" in out, out[
            -3000:
        ]
    [(still,)] = query(f"SELECT kind FROM loom.models WHERE name = '{model}'")
    assert still == "linear"


def test_train_on_an_index_with_no_relation(built):
    """loom_train's source is NULL when it trains on an index: the relation none reached it as
    the text 'None', which no index was built on."""
    project, query = built.project, built.query
    index, model = f"{project.schema}_ix", f"{project.schema}_on_ix"
    query(f"SELECT loom_create_index('{index}', '{project.schema}.iris_training', 'species_id')")
    args = {"model": model, "relation": None, "label": "species_id", "options": {"index": index}}
    out = project.dbt("run-operation", "loomdb.run_train", "--args", json.dumps(args))
    assert '"rows": 120' in out
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{model}'") == [(1,)]


def test_evaluate_passes_its_options(built):
    """loomdb.evaluate and the evaluate data test hand loom_evaluate its options (they took
    none: loom_evaluate's split or scans could not be given from dbt)."""
    project = built.project
    evaluated = (
        "version: 2\nmodels:\n  - name: iris_holdout\n    data_tests:\n"
        "      - loomdb.evaluate:\n          arguments:"
        " {loomdb_model: \"{{ var('loomdb_model') }}\","
        " metric: accuracy, min_value: 0.5, options: {nope: 1}}\n"
    )
    with project.files({"models/evaluated.yml": evaluated}):
        out = project.dbt("build", "-s", "iris_holdout", ok=False)
    assert "unknown loom_evaluate option 'nope'" in out, out[-3000:]


def test_predict_refuses_no_columns(built):
    """loomdb.predict over no columns (or a mapping, or a number) is refused when the model
    compiles (when dbt parses it: one a run); an empty list became ARRAY[], which PostgreSQL
    cannot type."""
    project = built.project
    for columns in ("[]", "{'sepal_length': 1}", "4"):
        scored = f"select {{{{ loomdb.predict('m', {columns}) }}}} as p from {{{{ ref('iris') }}}}"
        with project.files({"models/scored.sql": scored}):
            out = project.dbt("compile", "-s", "scored", ok=False)
        assert "loomdb: columns must be a non-empty list of column names" in out, out[-3000:]


def test_an_empty_build_on_a_fresh_database(fresh):
    """``dbt build --empty`` where no model was ever trained: every model builds without rows
    and every test passes. The evaluate data test failed (no metric: loom_evaluate found no
    model) and iris_predictions could not compile (loom_predict_sql found no model); now the
    package logs what it skips, predictions have no rows and the metrics are NULL."""
    project, query = fresh.project, fresh.query
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


def test_evaluate_test_honours_a_where_config(built):
    """The evaluate data test with dbt's ``where`` config, which makes the tested relation a
    subquery with an alias: loom_evaluate refused it ("source must be a table name or exactly
    one SELECT statement"); it evaluates the rows the ``where`` keeps."""
    project = built.project
    tests = "".join(
        f"      - loomdb.evaluate:\n{name}          arguments:"
        " {loomdb_model: \"{{ var('loomdb_model') }}\", metric: rows, min_value: 10,"
        f' max_value: 10}}\n          config: {{where: "{where}"}}\n'
        for name, where in (
            ("          name: setosa_holdout_rows\n", "species_id = 0"),
            ("", "species_id >= 0"),
        )
    )
    where = "version: 2\nmodels:\n  - name: iris_holdout\n    data_tests:\n" + tests
    with project.files({"models/where.yml": where}):
        out = project.dbt("test", "-s", "iris_holdout", ok=False)
    # the 10 holdout rows of one species pass; all 30 are out of bounds, a failure, not an error
    assert " PASS setosa_holdout_rows " in out, out[-3000:]
    assert "FAIL 1 loomdb_evaluate_iris_holdout" in out, out[-3000:]
    assert "PASS=1 WARN=0 ERROR=1 SKIP=0" in out, out[-3000:]


@pytest.fixture
def without_loomdb(request, tmp_path, packages) -> Iterator[Project]:
    """The example without loomdb. DuckDB: the profile without loomdb's plugin; PostgreSQL: a
    database where the extension is not made."""
    if request.param == "duckdb":
        env = {"LOOMDB_DBT_DUCKDB_PATH": str(tmp_path / "x.duckdb"), "LOOMDB_DBT_SCHEMA": "main"}
        project = Project(tmp_path, "duckdb", env, packages.warm, packages)
        profiles = project.dir / "profiles.yml"
        plugin = "      plugins:\n        - module: loomdb.dbt"
        assert plugin in profiles.read_text()
        profiles.write_text(profiles.read_text().replace(plugin, "      plugins: []  #"))
        yield project
        return
    pg_dsn = request.getfixturevalue("pg_dsn")
    dbname = f"noloomdb_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{pg_dsn} user=postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')  # type: ignore[arg-type]
    try:
        env = {**pg_env(pg_dsn, "loomdb_example"), "PGDATABASE": dbname}
        yield Project(tmp_path, "postgres", env, packages.warm, packages)
    finally:
        with psycopg.connect(f"{pg_dsn} user=postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')  # type: ignore[arg-type]


@pytest.mark.parametrize("without_loomdb", ENGINES, indirect=True)
def test_a_database_without_loomdb_is_named(without_loomdb):
    """A model calling loomdb's functions where loomdb is missing is refused when it compiles,
    saying what to add, rather than with the engine's "function does not exist"."""
    project = without_loomdb
    with project.files({"models/scored.sql": "select {{ loomdb.predict('m', ['1']) }} as p"}):
        out = project.dbt("compile", "-s", "scored", ok=False)
    expected = {
        "duckdb": "loomdb: loom_predict is not registered on dbt's DuckDB connection (hint: add "
        "loomdb's plugin to the profile's output",
        "postgres": "loomdb: the loomdb extension is not installed in this database, so "
        "loom_predict cannot be called (hint: a superuser runs loomdb pg install",
    }
    assert expected[project.target] in out, out[-3000:]


def test_an_ephemeral_relation_is_refused_when_it_compiles(built):
    """loomdb.evaluate, the evaluate data test (with and without a ``where`` config) and
    loomdb.train given an ephemeral model: it renders as the CTE name ``__dbt__cte__…``, which
    loom_evaluate's and loom_train's own queries cannot see, so loomdb answered that no such
    relation exists. Each is refused before it runs, naming the model and what to do."""
    project, query = built.project, built.query
    model = f"{project.schema}_cte"
    hook = f"loomdb.train('{model}', ref('holdout_cte'), 'species_id')"
    tests = "".join(
        f"      - loomdb.evaluate:\n{name}          arguments:"
        f" {{loomdb_model: m, metric: rows, min_value: 1}}{config}\n"
        for name, config in (
            ("", ""),
            (
                "          name: holdout_cte_rows_where\n",
                '\n          config: {where: "species_id = 0"}',
            ),
        )
    )
    files = {
        "models/holdout_cte.sql": "{{ config(materialized='ephemeral') }}\n"
        "select * from {{ ref('iris_holdout') }}\n",
        "models/cte_metrics.sql": "select {{ loomdb.evaluate(var('loomdb_model'),"
        " ref('holdout_cte')) }} as metrics\n",
        "models/cte_trained.sql": f'{{{{ config(post_hook={{"sql": "{{{{ {hook} }}}}",'
        " \"transaction\": false}) }}\nselect * from {{ ref('holdout_cte') }}\n",
        "models/cte_tested.yml": "version: 2\nmodels:\n  - name: holdout_cte\n    data_tests:\n"
        + tests,
    }
    refused = (
        "{}: holdout_cte is an ephemeral model (a CTE of this query's), which {} cannot read: it"
        " runs a query of its own (hint: materialize holdout_cte as a view or table"
    )
    with project.files(files):
        run = project.dbt("run", "-s", "cte_metrics", "cte_trained", ok=False)
        tested = project.dbt("test", "-s", "holdout_cte", ok=False)
    for out, node, fn in (
        (run, "model cte_metrics", "evaluate"),
        (run, "model cte_trained", "train"),
        (tested, "test loomdb_evaluate_holdout_cte_m__rows__1", "evaluate"),
        (tested, "test holdout_cte_rows_where", "evaluate"),
    ):  # each refused as dbt compiles it, saying why and what to do
        said = re.escape(refused.format(f"loomdb.{fn}", f"loom_{fn}"))
        assert re.search(rf"Compilation Error in {node} \(.*\)\n\s*{said}", out), out[-3000:]
    assert query(f"SELECT count(*) FROM loom.models WHERE name = '{model}'") == [(0,)]


def test_a_sampled_ref_is_trained_predicted_and_evaluated(built):
    """``dbt run --sample`` renders a ref to a model with an ``event_time`` as a subquery with an
    alias, ``(select … where seen_at >= …) _dbt_et_filter_subq_timed``: loom_evaluate and
    loom_train refused it as their source ("exactly one SELECT statement"). loomdb.evaluate,
    loomdb.train and loomdb.predict each read the rows the sample window keeps."""
    project, query = built.project, built.query
    sampled = f"{project.schema}_sampled"
    features = "['sepal_length', 'sepal_width', 'petal_length', 'petal_width']"
    hook = f"loomdb.train('{sampled}', ref('timed'), 'species_id', {{'features': {features}}})"
    files = {
        # the even ids inside the window, the odd ones a year before it
        "models/timed.sql": "{{ config(event_time='seen_at') }}\n"
        "select id, sepal_length, sepal_width, petal_length, petal_width, species_id,\n"
        "  case when id % 2 = 0 then cast('2024-01-10' as timestamp)\n"
        "       else cast('2023-01-10' as timestamp) end as seen_at\n"
        "from {{ ref('iris_features') }}\n",
        "models/sampled_metrics.sql": "-- depends_on: {{ ref('iris_training') }}\n"
        "select {{ loomdb.metric(loomdb.evaluate(var('loomdb_model'), ref('timed')), 'rows') }}"
        " as rows_evaluated\n",
        "models/sampled_predictions.sql": "-- depends_on: {{ ref('iris_training') }}\n"
        f"select id, {{{{ loomdb.predict(var('loomdb_model'), {features}) }}}} as p"
        " from {{ ref('timed') }}\n",
        "models/sampled_training.sql": f'{{{{ config(post_hook={{"sql": "{{{{ {hook} }}}}",'
        " \"transaction\": false}) }}\nselect count(*) as n from {{ ref('timed') }}\n",
    }
    window = json.dumps({"start": "2024-01-01", "end": "2024-02-01"})
    with project.files(files):
        # timed itself reads iris_features, which has no event_time: all its rows
        project.dbt(
            "run",
            "-s",
            "timed",
            "sampled_metrics",
            "sampled_predictions",
            "sampled_training",
            "--sample",
            window,
        )
    schema = f'"{project.schema}"'
    assert query(f"SELECT count(*) FROM {schema}.timed") == [(150,)]
    even = [(i,) for i in range(2, 151, 2)]
    assert query(f"SELECT id FROM {schema}.sampled_predictions ORDER BY id") == even
    assert query(f"SELECT rows_evaluated FROM {schema}.sampled_metrics") == [(75,)]
    assert query(f"SELECT n FROM {schema}.sampled_training") == [(75,)]
    assert query(f"SELECT rows_processed FROM loom.models WHERE name = '{sampled}'") == [(75,)]


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
def test_macros_run_no_role_operator_on_postgres(tmp_path, pg_dsn, packages):
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
        project = Project(tmp_path, "postgres", env, packages.warm, packages)
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


def test_an_empty_run_skips_training(built):
    """``dbt run --empty`` builds every model without rows; the training post-hook failed on
    its empty relation ("nothing to learn from"). It logs that it skips training and leaves
    the model trained before as it was. (Last of the tests on the built example: it empties
    the training rows until its second run.)"""
    project, query = built.project, built.query
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
