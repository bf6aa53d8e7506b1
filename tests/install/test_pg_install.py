"""``loomdb pg install``: as the README runs it, from a wheel; idempotent; refuses non-superusers.

The session's server (tests/support/pgserver.py) was installed with the README's exact command
from a fresh virtual environment holding a wheel of this checkout; these tests check what that
left behind, and install again only into a cluster the test run made itself.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import loomdb
from loomdb.engines.postgres import extension, index_am_install, server_setup
from loomdb.engines.postgres import install as pg_install
from loomdb.errors import LoomOptionError, LoomStateError
from loomdb.udfs import load

REPO = Path(__file__).resolve().parents[2]


# -- without a server --------------------------------------------------------------------------


def test_source_accepts_checkout_or_its_python_dir():
    assert pg_install.source_python_dir(str(REPO)) == str(REPO / "python")
    assert pg_install.source_python_dir(str(REPO / "python")) == str(REPO / "python")
    with pytest.raises(LoomOptionError, match="holds no loomdb package"):
        pg_install.source_python_dir(str(REPO / "tests"))


def test_writing_extension_files_refuses_paths(tmp_path):
    with pytest.raises(LoomStateError, match="refusing"):
        extension.write({"../evil.sql": ""}, str(tmp_path))
    written = extension.write({"loomdb.control": "x"}, str(tmp_path))
    assert written == ["loomdb.control"]
    assert (tmp_path / "loomdb.control").stat().st_mode & 0o777 == 0o644


def test_describe_dsn_hides_the_password():
    shown = server_setup.describe_dsn("postgresql://alice:secret@db.example:5433/prod")
    assert "secret" not in shown and "db.example" in shown and "5433" in shown


def test_a_server_older_than_14_is_refused():
    server_setup.check_version(14, "14.0")
    with pytest.raises(LoomStateError, match="PostgreSQL 13.9 is older") as caught:
        server_setup.check_version(13, "13.9")
    assert "14 or newer" in caught.value.hint


def test_install_says_when_the_server_cannot_be_reached():
    with pytest.raises(LoomStateError, match="could not connect"):
        pg_install.install("host=127.0.0.1 port=1 user=postgres connect_timeout=2", log=print)


def test_the_update_command_named_for_another_database_is_one_shell_word():
    """The install names each other database at an older loomdb with the command that updates
    it, to be copied into a root shell: a name its owner chose (ALTER DATABASE … RENAME) must
    reach that command as it is, never run as a command of its own."""
    dsn = "host=localhost user=postgres dbname=shop"
    for name in ("shop2", "shop$(echo ran)`echo ran`", 'sh"op\\!', "it's"):
        said: list[str] = []
        pg_install._name_outdated(dsn, "0.5.0", ({name: "0.4.0"}, {}), said.append)
        command = said[0].split("update it with ")[1].split(" (or, as a superuser")[0]
        word = command.removeprefix("loomdb pg install --dsn ")
        echoed = subprocess.run(
            ["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True
        ).stdout
        assert echoed == server_setup.describe_dsn(server_setup.in_database(dsn, name)), said
    assert pg_install.shell_word("dbname=shop2") == '"dbname=shop2"'  # as the README writes it


def test_cli_arguments():
    parser = argparse.ArgumentParser()
    pg_install.add_arguments(parser)
    args = parser.parse_args(["--dsn", "host=x", "--source", ".", "--reinstall"])
    assert (args.dsn, args.source, args.reinstall) == ("host=x", ".", True)
    assert not args.drop_catalog
    assert parser.parse_args(["--dsn", "x", "--reinstall", "--drop-catalog"]).drop_catalog
    assert args.venv == pg_install.DEFAULT_VENV and args.python == pg_install.DEFAULT_PYTHON


# -- the provisioned server --------------------------------------------------------------------


@pytest.mark.postgres
def test_the_readme_install_reported_a_checked_server(pg_dsn):
    from support import pgserver

    if pgserver.cluster is None:
        pytest.skip("the server was not installed by this test run")
    out = pgserver.cluster["output"]
    assert "checked: a train and a prediction run" in out
    assert "created" in out and "--source" not in out


@pytest.mark.postgres
def test_the_server_runs_the_installed_loomdb(pg_dsn):
    notices: list[str] = []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        assert conn.execute("SELECT loom_version()").fetchone() == (loomdb.__version__,)
        settings = dict(conn.execute("SELECT key, value FROM loom.settings").fetchall())
        conn.execute(
            "DO $$\n"
            "import os, sys\n"
            "plpy.notice(sys.modules['loomdb'].__file__)\n"
            "plpy.notice(os.environ.get('NUMBA_CACHE_DIR', ''))\n"
            "$$ LANGUAGE plpython3u"
        )
    loomdb_file, cache_dir = notices[-2:]
    assert loomdb_file.startswith(settings["venv"]) or settings["extra_path"]
    assert cache_dir == settings["numba_cache_dir"]


@pytest.mark.postgres
def test_every_function_exists_with_its_markings_for_loomdb_user_only(pg_dsn):
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT proname, provolatile, proparallel, proisstrict, pronargs, "
            "obj_description(p.oid, 'pg_proc'), "
            "has_function_privilege('loomdb_user', p.oid, 'EXECUTE'), "
            "EXISTS (SELECT 1 FROM unnest(proacl) AS a WHERE a::text LIKE '=%') "
            "FROM pg_proc p WHERE proname LIKE 'loom_%'"
        ).fetchall()
    found = {(r[0], r[5]): r[1:] for r in rows}  # by name and comment: overloads differ in it
    overloads = {u.overloads: u for u in load() if u.overloads}
    for udf in load():
        vol, par, strict, nargs, comment, usable, public = found[udf.name, udf.comment]
        if udf.name in overloads:  # the row form called by this name: the row form's markings
            row = overloads[udf.name]
            assert found[udf.name, row.comment][:4] == (vol, par, strict, nargs), udf.name
        assert vol == udf.volatility[0] and par == udf.parallel[0], udf.name
        assert strict == udf.strict and nargs == len(udf.args) and comment == udf.comment
    for (name, _), (*_, usable, public) in found.items():
        assert usable and not public, f"{name} must be executable by loomdb_user only"


@pytest.mark.postgres
def test_install_again_is_idempotent(pg_dsn):
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    lines: list[str] = []
    again = pg_install.install(pg_dsn, log=lines.append)
    assert again["action"] == "already installed"
    assert any("reusing virtual environment" in line for line in lines)
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT loom_version()").fetchone() == (loomdb.__version__,)


@pytest.mark.postgres
def test_reinstall_refuses_to_drop_a_catalog_that_holds_a_model(pg_dsn):
    """--reinstall drops the extension with loom.models and loom.indexes: while they hold rows
    it is refused before anything is done, and the model is still there."""
    with database_with_a_model(pg_dsn, "loom_reinstall") as dsn:
        with pytest.raises(LoomStateError, match="holds 1 model and 0 indexes") as refused:
            pg_install.install(dsn, reinstall=True, log=lambda line: None)
        assert "--drop-catalog" in refused.value.hint
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT name FROM loom.models").fetchall() == [("kept",)]


@pytest.mark.postgres
def test_reinstall_with_drop_catalog_drops_the_indexes_too(pg_dsn):
    """--reinstall --drop-catalog drops the indexes with the catalog, as it says: an index's
    storage table in loom_data, and a CREATE INDEX … USING relation, kept DROP EXTENSION from
    running, and the install was refused ("other objects depend on it").  The table stays."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    with database_with_a_model(pg_dsn, "loom_redrop") as dsn:
        methods = server_setup.index_methods(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT loom_create_index('ix', 't', 'y')")
            if methods:
                conn.execute("CREATE INDEX t_dense ON t USING dense (x) WITH (label = y)")
        assert server_setup.catalog_counts(dsn)["indexes"] == (2 if methods else 1)
        done = pg_install.install(dsn, reinstall=True, drop_catalog=True, log=lambda line: None)
        assert done["action"] == "reinstalled"
        assert server_setup.catalog_counts(dsn) == {"models": 0, "indexes": 0}
        with psycopg.connect(dsn) as conn:
            storage = "SELECT count(*) FROM pg_tables WHERE schemaname = 'loom_data'"
            assert conn.execute(storage).fetchone() == (0,)
            assert conn.execute("SELECT to_regclass('t_dense')").fetchone() == (None,)
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (40,)


@contextlib.contextmanager
def database_with_a_model(pg_dsn: str, name: str) -> Iterator[str]:
    """A new database of the server with loomdb and one model, ``kept``; its DSN, then gone."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    dsn = f"{pg_dsn} dbname={name}"
    try:
        server_setup.create_extension(dsn)
        assert server_setup.catalog_counts(dsn) == {"models": 0, "indexes": 0}
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE t AS SELECT g::float8 AS x, g % 2 AS y FROM generate_series(1, 40) g"
            )
            conn.execute("SELECT loom_train('kept', 't', 'y', '{\"epochs\": 1}')")
        yield dsn
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


EPOCH_FUNCTIONS = (
    "SELECT pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.pronamespace = 'loom'::regnamespace "
    "AND p.proname IN ('_epoch_step', '_epoch_combine') ORDER BY p.proname"
)


@pytest.mark.postgres
def test_install_again_with_another_numba_cache_moves_the_parallel_epoch_too(pg_dsn):
    """The parallel epoch's functions hold the server environment's paths in their bodies (their
    workers cannot read loom.settings).  Installing again at the same version with another
    --numba-cache-dir (or --venv, --source) pointed loom.settings at it but left those bodies
    on the old paths; now they read as a fresh CREATE EXTENSION of the new files makes them."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    with psycopg.connect(pg_dsn) as conn:
        settings = dict(conn.execute("SELECT key, value FROM loom.settings").fetchall())
        share = conn.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'").fetchone()
    parent = Path(tempfile.mkdtemp(prefix="loomdb-cache-"))
    parent.chmod(0o755)  # the server's OS user goes through it to its cache
    try:
        with database_with_a_model(pg_dsn, "loom_resettle") as dsn:
            done = pg_install.install(
                dsn, numba_cache_dir=str(parent / "cache"), log=lambda line: None
            )
            assert done["action"] == "already installed"
            with (
                database_with_a_model(pg_dsn, "loom_resettle_fresh") as fresh_dsn,
                psycopg.connect(fresh_dsn) as fresh,
                psycopg.connect(dsn) as moved,
            ):
                made = fresh.execute(EPOCH_FUNCTIONS).fetchall()
                assert str(parent / "cache") in made[0][0]
                assert moved.execute(EPOCH_FUNCTIONS).fetchall() == made
    finally:  # the extension files as the session's install wrote them
        assert share is not None
        extension.write(extension.files(settings), str(Path(share[0]) / "extension"))
        shutil.rmtree(parent, ignore_errors=True)


STRIP_PCR = (  # an extension as made before the C module was built, for the pcr method
    "ALTER EXTENSION loomdb DROP OPERATOR CLASS loom.pcr_bytea_ops USING pcr",
    "ALTER EXTENSION loomdb DROP OPERATOR FAMILY loom.pcr_bytea_ops USING pcr",
    "ALTER EXTENSION loomdb DROP ACCESS METHOD pcr",
    "ALTER EXTENSION loomdb DROP FUNCTION loom.pcr_handler(internal)",
    "ALTER EXTENSION loomdb DROP FUNCTION loom.finite(double precision)",
    "DROP ACCESS METHOD pcr CASCADE",
    "DROP FUNCTION loom.pcr_handler(internal)",
    "DROP FUNCTION loom.finite(double precision)",
)


@pytest.mark.postgres
def test_install_adds_the_c_module_in_place_keeping_the_catalog(pg_dsn):
    """An extension created before the C module was built lacks its access methods and C
    functions.  Running the install again adds them in place, each joined to the extension
    (so DROP EXTENSION removes them), and the catalog keeps its models; it used to advise
    --reinstall, which drops them.  A run with nothing missing adds nothing."""
    from conftest import need
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    if sorted(server_setup.index_methods(pg_dsn)) != sorted(index_am_install.METHODS):
        need("loomdb's index access methods (the C module)")
    with database_with_a_model(pg_dsn, "loom_inplace") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in STRIP_PCR:
                conn.execute(statement)
        assert "pcr" not in server_setup.index_methods(dsn)
        assert not server_setup.native_predict(dsn)
        lines: list[str] = []
        pg_install.install(dsn, log=lines.append)
        assert "the extension predates the C module: added 5 objects in place" in lines
        assert sorted(server_setup.index_methods(dsn)) == sorted(index_am_install.METHODS)
        assert server_setup.native_predict(dsn)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT name FROM loom.models").fetchall() == [("kept",)]
            members = conn.execute(
                "SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid "
                "WHERE e.extname = 'loomdb' AND d.deptype = 'e' AND ("
                "(d.classid = 'pg_am'::regclass AND d.objid = (SELECT oid FROM pg_am "
                "WHERE amname = 'pcr')) OR (d.classid = 'pg_proc'::regclass AND d.objid IN "
                "('loom.finite(double precision)'::regprocedure, "
                "'loom.pcr_handler(internal)'::regprocedure)))"
            ).fetchone()
            assert members == (3,)
        assert server_setup.add_native(dsn) == []


@pytest.mark.postgres
def test_install_refuses_a_role_that_is_not_superuser(pg_dsn):
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not adding a role to it")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE loom_plain LOGIN")
    try:
        with pytest.raises(LoomStateError, match="not a superuser"):
            pg_install.install(f"{pg_dsn} user=loom_plain", log=lambda line: None)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE loom_plain")


#: what the owner of a database plants in a schema of theirs put first on its search_path:
#: each makes a superuser that runs it make the owner one too
OWNER_TRAPS = [
    "CREATE FUNCTION mine.take() RETURNS text LANGUAGE plpgsql AS $$ BEGIN "
    "IF pg_catalog.current_setting('is_superuser') = 'on' THEN "
    "ALTER ROLE loom_dbowner SUPERUSER; END IF; "
    "RETURN '0.0.1'; END $$",
    "CREATE FUNCTION mine.current_setting(text) RETURNS text LANGUAGE sql "
    "AS 'SELECT mine.take(); SELECT pg_catalog.current_setting($1)'",
    "CREATE FUNCTION mine.to_regclass(text) RETURNS regclass LANGUAGE sql "
    "AS 'SELECT mine.take(); SELECT pg_catalog.to_regclass($1)'",
    "CREATE VIEW mine.pg_extension AS SELECT 0::oid AS oid, 'loomdb'::name AS extname, "
    "mine.take() AS extversion",
    "CREATE VIEW mine.pg_am AS SELECT mine.take()::name AS amname",
]


@pytest.mark.postgres
def test_reading_a_database_runs_no_code_of_its_owner(pg_dsn):
    """The install reads, as a superuser, the loomdb version of every database of the server,
    and the settings, catalog and loomdb objects of the DSN's.  A database's owner (a role
    with CREATEDB) sets its search_path to a schema of theirs first, with lookalikes there of
    what those reads name: neither the check of other databases nor those reads may run one."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not adding a role to it")
    role, database = "loom_dbowner", "loom_owned_db"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN CREATEDB")  # type: ignore[arg-type]
    try:
        with psycopg.connect(f"{pg_dsn} user={role}", autocommit=True) as owner:
            owner.execute(f"CREATE DATABASE {database}")  # type: ignore[arg-type]
        with psycopg.connect(
            server_setup.in_database(f"{pg_dsn} user={role}", database), autocommit=True
        ) as owner:
            owner.execute("CREATE SCHEMA mine")
            for trap in OWNER_TRAPS:
                owner.execute(trap)  # type: ignore[arg-type]
            owner.execute(f"ALTER DATABASE {database} SET search_path = mine, pg_catalog")  # type: ignore[arg-type]
        outdated, unread = server_setup.outdated_databases(pg_dsn, loomdb.__version__)
        there = server_setup.in_database(pg_dsn, database)
        with contextlib.suppress(LoomStateError):  # whatever it finds of the server
            server_setup.inspect_server(there)
        read = (
            server_setup.extension_version(there),
            server_setup.catalog_counts(there),
            server_setup.index_methods(there),
            server_setup.native_predict(there),
        )
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            (superuser,) = conn.execute(
                "SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role]
            ).fetchone()  # type: ignore[misc]
        assert not superuser, f"reading {database} made its owner {role} a superuser"
        assert database not in outdated and database not in unread
        assert read == (None, {"models": 0, "indexes": 0}, [], False)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database}")  # type: ignore[arg-type]
            conn.execute(f"DROP ROLE {role}")  # type: ignore[arg-type]


#: operators pg_catalog has none of, on the types the install's catalog queries compare
PLANTED = [("oid", "regnamespace"), ("regclass", "regclass"), ("oid", "regclass")]


@pytest.mark.postgres
def test_the_installs_catalog_queries_run_no_operator_of_a_role(pg_dsn):
    """add_native's query of the objects its block made and a reinstall's drop of loomdb's
    indexes run as a superuser under the database's search_path, where a role with CREATE on
    public (every role's before PostgreSQL 15) plants ``=`` on types pg_catalog has no ``=``
    of (each would be an exact match for a comparison of a column with a reg* constant)."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not adding a role to it")
    role = "loom_planter"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # type: ignore[arg-type]
        conn.execute(f"GRANT CREATE ON SCHEMA public TO {role}")  # type: ignore[arg-type]
    try:
        with psycopg.connect(f"{pg_dsn} user={role}", autocommit=True) as planter:
            for i, (left, right) in enumerate(PLANTED):
                planter.execute(
                    f"CREATE FUNCTION public.planted_eq{i}({left}, {right}) RETURNS boolean "  # type: ignore[arg-type]
                    "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the planted =(%, %) ran "
                    f"as %', '{left}', '{right}', current_user; END $$"
                )
                planter.execute(
                    f"CREATE OPERATOR public.= (LEFTARG = {left}, RIGHTARG = {right}, "  # type: ignore[arg-type]
                    f"FUNCTION = public.planted_eq{i})"
                )
        conn = psycopg.connect(pg_dsn, autocommit=True)
        with conn, conn.transaction(force_rollback=True):
            conn.execute(
                "CREATE FUNCTION loom.install_probe() RETURNS integer LANGUAGE sql AS 'SELECT 1'"
            )
            added = [r[0] for r in conn.execute(server_setup._NEW_MEMBERS).fetchall()]  # type: ignore[arg-type]
            assert "FUNCTION loom.install_probe()" in added
            conn.execute(server_setup._DROP_INDEXES)  # type: ignore[arg-type]
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")  # type: ignore[arg-type]
            conn.execute(f"DROP ROLE {role}")  # type: ignore[arg-type]


@pytest.mark.postgres
def test_the_installs_check_runs_loomdbs_functions_not_a_roles(pg_dsn):
    """The install's closing train and prediction run as a superuser under the database's
    search_path, whose first entry, "$user", is a schema named after the superuser: a role
    that may create schemas in the database makes it, with functions of loomdb's names and
    signatures.  The check must call the extension's own."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not adding a role to it")
    role = "loom_schemer"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        superuser, database = conn.execute("SELECT current_user, current_database()").fetchone()  # type: ignore[misc]
        if conn.execute("SELECT to_regnamespace(%s)", [superuser]).fetchone() != (None,):
            pytest.skip(f"a schema {superuser} exists already")
        conn.execute(f'CREATE ROLE {role} LOGIN; GRANT CREATE ON DATABASE "{database}" TO {role}')  # type: ignore[arg-type]
    planted = [
        ("loom_version", "", "text"),
        ("loom_train", "text, text, text, text", "text"),
        ("loom_predict", "text, double precision[]", "double precision"),
    ]
    try:
        with psycopg.connect(f"{pg_dsn} user={role}", autocommit=True) as schemer:
            schemer.execute(f'CREATE SCHEMA "{superuser}"')  # type: ignore[arg-type]
            for function, args, returns in planted:
                schemer.execute(
                    f'CREATE FUNCTION "{superuser}".{function}({args}) RETURNS {returns} '  # type: ignore[arg-type]
                    "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the planted "
                    f"{function} ran as %', current_user; END $$"
                )
        assert server_setup.check_functions_run(pg_dsn) == {"version": loomdb.__version__}
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")  # type: ignore[arg-type]
            conn.execute(f"DROP ROLE {role}")  # type: ignore[arg-type]


@pytest.mark.postgres
def test_the_install_built_the_index_access_methods(pg_dsn):
    """CI installs PostgreSQL's server headers (scripts/setup.sh): there the install must have
    compiled CREATE INDEX … USING; elsewhere it may report them missing and go on."""
    from conftest import need
    from support import pgserver

    methods = server_setup.index_methods(pg_dsn)
    if sorted(methods) != sorted(index_am_install.METHODS):
        need(f"loomdb's index access methods (the server has {methods or 'none'})")
    if pgserver.cluster is not None:
        listed = "|".join(sorted(index_am_install.METHODS))
        assert f"CREATE INDEX … USING {listed}: available" in pgserver.cluster["output"]


@pytest.mark.postgres
def test_the_install_bound_loom_predict_to_c_where_it_built_the_module(pg_dsn):
    """With the access methods built, loom_predict is the C function, loom.finite exists for
    everyone, and the cache's trigger is on each watched catalog table."""
    from conftest import need
    from loomdb.engines.postgres import predict_install
    from support import pgserver

    if not server_setup.index_methods(pg_dsn):
        need("loomdb's C module (the server has no index access methods either)")
    assert server_setup.native_predict(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        languages = dict(
            conn.execute(
                "SELECT p.proname, l.lanname FROM pg_proc p "
                "JOIN pg_language l ON l.oid = p.prolang "
                "WHERE p.proname IN ('loom_predict', 'loom_predict_proba', 'finite')"
            ).fetchall()
        )
        triggers = conn.execute(
            "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE t.tgname = 'predict_cache' ORDER BY 1"
        ).fetchall()
        public = conn.execute(
            "SELECT has_function_privilege('public', 'loom.finite(float8)', 'EXECUTE')"
        ).fetchone()
    assert languages == {"loom_predict": "c", "loom_predict_proba": "c", "finite": "c"}
    assert [t[0] for t in triggers] == sorted(predict_install.WATCHED)
    assert public == (True,)
    if pgserver.cluster is not None:
        assert "loom_predict per row in C" in pgserver.cluster["output"]


def test_the_c_predict_is_declared_only_where_its_library_is():
    script = extension.files()["loomdb--" + loomdb.__version__ + ".sql"]
    check = script.index("pg_stat_file(predict_library, true) IS NULL")
    assert check < script.index("AS '$libdir/loomdb_predict', 'loomdb_predict'")
    assert check < script.index("CREATE TRIGGER predict_cache")
    assert script.index("RETURN;", check) < script.index("CREATE OR REPLACE FUNCTION loom.finite")
