"""Start a lab daemon detached and wait until it says it is ready: the BMC/switch lab's and the Kubernetes stand-in's."""

from __future__ import annotations

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
