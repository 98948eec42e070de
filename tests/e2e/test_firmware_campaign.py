"""`fleetctl firmware check` and the `firmware update` campaign, end to end against lab BMCs over HTTPS.

What happened is read on the BMC side (the lab's counters: updates applied
per component, staged, pushed, downgrades, boots) and in the store (events,
board and server states, the journal).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, lab_doc, lab_up, selected_engine, serve  # (path set in conftest)

MN = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 5)]
GPU = "gpu-tyo1-r12-19"
BASE = "http://127.0.0.1:9/fw"  # SimpleUpdate images are never fetched by the lab; the name says what they are
FLEETCTL = Path(sys.executable).parent / "fleetctl"
BOARDS = [f"mncore2_slot{i}_mncore2-board" for i in range(4)]

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.2", "--firmware-time", "0.6", *serve([*MN, GPU]))
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def _baseline(model: str, component: str, version: str) -> None:
    """Set (or add) one component of a model's firmware baseline in the lab's fleet."""
    from sqlalchemy import text

    eng = selected_engine()
    with eng.begin() as c:
        mid = c.execute(text("SELECT id FROM hardware_model WHERE name = :m"), {"m": model}).scalar_one()
        n = c.execute(text("UPDATE firmware_baseline SET version = :v WHERE model_id = :m AND component = :c"),
                      {"v": version, "m": mid, "c": component}).rowcount  # fmt: skip
        if n == 0:
            c.execute(text("INSERT INTO firmware_baseline (model_id, component, version) VALUES (:m, :c, :v)"),
                      {"m": mid, "c": component, "v": version})  # fmt: skip
    eng.dispose()


def _update(cli, *args: str) -> tuple[int, list[dict[str, Any]]]:  # type: ignore[no-untyped-def]
    r = cli("firmware", "update", *args, "--poll", "0.2", "--output", "json")
    assert r.out.strip(), (r.code, r.err)
    return r.code, json.loads(r.out)


def _events(cli, action: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The audit log's events of one action, with the object split into kind and name."""
    out = []
    for e in json.loads(cli("events", "list", "--limit", "1000", "--output", "json").out):
        if e["action"] == action:
            kind, _, name = e["object"].partition(" ")
            out.append({**e, "object_kind": kind, "object_name": name})
    return out


def test_check_gives_compliance_per_component(lab, cli):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "BIOS", "1.9.0")
    _baseline("mn-server-2", "NIC-fw", "22.1")  # in the baseline, reported by no BMC
    r = cli("firmware", "check", MN[0], GPU, "--output", "json")
    assert r.code == 1, r.err  # not compliant
    rows = {(x["server"], x["component"]): x for x in json.loads(r.out)}
    assert rows[(MN[0], "BIOS")]["action"] == "update" and rows[(MN[0], "BIOS")]["wanted"] == "1.9.0"
    assert rows[(MN[0], "BMC")]["action"] == "none"
    assert {rows[(MN[0], b)]["action"] for b in BOARDS} == {"none"}  # the accelerator boards, by baseline_key
    assert rows[(MN[0], "NIC-fw")]["action"] == "unknown" and rows[(MN[0], "NIC-fw")]["current"] is None
    vb = rows[(GPU, "gpu_slot0_vbios")]
    assert vb["action"] == "downgrade-refused" and "older than 96.00.74.00.01" in vb["reason"]
    # CSV carries the same rows; a compliant server exits 0.
    _baseline("mn-server-2", "BIOS", "1.8.2")
    assert cli("firmware", "check", MN[1], "--output", "csv").code == 1  # NIC-fw still unknown
    from sqlalchemy import text

    eng = selected_engine()
    with eng.begin() as c:
        c.execute(text("DELETE FROM firmware_baseline WHERE component = 'NIC-fw'"))
    eng.dispose()
    r = cli("firmware", "check", MN[1], "--output", "csv")
    assert r.code == 0, r.out
    assert r.out.splitlines()[0].endswith("server,component,current,wanted,action,reason,error")


def test_a_downgrade_is_refused_then_allowed(lab, cli):  # type: ignore[no-untyped-def]
    code, rows = _update(cli, GPU, "--image-base", BASE)
    assert code == 1
    assert len(rows) == 8 and {x["result"] for x in rows} == {"refused"}
    assert "--allow-downgrade" in rows[0]["message"]
    assert counters(lab, GPU)["firmware_flashes"] == 0
    code, rows = _update(cli, GPU, "--image-base", BASE, "--allow-downgrade")
    assert code == 0, rows
    assert {x["result"] for x in rows} == {"updated"} and {x["after"] for x in rows} == {"92.00.45.00.03"}
    c = counters(lab, GPU)
    assert c["firmware_flashes"] == 8 and c["firmware_downgrades"] == 8
    assert set(c["firmware_by_component"].values()) == {1}
    ev = [e for e in _events(cli, "firmware.update") if e["object_name"] == GPU]
    assert len(ev) == 8 and all("96.00.74.00.01 -> 92.00.45.00.03" in e["detail"] for e in ev)
    # At the baseline now: nothing more is flashed.
    code, rows = _update(cli, GPU, "--image-base", BASE, "--allow-downgrade")
    assert code == 0 and [x["result"] for x in rows] == ["at baseline"]
    assert counters(lab, GPU)["firmware_flashes"] == 8


def test_component_is_sent_as_targets_and_only_it_is_flashed(lab, cli):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "BIOS", "1.9.0")
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    # The image's name says no component: only Redfish Targets tells the lab BMC which one.
    code, rows = _update(cli, MN[0], "--image-base", BASE, "--template", "{base}/image-{version}.bin", "--component", "BIOS")
    assert code == 0, rows
    assert [(x["component"], x["result"], x["after"]) for x in rows] == [("BIOS", "updated", "1.9.0")]
    c = counters(lab, MN[0])
    assert c["firmware_by_component"] == {"BIOS": 1}
    assert c["firmware"]["BIOS"] == "1.9.0" and {c["firmware"][b] for b in BOARDS} == {"0.9.7"}


def test_staged_on_reset_is_activated_by_one_reset_and_read_back(lab, cli):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "BIOS", "1.9.0")
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    assert counters(lab, MN[1])["power_state"] == "Off"
    code, rows = _update(cli, MN[1], "--image-base", BASE, "--apply-time", "on-reset")
    assert code == 0, rows
    assert len(rows) == 5 and {x["result"] for x in rows} == {"updated"}
    assert all("activated by a system reset" in x["message"] for x in rows)
    c = counters(lab, MN[1])
    assert c["firmware_staged"] == 5 and c["firmware_flashes"] == 5  # staged by the tasks, applied at the boot
    assert c["firmware_pending"] == {}
    assert c["power_on"] == 1 and c["boots"] == 1  # one power-on activated all five (the server was off)
    assert c["firmware"]["BIOS"] == "1.9.0" and {c["firmware"][b] for b in BOARDS} == {"1.0.0"}
    # It was off before: it is put back off (a graceful shutdown, requested once).
    assert c["power_off"] == 1


def test_push_only_bmc_gets_a_multipart_upload_from_a_local_folder(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "BIOS", "1.9.0")
    images = tmp_path / "images"
    images.mkdir()
    assert cli("lab", "fault", MN[2], "--set", "push_only=true").code == 0
    # A missing image is bad input: one line, exit 2, nothing flashed.
    r = cli("firmware", "update", MN[2], "--image-base", str(images))
    assert r.code == 2 and "BIOS-1.9.0.bin not found" in r.err, r.err
    assert counters(lab, MN[2])["firmware_pushes"] == 0
    (images / "BIOS-1.9.0.bin").write_bytes(b"BIOS-1.9.0\n" + os.urandom(4096))
    code, rows = _update(cli, MN[2], "--image-base", str(images))
    assert code == 0, rows
    assert [(x["component"], x["result"], x["after"]) for x in rows] == [("BIOS", "updated", "1.9.0")]
    c = counters(lab, MN[2])
    assert c["firmware_pushes"] == 1 and c["firmware_by_component"] == {"BIOS": 1}
    assert "push" in next(e for e in _events(cli, "firmware.update") if e["object_name"] == MN[2])["detail"]
    # From an http URL: the BMC cannot pull, so fleetctl fetches each image and pushes it.
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    for b in BOARDS:
        (images / f"{b}-1.0.0.bin").write_bytes(os.urandom(2048))
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(images))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        code, rows = _update(cli, MN[2], "--image-base", f"http://127.0.0.1:{httpd.server_address[1]}")
    finally:
        httpd.shutdown()
    assert code == 0, rows
    assert [(x["component"], x["result"]) for x in rows] == [(b, "updated") for b in BOARDS]
    c = counters(lab, MN[2])
    assert c["firmware_pushes"] == 5 and c["firmware_by_component"] == {"BIOS": 1, **{b: 1 for b in BOARDS}}


def test_failure_threshold_halts_the_waves_after(lab, cli):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "BIOS", "1.9.0")
    for n in MN[:2]:
        assert cli("lab", "fault", n, "--set", "firmware_fail=1").code == 0
    code, rows = _update(cli, *MN, "--image-base", BASE, "--component", "BIOS", "--canary", "1", "--batch", "1",
                         "--max-failures", "50%")  # fmt: skip
    assert code == 1
    res = {x["server"]: x["result"] for x in rows}
    assert res == {MN[0]: "failed", MN[1]: "failed", MN[2]: "not attempted", MN[3]: "not attempted"}, rows
    assert "halted: 2 server(s) failed, threshold 50%" in next(x for x in rows if x["server"] == MN[2])["message"]
    assert [counters(lab, n)["firmware_failures"] for n in MN] == [1, 1, 0, 0]
    assert [counters(lab, n)["firmware_flashes"] for n in MN] == [0, 0, 0, 0]
    failed = [e for e in _events(cli, "firmware.failed") if e["object_name"] in MN[:2]]
    assert len(failed) == 2 and all("Installing BIOS 1.9.0 failed" in e["detail"] for e in failed)
    # The default threshold is the first failure: the canary halts everything after it.
    assert cli("lab", "fault", MN[2], "--set", "firmware_fail=1").code == 0
    code, rows = _update(cli, MN[2], MN[3], "--image-base", BASE, "--component", "BIOS")
    assert code == 1 and {x["server"]: x["result"] for x in rows} == {MN[2]: "failed", MN[3]: "not attempted"}


def test_a_failed_board_firmware_takes_the_server_to_maintenance(lab, cli):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    assert cli("server", "set-state", MN[3], "ready", "--reason", "test: a ready server", "--force").code == 0
    assert cli("lab", "fault", MN[3], "--set", "firmware_fail=1").code == 0
    code, rows = _update(cli, MN[3], "--image-base", BASE, "--component", "mncore2-board")
    assert code == 1
    [row] = rows
    assert row["component"] == BOARDS[0] and row["result"] == "failed"
    assert "server ready -> maintenance" in row["message"] and "3 more component(s) not attempted" in row["message"]
    assert json.loads(cli("server", "show", MN[3], "--output", "json").out)["state"] == "maintenance"
    boards = {b["slot"]: b for b in json.loads(cli("board", "list", "--output", "json").out) if b["server"] == MN[3]}
    assert boards[0]["state"] == "failed" and {boards[i]["state"] for i in (1, 2, 3)} == {"ok"}
    [ev] = [e for e in _events(cli, "firmware.failed") if e["object_name"] == MN[3]]
    evidence = json.loads(ev["detail"])
    assert evidence["before"] == "0.9.7" and evidence["after"] == "0.9.7" and "Installing" in evidence["error"]
    assert any(e["object_kind"] == "board" and "ok -> failed" in e["detail"] for e in _events(cli, "board.state"))


def test_outside_the_window_no_wait_stops_cleanly(lab, cli):  # type: ignore[no-untyped-def]
    _baseline("mn-server-2", "BIOS", "1.9.0")
    now = dt.datetime.now(dt.UTC)
    start, end = now + dt.timedelta(hours=2), now + dt.timedelta(hours=3)
    window = f"{start:%H:%M}-{end:%H:%M}"
    code, rows = _update(cli, MN[0], "--image-base", BASE, "--window", window, "--no-wait")
    assert code == 1 and [x["result"] for x in rows] == ["not attempted"]
    assert "outside the maintenance window" in rows[0]["message"]
    assert counters(lab, MN[0])["firmware_flashes"] == 0
    # Inside a window (one that holds now), the same command goes through.
    inside = f"{now - dt.timedelta(hours=1):%H:%M}-{now + dt.timedelta(hours=1):%H:%M}"
    code, rows = _update(cli, MN[0], "--image-base", BASE, "--window", inside, "--no-wait")
    assert code == 0 and [x["result"] for x in rows] == ["updated"], rows


def test_bad_input_is_refused_before_any_bmc(lab, cli):  # type: ignore[no-untyped-def]
    bad = [(["--max-failures", "0"], "failure threshold"), (["--window", "25:00-02:00"], "not a window"),
           (["--template", "{base}/{nope}.bin"], "does not render"), (["--image-base", "/no/such/dir"], "local folder")]
    for args, says in bad:
        a = ["--image-base", BASE, *args] if "--image-base" not in args else args
        r = cli("firmware", "update", MN[0], *a)
        assert r.code == 2 and says in r.err, (args, r.err)
    assert counters(lab, MN[0])["requests"] == 0


def _step_running_with_task(db: str, server: str) -> bool:
    from sqlalchemy import create_engine, text

    eng = create_engine(db)
    try:
        with eng.connect() as c:
            rows = c.execute(text(
                "SELECT js.state, js.output FROM job_step js JOIN server s ON s.id = js.server_id "
                "WHERE s.name = :n AND js.name LIKE 'firmware.flash.%' ORDER BY js.id"), {"n": server}).all()  # fmt: skip
    finally:
        eng.dispose()
    # Killed while the second component's task runs in the BMC (the first is done).
    return len(rows) >= 2 and rows[0][0] == "succeeded" and rows[-1][0] == "running" and '"task"' in (rows[-1][1] or "")


def test_kill_mid_campaign_then_rerun_flashes_no_component_twice(lab, cli):  # type: ignore[no-untyped-def]
    from fleetctl.config import database_url

    _baseline("mn-server-2", "BIOS", "1.9.0")
    _baseline("mn-server-2", "mncore2-board", "1.0.0")
    db = database_url()
    proc = subprocess.Popen([str(FLEETCTL), "firmware", "update", MN[3], "--image-base", BASE, "--poll", "0.2", "--output", "json"],
                            env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not _step_running_with_task(db, MN[3]):
        assert proc.poll() is None, f"the campaign ended before the kill point: {proc.communicate()}"
        assert time.monotonic() < deadline, "the kill point was never reached"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # The rerun reads the journal, finds the task in flight, waits for it and reads the version: no second flash.
    code, rows = _update(cli, MN[3], "--image-base", BASE)
    assert code == 0, rows
    assert {x["result"] for x in rows} == {"updated"} and len(rows) == 4  # the first was done before the kill
    assert sum("not flashed again" in (x["message"] or "") for x in rows) == 1
    c = counters(lab, MN[3])
    assert c["firmware_flashes"] == 5 and set(c["firmware_by_component"].values()) == {1}, c["firmware_by_component"]
    assert len([e for e in _events(cli, "firmware.update") if e["object_name"] == MN[3]]) == 5
    assert [e["object_name"] for e in _events(cli, "server.unlock")] == [MN[3]]  # the dead run's lock, recovered
