"""A model's versions: ``loom_model_versions``, choosing one (``loom_deploy``'s ``version``
option), ``loom_rollback`` and dropping one (``loom_drop_model(model, version)``).

No paper section.  Each train of an existing name (``replace``, ``warm_start``, or the model
``loom_tune`` keeps) adds version n + 1 and keeps the others (``store.catalog``).  Choosing a
version makes it the current model: ``loom_predict``, ``loom_predict_sql`` and the deployed
functions (redefined here) use it from the next statement on; the prediction cache is keyed on
the current row, so a statement never mixes two versions.  ``'best'`` is the version with the
lowest final validation loss when every version recorded one, else the lowest final training
loss (as ``loom_training_info`` lists them); the oldest wins a tie.  Only a model's owner lists,
chooses or drops its versions: in PostgreSQL row-level security hides them from other roles,
even from one the model is granted to (it sees the current version only).
"""

from __future__ import annotations

import json
from typing import Any

from loomdb.errors import LoomStateError
from loomdb.store import catalog
from loomdb.store.names import check_name

CHOICES = ("latest", "best")
NEWEST_NUMBER = 2**31 - 1  # the catalog's version column is an integer


def model_versions(db: Any, name: str) -> list[tuple[Any, ...]]:
    """(version, current, created_at, options, loss, validation_loss, epochs), oldest first."""
    rows = catalog.versions_of(db, name)
    if not rows:
        catalog.get_model(db, name)  # says it does not exist
    return [
        (
            r["version"],
            r["current"],
            r["created_at"],
            json.dumps(r["options"]),
            *_final(r["history"]),
            sum(1 for h in r["history"] if "epoch" in h),
        )
        for r in rows
    ]


def _final(history: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """The last epoch's (loss, validation loss), as recorded."""
    epochs = [h for h in history if "epoch" in h]
    if not epochs:
        return None, None
    return epochs[-1].get("loss"), epochs[-1].get("val_loss")


def resolve(db: Any, name: str, spec: int | str) -> int:
    """The version number ``spec`` (a number, 'latest' or 'best') names."""
    if isinstance(spec, int):
        return spec
    rows = catalog.versions_of(db, name)
    if spec == "latest":
        return max(r["version"] for r in rows)
    finals = [(r["version"], *_final(r["history"])) for r in rows]
    by_validation = all(v is not None for _, _, v in finals)
    scored = [(v if by_validation else loss, n) for n, loss, v in finals]
    known = [(s, n) for s, n in scored if s is not None]
    if not known:
        raise LoomStateError(
            f"no version of model '{name}' recorded a loss to choose the best by",
            hint="choose a version by number",
        )
    return min(known)[1]


def choose(db: Any, name: str, spec: int | str) -> int:
    """Make the version ``spec`` names the current one and redefine the deployed functions;
    its number.  The caller holds a transaction and has checked the owner."""
    from loomdb.functions import deploy
    from loomdb.functions.model_cache import load

    number = resolve(db, name, spec)
    before = catalog.current_version(db, name)
    catalog.make_current(db, name, number)
    if number != before:
        deploy.refresh(db, name, load(db, name), db.role())
    return number


def rollback(db: Any, name: str) -> str:
    """``loom_rollback(model)``: back to the version before the current one."""
    from loomdb.functions.deploy import require_owner

    check_name(name, "model")
    with db.atomic():
        require_owner(db, name, "roll it back")
        current = catalog.current_version(db, name)
        older = [r["version"] for r in catalog.versions_of(db, name) if r["version"] < current]
        if not older:
            raise LoomStateError(
                f"model '{name}' has no version before version {current}",
                hint=f"list its versions with SELECT * FROM loom_model_versions('{name}')",
            )
        number = choose(db, name, max(older))
    return json.dumps({"model": name, "version": number, "previous": current})


def drop_version(db: Any, name: str, version: int) -> str:
    from loomdb.functions.deploy import require_owner

    with db.atomic():
        require_owner(db, name, "drop its versions")
        catalog.drop_version(db, name, int(version))
    return json.dumps({"model": name, "dropped_version": int(version)})
