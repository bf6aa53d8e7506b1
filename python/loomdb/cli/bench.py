"""``loomdb bench SUITE``: run a suite, print its tables, optionally write JSON.

No paper section.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from loomdb.bench import SUITES
from loomdb.bench.table import dumps


def run_suite(suite: str, *, quick: bool, json_path: str | None, dsn: str | None) -> int:
    module = importlib.import_module(SUITES[suite])
    kwargs: dict[str, Any] = {"quick": quick}
    if "dsn" in inspect.signature(module.run).parameters:
        kwargs["dsn"] = dsn
    tables = module.run(**kwargs)
    for table in tables:
        print(table.render())
        print()
    if json_path:
        with open(json_path, "w") as f:
            f.write(dumps(tables))
    return 0
