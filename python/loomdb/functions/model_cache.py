"""Trained models kept in memory between calls, never served stale or from another database.

No paper section.  A model is cached under (the database's identity, its name) with its
version — in PostgreSQL the row's uid and xmin, in DuckDB its uid and a hash of its contents —
so a retrain, an ``UPDATE`` of ``loom.models`` or a drop is seen by the next call, and a model
of one database is never used in another (object ids are not identities: they are reused).
Within one statement a model is pinned: DuckDB passes each call its connection's token and the
statement's transaction id, and every call of that statement gets the version its first call
saw (PostgreSQL's STABLE functions see one snapshot per statement already).  A connection runs
one statement at a time (DuckDB refuses a new one while a result is unfinished), so it keeps
the pins of its latest statement only, however long that statement streams and however many
statements other connections run meanwhile.  The connection's random token is part of the key
because transaction ids are not: a database opened again in the same process counts them from
the same start, and a pin by transaction id alone served the model of a statement of the
database's previous opening.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from loomdb.errors import LoomNotFoundError
from loomdb.learn.model import LinearModel
from loomdb.store import catalog
from loomdb.store.names import check_name

CONNECTIONS = 4096  # connections whose latest statement's pins are kept (the least recent go)

_lock = threading.Lock()
_models: dict[tuple[str, str], tuple[str, LinearModel]] = {}
#: (database, connection) → (its latest statement's transaction id, that statement's models)
_pinned: OrderedDict[tuple[str, Any], tuple[Any, dict[str, LinearModel]]] = OrderedDict()


def load(db: Any, name: str, statement: tuple[Any, Any] | None = None) -> LinearModel:
    """Model ``name`` as this statement sees it (``statement``: its connection's token and its
    transaction id, if any).

    The lock guards the dictionaries only, never a query: concurrent first calls of one
    statement may both read the catalog, and the first to pin its model wins for both.
    """
    check_name(name, "model")
    if statement is None:
        return _current(db, name)
    connection, transaction = statement
    key = (db.identity, connection)
    with _lock:
        pins = _pinned.get(key)
        if pins is not None and pins[0] == transaction and name in pins[1]:
            return pins[1][name]
    model = _current(db, name)
    with _lock:
        pins = _pinned.get(key)
        if pins is None or pins[0] != transaction:  # the connection's statement before is over
            pins = _pinned[key] = (transaction, {})
        _pinned.move_to_end(key)
        while len(_pinned) > CONNECTIONS:
            _pinned.popitem(last=False)
        return pins[1].setdefault(name, model)


def _current(db: Any, name: str) -> LinearModel:
    from loomdb.functions.train import model_of

    key = (db.identity, name)
    version = catalog.model_version(db, name)
    if version is None:
        with _lock:
            _models.pop(key, None)
        raise LoomNotFoundError(
            f"model '{name}' does not exist",
            hint="train it with loom_train, or list them with SELECT name FROM loom.models",
        )
    with _lock:
        hit = _models.get(key)
    if hit is not None and hit[0] == version:
        return hit[1]
    version, record = catalog.get_model_versioned(db, name)
    model = model_of(record)
    with _lock:
        _models[key] = (version, model)
    return model
