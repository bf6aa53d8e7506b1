"""A distributed train from ``functions/train.py``: the runner around the trainer's loop, and
what the catalog records of it.  No paper section (the loop is SketchML §4.1's, in
``runner.py``).
"""

from __future__ import annotations

import re
from typing import Any

from loomdb.distributed.options import Distributed
from loomdb.distributed.runner import Runner
from loomdb.errors import LoomOptionError
from loomdb.learn.trainer import TrainConfig, fit

_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]*@")


def fit_distributed(
    settings: Distributed,
    laid: Any,
    epochs: Any,
    problem: Any,
    config: TrainConfig,
    progress: Any,
    check: Any,
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """``learn.trainer.fit`` with the epochs run on the cluster: (model, history, report)."""
    if not isinstance(config.precision, int):
        raise LoomOptionError(
            "distributed training partitions the minibatches once, at one fidelity; "
            f"'{config.precision}' changes it between epochs",
            hint="give the fidelity as a number with 'cluster'",
        )
    runner = Runner(
        settings,
        laid,
        epochs.train_stop,
        problem,
        config.precision,
        config.kind,
        config.optimizer,
        config.l1,
        check,
    )
    with runner:
        model, history = fit(epochs, problem, config, runner, progress, check)
    return model, history, runner.report()


def used(settings: Distributed, report: dict[str, Any]) -> dict[str, Any]:
    """The distributed options a train used, for the catalog (a DSN without its password)."""
    out: dict[str, Any] = {
        "cluster": settings.cluster.text,
        "compress": settings.compress,
        "compress_model": settings.compress_model,
        "step_batches": report["step_batches"],
        "workers": report["workers"],
    }
    if settings.cluster.kind != "inprocess":  # no worker to wait for in process
        out["step_timeout_s"] = settings.step_timeout_s
    if settings.dsn is not None:
        out["dsn"] = redact(settings.dsn)
    return out


def redact(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``."""
    return _URI_PASSWORD.sub(r"\1:***@", _PASSWORD.sub(r"\1***", dsn))
