"""What a user does instead of training in the database: fetch the table into numpy.
No paper section.

DuckDB: the cursor's ``fetchnumpy()`` (one array per column).  PostgreSQL: psycopg's
``fetchall()`` (what most code does), and ``COPY … TO STDOUT (FORMAT BINARY)`` parsed by numpy
(the fastest way out we know of).  Each returns ``(X, y)`` with the label column by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


def duckdb_fetchnumpy(con: Any, table: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    cols = con.execute(f'SELECT * FROM "{table}"').fetchnumpy()
    names = [c for c in cols if c != label]
    X = np.column_stack([np.asarray(cols[c], dtype=np.float64) for c in names])
    return X, np.asarray(cols[label], dtype=np.float64)


def _split(data: np.ndarray, names: list[str], label: str) -> tuple[np.ndarray, np.ndarray]:
    at = names.index(label)
    return np.delete(data, at, axis=1), data[:, at]


def pg_fetchall(conn: Any, table: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    with conn.cursor() as cur:
        cur.execute(f'SELECT * FROM "{table}"', prepare=False)  # tables change shape
        names = [d.name for d in cur.description]
        data = np.asarray(cur.fetchall(), dtype=np.float64)
    return _split(data, names, label)


def pg_copy_binary(conn: Any, table: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    with conn.cursor() as cur:
        cur.execute(f'SELECT * FROM "{table}" LIMIT 0', prepare=False)
        names = [d.name for d in cur.description]
        with cur.copy(f'COPY "{table}" TO STDOUT (FORMAT BINARY)') as copy:
            raw = b"".join(bytes(block) for block in copy)
    return _split(parse_copy_binary(raw, len(names)), names, label)


def parse_copy_binary(raw: bytes, ncols: int) -> np.ndarray:
    """PostgreSQL's binary COPY of ``ncols`` non-NULL float8 columns as an (n, ncols) array."""
    if not raw.startswith(SIGNATURE) or len(raw) < 21:
        raise ValueError("not a PostgreSQL binary COPY stream")
    ext = int.from_bytes(raw[15:19], "big")
    body = raw[19 + ext : -2]
    if raw[-2:] != b"\xff\xff":
        raise ValueError("binary COPY stream without its trailer")
    fields = [("n", ">i2")]
    for i in range(ncols):
        fields += [(f"len{i}", ">i4"), (f"v{i}", ">f8")]
    record = np.dtype(fields)
    if len(body) % record.itemsize:
        raise ValueError(f"binary COPY body is not a whole number of {ncols}-float8 rows")
    rows = np.frombuffer(body, dtype=record)
    if (rows["n"] != ncols).any() or any((rows[f"len{i}"] != 8).any() for i in range(ncols)):
        raise ValueError(f"binary COPY rows are not {ncols} non-NULL float8 values")
    return np.column_stack([rows[f"v{i}"].astype(np.float64) for i in range(ncols)])
