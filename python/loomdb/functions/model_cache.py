"""Trained models kept in memory between calls, never served stale or from another database.

No paper section.  A model is cached under (the database's identity, its name) with its
version — in PostgreSQL the row's uid and xmin, in DuckDB its uid and a hash of its contents —
so a retrain, an ``UPDATE`` of ``loom.models`` or a drop is seen by the next call, and a model
of one database is never used in another (object ids are not identities: they are reused).
Within one statement a model is pinned: DuckDB passes each call the statement's transaction id,
and every call of that statement gets the version its first call saw (PostgreSQL's STABLE
functions see one snapshot per statement already).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from loomdb.errors import LoomNotFoundError
from loomdb.learn.model import LinearModel
from loomdb.store import catalog
from loomdb.store.names import check_name

PINNED = 256  # statements remembered

_lock = threading.Lock()
_models: dict[tuple[str, str], tuple[str, LinearModel]] = {}
_pinned: OrderedDict[tuple[str, Any, str], LinearModel] = OrderedDict()


def load(db: Any, name: str, statement: Any = None) -> LinearModel:
    """Model ``name`` as this statement sees it (``statement``: its transaction id, if any).

    The lock guards the dictionaries only, never a query: concurrent first calls of one
    statement may both read the catalog, and the first to pin its model wins for both.
    """
    check_name(name, "model")
    pin = (db.identity, statement, name)
    if statement is not None:
        with _lock:
            if pin in _pinned:
                return _pinned[pin]
    model = _current(db, name)
    if statement is None:
        return model
    with _lock:
        model = _pinned.setdefault(pin, model)
        while len(_pinned) > PINNED:
            _pinned.popitem(last=False)
    return model


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
