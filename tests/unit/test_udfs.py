"""The UDF catalogue is the single source of both engines' function definitions."""

from __future__ import annotations

from pathlib import Path

import pytest

import loomdb
from loomdb.engines.duckdb.functions import HIDDEN
from loomdb.engines.postgres import extension
from loomdb.errors import LoomError
from loomdb.udfs import load, parse

ROOT = Path(__file__).resolve().parents[2]


def test_committed_extension_is_generated_from_the_catalogue():
    for name, text in extension.files().items():
        committed = ROOT / "extension" / name
        assert committed.read_text() == text, f"extension/{name} is stale: run `make extension`"


def test_control_file_declares_what_postgres_needs():
    control = extension.files()["loomdb.control"]
    assert "requires = 'plpython3u'" in control and "superuser = true" in control
    assert f"default_version = '{loomdb.__version__}'" in control


def test_install_script_fixes_where_the_server_imports_from():
    script = extension.install_script(
        {"venv": "/opt/x'y", "numba_cache_dir": "/c", "extra_path": ""}
    )
    assert "('venv', '/opt/x''y')" in script
    assert "current_setting" not in script  # nothing a role can SET chooses code
    for udf in load():
        assert f"GRANT EXECUTE ON FUNCTION {udf.name}(" in script
        assert f"REVOKE ALL ON FUNCTION {udf.name}(" in script


def test_every_function_is_registered_in_duckdb_with_its_defaults():
    con = loomdb.connect(progress=False)
    rows = con.duckdb.execute(
        "SELECT function_name, function_type, len(parameters), varargs FROM duckdb_functions() "
        "WHERE function_name LIKE 'loom_%'"
    ).fetchall()
    found: dict[str, set] = {}
    for name, kind, n, varargs in rows:
        found.setdefault(name, set()).add((kind, n, varargs))
    for udf in load():
        n = len(udf.args)
        macro = "table_macro" if udf.table else "macro"  # this connection's, defaults in
        assert (macro, n, None) in found[udf.name], udf.name
        public = {(k, m, v) for k, m, v in found[udf.name] if k == "scalar"}
        # visible on every cursor: vectorised with its arity, scalar ones as varargs
        assert public == ({("scalar", n, None)} if udf.vectorized else {("scalar", 1, "ANY")})
        twin = found[HIDDEN.format(udf.name)]
        assert twin == {("scalar", n + (2 if udf.vectorized else 1), None)}, udf.name
    con.close()


def test_every_callable_resolves():
    for udf in load():
        assert callable(udf.callable()), udf.call


def test_the_catalogue_ships_in_the_package():
    from importlib import resources

    assert resources.files("loomdb.udfs").joinpath("catalogue.toml").is_file()
    assert not resources.files("loomdb.udfs").joinpath("catalogue.toml").is_symlink()  # type: ignore[attr-defined]


ENTRY = """
[[function]]
name = "f"
args = ["model text", "source text = 'x'"]
returns = "{returns}"
volatility = "stable"
parallel = "unsafe"
call = "m:f"
comment = "c"
"""


def test_a_table_return_is_parsed_into_named_typed_columns():
    (udf,) = parse(ENTRY.format(returns="table(threshold double, n bigint,  labels double[])"))
    assert udf.table and udf.returns == "table"
    assert [(c.name, c.type) for c in udf.columns] == [
        ("threshold", "double"),
        ("n", "bigint"),
        ("labels", "double[]"),
    ]
    (scalar,) = parse(ENTRY.format(returns="text"))
    assert not scalar.table and scalar.returns == "text" and scalar.columns == ()


@pytest.mark.parametrize(
    "returns",
    [
        "table(a double, a double)",  # a repeated column
        "table(model double)",  # an argument's name: PostgreSQL refuses it
        "table(a number)",  # an unknown type
        "table(A double)",  # not lowercase
        "table()",  # no column
        "table(a double = 1)",  # a default
        "tabular",  # neither a type nor a table
    ],
)
def test_a_wrong_table_return_is_refused(returns):
    with pytest.raises(LoomError, match="udfs catalogue"):
        parse(ENTRY.format(returns=returns))


def test_a_vectorized_table_function_is_refused():
    text = ENTRY.format(returns="table(a double)") + "vectorized = true\n"
    with pytest.raises(LoomError, match="not vectorized"):
        parse(text)


def test_table_functions_are_sets_in_postgres_and_table_macros_in_duckdb():
    from loomdb.engines.duckdb.functions import _macro

    (udf,) = parse(ENTRY.format(returns="table(threshold double, n bigint)"))
    sql = extension.function_sql(udf)
    assert 'RETURNS TABLE ("threshold" double precision, "n" bigint)' in sql
    macro = _macro(udf, 17)
    assert macro.startswith("CREATE OR REPLACE TEMP MACRO f(model, source := 'x') AS TABLE ")
    assert "unnest(f__conn(model, source, CAST(17 AS BIGINT)), max_depth := 2)" in macro


def test_a_left_out_argument_is_its_default_as_sql_passes_it():
    """DuckDB's public (varargs) functions fill in what was left out: loom_drop_model's version
    is the number that stands for none given, never NULL (which is refused)."""
    from loomdb.engines.duckdb.functions import _arguments
    from loomdb.functions.models import NO_VERSION

    udf = next(u for u in load() if u.name == "loom_drop_model")
    assert _arguments(udf, ("m",)) == ["m", NO_VERSION]
    assert udf.args[1].default == str(NO_VERSION)
    deploy = next(u for u in load() if u.name == "loom_deploy")
    assert _arguments(deploy, ("m",)) == ["m", "{}"]
