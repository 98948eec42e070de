"""Start a lab daemon detached and wait until it says it is ready: the BMC/switch lab's and the Kubernetes stand-in's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetctl.errors import FleetError


def spawn_and_wait(argv: list[str], log_file: Path, ready: Callable[[int], dict[str, Any] | None], *, what: str,
                   timeout: float) -> dict[str, Any]:  # fmt: skip
    """Run ``argv`` in a session of its own (it outlives the CLI and is not killed by its ^C), its output into
    ``log_file``, and poll ``ready(pid)`` until it gives the daemon's status (its state file names that pid).

    Raises:
        FleetError: it exited first (its log's last lines said), or it was not ready within ``timeout`` (then stopped).
    """
    logf = open(log_file, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True, close_fds=True)
    finally:
        logf.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = ready(proc.pid)
        if status is not None:
            return status
        rc = proc.poll()
        if rc is not None:
            tail = log_file.read_text(errors="replace").strip().splitlines()[-3:]
            raise FleetError(f"the {what} exited with status {rc}: {' | '.join(tail)}")
        time.sleep(0.05)
    proc.terminate()
    raise FleetError(f"the {what} was not ready within {timeout:.0f}s (see {log_file})")


def _gone(pid: int, ours: Callable[[int], bool]) -> bool:
    """Whether ``pid`` has ended (reaped when it is our child: a daemon this process started) or is no longer ours."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return not ours(pid)


def stop_detached(pid: int, ours: Callable[[int], bool], *, timeout: float) -> bool:
    """SIGTERM a daemon ``spawn_and_wait`` started, SIGKILL it if it still runs after ``timeout``; True when it had to be
    killed. ``ours(pid)`` says the pid is still that daemon (a pid reused by another process is never signalled again)."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid, ours):
            return False
        time.sleep(0.05)
    if _gone(pid, ours):
        return False
    os.kill(pid, signal.SIGKILL)
    return True
