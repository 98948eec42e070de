"""Issue #25 item 1: a problem an interrupted sweep saw first is still NEW at the next finished sweep.

A real `fleetctl sweep` process against the lab: a healthy sweep first (the
baseline), then a PSU failure set on one server and another server's BMC
hung (so the sweep cannot finish), and the sweep stopped with SIGTERM (as
`jobs cancel`, systemd and `timeout` do) or SIGKILL at the moment its
PSU problem row is first written. The next sweep, which finishes, must call
that problem new (`new=true`, counted in "N new", exit 5 as for a new
critical), and `sweep diff` must agree. On SQLite and on PostgreSQL (the
latter skips where no server is reachable).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import lab_up, selected_engine, serve  # (path set in conftest)

PSU = "mn-tyo1-r12-01"
HUNG = "mn-tyo1-r12-02"
FLEETCTL = Path(sys.executable).parent / "fleetctl"
FAST = ["--timeout", "20", "--request-timeout", "8"]

pytestmark = pytest.mark.slow


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--no-hosts", *serve([PSU, HUNG]))
    assert r.code == 0, r.err
    yield
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    cli("lab", "down")


def _problem_rows(pid: int) -> tuple[int, str, int] | None:
    """(run id, run state, PSU finding rows) of the sweep run of process ``pid``; None before its run row is written."""
    from sqlalchemy import text

    with selected_engine().connect() as c:
        row = c.execute(text("SELECT id, state FROM sweep_run WHERE pid = :p ORDER BY id DESC"), {"p": pid}).first()
        if row is None:
            return None
        n = c.execute(text("SELECT count(*) FROM finding WHERE run_id = :r AND target = :t"), {"r": row[0], "t": PSU}).scalar()
    return int(row[0]), str(row[1]), int(n or 0)


def _json(cli: Any, *args: str) -> Any:
    r = cli(*args, "-o", "json")
    assert r.code == 0, (args, r.code, r.err)
    return json.loads(r.out)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_problem_an_interrupted_sweep_saw_first_is_new_at_the_next_finished_sweep(lab, cli, sig) -> None:  # type: ignore[no-untyped-def]
    base = cli("sweep", PSU, HUNG, *FAST)
    assert base.code in (0, 1), base.err  # the healthy baseline (by design at most a warning)
    assert not [f for f in _json(cli, "sweep", "show") if f["target"] == PSU]
    # The PSU server answers slowly: its verdict comes after the recorder's first flush interval (2 s), so its
    # problem rows are written while the hung BMC keeps the sweep running.
    assert cli("lab", "fault", PSU, "--set", "psu_failed=true", "--set", "latency_ms=800").code == 0
    assert cli("lab", "fault", HUNG, "--set", "hang=true").code == 0
    proc = subprocess.Popen([str(FLEETCTL), "sweep", PSU, HUNG, "--timeout", "120", "--request-timeout", "110", "--retries", "0"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        got = None
        while time.monotonic() < deadline:
            got = _problem_rows(proc.pid)
            if got is not None and got[2] > 0:
                break
            assert proc.poll() is None, f"the sweep ended before its problem was written: {proc.stderr.read() if proc.stderr else ''}"
            time.sleep(0.05)
        assert got is not None and got[2] > 0, got
        os.kill(proc.pid, sig)  # the moment the PSU's problem is first written
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    run_id = got[0]
    if sig == signal.SIGTERM:  # stopped as Ctrl-C is: the run ends interrupted at once, exit 130, no traceback
        assert proc.returncode == 130, (proc.returncode, out, err)
        assert "Traceback" not in err, err
        assert _problem_rows(proc.pid)[:2] == (run_id, "interrupted")  # type: ignore[index]
    else:
        assert proc.returncode == -signal.SIGKILL
    seen_then = {(f["check"], f["subject"]) for f in _json(cli, "sweep", "show", str(run_id)) if f["target"] == PSU}
    assert any(check == "psu" for check, _ in seen_then), seen_then

    assert cli("lab", "fault", HUNG, "--clear").code == 0
    assert cli("lab", "fault", PSU, "--set", "latency_ms=0").code == 0
    r = cli("sweep", PSU, HUNG, *FAST)
    assert r.code == 5, (r.code, r.out, r.err)  # a new critical finding, as if the interrupted run had never been
    findings = _json(cli, "sweep", "show")
    psu = [f for f in findings if f["target"] == PSU]
    assert psu and all(f["new"] for f in psu), [(f["check"], f["new"]) for f in psu]
    assert {(f["check"], f["subject"]) for f in psu} >= seen_then
    said = re.search(r"since the last sweep: (\d+) new", r.out)
    assert said and int(said.group(1)) == sum(1 for f in findings if f["new"]) >= len(psu), r.out
    runs = {x["run"]: x["state"] for x in _json(cli, "sweep", "list")}
    assert runs[run_id] == "interrupted" and runs[max(runs)] == "finished", runs
    d = _json(cli, "sweep", "diff")  # the latest finished run against the one before it: the baseline
    assert d["before"] < run_id < d["after"], d
    assert {(f["target"], f["check"], f["subject"]) for f in d["new"]} == {(f["target"], f["check"], f["subject"]) for f in findings
                                                                          if f["new"]}  # fmt: skip
    assert not [f for f in d["persisting"] if f["target"] == PSU]
