"""``loomdb``: run SQL on either engine, install into PostgreSQL, run benchmarks.
No paper section.

loomdb sql (--duckdb PATH | --dsn DSN) [-f FILE | -c SQL] [-q] [--keep-going] [-e]
loomdb load KIND PATH TABLE (--duckdb PATH | --dsn DSN) [--options JSON]
loomdb pg install --dsn DSN [--venv DIR] [--source DIR] [--gpu EXTRA] [--reinstall [--drop-catalog]]
loomdb plot MODEL [MODEL …] (--duckdb PATH | --dsn DSN) [-o PNG]
loomdb bench SUITE [--quick] [--json PATH]
loomdb fuzz [DECODER ...] [--runs N] [--timeout SECONDS] [--max-len BYTES]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from loomdb.errors import LoomError

Fill = Callable[[argparse.ArgumentParser], None]
Handler = Callable[[argparse.Namespace], int]


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
        text.removeprefix("\ufeff"),  # a BOM (editors on Windows): no part of the first word
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


def _pg_prepare(args: argparse.Namespace) -> int:
    from loomdb.engines.postgres import install

    return install.run_prepare(args)


def _load(args: argparse.Namespace) -> int:
    from loomdb.cli.load import run_load

    return run_load(args)


def _plot(args: argparse.Namespace) -> int:
    from loomdb.cli.plot import run_plot

    return run_plot(args)


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


class _Subcommand(argparse.ArgumentParser):
    """A subcommand's parser whose arguments ``fill`` adds only when it parses or prints its
    help: every ``loomdb`` process builds all the subcommands' parsers, and what one of them
    needs for its arguments (the PostgreSQL installer and psycopg, the loaders' entry points,
    the fuzzer) must not be imported by the others."""

    def __init__(self, *args: Any, fill: Fill | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fill = fill

    def _filled(self) -> None:
        fill, self._fill = self._fill, None
        if fill is not None:
            fill(self)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._filled()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._filled()
        return super().format_usage()

    def format_help(self) -> str:
        self._filled()
        return super().format_help()


def _sql_arguments(s: argparse.ArgumentParser) -> None:
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


def _install_arguments(parser: argparse.ArgumentParser) -> None:
    from loomdb.engines.postgres import install

    install.add_arguments(parser)


def _prepare_arguments(parser: argparse.ArgumentParser) -> None:
    from loomdb.engines.postgres import install

    install.add_arguments(parser, prepare_only=True)


def _load_arguments(parser: argparse.ArgumentParser) -> None:
    from loomdb.cli import load

    load.add_arguments(parser)


def _plot_arguments(parser: argparse.ArgumentParser) -> None:
    from loomdb.cli import plot

    plot.add_arguments(parser)


def _bench_arguments(b: argparse.ArgumentParser) -> None:
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


def _fuzz_arguments(parser: argparse.ArgumentParser) -> None:
    from loomdb.fuzz.campaign import add_arguments

    add_arguments(parser)


def parser() -> argparse.ArgumentParser:
    """``loomdb``'s parser; each subcommand's arguments are added when it is the one run (or
    its help is printed), so that starting one imports only what that one needs."""
    p = argparse.ArgumentParser(prog="loomdb", description="in-database machine learning")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Subcommand)

    def add(parent: Any, name: str, help: str, fill: Fill | None, func: Handler | None) -> Any:
        command = parent.add_parser(name, help=help, fill=fill)
        if func is not None:
            command.set_defaults(func=func)
        return command

    add(sub, "sql", "run SQL through loomdb's front-end, like psql", _sql_arguments, _sql)
    pg = add(sub, "pg", "PostgreSQL administration", None, None)
    pgsub = pg.add_subparsers(dest="pgcmd", required=True)
    add(
        pgsub,
        "install",
        "install the loomdb extension into a local server",
        _install_arguments,
        _pg,
    )
    prepare = "the server machine's part of install, without a server (images)"
    add(pgsub, "prepare", prepare, _prepare_arguments, _pg_prepare)
    load = "load a file or folder into a new table (read here)"
    add(sub, "load", load, _load_arguments, _load)
    plot = "draw models' loss per epoch (and bits read) as a PNG"
    add(sub, "plot", plot, _plot_arguments, _plot)
    add(sub, "bench", "run a benchmark suite and print its table", _bench_arguments, _bench)
    fuzz = "fuzz loomdb's decoders with hostile bytes (needs atheris)"
    add(sub, "fuzz", fuzz, _fuzz_arguments, _fuzz)
    return p


def main(argv: list[str] | None = None) -> Any:
    args = parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a reader that went away is seen here, not as Python exits
        return code
    except BrokenPipeError:
        # the reader stopped early (``loomdb sql … | head``): stop quietly, with the status
        # of a command SIGPIPE ends, and let nothing write to the closed pipe as Python exits
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
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
