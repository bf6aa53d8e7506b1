"""``CREATE INDEX … USING mlweaving|toc|dense``, ``REINDEX`` and ``DROP INDEX`` in plain psql:
loomdb's index access methods (engines/postgres/index_am*).  PostgreSQL only.

Every statement runs in ``psql -X -v ON_ERROR_STOP=1`` (no loomdb front-end), in a schema of
the test's own; what it leaves is read back from the catalogs: the loomdb index row, the
storage table in ``loom_data``, the index relation and ``loom.index_relations``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from conftest import need

pytestmark = pytest.mark.postgres

SCHEMA = "loomam"
ROWS = 600
POINTS = f"""
CREATE TABLE pts AS
SELECT a, b, CASE WHEN a + b > 1 THEN 1 ELSE 0 END AS y
FROM (SELECT ((i * 37) % 101)::float8 / 101 AS a, ((i * 53) % 97)::float8 / 97 AS b
      FROM generate_series(1, {ROWS}) AS g(i)) AS s;
"""


class Psql:
    """Plain psql on the test schema, and a psycopg connection to read what it left."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.env = dict(
            os.environ,
            PGOPTIONS=f"-c search_path={SCHEMA},public -c lc_messages=C",
            PGCLIENTENCODING="UTF8",
        )

    def run(self, script: str) -> str:
        """Run ``script``; its output (tuples only); fails the test on any error."""
        done = self._psql(script)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def error(self, script: str) -> str:
        """Run ``script``, which must fail; the error text."""
        done = self._psql(script)
        assert done.returncode != 0, f"expected an error from:\n{script}\n{done.stdout}"
        return done.stderr

    def _psql(self, script: str) -> subprocess.CompletedProcess[str]:
        psql = shutil.which("psql")
        assert psql is not None
        cmd = [psql, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.dsn]
        return subprocess.run(
            cmd, input=script, capture_output=True, text=True, env=self.env, timeout=300
        )

    def rows(self, sql: str, params: list | dict | None = None) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def state(self, name: str) -> dict[str, bool]:
        """Which of the index's four traces exist."""
        (row,) = self.rows(
            "SELECT EXISTS (SELECT 1 FROM loom.indexes WHERE name = %(n)s), "
            "to_regclass('loom_data.' || quote_ident(%(n)s)) IS NOT NULL, "
            "EXISTS (SELECT 1 FROM loom.index_relations WHERE name = %(n)s), "
            "EXISTS (SELECT 1 FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
            "        WHERE c.relname = %(n)s AND a.amname IN ('mlweaving', 'toc', 'dense'))",
            {"n": name},
        )
        return dict(zip(("catalog", "storage", "registered", "relation"), row))


NOTHING = {"catalog": False, "storage": False, "registered": False, "relation": False}
EVERYTHING = {"catalog": True, "storage": True, "registered": True, "relation": True}


@pytest.fixture
def psql(pg_dsn) -> Iterator[Psql]:
    if shutil.which("psql") is None:
        need("psql (postgresql-client)")
    p = Psql(pg_dsn)
    methods = p.rows("SELECT amname FROM pg_am WHERE amname IN ('mlweaving', 'toc', 'dense')")
    if len(methods) != 3:
        need("loomdb's index access methods (apt-get install postgresql-server-dev-15)")
    p.rows(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    p.rows(f"CREATE SCHEMA {SCHEMA}")
    models = {r[0] for r in p.rows("SELECT name FROM loom.models")}
    indexes = {r[0] for r in p.rows("SELECT name FROM loom.indexes")}
    try:
        yield p
    finally:  # the schema first: its indexes go with their relations
        p.rows(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        p.rows("DROP SCHEMA IF EXISTS loomam_other CASCADE")
        for (name,) in p.rows("SELECT name FROM loom.models"):
            if name not in models:
                p.rows("SELECT loom_drop_model(%s)", [name])
        for (name,) in p.rows("SELECT name FROM loom.indexes"):
            if name not in indexes:
                p.rows("SELECT loom_drop_index(%s)", [name])
        p.conn.close()


def train(index: str, extra: str = "") -> str:
    options = f'{{"index": "{index}", "epochs": 2, "progress": false{extra}}}'
    return (
        f"SELECT loom_train('am_m_{uuid.uuid4().hex[:8]}', NULL, 'y', '{options}')::json->>'rows';"
    )


def test_create_train_explain_stale_reindex_drop(psql):
    psql.run(POINTS + "CREATE INDEX pts_w ON pts USING mlweaving (a, b) WITH (label = y);")
    assert psql.state("pts_w") == EVERYTHING
    source, label, columns, fmt, rows, owner = psql.rows(
        "SELECT source, label, columns, format, rows, owner FROM loom.indexes WHERE name = 'pts_w'"
    )[0]
    assert (source, label, json.loads(columns), fmt, rows) == (
        f"{SCHEMA}.pts",
        "y",
        ["a", "b"],
        "mlweaving",
        ROWS,
    )
    assert owner == psql.rows("SELECT current_user")[0][0]
    assert psql.run(train("pts_w")).strip() == str(ROWS)

    # the planner never uses it, even when everything else is disabled
    for setting in ("", "SET enable_seqscan = off; SET enable_bitmapscan = off;"):
        plan = psql.run(f"{setting} EXPLAIN SELECT * FROM pts WHERE a = 0.5 AND b > 0 ORDER BY a;")
        assert "pts_w" not in plan and "Seq Scan on pts" in plan

    # an INSERT makes it stale: a train is refused until REINDEX (or with allow_stale)
    psql.run("INSERT INTO pts VALUES (0.25, 0.5, 0);")
    stale = psql.error(train("pts_w"))
    assert "index 'pts_w' is older than the last change to loomam.pts" in stale
    assert psql.run(train("pts_w", ', "allow_stale": true')).strip() == str(ROWS)
    uid = psql.rows("SELECT uid FROM loom.indexes WHERE name = 'pts_w'")[0][0]
    psql.run("REINDEX INDEX pts_w;")
    rows, new_uid = psql.rows("SELECT rows, uid FROM loom.indexes WHERE name = 'pts_w'")[0]
    assert rows == ROWS + 1 and new_uid != uid
    assert psql.run(train("pts_w")).strip() == str(ROWS + 1)

    psql.run("DROP INDEX pts_w;")
    assert psql.state("pts_w") == NOTHING


def test_a_failed_build_leaves_nothing(psql):
    psql.run(POINTS)
    bad = {
        "WITH (label = y, bits = 3)": "unknown layout option 'bits'",
        "WITH (label = y, batch_size = 0)": "'batch_size' option must be an integer",
        "WITH (label = y, format = dense)": "'format' option is written in the statement",
        "WITH (batch_size = 8)": "names no label column",
        "WITH (label = nosuch)": "label 'nosuch' is not a column of loomam.pts",
        "": "names no label column",
    }
    for with_clause, message in bad.items():
        error = psql.error(f"CREATE INDEX pts_bad ON pts USING toc (a, b) {with_clause};")
        assert message in error, (with_clause, error)
        assert psql.state("pts_bad") == NOTHING
    for statement, message in {
        "ON pts USING toc ((a + b)) WITH (label = y)": "plain columns, not expressions",
        "ON pts USING toc (a) WITH (label = y) WHERE a > 0": "not a WHERE clause",
        "ON pts USING toc (a DESC) WITH (label = y)": "does not support ASC/DESC",
        "ON pts USING toc (y) WITH (label = y)": "cannot also be a feature",
    }.items():
        assert message in psql.error(f"CREATE INDEX pts_bad {statement};")
        assert psql.state("pts_bad") == NOTHING
    error = psql.error("CREATE INDEX CONCURRENTLY pts_bad ON pts USING toc (a) WITH (label = y);")
    assert "cannot be built CONCURRENTLY" in error
    psql.run("DROP INDEX pts_bad;")  # the invalid relation PostgreSQL leaves behind
    assert psql.state("pts_bad") == NOTHING


def test_names_are_global_across_schemas(psql):
    psql.run(
        POINTS
        + "CREATE INDEX pts_w ON pts USING toc (a, b) WITH (label = y);"
        + "CREATE SCHEMA loomam_other; CREATE TABLE loomam_other.pts AS SELECT * FROM pts;"
    )
    error = psql.error("CREATE INDEX pts_w ON loomam_other.pts USING dense (a) WITH (label = y);")
    assert "the loomdb index name 'pts_w' is taken by the index loomam.pts_w" in error
    assert psql.rows("SELECT to_regclass('loomam_other.pts_w')") == [(None,)]
    # loom_create_index and loom_drop_index do not touch a name an index relation holds
    held = psql.error("SELECT loom_create_index('pts_w', 'pts', 'y');")
    assert "is held by the PostgreSQL index loomam.pts_w" in held
    dropped = psql.error("SELECT loom_drop_index('pts_w');")
    assert "drop it with DROP INDEX loomam.pts_w" in dropped
    # a function-made index of the name is not taken over from another table
    psql.run("SELECT loom_create_index('pts_f', 'loomam_other.pts', 'y');")
    error = psql.error("CREATE INDEX pts_f ON pts USING toc (a) WITH (label = y);")
    assert "is taken by an index made by loom_create_index" in error
    assert psql.state("pts_w") == EVERYTHING


def test_truncate_rename_alter_and_rebuilds(psql):
    psql.run(
        POINTS
        + "CREATE INDEX pts_a ON pts (a);"  # a btree beside it, rebuilt after it by rewrites
        + "CREATE INDEX pts_w ON pts USING dense (a, b) WITH (label = y, batch_size = 32);"
        + "CREATE INDEX pts_z ON pts (b);"
    )
    uid = "SELECT uid FROM loom.indexes WHERE name = 'pts_w'"
    built = psql.rows(uid)
    psql.run("REINDEX TABLE pts;")  # rebuilt like every index of the table
    rebuilt = psql.rows(uid)
    assert rebuilt != built
    # a rewrite rebuilds the indexes in OID order: when pts_w's turn comes pts_z still waits,
    # the table cannot be read, and the layout of the (unchanged) rows is kept
    psql.run("VACUUM FULL pts; CLUSTER pts USING pts_a;")
    assert psql.rows(uid) == rebuilt
    assert psql.rows("SELECT rows, batches FROM loom.indexes WHERE name = 'pts_w'") == [
        (ROWS, ROWS // 32 + 1)
    ]
    assert psql.run(train("pts_w")).strip() == str(ROWS)

    # options: checked when set, used by the next REINDEX
    assert "'batch_size' option must be" in psql.error("ALTER INDEX pts_w SET (batch_size = -1);")
    psql.run("ALTER INDEX pts_w SET (batch_size = 100); REINDEX INDEX pts_w;")
    assert psql.rows("SELECT batches FROM loom.indexes WHERE name = 'pts_w'") == [(6,)]

    # a renamed relation keeps its layout until REINDEX gives it the new name
    psql.run("ALTER INDEX pts_w RENAME TO pts_v; REINDEX INDEX pts_v;")
    assert psql.state("pts_w") == NOTHING and psql.state("pts_v") == EVERYTHING

    # TRUNCATE leaves the index without a layout until REINDEX finds rows again
    psql.run("TRUNCATE pts;")
    assert psql.state("pts_v") == {**EVERYTHING, "catalog": False, "storage": False}
    assert "REINDEX INDEX loomam.pts_v once the table has rows" in psql.error(train("pts_v"))
    psql.run("INSERT INTO pts VALUES (0.1, 0.2, 0), (0.9, 0.8, 1); REINDEX INDEX pts_v;")
    assert psql.rows("SELECT rows FROM loom.indexes WHERE name = 'pts_v'") == [(2,)]

    # a column type change replaces the relation: its loomdb index follows
    psql.run("ALTER TABLE pts ALTER COLUMN b TYPE numeric;")
    assert psql.state("pts_v") == EVERYTHING
    psql.run("DROP TABLE pts;")
    assert psql.state("pts_v") == NOTHING


def test_a_renamed_table_says_to_reindex(psql):
    """After ALTER TABLE pts3 RENAME TO pts4 training on the index failed "cannot read source
    loomam.pts3" with no word of the REINDEX that builds it again from pts4."""
    psql.run(
        POINTS.replace("pts", "pts3")
        + "CREATE INDEX pts3_w ON pts3 USING mlweaving (a, b) WITH (label = y);"
        + "ALTER TABLE pts3 RENAME TO pts4;"
    )
    error = psql.error(train("pts3_w"))
    assert "cannot read source loomam.pts3" in error
    assert "HINT:" in error and "REINDEX INDEX loomam.pts3_w" in error
    psql.run("REINDEX INDEX loomam.pts3_w;")  # what the hint says
    assert psql.run(train("pts3_w")).strip() == str(ROWS)


def test_an_alter_index_a_rebuild_could_not_take_is_refused_at_alter(psql):
    """ALTER INDEX … RESET (label) (PostgreSQL checks no options when none remain) and SET
    (label = nosuch) were accepted and failed only at the next rebuild ("names no label
    column"), TRUNCATE and VACUUM FULL included."""
    psql.run(
        POINTS
        + "CREATE INDEX pts_a ON pts (a);"
        + "CREATE INDEX pts_w ON pts USING mlweaving (a, b) WITH (label = y);"
    )
    reloptions = f"SELECT reloptions FROM pg_class WHERE oid = '{SCHEMA}.pts_w'::regclass"
    kept = psql.rows(reloptions)
    for change, message in [
        ("RESET (label)", "names no label column"),
        ("SET (label = nosuch)", "label 'nosuch' is not a column of loomam.pts"),
        ("SET (label = a)", "its label 'a' is also one of its columns"),
    ]:
        error = psql.error(f"ALTER INDEX pts_w {change};")
        assert message in error and "HINT:  ALTER INDEX pts_w SET (label = column)" in error
        assert psql.rows(reloptions) == kept
    psql.run(  # what a build takes is accepted, and an index of PostgreSQL's is not asked
        "ALTER INDEX pts_w SET (batch_size = 64); ALTER INDEX pts_w RENAME TO pts_v;"
        "ALTER INDEX pts_a SET (fillfactor = 50); TRUNCATE pts; VACUUM FULL pts;"
    )
    assert psql.state("pts_v")["registered"]


def test_an_empty_table_and_drop_schema(psql):
    psql.run(
        "CREATE TABLE pts (a float8, b int4, c bool, y int2);"
        "CREATE INDEX pts_e ON pts USING mlweaving (a, b, c) WITH (label = y);"
    )
    assert psql.state("pts_e") == {**EVERYTHING, "catalog": False, "storage": False}
    psql.run(
        "INSERT INTO pts SELECT g / 10.0, g % 7, g % 3 = 0, g % 2 FROM generate_series(1, 50) g;"
        "REINDEX INDEX pts_e;"
    )
    assert psql.state("pts_e") == EVERYTHING
    psql.run(f"DROP SCHEMA {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA};")
    assert psql.state("pts_e") == NOTHING


def test_loomdb_sql_passes_drop_and_reindex_of_an_index_relation(psql):
    psql.run(POINTS + "CREATE INDEX pts_w ON pts USING toc (a, b) WITH (label = y);")
    script = f"SET search_path = {SCHEMA}, public; REINDEX INDEX pts_w; DROP INDEX pts_w;"
    done = subprocess.run(
        [sys.executable, "-m", "loomdb.cli.main", "sql", "--dsn", psql.dsn, "-q", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert psql.state("pts_w") == NOTHING


def may_add(what: str) -> None:
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip(f"not a server this test run made: set LOOMDB_TEST_ALLOW_ROLES to add {what}")


def test_a_dump_restores_its_indexes(psql):
    """pg_dump keeps loomdb's catalog rows and storage tables; the restored CREATE INDEX
    takes the loomdb index of its name and table over and lays it out again."""
    may_add("databases")
    if shutil.which("pg_dump") is None:
        need("pg_dump (postgresql-client)")
    psql.run(
        POINTS
        + "CREATE INDEX pts_w ON pts USING toc (a, b) WITH (label = y, batch_size = 50);"
        + "SELECT loom_create_index('pts_f', 'pts', 'y');"
    )
    copy = f"loomam_restore_{uuid.uuid4().hex[:6]}"
    psql.rows(f"CREATE DATABASE {copy}")  # type: ignore[arg-type]
    target = f"{psql.dsn} dbname={copy}"
    try:
        dump = subprocess.run(
            [
                str(shutil.which("pg_dump")),
                "-d",
                psql.dsn,
                "--schema",
                SCHEMA,
                "--schema",
                "loom",
                "--schema",
                "loom_data",
                "--extension",
                "loomdb",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
        done = subprocess.run(
            [str(shutil.which("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target],
            input="CREATE EXTENSION plpython3u;\n" + dump,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        with psycopg.connect(target, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT i.name, i.batches, r.name IS NOT NULL FROM loom.indexes i "
                "LEFT JOIN loom.index_relations r USING (name) ORDER BY i.name"
            ).fetchall()
        assert rows == [("pts_f", 3, False), ("pts_w", 12, True)]
    finally:
        psql.rows(f"DROP DATABASE IF EXISTS {copy}")  # type: ignore[arg-type]


@pytest.fixture
def roles(psql) -> Iterator[tuple[str, str, str]]:
    may_add("roles")
    suffix = uuid.uuid4().hex[:6]
    owner, member, plain = f"am_team_{suffix}", f"am_bob_{suffix}", f"am_eve_{suffix}"
    for name in (owner, member, plain):
        psql.rows(f"CREATE ROLE {name} LOGIN")  # type: ignore[arg-type]
    psql.rows(f"GRANT loomdb_user TO {owner}; GRANT {owner} TO {member}")  # type: ignore[arg-type]
    psql.rows(f"GRANT USAGE, CREATE ON SCHEMA {SCHEMA} TO {owner}, {plain}")  # type: ignore[arg-type]
    try:
        yield owner, member, plain
    finally:
        psql.rows(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        for name in (owner, member, plain):
            psql.rows(f"DROP OWNED BY {name}; DROP ROLE {name}")  # type: ignore[arg-type]


def test_roles_build_as_owner_and_any_dropper_cleans_up(psql, roles):
    owner, member, plain = roles
    as_ = {r: f"SET ROLE {r};" for r in roles}
    # a role outside loomdb_user may not build one, and drops its own tables as before
    error = psql.error(
        as_[plain] + POINTS.replace("pts", "eve") + "CREATE INDEX eve_w ON eve USING toc (a) "
        "WITH (label = y);"
    )
    assert f'role "{plain}" may not build loomdb indexes' in error
    psql.run(as_[plain] + "CREATE TABLE eve2 (a int); CREATE INDEX ON eve2 (a); DROP TABLE eve2;")
    # the index is built as the table's owner, its owner in loomdb's catalog
    psql.run(as_[owner] + POINTS + "CREATE INDEX pts_w ON pts USING toc (a, b) WITH (label = y);")
    assert psql.rows("SELECT owner FROM loom.indexes WHERE name = 'pts_w'") == [(owner,)]
    # a member of the owning role drops it: the rows it cannot see go too
    psql.run(as_[member] + "DROP INDEX pts_w;")
    assert psql.state("pts_w") == NOTHING


def test_sparse_arrays_under_toc_and_images_under_pcr(psql):
    import io

    import numpy as np
    from PIL import Image

    psql.run(
        "CREATE TABLE sp AS SELECT ARRAY[i % 7, 7 + i % 5]::int4[] AS indices, "
        'ARRAY[1.0, (i % 3)::float8] AS "values", (i % 2)::float8 AS y '
        "FROM generate_series(1, 200) AS g(i);\n"
        'CREATE INDEX sp_toc ON sp USING toc (indices, "values") WITH (label = y);\n'
    )
    assert psql.run(train("sp_toc")).strip() == "200"
    rng = np.random.default_rng(5)
    psql.rows(f"CREATE TABLE {SCHEMA}.imgs (image bytea, label int)")
    for i in range(24):
        buffer = io.BytesIO()
        pixels = rng.integers(0, 256, (12, 12), dtype=np.uint8) // (1 + i % 2)
        Image.fromarray(pixels).save(buffer, "JPEG", quality=80)
        psql.rows(f"INSERT INTO {SCHEMA}.imgs VALUES (%s, %s)", [buffer.getvalue(), i % 2])
    psql.run(
        "CREATE INDEX imgs_pcr ON imgs USING pcr (image) "
        "WITH (label = label, image_size = 8, color = 'gray', record_size = 8);\n"
    )
    (fmt,) = psql.rows("SELECT format FROM loom.indexes WHERE name = 'imgs_pcr'")[0]
    assert fmt == "pcr"
    assert psql.run(train("imgs_pcr").replace("'y'", "'label'")).strip() == "24"
