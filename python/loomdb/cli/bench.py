"""``loomdb bench SUITE``: run a suite, print its tables, optionally write JSON.

No paper section.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from loomdb.bench import SUITES
from loomdb.bench.table import dumps
from loomdb.errors import LoomOptionError


def sizes(text: str) -> list[int]:
    """``1000000,1e7`` → ``[1000000, 10000000]``: whole row counts of at least 1,000."""
    try:
        out = [int(float(part)) for part in text.split(",") if part.strip()]
    except ValueError:
        out = []
    if not out or any(n < 1000 or n != float(p) for n, p in zip(out, text.split(","))):
        raise LoomOptionError(
            f"--rows takes whole row counts of at least 1,000, separated by commas; got {text!r}",
            hint="e.g. --rows 1000000,10000000,100000000",
        )
    return out


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
    if "dsn" in takes:
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
