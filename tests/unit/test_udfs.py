"""The UDF catalogue is the single source of both engines' function definitions."""

from __future__ import annotations

from pathlib import Path

import loomdb
from loomdb.engines.duckdb.functions import HIDDEN
from loomdb.engines.postgres import extension
from loomdb.udfs import load

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
        assert ("macro", n, None) in found[udf.name], udf.name  # this connection's, defaults in
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
