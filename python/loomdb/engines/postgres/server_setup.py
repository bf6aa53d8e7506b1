"""The server-side steps of ``loomdb pg install``: checks, permissions, settings, extension.

Each function does one step of ``install.install`` against a DSN (psycopg 3, autocommit) or
the local file system, and turns what PostgreSQL or the OS refuses into a ``LoomStateError``
that says what to do.
"""

from __future__ import annotations

import json
import os
import pwd
import struct
import uuid
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from loomdb.engines.postgres.installed import EXTENSION_SCHEMA, EXTENSION_VERSION
from loomdb.engines.postgres.venv import refuse_foreign_folder
from loomdb.errors import LoomStateError


@dataclass(frozen=True)
class ServerInfo:
    """What ``install`` needs to know about the server it installs into."""

    version: str
    data_directory: str
    extension_dir: str
    os_user: str
    os_uid: int
    os_gid: int
    bin_dir: str = ""  # the server's own programs (its pg_config builds the access methods)


def describe_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    params.pop("password", None)
    return make_conninfo("", **params)


def connect(dsn: str, *, pinned: bool = False) -> psycopg.Connection:
    """An autocommit connection, or a LoomStateError naming the server; ``pinned``: one whose
    session searches pg_catalog alone (``_pinned``), for the install's reads of the catalog."""
    try:
        return psycopg.connect(_pinned(dsn) if pinned else dsn, autocommit=True)
    except psycopg.Error as exc:
        raise LoomStateError(
            f"could not connect to PostgreSQL at {describe_dsn(dsn)}: {exc}".strip(),
            hint="check the DSN and that the server is running",
        ) from exc


def _one(conn: psycopg.Connection, query: str) -> object:
    row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


OLDEST = 14  # hash_record_extended (an index's fingerprint)


def check_version(major: int, version: str) -> None:
    """Refuse a server older than loomdb's SQL needs."""
    if major < OLDEST:
        raise LoomStateError(
            f"PostgreSQL {version} is older than loomdb supports",
            hint=f"install loomdb into PostgreSQL {OLDEST} or newer",
        )


def inspect_server(dsn: str) -> ServerInfo:
    """Check that loomdb can be installed into the server of ``dsn`` from here."""
    with connect(dsn, pinned=True) as conn:
        if _one(conn, "SELECT current_setting('is_superuser')") != "on":
            raise LoomStateError(
                f"the role {conn.info.user!r} is not a superuser",
                hint="installing loomdb needs ALTER SYSTEM and plpython3u: "
                "connect as a superuser (e.g. user=postgres)",
            )
        version = str(_one(conn, "SELECT current_setting('server_version')"))
        major = int(str(_one(conn, "SELECT current_setting('server_version_num')"))) // 10000
        check_version(major, version)
        if not _one(conn, "SELECT count(*) FROM pg_available_extensions WHERE name='plpython3u'"):
            raise LoomStateError(
                f"PostgreSQL {version} has no plpython3u language",
                hint="install it on the server "
                f"(Debian: apt-get install postgresql-plpython3-{major})",
            )
        data_directory = str(_one(conn, "SELECT current_setting('data_directory')"))
        share = str(_one(conn, "SELECT setting FROM pg_config WHERE name = 'SHAREDIR'"))
        bin_dir = str(_one(conn, "SELECT setting FROM pg_config WHERE name = 'BINDIR'"))
        system_id = int(str(_one(conn, "SELECT system_identifier FROM pg_control_system()")))
    _check_local(dsn, data_directory, system_id)
    extension_dir = os.path.join(share, "extension")
    if not os.access(extension_dir, os.W_OK):
        raise LoomStateError(
            f"cannot write the PostgreSQL extension directory {extension_dir}",
            hint="run loomdb pg install as root (e.g. sudo loomdb pg install --dsn …)",
        )
    owner = os.stat(data_directory)
    try:
        os_user = pwd.getpwuid(owner.st_uid).pw_name
    except KeyError:
        os_user = str(owner.st_uid)
    return ServerInfo(
        version, data_directory, extension_dir, os_user, owner.st_uid, owner.st_gid, bin_dir
    )


def _check_local(dsn: str, data_directory: str, system_id: int) -> None:
    """Refuse a server that does not run on this machine (its files must be written here)."""
    hint = (
        "run loomdb pg install on the database server itself, "
        "or use the loomdb PostgreSQL image (docker/Dockerfile)"
    )
    if not os.path.isdir(data_directory):
        raise LoomStateError(
            f"the server at {describe_dsn(dsn)} does not run on this machine "
            f"(its data directory {data_directory} is not here)",
            hint=hint,
        )
    try:
        with open(os.path.join(data_directory, "global", "pg_control"), "rb") as control:
            local_id = struct.unpack("<Q", control.read(8))[0]
    except OSError:
        return  # not readable by this user: the directory check above is all we can do
    if local_id != system_id:
        raise LoomStateError(
            f"the server at {describe_dsn(dsn)} is not the cluster in {data_directory} "
            "on this machine",
            hint=hint,
        )


def check_private_path(path: str, uid: int) -> None:
    """Refuse a numba cache directory that ``make_private_to`` must not take over: a file, or a
    folder of files that neither is empty nor belongs to the server's OS user already
    (``--numba-cache-dir /etc`` would have the whole tree chowned and closed)."""
    refuse_foreign_folder(
        path,
        "the numba cache directory",
        "--numba-cache-dir",
        "the cache",
        lambda: os.stat(path).st_uid == uid,
        "holds files and is not the server's: loomdb would give all of them to the server's "
        "OS user",
    )


def make_private_to(path: str, uid: int, gid: int) -> None:
    """Create directory ``path`` owned by the OS user ``uid`` and closed to everyone else.

    numba reads its cache index with pickle: a directory anyone else could write would let
    them choose code the server runs.
    """
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.geteuid() not in (0, uid):
        raise LoomStateError(
            f"cannot give the numba cache directory {path} to the server's OS user",
            hint="run loomdb pg install as root (or as the server's OS user)",
        )
    for directory, dirs, files in os.walk(path):
        for name in [directory] + [os.path.join(directory, n) for n in dirs + files]:
            if os.geteuid() == 0:
                os.lchown(name, uid, gid)
    os.chmod(path, 0o700)


OLD_SETTINGS = ("loomdb.python_path", "loomdb.numba_cache_dir")


def reset_old_settings(dsn: str) -> list[str]:
    """Remove the server-wide settings loomdb 0.1 used (any role could override them)."""
    with connect(dsn, pinned=True) as conn:
        present = [
            name
            for (name,) in conn.execute(
                "SELECT DISTINCT name FROM pg_file_settings WHERE name = ANY(%s)",
                [list(OLD_SETTINGS)],
            ).fetchall()
        ]
        for name in present:
            conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(*name.split("."))))
        if present:
            conn.execute("SELECT pg_reload_conf()")
    return present


def write_settings(dsn: str, settings: dict[str, str]) -> None:
    """Point an existing loomdb extension at ``settings``: loom.settings (superuser-only), and
    the parallel epoch's functions, whose bodies hold the paths (their workers cannot read the
    table), made again from them in the same transaction."""
    from loomdb.engines.postgres import epoch_install, extension
    from loomdb.engines.postgres.client import PsycopgDatabase
    from loomdb.store import catalog

    with connect(dsn) as conn, conn.transaction():
        for key, value in settings.items():
            catalog.put_setting(PsycopgDatabase(conn), key, value)
        conn.execute(epoch_install.sql(settings, extension.ROLE))  # type: ignore[arg-type]


def catalog_counts(dsn: str) -> dict[str, int]:
    """How many models and indexes the database's loomdb catalog holds (0 without one)."""
    counts = {}
    with connect(dsn, pinned=True) as conn:
        for table in ("models", "indexes"):
            held = _one(conn, f"SELECT to_regclass('loom.{table}') IS NOT NULL")
            rows = _one(conn, f"SELECT count(*) FROM loom.{table}") if held else 0
            counts[table] = int(str(rows))
    return counts


# The objects this transaction made in loomdb's schema and access methods that no extension
# holds yet, each as what follows ALTER EXTENSION … ADD (names quoted by PostgreSQL's format:
# only objects the install script's own block just made are named, never a row a role wrote).
# Run as a superuser under the database's search_path: every comparison is pg_catalog's
# operator on oids (``oid = regnamespace`` or ``regclass = regclass`` has no operator of its
# own there, so another role's exact one in a schema on that path would be run).
_EQ = "OPERATOR(pg_catalog.=)"
_PROC, _AM = "'pg_catalog.pg_proc'", "'pg_catalog.pg_am'"
_OPFAMILY, _OPCLASS = "'pg_catalog.pg_opfamily'", "'pg_catalog.pg_opclass'"
_LOOM = "'loom'::pg_catalog.regnamespace::pg_catalog.oid"
_NOW = "pg_catalog.pg_current_xact_id()::pg_catalog.xid"


def _oid(catalog: str) -> str:
    return f"{catalog}::pg_catalog.regclass::pg_catalog.oid"


_NEW_MEMBERS = f"""
WITH fresh (classid, objid) AS (
    SELECT {_oid(_PROC)}, oid FROM pg_catalog.pg_proc
    WHERE xmin {_EQ} {_NOW} AND pronamespace {_EQ} {_LOOM}
    UNION ALL SELECT {_oid(_AM)}, oid FROM pg_catalog.pg_am WHERE xmin {_EQ} {_NOW}
    UNION ALL SELECT {_oid(_OPFAMILY)}, oid FROM pg_catalog.pg_opfamily
    WHERE xmin {_EQ} {_NOW} AND opfnamespace {_EQ} {_LOOM}
    UNION ALL SELECT {_oid(_OPCLASS)}, oid FROM pg_catalog.pg_opclass
    WHERE xmin {_EQ} {_NOW} AND opcnamespace {_EQ} {_LOOM}
)
SELECT CASE
    WHEN f.classid {_EQ} {_oid(_PROC)}
        THEN pg_catalog.format('FUNCTION %s', f.objid::pg_catalog.regprocedure)
    WHEN f.classid {_EQ} {_oid(_AM)} THEN pg_catalog.format('ACCESS METHOD %I', a.amname)
    WHEN f.classid {_EQ} {_oid(_OPFAMILY)}
        THEN pg_catalog.format('OPERATOR FAMILY loom.%I USING %I', o.opfname,
            (SELECT amname FROM pg_catalog.pg_am AS m WHERE m.oid {_EQ} o.opfmethod))
    ELSE pg_catalog.format('OPERATOR CLASS loom.%I USING %I',
        c.opcname, (SELECT amname FROM pg_catalog.pg_am AS m WHERE m.oid {_EQ} c.opcmethod))
    END
FROM fresh AS f
LEFT JOIN pg_catalog.pg_am AS a ON f.classid {_EQ} {_oid(_AM)} AND a.oid {_EQ} f.objid
LEFT JOIN pg_catalog.pg_opfamily AS o
    ON f.classid {_EQ} {_oid(_OPFAMILY)} AND o.oid {_EQ} f.objid
LEFT JOIN pg_catalog.pg_opclass AS c
    ON f.classid {_EQ} {_oid(_OPCLASS)} AND c.oid {_EQ} f.objid
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS d
                  WHERE d.classid {_EQ} f.classid AND d.objid {_EQ} f.objid
                  AND d.deptype {_EQ} 'e'::pg_catalog."char")
ORDER BY 1
"""


def add_native(dsn: str) -> list[str]:
    """Give an extension created before the C module was built its objects — the index access
    methods, ``loom.finite``, the C ``loom_predict`` — in place, keeping its catalog: the
    install script's own ``DO`` block, then each object it made joined to the extension (found
    as the new rows of this transaction), all in one transaction.  What was added, in words."""
    from loomdb.engines.postgres import index_am_install

    with connect(dsn) as conn, conn.transaction():
        conn.execute(index_am_install.native_sql())  # type: ignore[arg-type]
        added = [str(r[0]) for r in conn.execute(_NEW_MEMBERS).fetchall()]  # type: ignore[arg-type]
        for member in added:
            conn.execute(sql.SQL("ALTER EXTENSION loomdb ADD ") + sql.SQL(member))  # type: ignore[arg-type]
    return added


def extension_version(dsn: str) -> str | None:
    """The version of loomdb the database of ``dsn`` holds (None: not created there)."""
    with connect(dsn, pinned=True) as conn:
        held = _one(conn, EXTENSION_VERSION)
    return None if held is None else str(held)


# What a reinstall drops with the catalog before the extension, which they would keep from
# being dropped: the index relations of loomdb's access methods (CREATE INDEX … USING; the drop
# trigger removes their loomdb indexes), then the storage table of every loomdb index left
# (loom_data.<its checked name>).  Anything else that depends on the extension still refuses.
_DROP_INDEXES = f"""
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.oid::pg_catalog.regclass AS relation FROM pg_catalog.pg_class AS c
             JOIN pg_catalog.pg_am AS a ON a.oid OPERATOR(pg_catalog.=) c.relam
             JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) a.amhandler
             WHERE c.relkind OPERATOR(pg_catalog.=) 'i'::pg_catalog."char"
             AND p.pronamespace OPERATOR(pg_catalog.=) {_LOOM} LOOP
        EXECUTE pg_catalog.format('DROP INDEX %s', r.relation);
    END LOOP;
    FOR r IN SELECT name FROM loom.indexes LOOP
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS loom_data.%I', r.name);
    END LOOP;
END
$do$
"""


def create_extension(dsn: str, *, reinstall: bool = False) -> tuple[str, str]:
    """Create (or update, or drop and create) plpython3u and loomdb; return (action, version)."""
    query_version = EXTENSION_VERSION
    with connect(dsn) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS plpython3u")
            before = _one(conn, query_version)
            with conn.transaction():
                if before is not None and reinstall:
                    conn.execute(_DROP_INDEXES)
                    conn.execute("DROP EXTENSION loomdb")
                if before is None or reinstall:
                    conn.execute("CREATE EXTENSION loomdb")
                else:
                    conn.execute("ALTER EXTENSION loomdb UPDATE")
            after = str(_one(conn, query_version))
        except psycopg.errors.DependentObjectsStillExist as exc:
            raise LoomStateError(
                "cannot drop the loomdb extension: other objects depend on it",
                hint="drop them first (the detail names them), or install without --reinstall",
                detail=str(exc),
            ) from exc
        except psycopg.Error as exc:
            diag = exc.diag
            raise LoomStateError(
                f"PostgreSQL refused to create the loomdb extension: {diag.message_primary}",
                hint=diag.message_hint or "see the detail, fix it and run the install again",
                detail=diag.message_detail or str(exc),
            ) from exc
    if before is None:
        return "created", after
    if reinstall:
        return "reinstalled", after
    return ("updated" if after != before else "already installed"), after


def in_database(dsn: str, database: str) -> str:
    """``dsn`` with its database replaced by ``database``."""
    return make_conninfo(dsn, dbname=database)


def _pinned(dsn: str) -> str:
    """``dsn`` whose sessions search pg_catalog alone: the settings of a database (its owner's
    ALTER DATABASE … SET search_path) never choose what a superuser's names there mean."""
    options = conninfo_to_dict(dsn).get("options") or ""
    return make_conninfo(dsn, options=f"{options} -c search_path=pg_catalog".strip())


def outdated_databases(dsn: str, version: str) -> tuple[dict[str, str], dict[str, str]]:
    """The server's other databases whose loomdb extension is not at ``version``, with the
    version each holds (they share the server's loomdb environment, which now runs
    ``version``'s Python under their older SQL until each is updated); and those this role
    could not look into, with what refused it.  Each is read as a superuser, in a database
    another role may own: only pg_catalog is searched there, and the query names it too."""
    with connect(dsn, pinned=True) as conn:
        names = conn.execute(
            "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn "
            "AND datname OPERATOR(pg_catalog.<>) pg_catalog.current_database() ORDER BY 1"
        ).fetchall()
    outdated, unread = {}, {}
    for (name,) in names:
        try:
            with psycopg.connect(_pinned(in_database(dsn, name)), autocommit=True) as conn:
                held = _one(conn, EXTENSION_VERSION)
        except psycopg.Error as exc:
            unread[name] = str(exc).strip()
            continue
        if held is not None and held != version:
            outdated[name] = str(held)
    return outdated, unread


_CHECK = r"""
import json, os, sys
have = '%d.%d' % sys.version_info[:2]
if have != WANT:
    plpy.error('the server runs Python ' + have + ' but its loomdb environment has Python ' + WANT,
               hint='run loomdb pg install again with --python set to the Python ' + have
               + ' that plpython3u is linked with')
for entry in reversed(PATHS):
    if entry not in sys.path:
        sys.path.insert(0, entry)
os.environ['NUMBA_CACHE_DIR'] = CACHE
try:
    import loomdb, numpy, numba
except Exception as exc:
    plpy.error('the server cannot import loomdb, numpy and numba: %s: %s'
               % (type(exc).__name__, exc),
               hint='check that the environment is readable by the server OS user, '
               'then run loomdb pg install again')
if not os.access(CACHE, os.W_OK):
    plpy.error('the server cannot write the numba cache ' + CACHE,
               hint='the directory must belong to the server OS user')
plpy.notice('loomdb-check ' + json.dumps({'loomdb': loomdb.__file__,
                                          'version': loomdb.__version__,
                                          'numpy': numpy.__version__,
                                          'numba': numba.__version__}))
"""


def check_server_python(
    dsn: str, python_version: str, paths: list[str], cache: str
) -> dict[str, str]:
    """Import loomdb, numpy and numba in the server as the bootstrap would; say where from."""
    code = (
        f"WANT = {json.dumps(python_version)}\nPATHS = {json.dumps(paths)}\n"
        f"CACHE = {json.dumps(cache)}\n{_CHECK}"
    )
    notices: list[str] = []
    with connect(dsn) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS plpython3u")
            conn.execute(sql.SQL("DO {} LANGUAGE plpython3u").format(sql.Literal(code)))
        except psycopg.Error as exc:
            raise LoomStateError(
                str(exc.diag.message_primary or exc),
                hint=exc.diag.message_hint,
                detail=exc.diag.message_detail,
            ) from exc
    for notice in notices:
        if notice.startswith("loomdb-check "):
            return dict(json.loads(notice.removeprefix("loomdb-check ")))
    raise LoomStateError("the server's Python check printed nothing", hint="see the server log")


def index_methods(dsn: str) -> list[str]:
    """The loomdb index access methods the database has (``CREATE INDEX … USING``)."""
    from loomdb.engines.postgres.index_am_install import METHODS

    with connect(dsn, pinned=True) as conn:
        rows = conn.execute(
            "SELECT amname FROM pg_am WHERE amname = ANY(%s) ORDER BY amname", [list(METHODS)]
        ).fetchall()
    return [str(r[0]) for r in rows]


def native_predict(dsn: str) -> bool:
    """Whether loom_predict is the C function and loom.finite exists (the C module's)."""
    with connect(dsn, pinned=True) as conn:
        row = conn.execute(
            "SELECT to_regprocedure('loom.finite(double precision)') IS NOT NULL AND EXISTS ("
            "SELECT 1 FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e' "
            "JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'loomdb' "
            "WHERE p.proname = 'loom_predict' AND l.lanname = 'c')"
        ).fetchone()
    return bool(row and row[0])


def check_functions_run(dsn: str) -> dict[str, str]:
    """Train and predict on a tiny temporary table in a new session, then roll it all back:
    loomdb's functions named with the extension's schema, as a superuser under the database's
    search_path (a schema named after the superuser, "$user", may be another role's)."""
    name = f"loom_install_check_{uuid.uuid4().hex[:12]}"
    options = '{"epochs": 1, "progress": false}'
    with connect(dsn) as conn:
        try:
            with conn.transaction(force_rollback=True):
                schema = sql.Identifier(str(_one(conn, EXTENSION_SCHEMA)))
                version = str(_one(conn, sql.SQL("SELECT {}.loom_version()").format(schema)))  # type: ignore[arg-type]
                conn.execute(
                    sql.SQL(
                        "CREATE TEMPORARY TABLE {} AS SELECT g::pg_catalog.float8 AS x, "
                        "(g OPERATOR(pg_catalog.%) 2)::pg_catalog.float8 AS y "
                        "FROM pg_catalog.generate_series(1, 8) AS g"
                    ).format(sql.Identifier(name))
                )
                # exact argument types: no other overload of these names matches better
                conn.execute(
                    sql.SQL("SELECT {}.loom_train(%s::text, %s::text, 'y'::text, %s::text)").format(
                        schema
                    ),
                    [name, name, options],
                )
                row = conn.execute(
                    sql.SQL(
                        "SELECT {}.loom_predict(%s::text, ARRAY[1.0]::double precision[])"
                    ).format(schema),
                    [name],
                ).fetchone()
        except psycopg.Error as exc:
            raise LoomStateError(
                f"loomdb is installed but its functions fail: {exc.diag.message_primary or exc}",
                hint=exc.diag.message_hint or "see the server log",
                detail=exc.diag.message_detail,
            ) from exc
    if row is None or row[0] not in (0.0, 1.0):
        raise LoomStateError(f"loomdb's check model predicted {row!r} instead of a class")
    return {"version": version}
