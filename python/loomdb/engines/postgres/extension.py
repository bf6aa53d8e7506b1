"""The PostgreSQL extension, generated from the UDF catalogue, and writing it where the server
looks.  No paper section.

``files(settings)`` returns ``loomdb.control`` and ``loomdb--<version>.sql``.  The install
script creates the catalog (``store.catalog.ddl``), the multi-user rules (``security.sql``),
``loom.settings`` holding where the server imports loomdb from — fixed here, at install time,
and writable only by the installing superuser (never a setting a role could change) — the
bootstrap that reads it, one function per catalogued UDF whose body is one line of
dispatch (a table function ``RETURNS TABLE (…)``; its body returns the list of rows), the
parallel epoch's aggregate (``epoch_install``: internal and PostgreSQL's alone, so not in the
catalogue) and the index access methods (``index_am_install``: ``CREATE INDEX … USING`` in
psql).  Every function is executable by ``loomdb_user`` only.

``python -m loomdb.engines.postgres.extension DIR`` writes the files with the default settings
(the committed ``extension/`` folder; a test checks it is current).
"""

from __future__ import annotations

import json
import os
import sys
from importlib import resources
from pathlib import Path

import loomdb
from loomdb.engines.postgres import epoch_install, index_am_install
from loomdb.engines.postgres.dialect import PG_TYPES
from loomdb.errors import LoomStateError
from loomdb.store import catalog
from loomdb.udfs import ROW, Udf, load

DEFAULT_VENV = "/var/lib/loomdb/venv"
NUMBA_CACHE = "numba-cache"
ROLE = "loomdb_user"
#: the search_path of loomdb's own SQL and PL/pgSQL functions: pg_catalog, then pg_temp last
#: (where it is not named it is searched first), so no role's function or operator is found
WRAPPER_PATH = "SET search_path = pg_catalog, pg_temp"

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
import os, sys
conf = {r['key']: r['value'] for r in plpy.execute(
    "SELECT key, value FROM loom.settings WHERE key IN ('venv', 'numba_cache_dir', 'extra_path')")}
if not conf.get('venv') or not conf.get('numba_cache_dir'):
    plpy.error('loomdb is not configured in this database',
               hint='a superuser runs: loomdb pg install --dsn "dbname=..."')
site = os.path.join(conf['venv'], 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
for path in reversed([p for p in (conf.get('extra_path') or '').split(':') if p] + [site]):
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ['NUMBA_CACHE_DIR'] = conf['numba_cache_dir']
try:
    from loomdb.engines.postgres import server
except ImportError as e:
    plpy.error('loomdb cannot be imported by the server\\'s Python: %s' % e,
               hint='a superuser runs "loomdb pg install --dsn ..." on the server machine')
GD['loomdb'] = server
$fn$;
REVOKE ALL ON FUNCTION loom._bootstrap() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._bootstrap() TO {role};
COMMENT ON FUNCTION loom._bootstrap() IS 'load loomdb into this session''s Python (called by every loomdb function once)';
"""


def default_settings(venv: str = DEFAULT_VENV) -> dict[str, str]:
    return {"venv": venv, "numba_cache_dir": os.path.join(venv, NUMBA_CACHE), "extra_path": ""}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _pg_type(abstract: str, wrapper: bool = False) -> str:
    """A catalogue type in PostgreSQL; a ``row`` is ``to_jsonb`` text, ``record`` in the
    wrapper that takes the composite (PL/Python cannot accept ``record``)."""
    if abstract == ROW:
        return "record" if wrapper else "text"
    return PG_TYPES[abstract]


def _signature(u: Udf, defaults: bool, wrapper: bool = False) -> str:
    parts = []
    for a in u.args:
        text = f"{a.name} {_pg_type(a.type, wrapper)}"
        if defaults and a.default is not None:
            text += f" DEFAULT {a.default}"
        parts.append(text)
    return ", ".join(parts)


def _returns(u: Udf) -> str:
    """The return type; a table function returns ``TABLE (…)`` (a set of rows)."""
    if not u.table:
        return PG_TYPES[u.returns]
    return "TABLE (" + ", ".join(f'"{c.name}" {PG_TYPES[c.type]}' for c in u.columns) + ")"


def function_sql(u: Udf, replace: bool = False) -> str:
    names = "".join(f", {a.name}" for a in u.args)
    flags = [u.volatility.upper(), f"PARALLEL {u.parallel.upper()}"]
    if u.strict:
        flags.append("STRICT")
    body = (
        "if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')\n"
        f"return GD['loomdb'].call(plpy, '{u.name}'{names})"
    )
    sql = _created(u, replace, _signature(u, True), "plpython3u", flags, body, False)
    if u.takes_row:  # the composite's overload, passing the row on as to_jsonb text
        passed = ", ".join(
            f"pg_catalog.to_jsonb({a.name})::pg_catalog.text" if a.type == ROW else a.name
            for a in u.args
        )
        body = f"BEGIN\nRETURN @extschema@.{u.name}({passed});\nEND"
        signature = _signature(u, True, True)
        # every name qualified, and no role's schema searched: the row's type is its owner's,
        # so an unqualified to_jsonb would be an exact match for that owner's
        # to_jsonb(their type), run by whoever predicts (CVE-2018-1058)
        wrapped = [*flags, WRAPPER_PATH]
        sql += _created(u, replace, signature, "plpgsql", wrapped, body, True)
        if u.overloads:  # the same wrapper under the array form's name, told apart by record
            sql += _created(u, replace, signature, "plpgsql", wrapped, body, True, u.overloads)
    return sql


def _created(
    u: Udf,
    replace: bool,
    signature: str,
    language: str,
    flags: list[str],
    body: str,
    wrapper: bool,
    name: str | None = None,
) -> str:
    name = name or u.name
    types = ", ".join(_pg_type(a.type, wrapper) for a in u.args)
    return (
        f"CREATE {'OR REPLACE ' if replace else ''}FUNCTION {name}({signature}) "
        f"RETURNS {_returns(u)}\n"
        f"LANGUAGE {language} {' '.join(flags)} AS $fn$\n{body}\n$fn$;\n"
        f"REVOKE ALL ON FUNCTION {name}({types}) FROM PUBLIC;\n"
        f"GRANT EXECUTE ON FUNCTION {name}({types}) TO {ROLE};\n"
        f"COMMENT ON FUNCTION {name}({types}) IS {_literal(u.comment)};\n"
    )


def _text(name: str) -> str:
    return resources.files("loomdb.engines.postgres").joinpath(name).read_text()


def _settings_sql(settings: dict[str, str]) -> str:
    values = ", ".join(f"({_literal(k)}, {_literal(v)})" for k, v in sorted(settings.items()))
    # an update takes the settings of the install that wrote its script (where the server's
    # environment now is), as loomdb pg install does after it
    return (
        f"INSERT INTO {catalog.SCHEMA}.settings (key, value) VALUES {values} "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;"
    )


def _dumps(tables: tuple[str, ...]) -> list[str]:
    return [
        f"SELECT pg_catalog.pg_extension_config_dump('{catalog.SCHEMA}.{t}', '');" for t in tables
    ]


def _header(command: str) -> list[str]:
    return [
        f"-- loomdb {loomdb.__version__}: generated from loomdb/udfs/catalogue.toml by"
        " loomdb.engines.postgres.extension; do not edit by hand.",
        f'\\echo Use "{command}" to load this file. \\quit',
        "",
    ]


def install_script(settings: dict[str, str]) -> str:
    parts = [
        *_header("CREATE EXTENSION loomdb"),
        *[s + ";" for s in catalog.ddl("postgres")],
        _settings_sql(settings),
        *_dumps(("models", "model_versions", "trials", "indexes", "grants", "deployments")),
        "",
        _text("security.sql"),
        BOOTSTRAP.replace("{role}", ROLE),
        *[function_sql(u) for u in load()],
        epoch_install.sql(settings, ROLE),
        index_am_install.extension_sql(),
        _text("superseded.sql"),
    ]
    return "\n".join(parts)


# what an update creates (or, for models, adds columns to); all but models and settings dumped
UPGRADE_TABLES = ("models", "model_versions", "trials", "grants", "deployments", "settings")


def upgrade_script(old: str, settings: dict[str, str]) -> str:
    """The update from ``old`` to this version: the migration, then everything install makes
    that the old version lacked, and every function replaced."""
    parts = [
        *_header("ALTER EXTENSION loomdb UPDATE"),
        _text(f"upgrade-{old}--{loomdb.__version__}.sql"),
        *[s + ";" for s in catalog.ddl("postgres", UPGRADE_TABLES)],
        _settings_sql(settings),
        *_dumps(UPGRADE_TABLES[1:-1]),
        "",
        _text("security.sql"),
        BOOTSTRAP.replace("{role}", ROLE),
        *[function_sql(u, replace=True) for u in load()],
        epoch_install.sql(settings, ROLE),
        index_am_install.extension_sql(),
        _text("superseded.sql"),
        *([_text("owner_roles.sql")] if old in OWNERS_BY_NAME else []),
    ]
    return "\n".join(parts)


UPGRADES_FROM = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0")  # every released version updates here
OWNERS_BY_NAME = ("0.1.0", "0.2.0", "0.3.0")  # versions whose rows name their owner by name only


def files(settings: dict[str, str] | None = None) -> dict[str, str]:
    v = loomdb.__version__
    settings = settings or default_settings()
    out = {
        "loomdb.control": CONTROL.format(version=v),
        f"loomdb--{v}.sql": install_script(settings),
    }
    for old in UPGRADES_FROM:
        out[f"loomdb--{old}--{v}.sql"] = upgrade_script(old, settings)
    return out


def write(files: dict[str, str], extension_dir: str) -> list[str]:
    """Write ``files`` into ``extension_dir`` (world-readable); return their names."""
    for name in files:
        if os.path.basename(name) != name or not name.startswith("loomdb"):
            raise LoomStateError(
                f"refusing to write the extension file {name!r}",
                hint="extension files are plain names starting with 'loomdb'",
            )
    for name, text in files.items():
        target = os.path.join(extension_dir, name)
        partial = target + ".partial"
        try:
            with open(partial, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(partial, 0o644)
            os.replace(partial, target)
        except OSError as exc:
            raise LoomStateError(
                f"cannot write the extension file {target}: {exc.strerror}",
                hint="pass the server's extension directory (pg_config --sharedir, + /extension) "
                "and run as a user who may write it (root)",
            ) from exc
    return list(files)


def main(argv: list[str]) -> int:
    """``python -m loomdb.engines.postgres.extension DIR [SETTINGS_JSON]``."""
    if not 1 <= len(argv) <= 2:
        print("usage: python -m loomdb.engines.postgres.extension DIR [SETTINGS_JSON]")
        return 2
    settings = json.loads(argv[1]) if len(argv) == 2 else None
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in write(files(settings), str(out)):
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
