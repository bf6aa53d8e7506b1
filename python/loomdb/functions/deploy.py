"""``loom_deploy(model, options)``: a model as a native SQL function of its feature columns.

No paper section.  The function computes what ``loom_predict`` computes (or
``loom_predict_proba``, with ``proba``), from the compiled expression (``predict_sql``): a MACRO
in DuckDB, an IMMUTABLE PARALLEL SAFE SQL function in PostgreSQL that the planner inlines, so
prediction runs at the engine's speed and in parallel plans.  It is made in the current schema,
named ``predict_<model>`` unless ``name`` says otherwise, and recorded in ``loom.deployments``:
retraining the model (``replace``) redefines it, dropping the model drops it, and a function of
that name that loomdb did not make is never replaced nor shadowed: deploying is refused while any
function or macro of the name exists, of any arity, built-ins included (``_claim``), other than
this model's deployment, names compared as the engine compares them (DuckDB's in any case).
``version`` (a number, ``'latest'`` or ``'best'``) first makes that version of the model the
current one (``functions/versions.py``).
A model with an encoding (``store/encoding.py``) is deployed over its source columns, text ones
as ``text`` parameters, the encoding compiled into the body.  In PostgreSQL with loomdb's C
module the body calls ``loom.finite`` (``predict_sql``): a role calling the function needs
``USAGE`` on schema ``loom``, as members of ``loomdb_user`` have.
"""

from __future__ import annotations

import json
from typing import Any

from loomdb.errors import LoomNotFoundError, LoomOptionError, LoomStateError
from loomdb.functions import versions
from loomdb.functions.predict import compilable, require_compilable
from loomdb.functions.predict_sql import native_finite, predict_expression, proba_expression
from loomdb.learn.model import LinearModel, require_probabilities
from loomdb.options import AnyOf, Boolean, Choices, Interval, Option, Options, Text, parse_json
from loomdb.store import catalog
from loomdb.store import encoding as encodings
from loomdb.store.names import NAME, builtin, check_name, quote_ident

OPTIONS = Options(
    "loom_deploy",
    Option("name", Text(), None, "the function's name (default predict_<model>)"),
    Option("schema", Text(), None, "the schema it is made in (default the current schema)"),
    Option("proba", Boolean(), False, "also deploy <name>_proba (logistic models)"),
    Option("drop", Boolean(), False, "remove the model's deployed functions instead"),
    Option(
        "version",
        AnyOf(Interval(True, 1, versions.NEWEST_NUMBER), Choices(versions.CHOICES)),
        None,
        "make this version the current model first: a number, 'latest' or 'best' "
        "(SELECT * FROM loom_model_versions(model) lists them)",
    ),
)


def deploy(db: Any, name: str, options: str | None) -> str:
    check_name(name, "model")
    opts = OPTIONS.parse(parse_json(options))
    if opts["drop"] and opts["version"] is not None:
        raise LoomOptionError(
            "the 'drop' and 'version' options of loom_deploy do not go together",
            hint="drop the functions, or choose a version, in two calls",
        )
    named = [k for k in ("name", "schema", "proba") if opts["drop"] and opts[k]]
    if named:  # 'drop' removes every function of the model, not only the one named
        raise LoomOptionError(
            f"loom_deploy's 'drop' removes every function deployed from model '{name}': "
            f"'{named[0]}' does not go with it",
            hint=f"""loom_deploy('{name}', '{{"drop": true}}') drops them all """
            "(SELECT * FROM loom.deployments lists them); deploy again those to keep",
        )
    with db.atomic():
        owner = require_owner(db, name, "deploy it")
        if opts["drop"]:
            return json.dumps({"model": name, "dropped": undeploy(db, name, owner)})
        chosen = None if opts["version"] is None else versions.choose(db, name, opts["version"])
        model = compilable(db, name)
        schema = _schema(db, opts["schema"]) if opts["schema"] else _current_schema(db)
        _refuse_catalog_schema(db, schema)
        function = check_name(opts["name"] or f"predict_{name}"[:63], "function")
        proba = _proba_name(function) if opts["proba"] else None
        made = [_define(db, name, model, schema, function, "predict")]
        if proba is not None:
            made.append(_define(db, name, model, schema, proba, "proba"))
    out: dict[str, Any] = {"model": name, "functions": made}
    if chosen is not None:
        out["version"] = chosen
    return json.dumps(out)


def _proba_name(function: str) -> str:
    """``<function>_proba``, refused with a hint where it would pass 63 characters (a default
    ``predict_<model>`` of a long model's name does)."""
    proba = function + "_proba"
    if len(proba) > 63:
        raise LoomOptionError(
            f"the probability function {proba} would be {len(proba)} characters long; "
            "function names have at most 63",
            hint='name the functions yourself, in at most 57 characters: {"name": "…", '
            '"proba": true} makes <name> and <name>_proba',
        )
    return check_name(proba, "function")


def require_owner(db: Any, name: str, verb: str) -> str | None:
    """The owner of model ``name``, refused unless it is the caller (DuckDB: always); the
    caller, about to change the model, first waits for other writers of it to end."""
    catalog.hold_model(db, name)
    owner = catalog.get_model(db, name).owner
    if owner != db.role():
        raise LoomStateError(
            f"model '{name}' belongs to {owner}: only its owner may {verb}",
            hint=f"ask its owner to {verb}",
        )
    return owner


def _schema(db: Any, given: str) -> str:
    """The ``schema`` option, refused unless it is a schema of this database (on DuckDB an
    attached database's name is not: its macro would be written there, apart from the
    catalog's row).  Any name the engine takes, compared as a parameter and quoted after."""
    if "\x00" in given:
        raise LoomOptionError("the 'schema' option holds a NUL character", hint="name a schema")
    schema = given
    if db.dialect == "postgres":
        sql = (
            "SELECT pg_catalog.count(*) FROM pg_catalog.pg_namespace "
            "WHERE nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name"
        )
    else:
        sql = (
            "SELECT count(*) FROM information_schema.schemata "
            "WHERE catalog_name = current_database() AND lower(schema_name) = lower($1)"
        )
    if not db.query(sql, [schema])[0][0]:
        raise LoomNotFoundError(
            f"schema '{schema}' does not exist in this database: loom_deploy cannot define "
            "functions there",
            hint=f"CREATE SCHEMA {schema if NAME.match(schema) else quote_ident(schema)} first, "
            "or leave 'schema' out to deploy into the current schema",
        )
    return schema


def _refuse_catalog_schema(db: Any, schema: str) -> None:
    """A model's function is the user's, not loomdb's: in loomdb's catalog schema it would sit
    among loomdb's own functions (and go with a reinstall's DROP of that schema), in its
    storage schema among the storage tables."""
    for ours, what in ((catalog.SCHEMA, "catalog"), (catalog.DATA_SCHEMA, "storage")):
        if db.fold_name(schema) == db.fold_name(ours):
            raise LoomOptionError(
                f"loom_deploy does not define functions in '{schema}', loomdb's {what} schema",
                hint='name a schema of your own: {"schema": "…"}, or SET the search path to one',
            )


def _current_schema(db: Any) -> str:
    # pg_catalog's: a database's owner may put pg_catalog after a schema others create in on
    # the search_path (ALTER DATABASE … SET), where their current_schema() would be chosen
    rows = db.query(f"SELECT {builtin('current_schema', db.dialect)}()")
    if not rows or rows[0][0] is None:
        raise LoomStateError(
            "there is no current schema to deploy into", hint='name one: {"schema": "…"}'
        )
    return str(rows[0][0])


def _qualified(schema: str, function: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(function)}"


def _define(db: Any, name: str, model: LinearModel, schema: str, function: str, kind: str) -> str:
    require_compilable(model, name)  # a retrain on a sparse source cannot keep its function
    _require_create(db, schema, function)
    params = parameters(model)
    arity, qualified = len(params), _qualified(schema, function)
    ours = _claim(db, name, schema, function, arity)
    if kind == "predict":
        expression = predict_expression(model, db.dialect, native_finite(db))
    else:
        expression = proba_expression(model, db.dialect)
    returns = "text" if kind == "predict" and model.class_names else "double"
    if ours is not None and ours[2] != arity:  # PostgreSQL would keep the old one beside it
        db.drop_function(*ours)
    if ours is not None:  # its record, perhaps spelled otherwise (DuckDB: in another case)
        catalog.delete_deployment(db, ours[0], ours[1])
    db.define_function(qualified, [(quote_ident(c), t) for c, t in params], expression, returns)
    catalog.put_deployment(db, schema, function, name, kind, arity)
    return f"{schema}.{function}({', '.join(c for c, _ in params)})"


def _require_create(db: Any, schema: str, function: str) -> None:
    """Refuse, with a hint, a schema the role may not create in (PostgreSQL 15's ``public``
    for every role but its owner): PostgreSQL's own "permission denied" said neither what
    loomdb was doing nor what to do."""
    if db.dialect != "postgres":
        return
    sql = "SELECT pg_catalog.has_schema_privilege($1::pg_catalog.text, 'CREATE'::pg_catalog.text)"
    if db.query(sql, [schema])[0][0]:
        return
    raise LoomStateError(
        f"loomdb cannot define {schema}.{function}: {db.role()} has no CREATE privilege on "
        f"schema {schema}",
        hint='deploy into a schema you may create in ({"schema": "…"}, or SET the search path '
        f"to one), or ask the owner of {schema} to GRANT CREATE ON SCHEMA {schema} to you",
    )


def _claim(db: Any, name: str, schema: str, function: str, arity: int) -> tuple | None:
    """Refuse to define ``schema.function`` over anything loomdb did not deploy from model
    ``name``: a function or macro of that name (as the engine compares names: DuckDB's in any
    case) of any arity, a built-in included, or another model's deployment.  The
    ``(schema, function, arity)`` of this model's deployment there, as recorded, or None."""
    fold = db.fold_name
    ours = None
    for where, named, model, recorded in catalog.deployments_named(db, function):
        if (fold(where), fold(named)) != (fold(schema), fold(function)):
            continue
        if model != name:
            raise LoomStateError(
                f"function {schema}.{function} is deployed from model '{model}'",
                hint='choose another name ({"name": "…"}), or drop that deployment first',
            )
        ours = (where, named, recorded)
    for where, named, taken in db.functions_named(schema, function):
        if ours is not None and fold(where) == fold(ours[0]) and taken == ours[2]:
            continue  # the function this model's deployment made
        arguments = "argument" if taken == 1 else "arguments"
        raise LoomStateError(
            f"a function {where}.{named} with {taken} {arguments} exists and loomdb did not "
            f"make it: {schema}.{function} would replace or shadow it",
            hint='choose another name: {"name": "…"}',
        )
    return ours


def parameters(model: LinearModel) -> list[tuple[str, str]]:
    """The deployed function's ``(column, type)`` parameters: the source columns (a boolean
    one as ``boolean``, which PostgreSQL casts to no double)."""
    encoding = encodings.load(model.encoding)
    if encoding is None:
        booleans = set(model.booleans or ())
        return [(f, "boolean" if f in booleans else "double") for f in model.features]
    kinds = {"text": "text", "boolean": "boolean"}
    return [(e.column, kinds.get(e.kind, "double")) for e in encoding]


def refresh(db: Any, name: str, model: LinearModel, owner: str | None) -> None:
    """Redefine the functions deployed from ``name`` after it was retrained (its features may
    have changed: the old function is dropped first), with the owner's rights."""
    with db.as_role(owner):
        deployed = catalog.deployments_of(db, name, owner)
        for schema, function, kind, _arity in deployed:
            _keepable(model, name, f"{schema}.{function}", kind)
        for schema, function, kind, arity in deployed:
            db.drop_function(schema, function, arity)
            catalog.delete_deployment(db, schema, function)
            _define(db, name, model, schema, function, kind)


def _keepable(model: LinearModel, name: str, function: str, kind: str) -> None:
    """Refuse a retrain (or a version chosen) whose model can no longer be the deployed
    ``function`` of ``kind`` (one of a sparse source or of images has no SQL expression, a
    model other than logistic no probabilities), before anything is redefined."""
    try:
        require_compilable(model, name)
        if kind == "proba":
            require_probabilities(model.kind)
    except LoomOptionError as e:
        raise LoomOptionError(
            f"model '{name}' is deployed as {function}, a function the {model.kind} model it "
            f"would become cannot be: {e.message}",
            hint=f"drop its functions first with loom_deploy('{name}', '{{\"drop\": true}}'), "
            "or train the new model under another name",
        ) from None


def undeploy(db: Any, name: str, owner: str | None) -> list[str]:
    """Drop the functions deployed from ``name``, with the owner's rights."""
    dropped = []
    with db.as_role(owner):
        for schema, function, _kind, arity in catalog.deployments_of(db, name, owner):
            db.drop_function(schema, function, arity)
            catalog.delete_deployment(db, schema, function)
            dropped.append(f"{schema}.{function}")
    return dropped
