"""Put numpy data into a table of either engine (benchmarks and tests share this).
No paper section.

DuckDB takes an arrow table (NaN becomes NULL, as in PostgreSQL); PostgreSQL takes
``COPY … FROM STDIN`` in binary through psycopg.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _columns(X: np.ndarray, columns: Sequence[str] | None) -> list[str]:
    return list(columns or [f"x{i}" for i in range(X.shape[1])])


def load_duckdb(
    con: Any,
    table: str,
    X: np.ndarray,
    y: np.ndarray | None = None,
    columns: Sequence[str] | None = None,
    label: str = "y",
) -> list[str]:
    import pyarrow as pa

    names = _columns(X, columns)
    data = {c: pa.array(X[:, i], from_pandas=True) for i, c in enumerate(names)}
    if y is not None:
        data[label] = pa.array(y, from_pandas=True)
    con.register("loom_load_arrow", pa.table(data))
    try:
        con.execute(f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM loom_load_arrow')
    finally:
        con.unregister("loom_load_arrow")
    return names


def load_postgres(
    conn: Any,
    table: str,
    X: np.ndarray,
    y: np.ndarray | None = None,
    columns: Sequence[str] | None = None,
    label: str = "y",
) -> list[str]:
    names = _columns(X, columns)
    allnames = names + ([label] if y is not None else [])
    data = np.column_stack([X, y]) if y is not None else X
    cols = ", ".join(f'"{c}" double precision' for c in allnames)
    with conn.cursor() as cur:
        cur.execute(f'DROP TABLE IF EXISTS "{table}"')
        cur.execute(f'CREATE TABLE "{table}" ({cols})')
        with cur.copy(f'COPY "{table}" FROM STDIN (FORMAT BINARY)') as copy:
            copy.set_types(["float8"] * len(allnames))
            for row in data.tolist():
                copy.write_row([None if v != v else v for v in row])
    return names
