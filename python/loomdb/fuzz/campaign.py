"""``loomdb fuzz``: coverage-guided fuzzing of loomdb's decoders, one child process per decoder.

No paper section: loomdb's own robustness check of the codecs it stores in database rows.

    loomdb fuzz [DECODER ...] [--runs N] [--timeout SECONDS] [--max-len BYTES]
                [--rss-limit-mb MB] [--artifacts DIR]

Each DECODER (default: all of dense, toc, weave, sketch, pcr) is fuzzed by atheris, i.e.
libFuzzer, for ``--runs`` inputs (default 1,000,000), starting from valid encodings of small
matrices (``loomdb.fuzz.seeds``) and checked by ``loomdb.fuzz.targets``: every input must be
rejected with ``LoomFormatError`` or decode to something the products agree with.  libFuzzer
takes its process over and stops at the first finding, so each campaign runs in a child
(``loomdb.fuzz.child``); a child that dies of a signal is a crash.  Per decoder the report gives
the inputs run, the exec rate, and the findings: crashes (a deadly signal, or memory past
``--rss-limit-mb``), hangs (an input running past ``--timeout`` seconds) and exceptions other
than ``LoomFormatError``.  Each finding's input is saved under ``--artifacts`` (with the child's
log) and named in the report; the exit status is 1 when anything was found.

Needs atheris: ``pip install 'loomdb[fuzz]'``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import loomdb
from loomdb.errors import LoomOptionError, LoomStateError
from loomdb.fuzz.tally import Tally

DECODERS = ("dense", "toc", "weave", "sketch", "pcr")
TIMEOUT_EXIT, ERROR_EXIT = 70, 77  # libFuzzer's exit codes, set explicitly below


@dataclass
class Result:
    decoder: str
    runs: int
    decoded: int  # inputs that decoded (the rest were rejected with LoomFormatError)
    seconds: float
    crashes: int = 0
    hangs: int = 0
    exceptions: int = 0
    detail: str = ""  # what was found, one line
    saved: Path | None = None  # the offending input

    @property
    def findings(self) -> int:
        return self.crashes + self.hangs + self.exceptions

    @property
    def rate(self) -> float:
        return self.runs / self.seconds if self.seconds > 0 else 0.0


def require_atheris() -> None:
    if importlib.util.find_spec("atheris") is None:
        raise LoomStateError(
            "loomdb fuzz needs atheris (libFuzzer for Python), which is not installed",
            hint="pip install 'loomdb[fuzz]'",
        )


def fuzz_one(
    decoder: str,
    runs: int,
    timeout: int = 10,
    max_len: int = 4096,
    rss_limit_mb: int = 2048,
    artifacts: Path = Path("loomdb-fuzz-findings"),
) -> Result:
    """One decoder's campaign in a child process, and what it found."""
    require_atheris()
    with tempfile.TemporaryDirectory(prefix=f"loomdb-fuzz-{decoder.replace(':', '-')}-") as tmp:
        work = Path(tmp)
        flags = [
            f"-runs={runs}",
            f"-max_len={max_len}",
            f"-timeout={timeout}",
            f"-rss_limit_mb={rss_limit_mb}",
            f"-timeout_exitcode={TIMEOUT_EXIT}",
            f"-error_exitcode={ERROR_EXIT}",
            f"-artifact_prefix={work}/",
            "-print_final_stats=1",
            "-keep_seed=1",  # every seed reaches a stage; keep them though coverage can't tell
            "-len_control=0",  # mutate up to --max-len from the start
        ]
        command = [sys.executable, "-m", "loomdb.fuzz.child", decoder, str(work), str(max_len)]
        with open(work / "log.txt", "wb") as log:
            done = subprocess.run(
                command + flags, stdout=log, stderr=subprocess.STDOUT, env=_child_env()
            )
        return _result(decoder, done.returncode, work, artifacts)


def _child_env() -> dict[str, str]:
    """The environment, with this loomdb first on the child's path."""
    here = str(Path(loomdb.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else "")}


def _result(decoder: str, code: int, work: Path, artifacts: Path) -> Result:
    runs, decoded, seconds, last = Tally.read(work / "tally")
    result = Result(decoder, runs, decoded, seconds)
    log = (work / "log.txt").read_text(errors="replace")
    if code == 0 and not (work / "exception.txt").exists():
        return result
    if (work / "exception.txt").exists():
        result.exceptions = 1
        trace = (work / "exception.txt").read_text().strip().splitlines()
        result.detail = f"exception: {trace[-1] if trace else '?'}"
    elif code == TIMEOUT_EXIT:
        result.hangs = 1
        result.detail = "hang: an input ran past the per-input timeout"
    else:
        result.crashes = 1
        result.detail = _crash_detail(code, log)
    artifact = next(iter(sorted(work.glob("crash-*")) + sorted(work.glob("timeout-*"))), None)
    data = artifact.read_bytes() if artifact else last
    kind = result.detail.split(":")[0].split()[0]
    name = f"{decoder.replace(':', '-')}-{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
    artifacts.mkdir(parents=True, exist_ok=True)
    result.saved = artifacts / f"{name}.bin"
    result.saved.write_bytes(data)
    shutil.copyfile(work / "log.txt", artifacts / f"{name}.log")
    return result


def _crash_detail(code: int, log: str) -> str:
    if code < 0:
        return f"crash: killed by signal {-code}"
    if "out-of-memory" in log:
        return "crash: out of memory (past --rss-limit-mb)"
    if "deadly signal" in log:
        return "crash: a deadly signal"
    tail = [line for line in log.splitlines() if line.strip()][-1:] or ["?"]
    return f"crash: the child exited with status {code} ({tail[0][:120]})"


def report(results: list[Result]) -> str:
    lines = [
        f"{'decoder':<10} {'runs':>11} {'decoded':>8} {'exec/s':>8} {'crashes':>8} {'hangs':>6} "
        f"{'exceptions':>11}"
    ]
    for r in results:
        lines.append(
            f"{r.decoder:<10} {r.runs:>11,} {r.decoded / max(r.runs, 1):>8.1%} {r.rate:>8,.0f} "
            f"{r.crashes:>8} {r.hangs:>6} {r.exceptions:>11}"
        )
    for r in results:
        if r.findings:
            lines.append(f"{r.decoder}: {r.detail}; input saved to {r.saved}")
    return "\n".join(lines)


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        (__doc__ or "").split("\n\n", 1)[0] + "\n\n" + (__doc__ or "").split("\n\n", 3)[-1]
    )
    p.formatter_class = _Help
    p.add_argument(
        "decoders",
        nargs="*",
        metavar="DECODER",
        help=f"decoders to fuzz: {', '.join(DECODERS)} (default all), or module:function",
    )
    p.add_argument("--runs", type=int, metavar="N", default=1_000_000, help="inputs per decoder")
    p.add_argument("--timeout", type=int, metavar="SECONDS", default=10, help="per input")
    p.add_argument("--max-len", type=int, metavar="BYTES", default=4096, help="largest input")
    p.add_argument(
        "--rss-limit-mb", type=int, metavar="MB", default=2048, help="memory past it is a crash"
    )
    p.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        default=Path("loomdb-fuzz-findings"),
        help="where offending inputs are saved",
    )


def main(args: argparse.Namespace) -> int:
    for name in ("runs", "timeout", "max_len", "rss_limit_mb"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise LoomOptionError(
                f"{flag} must be at least 1; got {getattr(args, name)}",
                hint=f"give {flag} a whole number of 1 or more, or leave it out for its default",
            )
    for decoder in args.decoders:
        if decoder not in DECODERS and ":" not in decoder:
            raise LoomOptionError(
                f"unknown decoder {decoder!r}",
                hint=f"choose from {', '.join(DECODERS)}, or give module:function of a decoder "
                "of your own",
            )
    require_atheris()
    results = []
    for decoder in args.decoders or DECODERS:
        print(f"fuzzing {decoder}: {args.runs:,} runs…", file=sys.stderr, flush=True)
        results.append(
            fuzz_one(
                decoder, args.runs, args.timeout, args.max_len, args.rss_limit_mb, args.artifacts
            )
        )
    print(report(results))
    return 1 if any(r.findings for r in results) else 0
