"""The C per-row prediction and ``loom.finite`` (``index_am/loomdb_predict.c``, the
``loomdb_predict`` library, built beside ``loomdb_am``): the install script's part.
No paper section.

Always created: ``loom._predict_model`` (Python: what the C code caches of a model),
``loom._predict_python`` and ``loom._predict_proba_python`` (the catalogued Python functions
under internal names: what the C code hands a row it does not serve to).  Created only where
its library is installed (inside the access methods' ``DO`` block, ``index_am_install``):
``loom.finite``, the trigger that tells backends a model changed, and ``loom_predict`` /
``loom_predict_proba`` replaced by their C versions — without the library they stay the
generated PL/Python functions, and compiled and deployed models keep the portable guard
(``functions/predict_sql.py`` asks whether ``loom.finite`` exists).
"""

from __future__ import annotations

LIBRARY = "loomdb_predict"
ROLE = "loomdb_user"
# the catalog tables whose changes can change what loom_predict answers (loomdb_predict.c)
WATCHED = ("models", "model_versions", "grants")
ARGS = "model text, features double precision[]"
TYPES = "text, double precision[]"

_BODY = "if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')\n"


def _python(name: str, udf: str) -> str:
    return f"""CREATE OR REPLACE FUNCTION loom.{name}({ARGS}) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
{_BODY}return GD['loomdb'].call(plpy, '{udf}', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom.{name}({TYPES}) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom.{name}({TYPES}) TO {ROLE};
COMMENT ON FUNCTION loom.{name}({TYPES}) IS
    '{udf} in Python (the C {udf} hands it the rows it does not serve)';
"""


def sql() -> str:
    """The always-created part (outside the library check)."""
    return (
        f"""
-- The Python half of the C loom_predict (index_am/loomdb_predict.c).
CREATE OR REPLACE FUNCTION loom._predict_model(model text, OUT served boolean,
    OUT classifier boolean, OUT logistic boolean, OUT width integer, OUT margins integer,
    OUT coef double precision[], OUT intercept double precision[],
    OUT classes double precision[])
LANGUAGE plpython3u VOLATILE STRICT AS $fn$
{_BODY}return GD['loomdb'].native_model(plpy, model)
$fn$;
REVOKE ALL ON FUNCTION loom._predict_model(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._predict_model(text) TO {ROLE};
COMMENT ON FUNCTION loom._predict_model(text) IS
    'a model''s folded coefficients and classes, as the C loom_predict caches them';
"""
        + _python("_predict_python", "loom_predict")
        + _python("_predict_proba_python", "loom_predict_proba")
    )


def _c(function: str, symbol: str, returns: str, flags: str, args: str = "") -> str:
    return (
        f"    CREATE OR REPLACE FUNCTION {function}({args}) RETURNS {returns}\n"
        f"        LANGUAGE c {flags} AS '$libdir/{LIBRARY}', '{symbol}';\n"
    )


def native_sql() -> str:
    """Statements for inside the ``DO`` block that runs where the library is installed."""
    lines = [
        "    -- NULL for NaN and ±infinity: the guard of compiled and deployed models, executable",
        "    -- by everyone (callers of a deployed function need only USAGE on schema loom)",
        _c(
            "loom.finite",
            "loomdb_finite",
            "double precision",
            "IMMUTABLE STRICT PARALLEL SAFE",
            "x double precision",
        ).rstrip("\n"),
        "    COMMENT ON FUNCTION loom.finite(double precision) IS 'its argument, or NULL for NaN "
        "and infinity (the guard of loom_predict_sql and deployed functions)';",
        "    -- a change to a model (retrain, drop, version, grant) empties every backend's cache",
        _c("loom._models_changed", "loomdb_models_changed", "trigger", "VOLATILE").rstrip("\n"),
        "    REVOKE ALL ON FUNCTION loom._models_changed() FROM PUBLIC;",
    ]
    for table in WATCHED:
        lines += [
            f"    DROP TRIGGER IF EXISTS predict_cache ON loom.{table};",
            f"    CREATE TRIGGER predict_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            f"ON loom.{table}",
            "        FOR EACH STATEMENT EXECUTE FUNCTION loom._models_changed();",
        ]
    # CREATE OR REPLACE keeps the generated functions' grants and comments; PARALLEL UNSAFE as
    # catalogued: a parallel worker, a fresh process, would start Python to read the model
    for udf, symbol in (
        ("loom_predict", "loomdb_predict"),
        ("loom_predict_proba", "loomdb_predict_proba"),
    ):
        lines.append(
            _c(udf, symbol, "double precision", "STABLE PARALLEL UNSAFE STRICT", ARGS).rstrip("\n")
        )
    return "\n".join(lines)
