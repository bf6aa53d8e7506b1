"""Run a SQL script on DuckDB or PostgreSQL through loomdb's front-end, printing like psql.
No paper section."""

from __future__ import annotations

import logging
import sys
from typing import Any

from loomdb.cli.output import render
from loomdb.cli.progress import ProgressBars


class _ToBars(logging.Handler):
    def __init__(self, bars: ProgressBars):
        super().__init__()
        self.bars = bars

    def emit(self, record: logging.LogRecord) -> None:
        self.bars.message(record.getMessage())


def _print_result(description: Any, rows: list[tuple]) -> None:
    columns = [d[0] for d in description]
    sys.stdout.write(render(columns, rows) + "\n")
    sys.stdout.flush()


def run_duckdb(text: str, path: str, bars: ProgressBars) -> int:
    import loomdb

    log = logging.getLogger("loomdb.progress")
    handler = _ToBars(bars)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    con = loomdb.connect(path)
    try:
        for cur in con.each(text):
            if cur.description:
                _print_result(cur.description, cur.fetchall())
        return 0
    finally:
        bars.close()
        log.removeHandler(handler)
        con.close()


def run_postgres(text: str, dsn: str, bars: ProgressBars) -> int:
    import psycopg

    from loomdb.engines.postgres.client import PsycopgDatabase
    from loomdb.frontend import statements
    from loomdb.store.sql_catalog import DbCatalog

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: bars.message(d.message_primary or ""))
        db = PsycopgDatabase(conn)
        for statement in statements(text, "postgres", DbCatalog(db)):
            with conn.cursor() as cur:
                cur.execute(statement)
                if cur.description:
                    _print_result([(d.name,) for d in cur.description], cur.fetchall())
        bars.close()
    return 0


def run_script(text: str, *, duckdb_path: str | None, dsn: str | None, progress: bool) -> int:
    """Run every statement, stopping at the first error (printed with its hint); exit code."""
    import duckdb
    import psycopg

    from loomdb.errors import LoomError

    bars = ProgressBars(enabled=progress, bars=sys.stderr.isatty())
    try:
        if duckdb_path is not None:
            return run_duckdb(text, duckdb_path, bars)
        assert dsn is not None
        return run_postgres(text, dsn, bars)
    except psycopg.Error as e:
        diag = e.diag
        print(f"ERROR:  {diag.message_primary or e}", file=sys.stderr)
        for label, value in (("DETAIL", diag.message_detail), ("HINT", diag.message_hint)):
            if value:
                print(f"{label}:  {value}", file=sys.stderr)
        return 3
    except LoomError as e:
        bars.close()
        print(f"ERROR:  {e.message}", file=sys.stderr)
        for label, value in (("DETAIL", e.detail), ("HINT", e.hint)):
            if value:
                print(f"{label}:  {value}", file=sys.stderr)
        return 3
    except duckdb.Error as e:
        print(f"ERROR:  {e}", file=sys.stderr)
        return 3
