"""Run a SQL script on DuckDB or PostgreSQL through loomdb's front-end, printing like psql.
No paper section.

By default the script stops at the first error, printed with its hint on stderr (exit 3; a
database that cannot be opened exits 1, as in every ``loomdb`` command).
``keep_going`` runs every statement, as ``psql -v ON_ERROR_STOP=0`` does, and prints each
error's ``ERROR:``/``DETAIL:``/``HINT:`` lines on stdout where the statement's result would
be, so one stream holds the whole run in order (exit 3 if any statement failed).  ``echo``
prints each statement, followed by ``;``, before its result.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

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


def _error_lines(e: BaseException) -> list[str]:
    """psql's lines for an error: ERROR, then DETAIL and HINT when there are any."""
    from loomdb.errors import LoomError

    psycopg = sys.modules.get("psycopg")  # not imported: e is no psycopg error (DuckDB's run)
    if psycopg is not None and isinstance(e, psycopg.Error):
        d = e.diag
        message, detail, hint = d.message_primary or str(e), d.message_detail, d.message_hint
    elif isinstance(e, LoomError):
        message, detail, hint = e.message, e.detail, e.hint
    else:
        message, detail, hint = str(e), None, None
    lines = [f"ERROR:  {message}"]
    lines += [f"{label}:  {v}" for label, v in (("DETAIL", detail), ("HINT", hint)) if v]
    lines += [f"CONTEXT:  {note}" for note in getattr(e, "__notes__", ())]  # what had run
    return lines


def _print_error(e: BaseException, stream: TextIO) -> None:
    stream.write("".join(line + "\n" for line in _error_lines(e)))
    stream.flush()


class _Runner:
    """Hands out the script's parts and decides what an error in one of them does."""

    def __init__(self, text: str, dialect: str, *, keep_going: bool, echo: bool):
        from loomdb.frontend.script import split
        from loomdb.frontend.steps import Script

        self.text, self.dialect, self.keep_going, self.echo = text, dialect, keep_going, echo
        self.failed = False
        # echoing, each statement runs on its own: this says what had run when one fails
        self.script = Script(split(text, dialect) if echo else [], lambda s: s, dialect)

    def parts(self) -> Iterator[str]:
        """The whole script, or each statement on its own when echoing or keeping going."""
        if not (self.keep_going or self.echo):
            yield self.text
            return
        from loomdb.frontend.script import split

        for statement in self.script if self.echo else split(self.text, self.dialect):
            if self.echo:
                sys.stdout.write(statement + ";\n")
                sys.stdout.flush()
            yield statement

    def run(
        self, part: str, execute: Callable[[str], None], errors: tuple[type[BaseException], ...]
    ) -> None:
        try:
            execute(part)
        except errors as e:
            if not self.keep_going:
                self.script.annotate(e)
                raise
            self.failed = True
            _print_error(e, sys.stdout)


def run_duckdb(con: Any, bars: ProgressBars, runner: _Runner) -> int:
    """The script on ``con``, a loomdb DuckDB connection (Ctrl-C in a statement interrupts
    it: the connection's own), closed at the end."""
    import duckdb

    import loomdb
    from loomdb.engines.duckdb.connection import loom_errors

    log = logging.getLogger("loomdb.progress")
    handler = _ToBars(bars)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False

    def execute(part: str) -> None:
        with loom_errors():  # an error may surface while fetching, too
            for cur in con.each(part):
                if cur.description:
                    _print_result(cur.description, cur.fetchall())

    try:
        for part in runner.parts():
            runner.run(part, execute, (loomdb.LoomError, duckdb.Error))
        return 3 if runner.failed else 0
    finally:
        bars.close()
        log.removeHandler(handler)
        con.close()


def run_postgres(conn: Any, bars: ProgressBars, runner: _Runner) -> int:
    """The script on ``conn``, a psycopg connection, closed at the end."""
    import psycopg

    from loomdb.engines.postgres.client import PgCatalog, PsycopgDatabase
    from loomdb.errors import LoomError
    from loomdb.frontend import pieces, rewritten
    from loomdb.frontend.steps import Script

    with conn:
        conn.add_notice_handler(lambda d: bars.message(d.message_primary or ""))
        catalog = PgCatalog(PsycopgDatabase(conn))

        def execute(part: str) -> None:
            script = Script(
                pieces(part, "postgres"), lambda p: rewritten(p, "postgres", catalog), "postgres"
            )
            with script.noting():
                for statement in script:
                    with conn.cursor() as cur:
                        cur.execute(statement)
                        if cur.description:
                            _print_result([(d.name,) for d in cur.description], cur.fetchall())

        for part in runner.parts():
            runner.run(part, execute, (psycopg.Error, LoomError))
        bars.close()
    return 3 if runner.failed else 0


def _reported() -> tuple[type[BaseException], ...]:
    """The errors a script's run prints rather than raises: loomdb's and the engines' drivers'.
    A driver that was not imported raised nothing (only the chosen engine's is: psycopg's
    import alone took a third of ``loomdb sql --duckdb``'s start)."""
    from loomdb.errors import LoomError

    drivers = (sys.modules.get(name) for name in ("duckdb", "psycopg"))
    return (LoomError, *(driver.Error for driver in drivers if driver is not None))


def run_script(
    text: str,
    *,
    duckdb_path: str | None,
    dsn: str | None,
    progress: bool,
    keep_going: bool = False,
    echo: bool = False,
) -> int:
    """Run every statement, stopping at the first error (printed with its hint on stderr) unless
    ``keep_going``; the exit code: 0, or 3 when the script failed (a statement, or a
    meta-command refused).  A database that cannot be opened is a LoomError raised to
    ``loomdb``'s main, which exits 1 as every command does for it."""
    dialect = "duckdb" if duckdb_path is not None else "postgres"
    try:  # a meta-command psql would act on is refused here when echoing (split at once)
        runner = _Runner(text, dialect, keep_going=keep_going, echo=echo)
    except _reported() as e:
        _print_error(e, sys.stderr)
        return 3
    connection = _connect(duckdb_path, dsn)
    bars = ProgressBars(enabled=progress, bars=sys.stderr.isatty())
    try:
        if duckdb_path is not None:
            return run_duckdb(connection, bars, runner)
        return run_postgres(connection, bars, runner)
    except _reported() as e:
        bars.close()
        _print_error(e, sys.stderr)
        return 3


def _connect(duckdb_path: str | None, dsn: str | None) -> Any:
    """A loomdb DuckDB connection to ``duckdb_path``, or a psycopg one to ``dsn``."""
    from loomdb.cli import connect

    if duckdb_path is not None:
        return connect.duckdb(duckdb_path)
    assert dsn is not None
    return connect.postgres(dsn)
