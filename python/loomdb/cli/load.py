"""``loomdb load KIND PATH TABLE``: a loader run where the command runs, into either engine.

No paper section.  The file or folder is read on this machine (unlike the SQL function
``loom_load``, which the database's process runs) and the rows go to DuckDB through loomdb's
connection or to PostgreSQL with COPY, in one transaction.
"""

from __future__ import annotations

import argparse
import json
import os


def run_load(args: argparse.Namespace) -> int:
    from loomdb import loaders

    if args.duckdb is not None:
        done = _load_duckdb(args)
    else:
        from loomdb.cli.connect import postgres
        from loomdb.engines.postgres.client import PsycopgDatabase

        with postgres(args.dsn) as conn:
            done = loaders.load(
                PsycopgDatabase(conn), args.kind, args.path, args.table, args.options
            )
    print(json.dumps(done))
    return 0


def _load_duckdb(args: argparse.Namespace) -> dict:
    """The load into the DuckDB file ``--duckdb``; a file this load made is removed again
    where the load fails, so a failed load leaves no empty database behind."""
    from loomdb import loaders
    from loomdb.cli.connect import duckdb, kept_duckdb
    from loomdb.engines.duckdb.database import DuckDatabase

    made = not os.path.exists(kept_duckdb(args.duckdb))
    con = duckdb(args.duckdb)
    done = None
    try:
        db = DuckDatabase(con.duckdb.cursor(), con.state)
        done = loaders.load(db, args.kind, args.path, args.table, args.options)
        return done
    finally:
        con.close()
        for path in (args.duckdb, f"{args.duckdb}.wal") if made and done is None else ():
            if os.path.exists(path):
                os.unlink(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from loomdb import loaders

    parser.add_argument("kind", help=f"what to read: {', '.join(loaders.names()) or 'none yet'}")
    parser.add_argument("path", help="the file or folder, on this machine")
    parser.add_argument("table", help="the table to create (schema-qualified if you like)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--duckdb", metavar="PATH", help="a DuckDB database file")
    where.add_argument("--dsn", help="a PostgreSQL connection string")
    parser.add_argument("--options", default="{}", help="the loader's options, as JSON")
