"""The model catalog functions: info, drop, grant/revoke, and what the server runs.

No paper section.  ``loom_grant(model, role)`` lets ``role`` (or ``public``) see and predict
with a model; only its owner (or a superuser) may grant.  DuckDB has no roles: every model of a
database file is its opener's, so granting is refused there with that reason.
"""

from __future__ import annotations

import json
from typing import Any

from loomdb.errors import LoomOptionError, LoomStateError
from loomdb.learn.sparse_model import SparseLinearModel
from loomdb.store import catalog
from loomdb.store.names import check_name


def model_info(db: Any, name: str) -> str:
    record = catalog.get_model(db, check_name(name, "model"))
    out = {k: v for k, v in vars(record).items()}
    if isinstance(record.coefficients, dict):  # a sparse source's model: a summary, not arrays
        from loomdb.functions.train import model_of

        model = model_of(record)
        if isinstance(model, SparseLinearModel):
            out["coefficients"] = model.summary()
            out["standardization"] = {"method": model.scaling.method}
    if record.options.get("label_classes"):  # a text label: class code i is class_names[i]
        out["class_names"] = record.options["label_classes"]
    out["created_at"] = str(record.created_at)
    if db.role() is not None:
        out["granted_to"] = catalog.grantees(db, name)
    return json.dumps(out, default=str)


#: ``loom_drop_model``'s ``version`` when none is given (the catalogue's default): both engines
#: pass a NULL default as NULL, and a NULL version, a subquery that found no row, must never
#: mean every version
NO_VERSION = -9223372036854775807


def drop_model(db: Any, name: str, version: int | None = NO_VERSION) -> str:
    """Drop the model (every version), or only its old ``version``; a NULL one is refused."""
    from loomdb.functions.deploy import undeploy

    check_name(name, "model")
    if version is None:
        raise LoomOptionError(
            f"loom_drop_model('{name}', NULL): the version to drop is NULL",
            hint=f"loom_drop_model('{name}') drops the model, every version; "
            f"loom_drop_model('{name}', n) drops its old version n "
            f"(SELECT * FROM loom_model_versions('{name}') lists them)",
        )
    if version != NO_VERSION:
        from loomdb.functions.versions import drop_version

        return drop_version(db, name, version)
    with db.atomic():
        catalog.hold_model(db, name)
        owner = catalog.drop_model(db, name)
        functions = undeploy(db, name, owner)
    return json.dumps({"dropped": name, "functions": functions} if functions else {"dropped": name})


def _roles(db: Any, what: str) -> None:
    if db.role() is None:
        raise LoomStateError(
            f"{what} needs roles, and DuckDB has none: whoever opens the database file "
            "sees every model in it",
            hint="share a DuckDB model by sharing the file; grant models in PostgreSQL",
        )


def _public(role: Any) -> Any:
    """``public`` for PUBLIC in any case, as GRANT … TO PUBLIC reads it (no role can be named
    public), else ``role`` as given."""
    return "public" if isinstance(role, str) and role.lower() == "public" else role


def _role_name(db: Any, role: str) -> str:
    role = _public(role)
    if role == "public":
        return role
    if not isinstance(role, str) or not db.query(
        "SELECT 1 FROM pg_catalog.pg_roles "
        "WHERE rolname::pg_catalog.text OPERATOR(pg_catalog.=) $1::pg_catalog.text",
        [role],
    ):
        raise LoomStateError(
            f"role {role!r} does not exist", hint="name an existing role or public"
        )
    return role


def _require_granter(db: Any, name: str, verb: str, function: str) -> None:
    """Refuse ``function`` on model ``name`` unless the caller owns it or is a superuser: a
    grantee sees its own grant's row but may not change it (row-level security would leave
    it there without a word)."""
    owner = catalog.get_model(db, name).owner
    if owner != db.role() and not db.is_superuser():
        raise LoomStateError(
            f"only the owner of model '{name}' ({owner}) may {verb} it",
            hint=f"ask its owner to run {function}",
        )


def grant(db: Any, name: str, role: str) -> str:
    check_name(name, "model")
    _roles(db, "loom_grant")
    with db.atomic():
        _require_granter(db, name, "grant", "loom_grant")
        role = _role_name(db, role)
        catalog.grant(db, name, role)
    return json.dumps({"model": name, "granted_to": role})


def revoke(db: Any, name: str, role: str) -> str:
    check_name(name, "model")
    _roles(db, "loom_revoke")
    role = _public(role)
    with db.atomic():
        _require_granter(db, name, "revoke grants of", "loom_revoke")
        removed = catalog.revoke(db, name, role)
    return json.dumps({"model": name, "revoked_from": role, "grants_removed": removed})


def version(db: Any) -> str:
    import loomdb

    return loomdb.__version__


def backends(db: Any) -> str:
    from loomdb.accel import registry

    return json.dumps(registry.describe())
