"""`fleetctl firmware update` on the scale-out engine: a Temporal dev server, `fleetctl worker` processes per site,
lab BMCs, the store on PostgreSQL.

The same campaign runs in process and on Temporal and must give the same report, exit code, lab counters and
events; a worker killed with SIGKILL in the middle of a flash leaves the run to the other worker of its site,
which flashes no component twice; no workflow history holds the lab's BMC password.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, selected_engine  # (path set in conftest)

pytest.importorskip("temporalio", reason="the scale-out engine's SDK (pip install 'fleetctl[temporal]')")

import scaleout_helpers as h  # (path set in conftest)
from scaleout_helpers import BIN

lab, lab_timings, temporal, workers = h.lab, h.lab_timings, h.temporal, h.workers  # the fixtures

pytestmark = [
    *h.TEMPORAL_MARKS,
]

BASE = "http://127.0.0.1:9/fw"  # SimpleUpdate images are never fetched by the lab; the name says what they are
MN1, MN2, GPU, OSA = "mn-tyo1-r12-01", "mn-tyo1-r12-02", "gpu-tyo1-r12-17", "mn-osa1-r12-01"
BOARDS = [f"mncore2_slot{i}_mncore2-board" for i in range(4)]
SEEN: dict[str, Any] = {}  # engine -> what its campaign gave, compared once both ran


def _baseline(model: str, component: str, version: str) -> None:
    from sqlalchemy import text

    eng = selected_engine()
    with eng.begin() as c:
        mid = c.execute(text("SELECT id FROM hardware_model WHERE name = :m"), {"m": model}).scalar_one()
        c.execute(text("UPDATE firmware_baseline SET version = :v WHERE model_id = :m AND component = :c"),
                  {"v": version, "m": mid, "c": component})  # fmt: skip
    eng.dispose()


def _events(cli, *actions: str) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """(action, object, detail) of the audit log's events of those actions, the job numbers masked, oldest first."""
    out = []
    for e in json.loads(cli("events", "list", "--limit", "1000", "--output", "json").out):
        if e["action"] in actions:
            out.append((e["action"], e["object"], re.sub(r'job"?:? ?\d+', "job N", e["detail"])))
    return sorted(out)


_histories = h.histories


def _no_password_in_histories(address: str) -> dict[str, dict[str, Any]]:
    password = (Path(os.environ["FLEETCTL_LAB_DIR"]) / "credential").read_text().split()[1]
    histories = asyncio.run(_histories(address))
    dumped = h.history_text(histories)  # the payloads decoded: the password would be in them, not in their base64
    assert "fleetctl.run.unit" in dumped and any(w.startswith("firmware:") for w in histories)  # the histories were read
    assert password not in dumped
    return histories


def _completed_by(history: dict[str, Any], activity: str) -> tuple[int, int]:
    """(attempt, worker pid) of the activity's attempt that ended (Temporal records the started event of that one only)."""
    scheduled = {}
    for ev in history["events"]:
        if attrs := ev.get("activityTaskScheduledEventAttributes"):
            scheduled[ev["eventId"]] = attrs["activityType"]["name"]
        if (attrs := ev.get("activityTaskStartedEventAttributes")) and scheduled[attrs["scheduledEventId"]] == activity:
            return int(attrs["attempt"]), int(attrs["identity"].partition("@")[0])
    raise AssertionError(f"no {activity} in the history")


@pytest.mark.parametrize("engine", ["process", "temporal"])
def test_the_same_campaign_on_both_engines(lab, cli, request, monkeypatch, engine):  # type: ignore[no-untyped-def]
    if engine == "temporal":
        w = request.getfixturevalue("workers")
        w.start("tyo1-a", "tyo1")
        w.start("osa1-a", "osa1")
        w.wait_ready()
    else:
        monkeypatch.delenv("FLEETCTL_TEMPORAL", raising=False)
    _baseline("mn-server-2", "BIOS", "1.9.0")
    assert cli("lab", "fault", MN2, "--set", "firmware_fail=1").code == 0
    # Waves: the canary MN1; MN2 (fails) and GPU (its downgrades refused); OSA, halted by the threshold (1).
    t0 = time.monotonic()
    r = cli("firmware", "update", MN1, MN2, GPU, OSA, "--image-base", BASE, "--canary", "1", "--batch", "2", "--poll", "0.3",
            "--output", "json")  # fmt: skip
    took = time.monotonic() - t0
    assert r.out.strip(), (r.code, r.err)
    rows = [{k: v for k, v in x.items() if k != "fleet"} for x in json.loads(r.out)]  # (each test has its own database)
    got = {
        "code": r.code,
        "rows": rows,
        "flashed": {n: counters(lab, n)["firmware_by_component"] for n in (MN1, MN2, GPU, OSA)},
        "failures": {n: counters(lab, n)["firmware_failures"] for n in (MN1, MN2, GPU, OSA)},
        "events": _events(cli, "firmware.update", "firmware.failed"),
    }
    assert got["code"] == 1, (rows, r.err)
    by = {(x["server"], x["component"]): x for x in rows}
    assert (by[(MN1, "BIOS")]["result"], by[(MN1, "BIOS")]["after"]) == ("updated", "1.9.0")
    assert by[(MN2, "BIOS")]["result"] == "failed" and "Installing BIOS 1.9.0 failed" in by[(MN2, "BIOS")]["message"]
    assert {x["result"] for x in rows if x["server"] == GPU} == {"refused"}
    assert [(x["wave"], x["result"], x["message"]) for x in rows if x["server"] == OSA] == [
        (2, "not attempted", "halted: 1 server(s) failed, threshold 1")]  # fmt: skip
    assert got["flashed"] == {MN1: {"BIOS": 1}, MN2: {}, GPU: {}, OSA: {}}
    assert got["failures"] == {MN1: 0, MN2: 1, GPU: 0, OSA: 0}
    assert [e[:2] for e in got["events"]] == [("firmware.failed", f"server {MN2}"), ("firmware.update", f"server {MN1}")]
    assert "BIOS 1.8.2 -> 1.9.0 (baseline 1.9.0; job N; SimpleUpdate)" in got["events"][1][2]
    # The journal: the campaign's job and a firmware.update job per wave that ran, as in process.
    jobs = [j for j in json.loads(cli("jobs", "list", "--output", "json").out) if j["kind"].startswith("firmware.")]
    assert sorted(j["kind"] for j in jobs) == ["firmware.campaign", "firmware.update", "firmware.update"], jobs
    eng = selected_engine()
    with eng.connect() as c:
        from sqlalchemy import text

        assert c.execute(text("SELECT count(*) FROM server WHERE reservation IS NOT NULL")).scalar() == 0  # locks released
    eng.dispose()
    # Outside the maintenance window with --no-wait: nothing flashed, the wave not attempted, exit 1.
    now = dt.datetime.now(dt.UTC)
    window = f"{now + dt.timedelta(hours=2):%H:%M}-{now + dt.timedelta(hours=3):%H:%M}"
    r = cli("firmware", "update", OSA, "--image-base", BASE, "--window", window, "--no-wait", "--output", "json")
    # (the window's text masked: the two engines' tests may start in different minutes)
    got["window"] = (r.code, [{k: v.replace(window, "W") if k == "message" else v for k, v in x.items() if k != "fleet"}
                              for x in json.loads(r.out)])  # fmt: skip
    assert got["window"][0] == 1 and [x["result"] for x in got["window"][1]] == ["not attempted"], got["window"]
    assert "outside the maintenance window" in got["window"][1][0]["message"]
    assert counters(lab, OSA)["firmware_flashes"] == 0
    # Staged (OnReset): the boards' images staged one by one, then one system reset activates them all.
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    r = cli("firmware", "update", MN1, "--image-base", BASE, "--apply-time", "on-reset", "--poll", "0.3", "--output", "json")
    staged = [{k: v for k, v in x.items() if k != "fleet"} for x in json.loads(r.out)]
    c = counters(lab, MN1)
    got["staged"] = (r.code, staged, {k: c[k] for k in ("firmware_staged", "firmware_by_component", "power_on", "power_off", "boots")})
    assert r.code == 0 and [x["component"] for x in staged] == BOARDS, (r.code, staged, r.err)
    assert all(x["result"] == "updated" and "activated by a system reset" in x["message"] for x in staged), staged
    assert c["firmware_staged"] == 4 and c["power_on"] == 1 and c["boots"] == 1, c
    assert c["firmware_by_component"] == {"BIOS": 1, **dict.fromkeys(BOARDS, 1)}, c
    if engine == "temporal":
        _no_password_in_histories(os.environ["FLEETCTL_TEMPORAL"])
    SEEN[engine] = got
    print(f"{engine}: {took:.1f} s")
    if len(SEEN) == 2:
        assert SEEN["process"] == SEEN["temporal"]
        for a, b in zip(SEEN["process"]["rows"], SEEN["temporal"]["rows"], strict=True):
            assert list(a) == list(b)  # the columns in the same order


def _running_flash(db: str, server: str) -> bool:
    """A flash's journal step is running with its task noted, after one flash succeeded: the BMC is flashing."""
    from sqlalchemy import create_engine, text

    eng = create_engine(db)
    try:
        with eng.connect() as c:
            rows = c.execute(text(
                "SELECT js.state, js.output FROM job_step js JOIN server s ON s.id = js.server_id "
                "WHERE s.name = :n AND js.name LIKE 'firmware.flash.%' ORDER BY js.id"), {"n": server}).all()  # fmt: skip
    finally:
        eng.dispose()
    return len(rows) >= 2 and rows[0][0] == "succeeded" and rows[-1][0] == "running" and '"task"' in (rows[-1][1] or "")


async def _flashing_worker(address: str, server: str) -> int:
    """The pid of the worker running the server's unit of the campaign (the activity of its child workflow ``firmware:<server>``;
    Temporal's identity of a worker is PID@HOST)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    desc = await client.get_workflow_handle(f"firmware:{server}").describe()
    [pending] = [a for a in desc.raw_description.pending_activities if a.activity_type.name == "fleetctl.run.unit"]
    return int(pending.last_worker_identity.partition("@")[0])


def test_a_worker_killed_mid_flash_leaves_the_run_to_the_other(lab, cli, temporal, workers):  # type: ignore[no-untyped-def]
    from fleetctl.config import database_url

    workers.start("tyo1-a", "tyo1")
    workers.start("tyo1-b", "tyo1")
    workers.wait_ready()
    _baseline("mn-server-2", "BIOS", "1.9.0")
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    t0 = time.monotonic()
    proc = subprocess.Popen([str(BIN / "fleetctl"), "firmware", "update", MN1, "--image-base", BASE, "--poll", "0.3", "--output", "json"],
                            env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while not _running_flash(database_url(), MN1):
        assert proc.poll() is None, f"the campaign ended before the kill point: {proc.communicate()}"
        assert time.monotonic() < deadline, ("the kill point was never reached", workers.logs())
        time.sleep(0.05)
    pid = asyncio.run(_flashing_worker(temporal.address, MN1))
    [name] = [n for n, p in workers.procs.items() if p.pid == pid]
    workers.procs[name].kill()  # SIGKILL: no goodbye to Temporal, the activity is lost with it
    workers.procs[name].wait()
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 0, (out, err, workers.logs())
    rows = json.loads(out)
    assert {x["result"] for x in rows} == {"updated"} and len(rows) == 5, rows
    assert sum("not flashed again" in (x["message"] or "") for x in rows) == 1, rows  # the flash in flight, settled
    c = counters(lab, MN1)
    assert c["firmware_flashes"] == 5 and c["firmware_by_component"] == {"BIOS": 1, **dict.fromkeys(BOARDS, 1)}, c
    assert len([e for e in _events(cli, "firmware.update") if e[1] == f"server {MN1}"]) == 5
    histories = _no_password_in_histories(temporal.address)
    attempt, survivor = _completed_by(histories[f"firmware:{MN1}"], "fleetctl.run.unit")
    assert attempt >= 2 and survivor != pid and survivor in {p.pid for p in workers.procs.values()}, (attempt, survivor, pid)
    print(f"killed {name} (pid {pid}); the campaign took {took:.1f} s")


def test_ctrl_c_detaches_and_a_cancel_closes_the_job(lab, cli, temporal, workers):  # type: ignore[no-untyped-def]
    from fleetctl.config import database_url

    workers.start("tyo1-a", "tyo1")
    workers.wait_ready()
    _baseline("mn-server-2", "BIOS", "1.9.0")
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    proc = subprocess.Popen([str(BIN / "fleetctl"), "firmware", "update", MN1, "--image-base", BASE, "--poll", "0.3", "--output", "json"],
                            env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while not _running_flash(database_url(), MN1):
        assert proc.poll() is None and time.monotonic() < deadline, (proc.poll(), workers.logs())
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # as Ctrl-C: the command detaches, the run goes on
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "detached: job" in err, (proc.returncode, out, err)
    wid = re.search(r"Temporal workflow (fleetctl-firmware-\w+)", err).group(1)  # type: ignore[union-attr]
    job = int(re.search(r"detached: job (\d+)", err).group(1))  # type: ignore[union-attr]

    async def status() -> str:
        from temporalio.client import Client

        d = await (await Client.connect(temporal.address)).get_workflow_handle(wid).describe()
        return str(d.status.name if d.status is not None else None)

    assert asyncio.run(status()) == "RUNNING"  # it went on without the command
    r = cli("jobs", "cancel", str(job), "--wait", "60", "--output", "json")
    doc = json.loads(r.out) if r.code == 0 else {}
    # the command returns once the job is interrupted *and* the workflow closed (the close comes a moment after)
    assert doc.get("state") == "interrupted" and doc.get("workflow_status_after") == "CANCELED", (r.code, r.out, r.err)
    assert asyncio.run(status()) == "CANCELED"
    from sqlalchemy import text

    eng = selected_engine()
    with eng.connect() as c:  # the parent closed the job (interrupted) and released the lock
        assert c.execute(text("SELECT state FROM job WHERE id = :j"), {"j": job}).scalar() == "interrupted"
        assert c.execute(text("SELECT count(*) FROM server WHERE reservation IS NOT NULL")).scalar() == 0
    eng.dispose()
    # A later run settles what the cancelled one left running and finishes: no component flashed twice.
    r = cli("firmware", "update", MN1, "--image-base", BASE, "--poll", "0.3", "--output", "json")
    assert r.code == 0, (r.out, r.err, workers.logs())
    c = counters(lab, MN1)
    assert c["firmware_by_component"] == {"BIOS": 1, **dict.fromkeys(BOARDS, 1)}, c
