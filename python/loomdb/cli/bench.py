"""``loomdb bench SUITE``: run a suite, print its tables, optionally write JSON.

No paper section.
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

from loomdb.bench import SUITES
from loomdb.bench.table import dumps
from loomdb.errors import LoomNotFoundError, LoomOptionError


def sizes(text: str) -> list[int]:
    """``1000000,1e7`` → ``[1000000, 10000000]``: whole row counts of at least 1,000."""
    out = []
    for part in text.split(","):
        try:
            n = float(part)
            whole = n == int(n) and n >= 1000
        except (ValueError, OverflowError):  # not a number, or nan/inf
            whole = False
        if not whole:
            raise LoomOptionError(
                "--rows takes whole row counts of at least 1,000, separated by commas; "
                f"got {text!r}",
                hint="e.g. --rows 1000000,10000000,100000000",
            )
        out.append(int(n))
    return out


def _writable_json(path: str) -> None:
    """Refuse up front a --json the results could not be written to (after a long run)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        raise LoomNotFoundError(
            f"cannot write --json {path}: "
            + ("it is a folder" if os.path.isdir(path) else f"there is no folder {folder}"),
            hint="give --json a file name in a folder that exists",
        )


def _reachable(dsn: str) -> None:
    """Refuse up front a --dsn no connection opens to (the suite may run a while first)."""
    from loomdb.cli.connect import postgres

    postgres(dsn).close()


def run_suite(
    suite: str,
    *,
    quick: bool,
    json_path: str | None,
    dsn: str | None,
    rows: str | None = None,
    formats: str | None = None,
) -> int:
    module = importlib.import_module(SUITES[suite])
    kwargs: dict[str, Any] = {"quick": quick}
    takes = inspect.signature(module.run).parameters
    if json_path:
        _writable_json(json_path)
    if dsn is not None:
        if "dsn" not in takes:
            raise LoomOptionError(
                f"bench {suite} does not compare engines: --dsn is for the suites that do",
                hint=f"run loomdb bench {suite} without --dsn",
            )
        _reachable(dsn)
        kwargs["dsn"] = dsn
    if rows is not None:
        if "rows" not in takes:
            raise LoomOptionError(
                f"bench {suite} has fixed sizes: --rows is for bench scale",
                hint=f"run loomdb bench {suite} without --rows",
            )
        kwargs["rows"] = sizes(rows)
    if formats is not None:
        if "formats" not in takes:
            raise LoomOptionError(
                f"bench {suite} measures fixed formats: --formats is for bench scale",
                hint=f"run loomdb bench {suite} without --formats",
            )
        kwargs["formats"] = [f.strip() for f in formats.split(",") if f.strip()]
    tables = module.run(**kwargs)
    for table in tables:
        print(table.render())
        print()
    if json_path:
        with open(json_path, "w") as f:
            f.write(dumps(tables))
    return 0
