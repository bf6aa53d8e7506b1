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
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from loomdb.errors import LoomStateError

#: How long to wait for ``pg_reload_conf()`` to reach new sessions.
RELOAD_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerInfo:
    """What ``install`` needs to know about the server it installs into."""

    version: str
    data_directory: str
    extension_dir: str
    os_user: str
    os_uid: int
    os_gid: int


def describe_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    params.pop("password", None)
    return make_conninfo("", **params)


def connect(dsn: str) -> psycopg.Connection:
    """An autocommit connection, or a LoomStateError naming the server."""
    try:
        return psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise LoomStateError(
            f"could not connect to PostgreSQL at {describe_dsn(dsn)}: {exc}".strip(),
            hint="check the DSN and that the server is running",
        ) from exc


def _one(conn: psycopg.Connection, query: str) -> object:
    row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


def inspect_server(dsn: str) -> ServerInfo:
    """Check that loomdb can be installed into the server of ``dsn`` from here."""
    with connect(dsn) as conn:
        if _one(conn, "SELECT current_setting('is_superuser')") != "on":
            raise LoomStateError(
                f"the role {conn.info.user!r} is not a superuser",
                hint="installing loomdb needs ALTER SYSTEM and plpython3u: "
                "connect as a superuser (e.g. user=postgres)",
            )
        version = str(_one(conn, "SELECT current_setting('server_version')"))
        major = int(str(_one(conn, "SELECT current_setting('server_version_num')"))) // 10000
        if not _one(conn, "SELECT count(*) FROM pg_available_extensions WHERE name='plpython3u'"):
            raise LoomStateError(
                f"PostgreSQL {version} has no plpython3u language",
                hint="install it on the server "
                f"(Debian: apt-get install postgresql-plpython3-{major})",
            )
        data_directory = str(_one(conn, "SELECT current_setting('data_directory')"))
        share = str(_one(conn, "SELECT setting FROM pg_config WHERE name = 'SHAREDIR'"))
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
    return ServerInfo(version, data_directory, extension_dir, os_user, owner.st_uid, owner.st_gid)


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


def make_writable_by(path: str, uid: int, gid: int) -> None:
    """Create directory ``path`` and let the OS user ``uid`` write into it."""
    os.makedirs(path, mode=0o755, exist_ok=True)
    if os.geteuid() == uid:
        return
    if os.geteuid() == 0:
        for directory, dirs, files in os.walk(path):
            for name in [directory] + [os.path.join(directory, n) for n in dirs + files]:
                os.lchown(name, uid, gid)
        return
    os.chmod(path, 0o1777)  # neither root nor the server's user: open it, sticky like /tmp


def set_server_settings(dsn: str, settings: dict[str, str]) -> None:
    """``ALTER SYSTEM SET`` each setting, reload, and wait until new sessions see them."""
    with connect(dsn) as conn:
        for name, value in settings.items():
            # Before PostgreSQL 17 ALTER SYSTEM only knows a custom setting once this session
            # has one: SET it here first to create the placeholder.
            conn.execute("SELECT set_config(%s, %s, false)", [name, value])
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(
                    sql.Identifier(*name.split(".")), sql.Literal(value)
                )
            )
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + RELOAD_TIMEOUT_S
    while True:
        with connect(dsn) as conn:
            seen = {
                name: conn.execute("SELECT current_setting(%s, true)", [name]).fetchone()
                for name in settings
            }
        if all(row is not None and row[0] == settings[name] for name, row in seen.items()):
            return
        if time.monotonic() > deadline:
            raise LoomStateError(
                "the server did not pick up the loomdb settings after pg_reload_conf()",
                hint="restart PostgreSQL, or check that no database- or role-level "
                "setting overrides loomdb.python_path",
            )
        time.sleep(0.1)


def create_extension(dsn: str, *, reinstall: bool = False) -> tuple[str, str]:
    """Create (or update, or drop and create) plpython3u and loomdb; return (action, version)."""
    query_version = "SELECT extversion FROM pg_extension WHERE extname = 'loomdb'"
    with connect(dsn) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS plpython3u")
            before = _one(conn, query_version)
            with conn.transaction():
                if before is not None and reinstall:
                    conn.execute("DROP EXTENSION loomdb")
                if before is None or reinstall:
                    conn.execute("CREATE EXTENSION loomdb")
                else:
                    conn.execute("ALTER EXTENSION loomdb UPDATE")
            after = str(_one(conn, query_version))
        except psycopg.errors.DependentObjectsStillExist as exc:
            raise LoomStateError(
                "cannot drop the loomdb extension: other objects depend on it",
                hint="drop them first, or install without --reinstall",
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


_CHECK = r"""
import json, os, sys
have = '%d.%d' % sys.version_info[:2]
if have != WANT:
    plpy.error('the server runs Python ' + have + ' but its loomdb environment has Python ' + WANT,
               hint='run loomdb pg install again with --python set to the Python ' + have
               + ' that plpython3u is linked with')
row = plpy.execute("SELECT current_setting('loomdb.python_path', true) AS path, "
                   "current_setting('loomdb.numba_cache_dir', true) AS cache")[0]
for entry in reversed([p for p in (row['path'] or '').split(':') if p]):
    if entry not in sys.path:
        sys.path.insert(0, entry)
os.environ.setdefault('NUMBA_CACHE_DIR', row['cache'] or '')
try:
    import loomdb, numpy, numba
except Exception as exc:
    plpy.error('the server cannot import loomdb, numpy and numba: %s: %s'
               % (type(exc).__name__, exc),
               hint='check that every directory in loomdb.python_path is readable by the '
               'server OS user, then run loomdb pg install again')
if not os.access(os.environ['NUMBA_CACHE_DIR'], os.W_OK):
    plpy.error('the server cannot write the numba cache ' + os.environ['NUMBA_CACHE_DIR'],
               hint='make loomdb.numba_cache_dir writable by the server OS user')
plpy.notice('loomdb-check ' + json.dumps({'loomdb': loomdb.__file__,
                                          'numpy': numpy.__version__,
                                          'numba': numba.__version__}))
"""


def check_server_python(dsn: str, python_version: str) -> dict[str, str]:
    """Import loomdb, numpy and numba in the server as the bootstrap would; say where from."""
    code = f"WANT = {json.dumps(python_version)}\n{_CHECK}"
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
