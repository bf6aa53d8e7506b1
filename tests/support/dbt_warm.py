"""dbt's command line without its start-up at every run: run by the Python of dbt's environment,
it imports dbt-core, its adapters and loomdb's plugin once, then forks once per run and runs in
the child what the ``dbt`` script runs (``sys.exit(dbt.cli.main.cli())``) with the run's
arguments, folder and environment.  Each run is a process of its own, as from a shell: nothing
one run opens (an adapter's connections, a DuckDB file's lock) outlives it.  A ``parse`` run
asked to ``warm`` runs in this process instead (dbt's programmatic runner, without the static
parser), so that what dbt builds on its first parse (its classes' serialisers and JSON schemas)
is there in every child.
No paper section; tests/engines/test_dbt.py drives it.

A request is one JSON line on stdin: ``{"args": [...], "cwd": ..., "env": {...}, "out": path,
"warm": bool}``; the run's stdout and stderr go to ``out`` and its exit status comes back as one
JSON line on stdout.
"""

from __future__ import annotations

import os
import sys

# run as a script, this folder is first on the path: its modules (wheel, engines…) are not dbt's
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path = [p for p in sys.path if os.path.realpath(p or ".") != HERE]

import atexit  # noqa: E402
import json  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402


def warm() -> None:
    """What every run imports, imported before the first fork."""
    import dbt.adapters.duckdb  # noqa: F401
    import dbt.adapters.postgres  # noqa: F401
    import dbt.cli.main  # noqa: F401
    import dbt.task.build  # noqa: F401
    import dbt.task.run_operation  # noqa: F401

    import loomdb.dbt  # noqa: F401


@contextmanager
def placed(request: dict) -> Iterator[None]:
    """The request's folder and environment, its output going to ``out``; put back after."""
    cwd, env = os.getcwd(), dict(os.environ)
    saved = os.dup(1), os.dup(2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    fd = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, was in zip((1, 2), saved):
            os.dup2(was, fd)
            os.close(was)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)


def child(request: dict) -> None:
    """The forked run: the ``dbt`` script's own line, then the interpreter's exit handlers
    (dbt's log files, multiprocessing's semaphores) and out, without tearing down every module
    (a second, as long as the run itself)."""
    code = 2
    try:
        null = os.open(os.devnull, os.O_RDONLY)  # not the requests: a run reads no input
        os.dup2(null, 0)
        os.close(null)
        with placed(request):
            from dbt.cli.main import cli

            sys.argv = ["dbt", *request["args"]]
            try:
                sys.exit(cli())
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def threads() -> int:
    """This process's threads, native ones included (Linux)."""
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def in_parent(request: dict) -> int:
    """A parse in this process, without dbt's static parser: its native code (dbt_extractor)
    leaves threads running, and a child forked from a process with threads can wait forever on
    a lock one of them held (it hung in the static parser)."""
    from dbt.cli.main import dbtRunner

    assert request["args"][0] == "parse", "only a parse runs in the parent"
    with placed(request):
        ok = dbtRunner().invoke([*request["args"], "--no-static-parser"]).success
    assert threads() == 1, f"the parse left {threads() - 1} threads: no fork is safe after it"
    return 0 if ok else 1


def main() -> None:
    warm()
    assert threads() == 1, "importing dbt started threads: no fork is safe after it"
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("warm"):
            rc = in_parent(request)
        else:
            pid = os.fork()
            if pid == 0:
                child(request)
            rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(json.dumps({"rc": rc}), flush=True)


if __name__ == "__main__":
    main()
