"""The UDF catalogue is the single source of both engines' function definitions."""

from __future__ import annotations

from pathlib import Path

import pytest

import loomdb
from loomdb.udfs import load
from loomdb.udfs.pgsql import extension_files

ROOT = Path(__file__).resolve().parents[1]


def test_committed_extension_is_generated_from_the_catalogue():
    for name, text in extension_files().items():
        committed = ROOT / "extension" / name
        assert committed.read_text() == text, (
            f"extension/{name} is stale: run `make extension` (python -m loomdb.udfs.pgsql "
            "extension)"
        )


def test_control_file_declares_what_postgres_needs():
    control = extension_files()["loomdb.control"]
    assert "requires = 'plpython3u'" in control and "superuser = true" in control
    assert f"default_version = '{loomdb.__version__}'" in control


def test_every_function_is_registered_in_duckdb_with_its_arity():
    con = loomdb.connect()
    rows = con.duckdb.execute(
        "SELECT function_name, len(parameters) FROM duckdb_functions() "
        "WHERE function_name LIKE 'loom_%'"
    ).fetchall()
    registered = dict(rows)
    for udf in load():
        assert registered.get(udf.name) == len(udf.args), udf.name


def test_every_callable_resolves():
    for udf in load():
        assert callable(udf.callable()), udf.call


@pytest.mark.postgres
def test_every_function_exists_in_postgres_with_its_markings(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT proname, provolatile, proparallel, proisstrict, pronargs, "
            "obj_description(p.oid, 'pg_proc') FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE proname LIKE 'loom_%'"
        ).fetchall()
    found = {r[0]: r[1:] for r in rows}
    for udf in load():
        vol, par, strict, nargs, comment = found[udf.name]
        assert vol == udf.volatility[0] and par == udf.parallel[0], udf.name
        assert strict == udf.strict and nargs == len(udf.args) and comment == udf.comment
