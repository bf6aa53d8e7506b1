"""The workers a distributed train runs on: this process, a LocalCluster, or a running Dask
scheduler.  No paper section (SketchML runs on Spark; loomdb on Dask's ``distributed``).

Every kind answers ``map(calls, check)``: run ``fn(*args)`` on each named worker and return
the results by worker, polling ``check`` (the caller's cancel) while it waits.  A worker that
goes away (its process killed, its connection lost) raises :class:`Lost` naming it; the runner
hands its minibatches to the workers left and retries the step.  One that does not answer a
task within ``step_timeout_s`` (alive, but hung) fails the train with a ``LoomStateError``.
An error a task raised on purpose (a ``LoomError``) comes back as itself.

``local:N`` starts N worker processes (one thread each) on 127.0.0.1 with Dask's TLS and a
throwaway certificate (``Security.temporary``): the scheduler's port would otherwise run any
code it is sent, as this process's user — inside PostgreSQL, the server's.  ``close`` shuts
them down; the runner closes in ``finally``, so success, error and cancel all end them.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from loomdb.distributed import worker
from loomdb.distributed.options import REMOTE, STEP_TIMEOUT_S, ClusterSpec
from loomdb.errors import LoomError, LoomStateError

POLL_S = 0.25  # how often a waiting driver checks for cancel and lost workers
CONNECT_S = 30  # waiting for a scheduler, and for a LocalCluster's workers
HANDSHAKE_S = 10  # a listener's answer to Dask's handshake (a scheduler answers at once)
Calls = dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]


class Lost(Exception):
    def __init__(self, workers: list[str], why: str = ""):
        super().__init__(f"lost workers {', '.join(workers)}: {why}")
        self.workers, self.why = workers, why


class InProcess:
    """One worker: this process (the reference every distributed run equals)."""

    kind = "inprocess"

    def __init__(self) -> None:
        self.workers = ["inprocess"]

    def map(self, calls: Calls, check: Callable[[], None]) -> dict[str, Any]:
        out = {}
        for w, (fn, args) in calls.items():
            check()
            out[w] = fn(*args)
        return out

    def close(self) -> None:
        pass


class DaskWorkers:
    """The workers of a Dask scheduler, each task pinned to the worker holding its data."""

    def __init__(self, client: Any, cluster: Any = None, timeout_s: float = STEP_TIMEOUT_S):
        self.client, self.cluster = client, cluster
        self.kind = "dask"
        self.timeout_s = timeout_s  # the longest wait for a worker's answer to one task
        self.hung: set[str] = set()  # workers that did not answer within it
        self.workers = sorted(client.scheduler_info()["workers"])
        if not self.workers:
            self.close()
            raise LoomStateError(
                "the Dask scheduler has no workers", hint="start workers (dask worker ADDRESS)"
            )

    def alive(self) -> set[str]:
        return set(self.client.scheduler_info()["workers"])

    def map(self, calls: Calls, check: Callable[[], None]) -> dict[str, Any]:
        futures = {
            w: self.client.submit(fn, *args, workers=[w], allow_other_workers=False, pure=False)
            for w, (fn, args) in calls.items()
        }
        finished = threading.Event()
        for f in futures.values():
            f.add_done_callback(lambda _f: finished.set())
        looked = time.monotonic()
        deadline = looked + self.timeout_s
        out: dict[str, Any] = {}
        try:
            while len(out) < len(futures):
                finished.clear()
                for w, f in futures.items():
                    if w not in out and f.done():
                        out[w] = self._fetch(w, f, check, deadline)
                if len(out) == len(futures):
                    break
                check()
                if time.monotonic() - looked >= POLL_S:
                    looked = time.monotonic()
                    self._look(futures)
                    self._in_time(deadline, [w for w in futures if w not in out])
                finished.wait(POLL_S)
            return out
        finally:
            for f in futures.values():
                f.release()

    def _in_time(self, deadline: float, waiting: list[str]) -> None:
        """Refuse to wait past ``deadline`` for ``waiting`` workers: one that hangs without
        dying stays in the scheduler, which would be waited on until the scheduler drops it."""
        if time.monotonic() < deadline:
            return
        self.hung.update(waiting)
        raise LoomStateError(
            f"Dask worker(s) {', '.join(waiting)} did not answer within {self.timeout_s:g} s "
            "('step_timeout_s'); the train stopped and nothing was stored",
            hint="check those workers (a worker can hang without dying: its scheduler still "
            'lists it), or give a larger {"step_timeout_s": …} if its steps take that long',
        )

    def _look(self, futures: dict[str, Any]) -> None:
        """Raise ``Lost`` for workers gone from the scheduler or holding a lost result."""
        alive = self.alive()
        gone = sorted(w for w, f in futures.items() if w not in alive or f.status == "lost")
        if gone:
            raise Lost(gone, "its process went away")

    def _fetch(self, w: str, future: Any, check: Callable[[], None], deadline: float) -> Any:
        """A done task's result; a worker that dies before handing it over is lost, one that
        hangs past ``deadline`` is an error."""
        while True:
            try:
                return _result(w, future)
            except TimeoutError:
                check()
                self._look({w: future})
                self._in_time(deadline, [w])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()


def _result(w: str, future: Any) -> Any:
    try:
        return future.result(timeout=POLL_S)
    except (LoomError, TimeoutError):
        raise
    except Exception as e:
        name = type(e).__name__
        if name in ("KilledWorker", "CommClosedError", "FutureCancelledError", "CancelledError"):
            raise Lost([w], str(e)) from None
        raise LoomStateError(
            f"a task failed on worker {w}: {name}: {e}",
            hint="install the same loomdb (and its dependencies) on every worker",
        ) from None


def open_workers(spec: ClusterSpec, timeout_s: float = STEP_TIMEOUT_S) -> InProcess | DaskWorkers:
    if spec.kind == "inprocess":
        return InProcess()
    try:
        import distributed
    except ImportError:
        raise LoomStateError(
            f"cluster '{spec.text}' needs Dask's distributed package, which is not installed",
            hint="pip install 'loomdb[dask]' (PostgreSQL: loomdb pg install puts it into the "
            'server\'s environment), or train without "cluster"',
        ) from None
    if spec.kind == "local":
        workers = _local(distributed, spec.workers, timeout_s)
    else:
        _reachable(spec)
        try:
            client = distributed.Client(spec.address, timeout=CONNECT_S, set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise LoomStateError(
                f"could not reach the Dask scheduler at {spec.address}: {e}",
                hint="start it (dask scheduler) and its workers, or check the address",
            ) from None
        workers = DaskWorkers(client, timeout_s=timeout_s)
    try:
        _check_versions(workers)
    except BaseException:
        workers.close()
        raise
    return workers


def _reachable(spec: ClusterSpec) -> None:
    """Fail at once on an address nothing listens at (Dask's client would retry for
    ``CONNECT_S``): a plain TCP connect, closed again."""
    m = REMOTE.fullmatch(spec.address)
    assert m is not None  # parse_cluster's remote kind
    host, port = m.group(2).strip("[]"), int(m.group(3))
    try:
        socket.create_connection((host, port), timeout=CONNECT_S).close()
    except OSError as e:
        raise LoomStateError(
            f"could not reach the Dask scheduler at {spec.address}: {e}",
            hint="start it (dask scheduler) and its workers, or check the address; "
            "'local:N' starts a cluster for the train",
        ) from None
    why = _handshake(spec.address)
    if why is not None:
        raise LoomStateError(
            f"could not reach the Dask scheduler at {spec.address}: {why}",
            hint="give the address of a running Dask scheduler (dask scheduler prints it; a "
            "tls:// one needs Dask's TLS settings, distributed.comm.tls.*), or 'local:N' to "
            "start a cluster for the train",
        )


def _handshake(address: str) -> str | None:
    """Why ``address`` does not complete Dask's handshake within ``HANDSHAKE_S`` (None: it
    does).  distributed's client waits for the listener's first message without a limit, so
    a port held by something else would hang the train.  Probed on a loop of its own, in a
    thread (the caller's thread may run an event loop already)."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    why = [f"something listens there but did not answer Dask's handshake within {HANDSHAKE_S} s"]

    async def probe() -> None:
        args = Security().get_connection_args("client")
        comm = await asyncio.wait_for(connect(address, timeout=HANDSHAKE_S, **args), HANDSHAKE_S)
        await comm.close()

    def run() -> None:
        try:
            asyncio.run(probe())
            why[0] = ""
        except TimeoutError:
            pass
        except Exception as e:
            why[0] = f"{type(e).__name__}: {e}"

    probing = threading.Thread(target=run, name="loomdb-dask-probe", daemon=True)
    probing.start()
    probing.join(HANDSHAKE_S + 5)
    return why[0] or None


def _local(distributed: Any, n: int, timeout_s: float) -> DaskWorkers:
    from distributed.security import Security

    security = Security.temporary()
    try:
        cluster = distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            # no dashboard; the scheduler's HTTP routes (health, metrics) on a free local port
            # rather than 8787, which another train's cluster may hold
            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
            security=security,
            silence_logs=logging.ERROR,
        )
    except Exception as e:
        raise _not_started(n, e) from None
    try:
        client = distributed.Client(cluster, security=security, set_as_default=False)
        client.wait_for_workers(n, timeout=CONNECT_S)
    except BaseException as e:
        cluster.close()
        if isinstance(e, Exception):
            raise _not_started(n, e) from None
        raise
    return DaskWorkers(client, cluster, timeout_s)


def _not_started(n: int, e: Exception) -> LoomStateError:
    return LoomStateError(
        f"could not start a local Dask cluster of {n} worker process(es): {type(e).__name__}: {e}",
        hint="its workers are spawned: a Python script that trains on 'local:N' must run its "
        "code under if __name__ == '__main__': (the workers import the script); otherwise "
        "check the machine's memory and process limits, or give fewer workers",
    )


def _check_versions(workers: DaskWorkers) -> None:
    import loomdb

    try:
        seen = workers.map({w: (worker.hello, ()) for w in workers.workers}, lambda: None)
    except Lost as e:
        raise LoomStateError(
            f"Dask worker(s) {', '.join(e.workers)} went away as the train started: {e.why}",
            hint="check the workers' memory and logs, then train again",
        ) from None
    other = {w: h["loomdb"] for w, h in seen.items() if h["loomdb"] != loomdb.__version__}
    if other:
        w, v = next(iter(other.items()))
        raise LoomStateError(
            f"worker {w} runs loomdb {v}; the driver runs {loomdb.__version__}",
            hint="install the same loomdb on every worker",
        )
