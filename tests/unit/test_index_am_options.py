"""The index access methods without a server: WITH options, the C module's methods and the
operator classes' types, the extension SQL, and what the installer says when tools are missing."""

from __future__ import annotations

import json
import re
import stat
from importlib import resources

import pytest
import sqlglot

from loomdb.engines.postgres import extension, index_am, index_am_install
from loomdb.engines.postgres.dialect import BOOL_OID, NUMERIC_OIDS
from loomdb.errors import LoomOptionError, LoomSyntaxError
from loomdb.options import with_value
from loomdb.store import formats


def test_with_values_read_as_json_scalars_else_text():
    label, given = index_am.options(
        "dense",
        ["label=Y", "batch_size=64", "seed=7", "dtype=float32", "nulls=skip"],
    )
    assert label == "Y"
    assert given == {"batch_size": 64, "seed": 7, "dtype": "float32", "nulls": "skip"}
    assert index_am.options("toc", ["label=y", "entropy=zstd"])[1] == {"entropy": "zstd"}
    assert with_value("NaN") == "NaN" and with_value("true") is True


@pytest.mark.parametrize(
    "method, reloptions, error, message",
    [
        ("toc", ["batch_size=8"], LoomSyntaxError, "names no label column"),
        ("toc", ["label=1"], LoomSyntaxError, "the label must be a column name"),
        ("toc", ["label=y", "label=z"], LoomSyntaxError, "names the option 'label' twice"),
        ("toc", ["label=y", "format=dense"], LoomSyntaxError, "written in the statement"),
        ("toc", ["label=y", "features=a"], LoomSyntaxError, "written in the statement"),
        ("toc", ["label=y", "if_not_exists=true"], LoomSyntaxError, "written in the statement"),
        ("toc", ["label=y", "bits=3"], LoomOptionError, "unknown layout option 'bits'"),
        ("dense", ["label=y", "batch_size=0"], LoomOptionError, "'batch_size' option must be"),
        # loom._index_am_check is callable by hand: ARRAY[NULL] was an AttributeError
        ("toc", [None], LoomSyntaxError, "'name=value' texts; got null"),
        ("toc", ["label=y", "seed"], LoomSyntaxError, "'name=value' texts; got \"seed\""),
        ("toc", [["label=y"]], LoomSyntaxError, "'name=value' texts; got [\"label=y\"]"),
    ],
)
def test_bad_with_options_are_refused(method, reloptions, error, message):
    with pytest.raises(error, match=re.escape(message)):
        index_am.options(method, reloptions)


def test_one_access_method_per_built_in_format_in_c_and_sql():
    assert sorted(index_am_install.METHODS) == sorted(formats.KNOWN)
    source = (
        resources.files("loomdb.engines.postgres").joinpath("index_am", "loomdb_am.c").read_text()
    )
    assert sorted(re.findall(r"^LOOM_METHOD\((\w+)\)$", source, re.M)) == sorted(
        index_am_install.METHODS
    )
    for script in extension.files().values():
        if not script.startswith("-- loomdb"):
            continue
        for method in index_am_install.METHODS:
            assert f"CREATE ACCESS METHOD {method} TYPE INDEX HANDLER" in script
            assert f"'loomdb_{method}_handler'" in script
        assert "CREATE EVENT TRIGGER loom_index_am_drop ON sql_drop" in script
        assert "{name_pattern}" not in script


NUMERIC_AMS = ("mlweaving", "dense", "toc")


def test_operator_classes_cover_every_type_loomdb_reads_as_a_number():
    oids = {"float8": 701, "float4": 700, "numeric": 1700, "int8": 20, "int4": 23, "int2": 21}
    oids["bool"] = BOOL_OID
    assert {oids[t] for t in index_am_install.NUMBERS} == NUMERIC_OIDS | {BOOL_OID}
    assert all(set(index_am_install.NUMBERS) <= set(index_am_install.TYPES[m]) for m in NUMERIC_AMS)


def _fake_pg_config(tmp_path, headers: bool):
    include = tmp_path / "include"
    include.mkdir()
    if headers:
        (include / "postgres.h").write_text("")
    pgxs = tmp_path / "pgxs.mk"
    pgxs.write_text("")
    script = tmp_path / "pg_config"
    script.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        f"--includedir-server) echo {include};;\n--pgxs) echo {pgxs};;\n"
        "--version) echo 'PostgreSQL 15.20';;\n--cc) echo sh;;\nesac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_missing_server_headers_are_named_and_the_build_is_skipped(tmp_path):
    pg_config = _fake_pg_config(tmp_path, headers=False)
    missing = index_am_install.missing_tools(pg_config)
    assert len(missing) == 1 and "apt-get install postgresql-server-dev-15" in missing[0]
    lines: list[str] = []
    assert index_am_install.build_module(pg_config, lines.append) is None
    assert "CREATE INDEX … USING mlweaving|toc|dense|pcr is not installed" in lines[0]
    assert "loom_create_index works without it" in lines[0]
    assert index_am_install.missing_tools(str(tmp_path / "nosuch")) != []
    assert index_am_install.missing_tools(None) != []


def test_present_tools_are_not_reported(tmp_path):
    if index_am_install.shutil.which("make") is None:
        pytest.skip("make is not installed here")
    assert index_am_install.missing_tools(_fake_pg_config(tmp_path, headers=True)) == []


@pytest.mark.parametrize(
    ("text", "number"),
    [(".5", 0.5), ("5.", 5.0), ("1e-3", 0.001), ("-2", -2), ("-.5", -0.5), ("+2", 2), ("1E3", 1e3)],
)
def test_with_numbers_read_as_numbers_in_psql_and_through_the_front_end(text, number):
    """PostgreSQL keeps a decimal constant's text as written in the reloption (``x=.5``), which
    JSON does not read: psql's access methods took ``.5``, ``5.`` and ``-.5`` as text where the
    front-end read the same statement's constant as a number, and its string ``'.5'`` as text."""
    from loomdb.frontend import process

    psql = with_value(text)  # what index_am.options reads of the reloption "seed=<text>"
    assert psql == number and type(psql) is type(number)
    for written in (text, f"'{text}'"):
        for dialect in ("duckdb", "postgres"):
            sql = f"CREATE INDEX i ON t USING toc (a) WITH (label = y, seed = {written})"
            (call,) = process(sql, dialect)
            options = sqlglot.parse_one(call, read=dialect).expressions[0].expressions[3]
            front = json.loads(options.this)["seed"]
            assert front == psql and type(front) is type(psql), (written, dialect)
