"""A wheel of this checkout, installed into a fresh virtual environment, as a user installs it.

The wheel is built from the files git tracks (what a clean clone holds, with this checkout's
edits), so anything the package needs but the wheel would drop is found here.  The environment
gets loomdb's dependencies from the package index (pip's cache makes that quick).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd: list[str], cwd: Path | None = None) -> str:
    """Run ``cmd``; its stdout, or a RuntimeError with the end of its output."""
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def tracked_copy(target: Path) -> Path:
    """The files git tracks, as they are in this checkout, copied into ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = REPO / name.decode()
        if source.is_file():
            dest = target / name.decode()
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
    return target


def build_wheel(out: Path) -> Path:
    """``pip wheel`` of a tracked copy; returns the wheel's path."""
    with tempfile.TemporaryDirectory(prefix="loomdb-clean-") as scratch:
        clean = tracked_copy(Path(scratch) / "loomdb")
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(clean)])
    return next(out.glob("loomdb-*.whl"))


def wheel_venv(where: Path) -> Path:
    """A fresh venv at ``where`` with the wheel (and its dependencies) installed; its python."""
    wheel = build_wheel(where / "dist")
    run([sys.executable, "-m", "venv", str(where / "venv")])
    python = where / "venv" / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
    return python
