"""``loomdb``: run SQL on either engine, install into PostgreSQL, run benchmarks.
No paper section.

loomdb sql (--duckdb PATH | --dsn DSN) [-f FILE | -c SQL]
loomdb load KIND PATH TABLE (--duckdb PATH | --dsn DSN) [--options JSON] [--keep-going] [--echo]
loomdb pg install --dsn DSN [--venv DIR] [--source DIR] [--gpu EXTRA] [--reinstall [--drop-catalog]]
loomdb plot MODEL [MODEL …] (--duckdb PATH | --dsn DSN) [-o PNG]
loomdb bench SUITE [--quick] [--json PATH]
loomdb fuzz [DECODER ...] [--runs N] [--timeout SECONDS] [--max-len BYTES]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from loomdb.errors import LoomError


def _sql(args: argparse.Namespace) -> int:
    from loomdb.cli.connect import read_text
    from loomdb.cli.run_sql import run_script

    if args.command:
        text = args.command
    elif args.file and args.file != "-":
        text = read_text(args.file, "the SQL script")
    else:
        text = sys.stdin.read()
    return run_script(
        text,
        duckdb_path=args.duckdb,
        dsn=args.dsn,
        progress=not args.quiet,
        keep_going=args.keep_going,
        echo=args.echo,
    )


def _pg(args: argparse.Namespace) -> int:
    from loomdb.engines.postgres import install

    install.run(args)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from loomdb.cli.bench import run_suite

    return run_suite(
        args.suite,
        quick=args.quick,
        json_path=args.json,
        dsn=args.dsn,
        rows=args.rows,
        formats=args.formats,
    )


def _fuzz(args: argparse.Namespace) -> int:
    from loomdb.fuzz.campaign import main as fuzz

    return fuzz(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loomdb", description="in-database machine learning")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("sql", help="run SQL through loomdb's front-end, like psql")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--duckdb", metavar="PATH", help="a DuckDB database file (:memory: ok)")
    where.add_argument("--dsn", help="a PostgreSQL connection string")
    what = s.add_mutually_exclusive_group()
    what.add_argument("-f", "--file", help="a SQL script (default: standard input)")
    what.add_argument("-c", "--command", help="SQL text to run")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    s.add_argument(
        "--keep-going",
        action="store_true",
        help="run every statement, printing each error with its hint on stdout in order"
        " (psql -v ON_ERROR_STOP=0); exit 3 if any failed",
    )
    s.add_argument(
        "-e", "--echo", action="store_true", help="print each statement before its result"
    )
    s.set_defaults(func=_sql)

    pg = sub.add_parser("pg", help="PostgreSQL administration")
    pgsub = pg.add_subparsers(dest="pgcmd", required=True)
    inst = pgsub.add_parser("install", help="install the loomdb extension into a local server")
    from loomdb.engines.postgres import install

    install.add_arguments(inst)
    inst.set_defaults(func=_pg)
    prep = pgsub.add_parser(
        "prepare", help="the server machine's part of install, without a server (images)"
    )
    install.add_arguments(prep, prepare_only=True)
    prep.set_defaults(func=lambda args: install.run_prepare(args))

    ld = sub.add_parser("load", help="load a file or folder into a new table (read here)")
    from loomdb.cli import load

    load.add_arguments(ld)
    ld.set_defaults(func=load.run_load)

    pl = sub.add_parser("plot", help="draw models' loss per epoch (and bits read) as a PNG")
    from loomdb.cli import plot

    plot.add_arguments(pl)
    pl.set_defaults(func=plot.run_plot)

    b = sub.add_parser("bench", help="run a benchmark suite and print its table")
    from loomdb.bench import SUITES

    b.add_argument("suite", choices=sorted(SUITES))
    b.add_argument("--quick", action="store_true", help="small data, for a smoke run")
    b.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    b.add_argument("--dsn", help="PostgreSQL to include (suites that compare engines)")
    b.add_argument(
        "--rows",
        metavar="N[,N…]",
        help="table sizes for suites that scale (scale: default 1000000,10000000)",
    )
    b.add_argument(
        "--formats",
        metavar="F[,F…]",
        help="storage formats to lay out (scale: default dense,toc,mlweaving)",
    )
    b.set_defaults(func=_bench)

    f = sub.add_parser("fuzz", help="fuzz loomdb's decoders with hostile bytes (needs atheris)")
    from loomdb.fuzz.campaign import add_arguments

    add_arguments(f)
    f.set_defaults(func=_fuzz)
    return p


def main(argv: list[str] | None = None) -> Any:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("loomdb: interrupted", file=sys.stderr)
        return 130
    except LoomError as e:
        print(f"loomdb: error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
