"""``Database`` over ``plpy``, inside the PostgreSQL server (plpython3u).

Values are bound through ``plpy.prepare`` with typed parameters (plans cached per statement
text and types); rows stream through ``plpy.cursor(...).fetch(n)``; minibatch rows travel from
SQL packed as one ``bytea`` per chunk (``array_send`` of a float8[] per row, concatenated by
``string_agg``), never as one Python object per value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from loomdb.engines.postgres.dialect import (
    column_kind,
    decode_packed_rows,
    packed_rows_query,
    param_type,
    signature_query,
    type_name,
)

_plans: dict[tuple[str, tuple[str, ...]], Any] = {}


class PlpyDatabase:
    dialect = "postgres"
    cache_key = "postgres-server"

    def __init__(self, plpy: Any):
        self.plpy = plpy

    def type(self, abstract: str) -> str:
        return type_name(abstract)

    def _plan(self, sql: str, params: Sequence[Any]) -> Any:
        types = tuple(param_type(v) for v in params)
        key = (sql, types)
        plan = _plans.get(key)
        if plan is None:
            plan = _plans[key] = self.plpy.prepare(sql, list(types))
        return plan

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        if not params:
            return self.plpy.execute(sql)
        return self.plpy.execute(self._plan(sql, params), list(params))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        result = self._run(sql, params)
        try:
            cols = result.colnames()
        except Exception:  # plpy raises for statements that return no rows
            return []
        if len(set(cols)) != len(cols):  # rows are dicts: every column needs its own name
            raise ValueError(f"duplicate column names in a loomdb query: {cols}")
        return [tuple(row[c] for c in cols) for row in result]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._run(sql, params)

    def stream(self, sql: str, params: Sequence[Any] = (), size: int = 16) -> Iterator[tuple]:
        if params:
            cursor = self.plpy.cursor(self._plan(sql, params), list(params))
        else:
            cursor = self.plpy.cursor(sql)
        cols: list[str] | None = None
        while True:
            rows = cursor.fetch(size)
            if not rows:
                break
            if cols is None:  # fetch() results carry no column list: rows are ordered dicts
                cols = list(rows[0].keys())
            for row in rows:
                yield tuple(row[c] for c in cols)

    def atomic(self) -> AbstractContextManager[Any]:
        return self.plpy.subtransaction()

    def notice(self, message: str) -> None:
        self.plpy.notice(message)

    def columns(self, relation: str) -> list[tuple[str, str]]:
        result = self.plpy.execute(f"SELECT * FROM {relation} LIMIT 0")
        return [(n, column_kind(t)) for n, t in zip(result.colnames(), result.coltypes())]

    def signature(self, relation: str, columns: Sequence[str], where: str | None) -> str:
        n, total = self.query(signature_query(relation, columns, where))[0]
        return f"{n}:{total}"

    def read_matrix(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[np.ndarray]:
        sql = packed_rows_query(relation, columns, where, shuffle_seed, chunk)
        for (blob,) in self.stream(sql, (), size=1):
            yield decode_packed_rows(bytes(blob), len(columns))
