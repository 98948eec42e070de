"""Issue #24 item 3: `fleetctl sweep --processes N` against the lab: the same verdicts, and workers that stop.

- The lab's fault set (tests/e2e/test_sweep_faults.py's, less the flapping port, whose state depends on where in its
  period a sweep reads it) swept by one process and by two, each from the same store (two copies of the lab's fleet
  taken after the baseline sweep): the same findings, field for field.
- A worker process SIGKILLed mid-sweep: its shard (and the other worker's, which the pool tears down with it) is read
  again by a new worker, the run finishes with one verdict per target, and no worker is left.
- The command SIGTERMed mid-sweep: its workers stop (none is left running), what they recorded stays, the run is
  `interrupted`, exit 130.

SIGKILL and SIGTERM on SQLite and PostgreSQL (the latter skips where no server is reachable).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import lab_up, selected_engine  # (path set in conftest)

from tests.conftest import Result, run_cli
from tests.e2e.test_sweep_faults import FAST, FAULTS, REBOOTED, SITE

FLEETCTL = Path(sys.executable).parent / "fleetctl"
FLAPPING = "leaf-tyo1-r11-a"

pytestmark = pytest.mark.slow


def cli(*args: str) -> Result:
    return run_cli(*args)


def _use(env: dict[str, str], mp: pytest.MonkeyPatch) -> None:
    from fleetctl.store import reset_engines

    for k, v in env.items():
        mp.setenv(k, v)
    reset_engines()


def _copy(src: str, dst: Path) -> str:
    """A consistent copy of a SQLite store (its WAL included), as sqlite3's backup makes it."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return str(dst)


def _findings(env: dict[str, str], mp: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    _use(env, mp)
    r = cli("sweep", "show", "-o", "json")
    assert r.code == 0, r.err
    return sorted(json.loads(r.out), key=lambda f: (f["target"], f["check"], f["subject"]))


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Result, Result, list[dict[str, Any]], list[dict[str, Any]]]]:
    """The faulty fleet swept with --processes 1 and with --processes 2, each from its own copy of one store."""
    root = tmp_path_factory.mktemp("sweep-processes")
    env = {"FLEETCTL_LAB_DIR": str(root / "lab"), "FLEETCTL_DATA_DIR": str(root / "data"),
           "FLEETCTL_DB": str(root / "fleet.db"), "FLEETCTL_ACTOR": "tester@ci"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        _use(env, mp)
        r = lab_up(cli, mp, "--site", str(SITE), "--no-hosts")
        assert r.code == 0, r.err
        env["FLEETCTL_DB"] = os.environ["FLEETCTL_DB"]
        try:
            # Up for a day, as a real switch: the reboot below then makes sysUpTime go down, whatever the sweeps take
            # (a switch up for seconds only, rebooted, could look up as long again by the time a slow sweep reads it).
            assert cli("lab", "fault", REBOOTED, "--set", "uptime_s=86400").code == 0
            base = cli("sweep", "--no-publish", *FAST)
            assert base.code == 1, base.err  # the design's warnings, new
            for target, (args, _, _) in FAULTS.items():
                if target not in (REBOOTED, FLAPPING):
                    assert cli("lab", "fault", target, *args).code == 0, target
            assert cli("lab", "fault", REBOOTED, *FAULTS[REBOOTED][0]).code == 0
            time.sleep(3)  # port error rates are counter deltas between sweeps
            one = {**env, "FLEETCTL_DB": _copy(env["FLEETCTL_DB"], root / "one.db")}
            two = {**env, "FLEETCTL_DB": _copy(env["FLEETCTL_DB"], root / "two.db")}
            _use(one, mp)
            r1 = cli("sweep", "--no-publish", "--processes", "1", *FAST)
            f1 = _findings(one, mp)
            _use(two, mp)
            r2 = cli("sweep", "--no-publish", "--processes", "2", *FAST)
            f2 = _findings(two, mp)
            yield r1, r2, f1, f2
        finally:
            _use(env, mp)
            cli("lab", "down")


# Rates, the clock's skew and an uptime are measured at the moment each sweep reads: their figures (not their status) differ.
MEASURED = {"port.errors", "bmc.clock", "switch.rebooted"}


def _comparable(f: dict[str, Any]) -> tuple[Any, ...]:
    message = f["message"] if f["check"] not in MEASURED else ""
    return f["target"], f["check"], f["subject"], f["status"], f["new"], f["ack_id"], message


def test_two_processes_find_what_one_process_finds_on_the_fault_set(two_sweeps: Any) -> None:
    r1, r2, f1, f2 = two_sweeps
    assert r1.code == r2.code == 5, (r1.code, r2.code, r1.err, r2.err)
    assert len(f1) > 20  # every fault found something
    assert [_comparable(f) for f in f1] == [_comparable(f) for f in f2]
    # What the command printed counts the same (the workers' shards merged into the run's report): by status, then new,
    # resolved and persisting.
    said = [[ln.split(" s: ", 1)[-1] for ln in r.out.splitlines() if ln.startswith(("sweep ", "since the last sweep"))] for r in (r1, r2)]
    assert len(said[0]) == 2 and said[0] == said[1], said


# --- kill and interrupt -------------------------------------------------------------------------------------------

RACK = "rack-12"


@pytest.fixture
def lab(example_loaded: str, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_db_args: list[str]) -> Iterator[list[str]]:
    """The example site's lab on the test's backend; rack-12's servers, half answering within a second, half slowly."""
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--no-hosts")
    assert r.code == 0, r.err
    servers = [s["name"] for s in json.loads(cli("server", "list", "--rack", RACK, "-o", "json").out)]
    assert len(servers) > 10, servers
    # Fast ones are recorded early (the recorder writes after 2 s), the slow ones keep both workers busy after that.
    assert cli("lab", "fault", *servers[0::2], "--set", "latency_ms=100").code == 0
    assert cli("lab", "fault", *servers[1::2], "--set", "latency_ms=900").code == 0
    yield servers
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    cli("lab", "down")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _workers(pid: int) -> list[int]:
    """The sweep's worker processes (multiprocessing's spawn children; not its resource tracker)."""
    return [k for k in _children(pid) if "spawn_main" in _cmdline(k)]


def _alive(pid: int, was: str) -> bool:
    """Whether the process ``pid`` still runs (a zombie is gone; a pid reused by another command is not the same)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and _cmdline(pid) == was


def _run_of(pid: int) -> tuple[int, str] | None:
    from sqlalchemy import text

    with selected_engine().connect() as c:
        row = c.execute(text("SELECT id, state FROM sweep_run WHERE pid = :p ORDER BY id DESC"), {"p": pid}).first()
    return (int(row[0]), str(row[1])) if row else None


def _recorded(run_id: int) -> list[tuple[str, str]]:
    from sqlalchemy import text

    with selected_engine().connect() as c:
        return [(r[0], r[1]) for r in c.execute(text("SELECT kind, name FROM sweep_target WHERE run_id = :r"), {"r": run_id})]


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(FLEETCTL), "sweep", RACK, "--no-publish", "--processes", "2", *args], env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _wait_for_rows(proc: subprocess.Popen[str], need_workers: int = 2) -> tuple[int, list[int], list[tuple[str, str]]]:
    """(run id, worker pids, rows) once both workers run and the run has rows recorded."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the sweep ended before it could be stopped: {proc.communicate()[1][-2000:]}"
        workers = _workers(proc.pid)
        run = _run_of(proc.pid)
        rows = _recorded(run[0]) if run else []
        if len(workers) >= need_workers and rows:
            assert run is not None
            return run[0], workers, rows
        time.sleep(0.05)
    raise AssertionError(f"no rows recorded by two workers in time: workers {_workers(proc.pid)}, run {_run_of(proc.pid)}")


def test_a_worker_killed_mid_sweep_has_its_shard_read_again_and_the_run_finishes(lab: list[str]) -> None:
    proc = _start("--timeout", "60", "--request-timeout", "30")
    try:
        run_id, workers, _ = _wait_for_rows(proc)
        cmd = {w: _cmdline(w) for w in workers}
        os.kill(workers[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode in (0, 1), (proc.returncode, out, err[-3000:])  # rack-12's design: its GPU servers' warnings
    assert "Traceback" not in err, err
    assert _run_of(proc.pid) == (run_id, "finished")
    rows = _recorded(run_id)
    switches = [s["name"] for s in json.loads(run_cli("switch", "list", "--rack", RACK, "-o", "json").out)]
    # one verdict per target: the lost attempts' rows were replaced, none is missing or twice
    assert sorted(rows) == sorted([("server", n) for n in lab] + [("switch", n) for n in switches])
    from sqlalchemy import text

    with selected_engine().connect() as c:
        counts = c.execute(text("SELECT counts FROM sweep_run WHERE id = :r"), {"r": run_id}).scalar()
    counts = json.loads(counts) if isinstance(counts, str) else counts
    assert sum(counts.values()) == len(rows), counts
    assert not [w for w in workers if _alive(w, cmd[w])]  # the new workers ended with the run, the old ones before


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_command_stopped_mid_sweep_stops_its_workers_and_keeps_what_they_recorded(lab: list[str], sig: int) -> None:
    hung = lab[1]  # a slow one made hung: the sweep cannot finish on its own within the test
    assert run_cli("lab", "fault", hung, "--set", "hang=true").code == 0
    proc = _start("--timeout", "120", "--request-timeout", "110", "--retries", "0")
    try:
        run_id, workers, _ = _wait_for_rows(proc)
        cmd = {w: _cmdline(w) for w in workers}
        time.sleep(1.0)  # (more rows, written by both workers; the hung BMC keeps its worker busy)
        seen = _recorded(run_id)
        os.kill(proc.pid, sig)  # as `jobs cancel`, systemd and `timeout` do (SIGTERM), or Ctrl-C at a terminal (SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, (proc.returncode, out, err[-3000:])
    assert "Traceback" not in err, err
    assert not [w for w in workers if _alive(w, cmd[w])], "a worker outlived the command"
    assert _run_of(proc.pid) == (run_id, "interrupted")
    after = _recorded(run_id)
    assert set(seen) <= set(after) and len(after) == len(set(after))  # what the workers recorded stays, once
    assert ("server", hung) not in after
    from sqlalchemy import text

    with selected_engine().connect() as c:
        counts = c.execute(text("SELECT counts FROM sweep_run WHERE id = :r"), {"r": run_id}).scalar()
    counts = json.loads(counts) if isinstance(counts, str) else counts
    assert sum(counts.values()) == len(after), counts  # the interrupted run counts what its workers recorded
