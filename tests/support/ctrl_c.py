"""Ctrl-C sent to a process once it says it is working: what the interrupt tests share."""

from __future__ import annotations

import signal
import subprocess

import pytest


def ctrl_c_once(args: list[str], marker: str) -> tuple[int, str, str]:
    """Run ``args``, send SIGINT once a line of its stderr holds ``marker`` (it is working:
    no timing assumed), and return its exit code, stdout and the rest of its stderr; a
    process still running a minute later fails the test."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        assert p.stderr is not None
        for line in p.stderr:
            if marker in line:
                break
        p.send_signal(signal.SIGINT)
        try:
            out, rest = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail(f"Ctrl-C did not stop {args[:3]} within a minute")
    return p.returncode, out, rest
