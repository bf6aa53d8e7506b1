"""PostgreSQL keeps an index's payloads as the format wrote them: out of line, never compressed
by TOAST (pglz would be undone at every epoch's read)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_engine(pg_dsn) -> Iterator:
    from support.engines import PgEngine

    engine = PgEngine(pg_dsn)
    yield engine
    engine.close()


def test_payloads_are_stored_uncompressed(pg_engine):
    pg_engine.rows(
        "CREATE TABLE ps AS SELECT (g % 7)::float8 AS a, (g % 3)::float8 AS b, "
        "(g % 2)::float8 AS y FROM generate_series(1, 20000) AS g"
    )
    pg_engine.rows("SELECT loom_create_index('ps_dense', 'ps', 'y', '{\"format\": \"dense\"}')")
    storage = pg_engine.rows(
        "SELECT attstorage FROM pg_attribute "
        "WHERE attrelid = 'loom_data.ps_dense'::regclass AND attname = 'payload'"
    )
    assert storage == [("e",)]  # EXTERNAL
    compressed = pg_engine.rows(
        "SELECT count(*) FROM loom_data.ps_dense WHERE pg_column_compression(payload) IS NOT NULL"
    )
    assert compressed == [(0,)]  # these rows compress well: pglz would have taken every one
    trained = pg_engine.rows("SELECT loom_train('ps_m', NULL, NULL, '{\"index\": \"ps_dense\"}')")
    assert '"model": "ps_m"' in trained[0][0]
