"""PostgreSQL's spelling of what the store needs: types, type classes, packed row reads.
No paper section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.errors import LoomFormatError

PG_TYPES = {
    "text": "text",
    "double": "double precision",
    "double[]": "double precision[]",
    "integer[]": "integer[]",
    "bigint": "bigint",
    "integer": "integer",
    "smallint": "smallint",
    "boolean": "boolean",
    "bytes": "bytea",
    "timestamp": "timestamptz",
}

NUMERIC_OIDS = {20, 21, 23, 700, 701, 1700}  # int8 int2 int4 float4 float8 numeric
BOOL_OID = 16
BYTEA_OID = 17
FLOAT8_OID = 701
ARRAY_HEADER = 20  # ndim, flags, element type, dimension, lower bound: 5 × int4


def type_name(abstract: str) -> str:
    return PG_TYPES[abstract]


def column_kind(oid: int) -> str:
    if oid in NUMERIC_OIDS:
        return "numeric"
    return {BOOL_OID: "boolean", BYTEA_OID: "bytes"}.get(oid, "other")


def param_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytea"
    if isinstance(value, (list, tuple)):
        return "double precision[]"
    return "text"


def shuffle_key(row_number: str, seed: int) -> str:
    return f"hashint8extended({row_number}, {int(seed)}), {row_number}"


def packed_rows_query(
    relation: str, columns: Sequence[str], where: str | None, seed: int | None, chunk: int
) -> str:
    """One bytea per ``chunk`` rows: each row's values as ``array_send(float8[])``."""
    values = ", ".join(f"CAST({c} AS float8)" for c in columns)
    order = shuffle_key("loom_rn", seed) if seed is not None else "loom_rn"
    filtered = f" WHERE {where}" if where else ""
    return (
        "SELECT string_agg(loom_row, ''::bytea ORDER BY loom_pos) FROM ("
        f"SELECT array_send(ARRAY[{values}]::float8[]) AS loom_row, "
        f"row_number() OVER (ORDER BY {order}) AS loom_pos FROM ("
        f"SELECT *, row_number() OVER () AS loom_rn FROM {relation}{filtered}) loom_a) loom_b "
        f"GROUP BY (loom_pos - 1) / {int(chunk)} ORDER BY (loom_pos - 1) / {int(chunk)}"
    )


def rows_query(relation: str, columns: Sequence[str], where: str | None, seed: int | None) -> str:
    """The values of ``columns`` (SQL expressions), in the order of :func:`packed_rows_query`."""
    values = ", ".join(f"{c} AS loom_c{i}" for i, c in enumerate(columns))
    order = shuffle_key("loom_rn", seed) if seed is not None else "loom_rn"
    filtered = f" WHERE {where}" if where else ""
    return (
        f"SELECT {values} FROM (SELECT *, row_number() OVER () AS loom_rn "
        f"FROM {relation}{filtered}) loom_a ORDER BY {order}"
    )


def signature_query(relation: str, columns: Sequence[str], where: str | None) -> str:
    row = f"ROW({', '.join(columns)})::text"
    filtered = f" WHERE {where}" if where else ""
    return (
        f"SELECT count(*) AS n, sum(hashtextextended({row}, 0)) AS total FROM {relation}{filtered}"
    )


def decode_packed_rows(blob: bytes, m: int) -> np.ndarray:
    """Rows packed by :func:`packed_rows_query` → float64 (rows, m)."""
    row = np.dtype(
        [("header", f"V{ARRAY_HEADER}"), ("items", [("len", ">i4"), ("v", ">f8")], (m,))]
    )
    if len(blob) % row.itemsize:
        raise LoomFormatError(f"packed rows of {len(blob)} bytes do not hold whole {m}-value rows")
    rows = np.frombuffer(blob, dtype=row)
    return rows["items"]["v"].astype(np.float64)
