"""Installing the index access methods: compile ``index_am/loomdb_am.c`` with PGXS into the
server's library directory, and the extension SQL that declares them.  No paper section.

The C part is optional.  Without PostgreSQL's server headers (Debian:
``postgresql-server-dev-15``), ``make`` or a C compiler, ``loomdb pg install`` says what is
missing and goes on: ``loom_create_index`` and every other function work, ``CREATE INDEX …
USING mlweaving`` in psql does not.  The install script is the same either way: it declares
the access methods only when it finds the library (``pg_stat_file``); an extension created
before the library was installed gains them when ``loomdb pg install`` runs again
(``server_setup.add_native``: in place, its catalog kept).  With the
tools present, a failing build is an error, never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib import resources

from loomdb.engines.postgres import owner_install, predict_install
from loomdb.errors import LoomStateError
from loomdb.store.names import NAME_PATTERN

LIBRARY = "loomdb_am"
# libraries of their own (predict_install.py, owner_install.py): the SQL binds each only where
# it is installed, so a server whose loomdb_am.so was built before them keeps what it had
LIBRARIES = (LIBRARY, predict_install.LIBRARY, owner_install.LIBRARY)
SOURCES = ("loomdb_am.c", "loomdb_predict.c", "loomdb_owner.c", "Makefile")
METHODS = ("mlweaving", "toc", "dense", "pcr")  # loomdb_am.c defines a handler for each
# the column types loomdb reads as numbers (engines/postgres/dialect.py): one operator class
# (without operators: nothing can search the index) per type and method
NUMBERS = ("float8", "float4", "numeric", "int8", "int4", "int2", "bool")
# the column types each method indexes: numbers; toc also a sparse source's indices and values
# arrays; pcr an image column
TYPES = {
    "mlweaving": NUMBERS,
    "dense": NUMBERS,
    "toc": (*NUMBERS, "int2[]", "int4[]", "int8[]", "float4[]", "float8[]", "numeric[]"),
    "pcr": ("bytea",),
}
BUILD_TIMEOUT_S = 300

Log = Callable[[str], None]


def _pg_config(pg_config: str, flag: str) -> str:
    out = subprocess.run([pg_config, flag], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def missing_tools(pg_config: str | None) -> list[str]:
    """What building the access methods needs and this machine lacks (empty: all there)."""
    if not pg_config or not shutil.which(pg_config):
        return [f"PostgreSQL's pg_config ({pg_config or 'not on PATH'})"]
    missing = []
    headers = _pg_config(pg_config, "--includedir-server")
    if not os.path.isfile(os.path.join(headers, "postgres.h")):
        major = _pg_config(pg_config, "--version").split()[-1].split(".")[0]
        missing.append(
            f"PostgreSQL's server headers in {headers} "
            f"(Debian: apt-get install postgresql-server-dev-{major})"
        )
    if not os.path.isfile(_pg_config(pg_config, "--pgxs")):
        missing.append("PostgreSQL's PGXS makefiles (pg_config --pgxs)")
    if not shutil.which("make"):
        missing.append("make")
    compiler = (_pg_config(pg_config, "--cc").split() or ["cc"])[0]
    if not shutil.which(compiler):
        missing.append(f"the C compiler {compiler}")
    return missing


def _compile(pg_config: str, work: str) -> list[str]:
    for name in SOURCES:
        text = resources.files("loomdb.engines.postgres").joinpath("index_am", name).read_text()
        with open(os.path.join(work, name), "w", encoding="utf-8") as out:
            out.write(text)
    make = ["make", "-C", work, f"PG_CONFIG={pg_config}", "with_llvm=no"]
    done = subprocess.run(make, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    built = {
        library: [
            n
            for n in os.listdir(work)
            if n.startswith(library + ".") and n[-2:] not in (".c", ".o")
        ]
        for library in LIBRARIES
    }
    if done.returncode != 0 or any(len(found) != 1 for found in built.values()):
        raise LoomStateError(
            "compiling loomdb's C module (CREATE INDEX … USING, loom_predict in C) failed",
            hint="check that the server headers match the server's PostgreSQL version",
            detail=(done.stdout + done.stderr)[-2000:],
        )
    return [os.path.join(work, found[0]) for found in built.values()]


def build_module(pg_config: str | None, log: Log) -> str | None:
    """Compile and install the C module's libraries (the access methods', predict's); the
    access methods' path, or None when skipped."""
    missing = missing_tools(pg_config)
    if missing:
        log(
            "CREATE INDEX … USING mlweaving|toc|dense|pcr is not installed: it needs "
            + "; ".join(missing)
            + " (loom_create_index works without it; loom_predict stays Python and compiled "
            "models keep the portable guard without loom.finite)"
        )
        return None
    assert pg_config is not None
    libdir = _pg_config(pg_config, "--pkglibdir")
    installed = []
    with tempfile.TemporaryDirectory(prefix="loomdb-am-") as work:
        for built in _compile(pg_config, work):
            target = os.path.join(libdir, os.path.basename(built))
            partial = target + ".partial"
            try:
                shutil.copyfile(built, partial)
                os.chmod(partial, 0o755)
                os.replace(partial, target)  # a new file: backends that loaded the old one keep it
            except OSError as exc:
                raise LoomStateError(
                    f"cannot install {target}: {exc.strerror}",
                    hint="run loomdb pg install as root (it writes the server's library directory)",
                ) from exc
            installed.append(target)
    log(f"CREATE INDEX … USING {'|'.join(METHODS)}: built {installed[0]}")
    log(f"loom.finite and loom_predict in C: built {installed[1]}")
    log(f"acting as another role's index owner, restricted: built {installed[2]}")
    return installed[0]


def _methods_sql() -> str:
    """Each access method with its handler and operator classes; an update keeps the methods
    it finds (dropping one would drop every index made with it)."""
    lines = []
    for method in METHODS:
        handler = f"loom.{method}_handler"
        lines += [
            f"    CREATE OR REPLACE FUNCTION {handler}(internal) RETURNS index_am_handler",
            f"        LANGUAGE c AS '$libdir/{LIBRARY}', 'loomdb_{method}_handler';",
            f"    REVOKE ALL ON FUNCTION {handler}(internal) FROM PUBLIC;",
            f"    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_am WHERE amname = '{method}') THEN",
            f"        CREATE ACCESS METHOD {method} TYPE INDEX HANDLER {handler};",
            f"        COMMENT ON ACCESS METHOD {method} IS 'loomdb: lay the table out as {method} "
            "for loom_train (never used by queries)';",
        ]
        lines += [
            f"        CREATE OPERATOR CLASS loom.{method}_{t.replace('[]', '_array')}_ops "
            f"DEFAULT FOR TYPE {t} USING {method} AS STORAGE {t};"
            for t in TYPES[method]
        ]
        lines.append("    END IF;")
    return "\n".join(lines)


def extension_sql() -> str:
    """The access methods' part of the install (and update) script."""
    text = resources.files("loomdb.engines.postgres").joinpath("index_am.sql").read_text()
    return text.replace("{name_pattern}", NAME_PATTERN) + predict_install.sql() + native_sql()


def native_sql() -> str:
    """The C module's objects, made where its library is installed: the ``DO`` block the
    install script ends with, which ``server_setup.add_native`` also runs on its own."""
    library = f"{LIBRARY}.so"
    return f"""
-- The access methods themselves, loom.finite and the C loom_predict, when their library is
-- installed (loomdb pg install builds it where PostgreSQL's server headers are present);
-- without it, loom_create_index only, and loom_predict in Python.
DO $do$
DECLARE
    library text := (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')
                    || '/{library}';
    predict_library text := (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')
                            || '/{predict_install.LIBRARY}.so';
    owner_library text := (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')
                          || '/{owner_install.LIBRARY}.so';
BEGIN
    IF pg_catalog.pg_stat_file(library, true) IS NULL THEN
        RAISE NOTICE 'loomdb: % is not installed: CREATE INDEX … USING {"|".join(METHODS)} '
                     'is unavailable (loom_create_index works), loom_predict is Python', library;
        RETURN;
    END IF;
{_methods_sql()}
    IF pg_catalog.pg_stat_file(owner_library, true) IS NULL THEN
        RAISE NOTICE 'loomdb: % is not installed: acting on another role''s index is '
                     'refused', owner_library;
    ELSE
{owner_install.native_sql()}
    END IF;
    IF pg_catalog.pg_stat_file(predict_library, true) IS NULL THEN
        RAISE NOTICE 'loomdb: % is not installed: loom_predict is Python', predict_library;
        RETURN;
    END IF;
{predict_install.native_sql()}
END
$do$;
"""
