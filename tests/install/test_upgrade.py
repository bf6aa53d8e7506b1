"""``ALTER EXTENSION loomdb UPDATE`` from 0.1.0 (the released version) to this one: models kept,
0.1.0's indexes dropped with a warning, the multi-user rules and every function in place."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.postgres
OLD = Path(__file__).resolve().parents[1] / "fixtures" / "extension" / "loomdb--0.1.0.sql"


def test_a_0_1_0_catalog_is_upgraded(pg_dsn):
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip("not a server this test run made: it writes the extension directory")
    database = f"loom_upgrade_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        share = admin.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'").fetchone()
        assert share is not None
        old_script = Path(share[0]) / "extension" / OLD.name
        old_script.write_text(OLD.read_text())
        admin.execute(f"CREATE DATABASE {database}")
    try:
        upgraded(pg_dsn, database)
    finally:
        old_script.unlink()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database}")


def upgraded(pg_dsn: str, database: str) -> None:
    notices: list[str] = []
    model = {
        "coefficients": "[[1.5], [-2.0]]",
        "intercept": "[0.25]",
        "feature_names": '["a", "b"]',
        "classes": "[0.0, 1.0]",
        "standardization": '{"method": "none", "shift": [0.0, 0.0], "scale": [1.0, 1.0]}',
    }
    with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("CREATE EXTENSION plpython3u")
        conn.execute("CREATE EXTENSION loomdb VERSION '0.1.0'")
        conn.execute(
            "INSERT INTO loom.models (name, uid, kind, coefficients, intercept, feature_names, "
            "classes, standardization, options, history) VALUES ('old_m', 'u1', 'logistic', "
            "%(coefficients)s, %(intercept)s, %(feature_names)s, %(classes)s, "
            "%(standardization)s, '{}', '[]')",
            model,
        )
        conn.execute('CREATE TABLE loom."ix_old_ix" (batch integer)')
        conn.execute(
            "INSERT INTO loom.indexes (name, storage_table) "
            "VALUES ('old_ix', 'loom.\"ix_old_ix\"; DROP TABLE loom.models')"
        )
        conn.execute("ALTER EXTENSION loomdb UPDATE TO '0.2.0'")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'loomdb'")
        assert version.fetchone() == ("0.2.0",)
        assert any("index old_ix is dropped" in n for n in notices), notices
        assert conn.execute("SELECT count(*) FROM loom.indexes").fetchone() == (0,)
        gone = conn.execute("SELECT to_regclass('loom.ix_old_ix')").fetchone()
        assert gone == (None,)
        assert conn.execute("SELECT owner FROM loom.models").fetchone() == ("postgres",)
        assert conn.execute("SELECT loom_predict('old_m', ARRAY[1.0, 0.0])").fetchone() == (1.0,)
        weights = conn.execute("SELECT feature, weight, rank FROM loom_weights('old_m')")
        assert weights.fetchall() == [("a", 1.5, 2), ("b", -2.0, 1), ("(intercept)", 0.25, None)]
        conn.execute(
            "CREATE TABLE t AS SELECT g::float8 AS a, (g % 3)::float8 AS b, (g % 2)::float8 AS y "
            "FROM generate_series(1, 50) AS g"
        )
        conn.execute("SELECT loom_train('new_m', 't', 'y', '{\"epochs\": 2}')")
        info = json.loads(conn.execute("SELECT loom_model_info('new_m')").fetchone()[0])
        assert info["owner"] == "postgres"
        grantable = conn.execute(
            "SELECT has_function_privilege('loomdb_user', 'loom_grant(text, text)', 'EXECUTE')"
        )
        assert grantable.fetchone() == (True,)
        versions = "SELECT version, current FROM loom_model_versions('old_m')"
        assert conn.execute(versions).fetchall() == [(1, True)]  # a 0.1.0 model is version 1
        conn.execute("SELECT loom_train('old_m', 't', 'y', '{\"epochs\": 2, \"replace\": true}')")
        assert conn.execute(versions).fetchall() == [(1, False), (2, True)]
        conn.execute("SELECT loom_rollback('old_m')")
        assert conn.execute("SELECT loom_predict('old_m', ARRAY[1.0, 0.0])").fetchone() == (1.0,)
