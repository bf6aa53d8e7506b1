"""The entry point of every loomdb function inside PostgreSQL.  No paper section.

The generated function bodies call ``call(plpy, name, *args)``; it finds the catalogued UDF,
wraps ``plpy`` in a :class:`PlpyDatabase`, runs the engine-neutral callable and turns a
:class:`LoomError` into a PostgreSQL error with its detail, hint and SQLSTATE.  The index
access methods' functions (``loom._index_am_build``, ``loom._index_am_check``) call
``index_am(plpy, name, *args)`` the same way, and the C ``loom_predict`` asks
``native_model(plpy, name)`` for a model's coefficients.
"""

from __future__ import annotations

from typing import Any

import loomdb
from loomdb.engines.calls import rows_of, vectorized
from loomdb.engines.postgres.installed import EXTENSION_VERSION
from loomdb.engines.postgres.plpy_database import PlpyDatabase, raise_error
from loomdb.errors import LoomError
from loomdb.udfs import by_name

_udfs = by_name()
_version_checked = False


def call(plpy: Any, name: str, *args: Any) -> Any:
    udf = _udfs[name]
    db = PlpyDatabase(plpy)
    if not _version_checked:
        _warn_if_not_updated(plpy)
    try:
        if udf.vectorized:
            model, *data = args
            X, ok = rows_of(udf, [[d] for d in data])
            value = vectorized(udf, db, [model], X, ok)[0]
            if udf.returns == "text":
                return value
            return None if value != value else float(value)
        return udf.callable()(db, *args)
    except LoomError as e:
        raise_error(plpy, e)


def _warn_if_not_updated(plpy: Any) -> None:
    """Once a session, a WARNING where this database's loomdb SQL is not the version of the
    Python it runs: the server's environment was upgraded (by ``loomdb pg install`` from
    another database, or by hand) and this database was not updated, so its functions may
    pass the Python what an older version did."""
    global _version_checked
    _version_checked = True
    rows = plpy.execute(EXTENSION_VERSION)
    held = rows[0]["extversion"] if rows.nrows() else None
    if held is not None and held != loomdb.__version__:
        plpy.warning(
            f"loomdb: this database's loomdb SQL is version {held}, the server's loomdb "
            f"Python is {loomdb.__version__}",
            hint="update it: ALTER EXTENSION loomdb UPDATE (or run loomdb pg install for "
            "this database)",
        )


def index_am(plpy: Any, name: str, *args: Any) -> Any:
    """The index access methods' entry points (``index_am.build``, ``index_am.check``)."""
    from loomdb.engines.postgres import index_am as methods

    try:
        return getattr(methods, name)(PlpyDatabase(plpy), *args)
    except LoomError as e:
        raise_error(plpy, e)


def native_model(plpy: Any, name: str) -> Any:
    """``loom._predict_model``: what the C ``loom_predict`` caches of a model."""
    from loomdb.functions.predict import native_model as read

    try:
        return read(PlpyDatabase(plpy), name)
    except LoomError as e:
        raise_error(plpy, e)
