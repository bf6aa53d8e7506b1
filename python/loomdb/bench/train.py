"""``loomdb bench train``: training rows/s of loomdb (DuckDB, PostgreSQL) vs scikit-learn.
No paper section.

Same data, same run: logistic regression, z-scored features, L2 = 1e-4, a fixed number of
epochs.  scikit-learn's SGDClassifier runs in-process on a numpy array (the peer users would
export their data to); loomdb reads its stored minibatches inside the database every epoch.
Reported: the median per-epoch rows/s, the whole call's rows/s (layout included), and the
final mean training log-loss of each model, computed the same way for all.
"""

from __future__ import annotations

import json
import time

import numpy as np

from loomdb.bench.engines import binary_datasets, engines
from loomdb.bench.table import BenchTable

L2 = 1e-4


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _sklearn(X: np.ndarray, y: np.ndarray, epochs: int) -> tuple[float, float]:
    from sklearn.linear_model import SGDClassifier
    from sklearn.preprocessing import StandardScaler

    Xs = StandardScaler().fit_transform(X)
    clf = SGDClassifier(loss="log_loss", alpha=L2, max_iter=epochs, tol=None, random_state=0)
    started = time.perf_counter()
    clf.fit(Xs, y)
    seconds = time.perf_counter() - started
    return len(y) * epochs / seconds, _log_loss(clf.predict_proba(Xs)[:, 1], y)


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    epochs = 3 if quick else 10
    table = BenchTable(
        f"train: logistic regression, {epochs} epochs, rows/s (higher is better)",
        [
            "data",
            "rows",
            "system",
            "epoch rows/s",
            "vs sklearn",
            "call rows/s",
            "log-loss",
            "loss vs sklearn",
        ],
        notes=[
            "epoch rows/s: median over epochs; call rows/s: rows × epochs / whole loom_train "
            "call (profiling and layout included)",
            "log-loss: mean training log-loss of the final model, computed alike for all",
        ],
    )
    with engines(dsn) as found:
        for name, X, y in binary_datasets(quick):
            sk_rate, sk_loss = _sklearn(X, y, epochs)
            table.add(name, len(y), "sklearn SGDClassifier", sk_rate, 1.0, sk_rate, sk_loss, 0.0)
            for engine in found:
                engine.load("bench_train", X, y)
                opts = json.dumps(
                    {
                        "epochs": epochs,
                        "l2": L2,
                        "batch_size": 256,
                        "replace": True,
                        "progress": False,
                    }
                )
                started = time.perf_counter()
                engine.scalar(f"SELECT loom_train('bench_m', 'bench_train', 'y', '{opts}')")
                call = time.perf_counter() - started
                history = json.loads(
                    engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_m'")
                )
                rate = float(np.median([h["rows_per_s"] for h in history]))
                metrics = json.loads(
                    engine.scalar("SELECT loom_evaluate('bench_m', 'bench_train')")
                )
                loss = metrics["log_loss"]
                table.add(
                    name,
                    len(y),
                    f"loomdb {engine.name}",
                    rate,
                    rate / sk_rate,
                    len(y) * epochs / call,
                    loss,
                    (loss - sk_loss) / sk_loss,
                )
                engine.run("SELECT loom_drop_model('bench_m')")
        if len(found) == 1:
            table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return [table]
