"""A sweep stopped while every BMC is being read says so in one line, and nothing else.

The example site's 31 lab BMCs answer in 300 ms a request, so that all of them are mid-read when the
command gets SIGTERM (as `jobs cancel`, systemd and `timeout` send it), in one process and in two. Before:
exit 130 in silence (typer turned the interrupt into its own exit 130), and in one process thousands of
lines of tracebacks ("unhandled exception during asyncio.run() shutdown ... Connector is closed": a BMC's
readers outlived its read, and its logout met the connector the sweep had closed). Now: exit 130,
`error: interrupted` as the one line on stderr, the run interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests_helpers_bmc import lab_up, selected_engine  # (path set in conftest)

FLEETCTL = Path(sys.executable).parent / "fleetctl"

pytestmark = pytest.mark.slow


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--no-hosts")
    assert r.code == 0, r.err
    assert cli("lab", "fault", "*", "--set", "latency_ms=300").code == 0
    yield
    cli("lab", "down")


def _run_of(pid: int) -> tuple[int, str] | None:
    from sqlalchemy import text

    with selected_engine().connect() as c:
        row = c.execute(text("SELECT id, state FROM sweep_run WHERE pid = :p ORDER BY id DESC"), {"p": pid}).first()
    return (int(row[0]), str(row[1])) if row is not None else None


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_sweep_stopped_mid_read_says_interrupted_in_one_line(lab, processes: str) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen([str(FLEETCTL), "sweep", "all", "--processes", processes, "--no-publish", "--retries", "0"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _run_of(proc.pid) is None and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert _run_of(proc.pid) is not None, "the sweep did not open its run"
        time.sleep(2.5)  # every BMC logged in and mid-read (32 requests at 300 ms, 2 at a time: about 5 s each)
        assert proc.poll() is None, "the sweep ended before it was stopped: the test reads nothing mid-flight"
        os.kill(proc.pid, signal.SIGTERM)
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert err.strip().splitlines() == ["error: interrupted"], err[-3000:]
    assert _run_of(proc.pid) is not None and _run_of(proc.pid)[1] == "interrupted"  # type: ignore[index]
