"""Generate the PostgreSQL extension (control file and install script) from the catalogue.

Function bodies are one line of dispatch: the module ``loomdb.engines.postgres.server`` is
imported once per session by ``loom._bootstrap()`` (which puts the server-side venv on
``sys.path`` from the ``loomdb.python_path`` setting) and cached in ``GD``.

``python -m loomdb.udfs.pgsql extension/`` rewrites the committed files; a test checks they are
up to date.
"""

from __future__ import annotations

import sys
from pathlib import Path

import loomdb
from loomdb.store import catalog
from loomdb.udfs import Udf, load

PG_TYPES = {
    "text": "text",
    "double": "double precision",
    "double[]": "double precision[]",
    "bigint": "bigint",
    "integer": "integer",
    "boolean": "boolean",
    "bytes": "bytea",
    "timestamp": "timestamptz",
}

CONTROL = """\
comment = 'in-database machine learning: compressed layouts, any-precision training, predict in SELECT'
default_version = '{version}'
requires = 'plpython3u'
superuser = true
relocatable = false
"""

BOOTSTRAP = """\
CREATE FUNCTION loom._bootstrap() RETURNS void
LANGUAGE plpython3u VOLATILE AS $fn$
import os, sys, tempfile
row = plpy.execute("SELECT current_setting('loomdb.python_path', true) AS p, "
                   "current_setting('loomdb.numba_cache_dir', true) AS c")[0]
for path in reversed([p for p in (row['p'] or '').split(':') if p]):
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ.setdefault('NUMBA_CACHE_DIR', row['c'] or os.path.join(tempfile.gettempdir(), 'loomdb-numba'))
try:
    from loomdb.engines.postgres import server
except ImportError as e:
    plpy.error('loomdb cannot be imported by the server\\'s Python: %s' % e,
               hint='run "loomdb pg install --dsn ..." on the server machine, or set loomdb.python_path')
GD['loomdb'] = server
$fn$;
COMMENT ON FUNCTION loom._bootstrap() IS 'load loomdb into this session''s Python (called by every loomdb function once)';
"""


def _signature(u: Udf, defaults: bool) -> str:
    parts = []
    for a in u.args:
        text = f"{a.name} {PG_TYPES[a.type]}"
        if defaults and a.default is not None:
            text += f" DEFAULT {a.default}"
        parts.append(text)
    return ", ".join(parts)


def function_sql(u: Udf) -> str:
    names = "".join(f", {a.name}" for a in u.args)
    flags = [u.volatility.upper(), f"PARALLEL {u.parallel.upper()}"]
    if u.strict:
        flags.append("STRICT")
    body = (
        "if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')\n"
        f"return GD['loomdb'].call(plpy, '{u.name}'{names})"
    )
    comment = u.comment.replace("'", "''")
    types = ", ".join(PG_TYPES[a.type] for a in u.args)
    return (
        f"CREATE FUNCTION {u.name}({_signature(u, True)}) RETURNS {PG_TYPES[u.returns]}\n"
        f"LANGUAGE plpython3u {' '.join(flags)} AS $fn$\n{body}\n$fn$;\n"
        f"COMMENT ON FUNCTION {u.name}({types}) IS '{comment}';\n"
    )


def install_script() -> str:
    ddl = [s + ";" for s in catalog.ddl(lambda t: PG_TYPES[t])]
    dumps = [
        f"SELECT pg_catalog.pg_extension_config_dump('{catalog.SCHEMA}.{t}', '');"
        for t in catalog.TABLES
    ]
    parts = [
        f"-- loomdb {loomdb.__version__}: generated from udfs/loomdb.toml by loomdb.udfs.pgsql;"
        " do not edit by hand.",
        '\\echo Use "CREATE EXTENSION loomdb" to load this file. \\quit',
        "",
        *ddl,
        *dumps,
        "",
        BOOTSTRAP,
        *[function_sql(u) for u in load()],
    ]
    return "\n".join(parts)


def extension_files() -> dict[str, str]:
    v = loomdb.__version__
    return {
        "loomdb.control": CONTROL.format(version=v),
        f"loomdb--{v}.sql": install_script(),
    }


def main(argv: list[str]) -> None:
    out = Path(argv[0] if argv else "extension")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in extension_files().items():
        (out / name).write_text(text)
        print(out / name)


if __name__ == "__main__":
    main(sys.argv[1:])
