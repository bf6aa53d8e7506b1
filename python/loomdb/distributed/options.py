"""``loom_train``'s distributed options: what they mean, what the path honours, who may use it.

No paper section (the options choose among SketchML §4's codecs; the rest is loomdb's).

* ``cluster``: ``local:N`` starts a Dask ``LocalCluster`` of N worker processes here (inside
  PostgreSQL: children of the backend, shut down when the train ends, however it ends);
  ``tcp://host:port`` / ``tls://host:port`` use a running Dask scheduler (its workers need
  loomdb installed); ``inprocess`` runs the same loop with one worker in this process, no Dask
  (the reference the distributed runs are compared with).
* ``compress``: the gradient codec (default ``sketchml``); ``compress_model``: the codec of
  the model values sent to the workers (default ``none``: float64, keys not sent).
* ``step_batches``: stored minibatches per step (default: one per worker).
* ``dsn``: the workers read their partition from PostgreSQL with this connection string
  (an index's storage table, committed); without it the driver sends them the stored blobs.
* ``step_timeout_s``: how long the driver waits for a Dask worker's answer to one task (a
  step's share, a part of its partition) before the train fails: a worker that hangs without
  dying stays in the scheduler, which would otherwise be waited on until it drops it.

Who may use them: a ``cluster`` other than ``inprocess`` makes the database server start
processes (``local``) or connect to an address the caller chose (``tcp``/``tls``, and ``dsn``):
from inside PostgreSQL that is the server reaching out on a role's behalf.  Superusers may;
other roles only the values a superuser listed in ``loom.settings`` (``dask_clusters``: a comma
separated list of allowed ``cluster`` values, ``local:*`` for any local size; ``dask_dsn``: the
one allowed ``dsn``).  DuckDB runs in the caller's own process, whose user is its superuser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from loomdb.errors import LoomOptionError, LoomStateError
from loomdb.options import Choices, Constraint, Interval, Option, Options, Text

MAX_LOCAL = 64
_LOCAL = re.compile(r"local:([0-9]{1,3})")
REMOTE = re.compile(r"(tcp|tls)://([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")
CLUSTERS_SETTING = "dask_clusters"
DSN_SETTING = "dask_dsn"
STEP_TIMEOUT_S = 600  # a worker's longest answer to one task (a step's share, a partition's part)
MAX_STEP_TIMEOUT_S = 86400


def _codecs() -> list[str]:
    from loomdb.codecs import sketch

    return list(sketch.METHODS)


class ClusterAddress(Constraint):
    def check(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        local = _LOCAL.fullmatch(value)
        if local:
            return 1 <= int(local.group(1)) <= MAX_LOCAL
        remote = REMOTE.fullmatch(value)
        return value == "inprocess" or (remote is not None and 0 < int(remote.group(3)) < 65536)

    def describe(self) -> str:
        return (
            f"'local:N' (N from 1 to {MAX_LOCAL}), 'tcp://host:port', 'tls://host:port' "
            "or 'inprocess'"
        )


OPTIONS = Options(
    "loom_train",
    Option(
        "cluster",
        ClusterAddress(),
        None,
        "train on Dask: 'local:2' starts 2 worker processes here; 'tcp://host:8786' uses a "
        "running scheduler",
    ),
    Option("compress", Choices(_codecs), None, "the gradient codec (default sketchml)"),
    Option("compress_model", Choices(_codecs), None, "the codec of the model sent to the workers"),
    Option(
        "step_batches",
        Interval(True, 1, 4096),
        None,
        "stored minibatches per distributed step (default: one per worker)",
    ),
    Option("dsn", Text(), None, "workers read their partition from PostgreSQL with this DSN"),
    Option(
        "step_timeout_s",
        Interval(False, 1, MAX_STEP_TIMEOUT_S),
        None,
        f"seconds a Dask worker may take to answer one task (default {STEP_TIMEOUT_S})",
    ),
)
NAMES = tuple(OPTIONS.names())
OPTIMIZERS = ("adam", "sgd")  # optimisers whose step needs nothing but the summed gradient


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``cluster`` value: ``inprocess``, ``local`` (N processes) or ``remote``."""

    text: str
    kind: str
    workers: int  # local: N; inprocess: 1; remote: 0 (known once connected)
    address: str = ""


def parse_cluster(text: str) -> ClusterSpec:
    if text == "inprocess":
        return ClusterSpec(text, "inprocess", 1)
    local = _LOCAL.fullmatch(text)
    if local:
        return ClusterSpec(text, "local", int(local.group(1)))
    return ClusterSpec(text, "remote", 0, text)


@dataclass(frozen=True)
class Distributed:
    """What a distributed train uses (the catalog records it)."""

    cluster: ClusterSpec
    compress: str
    compress_model: str
    step_batches: int | None
    dsn: str | None
    step_timeout_s: float = STEP_TIMEOUT_S


def resolve(db: Any, given: dict[str, Any], opts: dict[str, Any]) -> Distributed | None:
    """The distributed settings of a train (None: it is not distributed), after refusing
    what the path cannot honour and what the caller may not use.  Makes Adam the default
    optimiser of a distributed train (the paper's)."""
    if opts["cluster"] is None:
        for name in NAMES:
            if opts[name] is not None:
                raise LoomOptionError(
                    f"'{name}' applies to distributed training only",
                    hint='add {"cluster": "local:2"} (or a Dask scheduler\'s address), '
                    f"or leave '{name}' out",
                )
        return None
    spec = parse_cluster(opts["cluster"])
    _refuse_unhonoured(given, opts)
    if "optimizer" not in given:
        opts["optimizer"] = "adam"
    if spec.kind == "inprocess" and opts["step_timeout_s"] is not None:
        raise LoomOptionError(
            "'step_timeout_s' bounds the wait for a Dask worker; 'inprocess' runs each step "
            "in this call",
            hint="leave 'step_timeout_s' out with 'inprocess'",
        )
    if opts["dsn"] is not None:
        if spec.kind == "inprocess":
            raise LoomOptionError(
                "'dsn' is for workers of a cluster; 'inprocess' reads through this connection",
                hint="leave 'dsn' out",
            )
        if db.dialect != "postgres":
            raise LoomOptionError(
                "'dsn' makes the workers read from PostgreSQL; this database is not",
                hint="leave 'dsn' out: the driver sends the workers their minibatches",
            )
        if not opts["index"]:
            raise LoomOptionError(
                "workers can read only an index's minibatches from PostgreSQL ('dsn')",
                hint="create an index (loom_create_index) and train on it, or leave 'dsn' out",
            )
    allow(db, spec, opts["dsn"])
    return Distributed(
        spec,
        opts["compress"] or "sketchml",
        opts["compress_model"] or "none",
        opts["step_batches"],
        opts["dsn"],
        STEP_TIMEOUT_S if opts["step_timeout_s"] is None else float(opts["step_timeout_s"]),
    )


def _refuse_unhonoured(given: dict[str, Any], opts: dict[str, Any]) -> None:
    if opts["backend"] != "cpu":
        raise LoomOptionError(
            f"distributed training computes on the workers' CPUs; backend "
            f"'{opts['backend']}' cannot run there",
            hint="leave 'backend' out (or 'cpu') with 'cluster'",
        )
    if "optimizer" in given and opts["optimizer"] not in OPTIMIZERS:
        raise LoomOptionError(
            f"distributed training applies {' or '.join(OPTIMIZERS)} on the driver; "
            f"'{opts['optimizer']}' keeps epoch averages and restarts it cannot share",
            hint="leave 'optimizer' out (Adam, the SketchML paper's) or choose sgd",
        )
    if opts.get("skip") not in (None, "none"):
        raise LoomOptionError(
            f"distributed training sends each worker whole stored minibatches once; 'skip': "
            f"'{opts['skip']}' chooses rows at every step from the model of that moment",
            hint="leave 'skip' out with 'cluster', or train without 'cluster'",
        )
    if "cache_mb" in given:
        raise LoomOptionError(
            "distributed training keeps each worker's partition in its memory for the whole "
            "train; 'cache_mb' (the driver's cache between epochs) has nothing to keep",
            hint="leave 'cache_mb' out with 'cluster'",
        )
    for name in ("precision", "scans"):
        if isinstance(opts[name], str):
            raise LoomOptionError(
                f"distributed training partitions the minibatches once, at one fidelity; "
                f"'{name}': '{opts[name]}' changes it between epochs",
                hint=f"give '{name}' as a number with 'cluster'",
            )


def allow(db: Any, spec: ClusterSpec, dsn: str | None) -> None:
    """Refuse a cluster (or dsn) the calling role may not use (see the module docstring)."""
    if spec.kind == "inprocess" or db.is_superuser():
        return
    from loomdb.store import catalog

    listed = [s.strip() for s in (catalog.setting(db, CLUSTERS_SETTING) or "").split(",")]
    ok = spec.text in listed or (spec.kind == "local" and "local:*" in listed)
    if not ok:
        raise LoomStateError(
            f"role {db.role()} may not use cluster '{spec.text}': only superusers and the "
            f"clusters listed in loom.settings ('{CLUSTERS_SETTING}') may be used",
            hint=f"a superuser may allow it: INSERT INTO loom.settings VALUES "
            f"('{CLUSTERS_SETTING}', '{spec.text}') (a comma-separated list; 'local:*' for "
            "any local cluster)",
        )
    if dsn is not None and dsn != catalog.setting(db, DSN_SETTING):
        raise LoomStateError(
            f"role {db.role()} may not give the workers a 'dsn': only superusers and the "
            f"one listed in loom.settings ('{DSN_SETTING}') may be used",
            hint="leave 'dsn' out (the driver sends the minibatches), or ask a superuser to "
            f"set loom.settings '{DSN_SETTING}'",
        )
