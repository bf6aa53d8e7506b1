"""The extension SQL of ``loom._epoch_agg``, the parallel epoch's aggregate.  No paper section
(the aggregate is Bismarck's, see ``epoch_aggregate``).

Its functions are PARALLEL SAFE PL/Python, so PostgreSQL runs them in parallel workers, where
PL/Python may not run a query: they cannot read ``loom.settings`` as ``loom._bootstrap`` does.
The paths the server imports loomdb from are therefore written into their bodies here, at
install time, from the same settings the install script writes into ``loom.settings`` (a
superuser's choice either way; no setting a role can change picks the code).  The transition's
COST says a call trains whole minibatches, so the planner prefers running it in the workers.
A worker's BLAS runs one thread unless the server's environment says otherwise (the shards are
the parallelism); the variables are set before the worker first imports numpy.
"""

from __future__ import annotations

from loomdb.errors import LoomStateError

ARGS = (
    ("shard", "integer"),
    ("batches", "integer[]"),
    ("rows", "integer[]"),
    ("parts", "integer[]"),
    ("versions", "smallint[]"),
    ("payloads", "bytea[]"),
    ("checksums", "bigint[]"),
    ("job", "bytea"),
)
TYPES = ", ".join(t for _, t in ARGS)
STEP_COST = 100000  # cpu_operator_cost units: minibatches' SGD steps, not an operator
# before 0.4.0 a call took one minibatch (``batch integer``): an update drops those functions
OLD_TYPES = "integer, integer, integer[], integer[], smallint[], bytea[], bigint[], bytea"

BOOTSTRAP = """\
if 'loomdb_epochs' not in GD:
    import os, sys
    site = os.path.join({venv}, 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
    for path in reversed([p for p in {extra}.split(':') if p] + [site]):
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ['NUMBA_CACHE_DIR'] = {cache}
    for blas in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        os.environ.setdefault(blas, '1')
    from loomdb.engines.postgres import epoch_aggregate
    GD['loomdb_epochs'] = epoch_aggregate
"""


def _body(settings: dict[str, str], call: str) -> str:
    values = {k: settings.get(k, "") for k in ("venv", "extra_path", "numba_cache_dir")}
    for key, value in values.items():
        if "$fn$" in value or "\n" in value:
            raise LoomStateError(f"the setting {key} = {value!r} cannot be written into SQL")
    boot = BOOTSTRAP.format(
        venv=repr(values["venv"]),
        extra=repr(values["extra_path"]),
        cache=repr(values["numba_cache_dir"]),
    )
    return f"$fn$\n{boot}return GD['loomdb_epochs'].{call}\n$fn$"


def sql(settings: dict[str, str], role: str) -> str:
    """``loom._epoch_step``, ``loom._epoch_combine`` and the aggregate, executable by ``role``."""
    names = ", ".join(n for n, _ in ARGS)
    step = f"loom._epoch_step(bytea, {TYPES})"
    combine = "loom._epoch_combine(bytea, bytea)"
    aggregate = f"loom._epoch_agg({TYPES})"
    signature = ", ".join(f"{n} {t}" for n, t in ARGS)
    return "\n".join(
        [
            f"DROP AGGREGATE IF EXISTS loom._epoch_agg({OLD_TYPES});",
            f"DROP FUNCTION IF EXISTS loom._epoch_step(bytea, {OLD_TYPES});",
            f"CREATE OR REPLACE FUNCTION loom._epoch_step(state bytea, {signature}) RETURNS bytea",
            f"LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE COST {STEP_COST} AS "
            + _body(settings, f"call(plpy, 'step', state, {names})")
            + ";",
            "CREATE OR REPLACE FUNCTION loom._epoch_combine(a bytea, b bytea) RETURNS bytea",
            "LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE STRICT AS "
            + _body(settings, "call(plpy, 'combine', a, b)")
            + ";",
            f"CREATE OR REPLACE AGGREGATE {aggregate} (",
            "    SFUNC = loom._epoch_step, STYPE = bytea,",
            "    COMBINEFUNC = loom._epoch_combine, PARALLEL = SAFE",
            ");",
            *[
                f"REVOKE ALL ON FUNCTION {f} FROM PUBLIC;\nGRANT EXECUTE ON FUNCTION {f} TO {role};"
                for f in (step, combine, aggregate)
            ],
            f"COMMENT ON FUNCTION {step} IS 'a run of minibatches of a parallel epoch''s shard "
            "(the transition of loom._epoch_agg)';",
            f"COMMENT ON FUNCTION {combine} IS 'two partial states of a parallel epoch as one "
            "(the combine function of loom._epoch_agg)';",
            f"COMMENT ON AGGREGATE {aggregate} IS 'a parallel epoch: each shard''s SGD over its "
            "minibatches, run in parallel workers (Bismarck); loom_train averages the shards';",
            "",
        ]
    )
