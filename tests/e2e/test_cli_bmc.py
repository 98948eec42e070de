"""The BMC commands end to end: the real CLI against lab BMCs over HTTPS.

The lab runs as its own daemon (`fleetctl lab up`), the way an operator
starts it; each test reads what the lab saw through its control endpoint, so
"power on never cycles" and "nothing was changed" are checked on the BMC side.
"""

from __future__ import annotations

import itertools
import json

import pytest
from tests_helpers_bmc import counters, lab_doc, lab_up, selected_engine, serve  # (path set in conftest)

RACK12 = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 17)] + ["gpu-tyo1-r12-17", "gpu-tyo1-r12-18", "gpu-tyo1-r12-19"]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.2", "--firmware-time", "0.2", *serve(RACK12[:6] + RACK12[-1:]))
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    # A test may have pointed FLEETCTL_LAB_DIR elsewhere; stop this lab by its own folder.
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def test_power_on_is_idempotent_and_never_cycles(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("power", "status", "mn-tyo1-r12-01", "mn-tyo1-r12-02", "--output", "json")
    assert r.code == 0, r.err
    assert {x["server"]: x["power"] for x in json.loads(r.out)} == {"mn-tyo1-r12-01": "off", "mn-tyo1-r12-02": "off"}
    r = cli("power", "on", "mn-tyo1-r12-01", "--output", "json")
    assert r.code == 0 and json.loads(r.out)[0]["action"] == "powered on"
    import time

    time.sleep(0.5)
    r = cli("power", "on", "mn-tyo1-r12-01", "--output", "json")
    assert r.code == 0 and json.loads(r.out)[0]["action"] == "already on"
    c = counters(lab, "mn-tyo1-r12-01")
    assert c["power_on"] == 1 and c["power_cycle"] == 0
    assert counters(lab, "mn-tyo1-r12-02")["power_on"] == 0


def test_dry_run_changes_nothing_on_the_bmc(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("power", "on", "mn-tyo1-r12-03", "--dry-run", "--output", "json")
    assert r.code == 0, r.out
    [row] = json.loads(r.out)
    assert row["server"] == "mn-tyo1-r12-03" and row["action"] == "would power on" and row["start_s"] == 0.0
    c = counters(lab, "mn-tyo1-r12-03")
    assert c["power_on"] == 0 and c["power_state"] == "Off"  # read, never changed


def test_inspect_matches_and_moves_to_inspected(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("server", "inspect", "mn-tyo1-r12-01", "gpu-tyo1-r12-19", "--output", "json")
    assert r.code == 0, r.err + r.out
    rows = {x["server"]: x for x in json.loads(r.out)}
    assert rows["mn-tyo1-r12-01"]["drift"] == [] and rows["mn-tyo1-r12-01"]["boards"] == "4/4"
    assert rows["gpu-tyo1-r12-19"]["boards"] == "8/8"
    assert {b["serial"] for b in rows["gpu-tyo1-r12-19"]["facts"]["boards"]} == {f"1321010124{i}{s}" for i, s in [(1, k) for k in range(8)]}
    show = json.loads(cli("server", "show", "mn-tyo1-r12-01", "--output", "json").out)
    assert show["state"] == "inspected"
    # The lab's fleet pins the lab BMC's certificate, as `lab up` wrote it.
    assert show["fingerprint"] == lab["servers"]["mn-tyo1-r12-01"]["fingerprint"].removeprefix("sha256:")


def test_inspect_reports_drift_and_keeps_declared_data(lab, cli):  # type: ignore[no-untyped-def]
    # The inventory now disagrees with the BMC: a board the BMC shows is not
    # declared, the chassis serial differs, and a NIC's MAC differs.
    assert cli("board", "remove", "MN2B-01012033").code == 0
    assert cli("server", "set", "mn-tyo1-r12-02", "--serial", "WRONG-SERIAL", "--nic", "eth0=02:aa:bb:cc:dd:ee").code == 0
    def declared() -> list[str]:
        # The certificate pinned on first contact is the one legitimate change.
        return [line for line in cli("inventory", "export").out.splitlines() if "fingerprint:" not in line]

    before = declared()
    r = cli("server", "inspect", "mn-tyo1-r12-02", "--output", "json")
    assert r.code == 1
    drift = json.loads(r.out)[0]["drift"]
    assert any("serial: declared WRONG-SERIAL, BMC reports MNS0101203" in d for d in drift), drift
    assert any("board MN2B-01012033: seen by the BMC, not declared" in d for d in drift), drift
    assert any("NIC eth0: declared MAC 02:aa:bb:cc:dd:ee not seen" in d for d in drift), drift
    assert declared() == before  # nothing overwritten
    show = json.loads(cli("server", "show", "mn-tyo1-r12-02", "--output", "json").out)
    assert show["state"] == "registered" and "inspection drift" in show["last_error"]
    # --accept takes the BMC's view of boards and serial.
    r = cli("server", "inspect", "mn-tyo1-r12-02", "--accept", "--output", "json")
    assert r.code == 0, r.out
    show = json.loads(cli("server", "show", "mn-tyo1-r12-02", "--output", "json").out)
    assert show["serial"] == "MNS0101203" and len(show["boards"]) == 4 and show["state"] == "inspected"
    assert show["last_error"] is None
    assert {n["name"]: n["mac"] for n in show["nics"]}["eth0"] != "02:aa:bb:cc:dd:ee"  # the MAC was accepted too
    assert cli("server", "inspect", "mn-tyo1-r12-02").code == 0  # and nothing drifts any more


def test_inspect_fills_boards_of_a_server_that_declares_none(lab, cli):  # type: ignore[no-untyped-def]
    for slot in range(4):
        assert cli("board", "remove", f"MN2B-0101205{slot}").code == 0
    r = cli("server", "inspect", "mn-tyo1-r12-03", "--output", "json")
    assert r.code == 0, r.out
    assert json.loads(r.out)[0]["filled"] == ["4 boards"]
    boards = json.loads(cli("board", "list", "--server", "mn-tyo1-r12-03", "--output", "json").out)
    assert sorted(b["serial"] for b in boards) == [f"MN2B-0101205{s}" for s in range(4)]
    # Standard Redfish carries no PCI address (only HPE's OEM data does): kind and slot suffice.
    assert all(b["kind"] == "mncore2" for b in boards) and sorted(b["slot"] for b in boards) == [0, 1, 2, 3]


def test_one_failing_bmc_fails_alone_with_its_reason(lab, cli):  # type: ignore[no-untyped-def]
    assert cli("lab", "fault", "mn-tyo1-r12-04", "--set", "error_rate=1").code == 0
    r = cli("power", "status", "mn-tyo1-r12-04", "mn-tyo1-r12-05", "mn-tyo1-r12-06", "--output", "json")
    assert r.code == 1
    rows = {x["server"]: x for x in json.loads(r.out)}
    assert not rows["mn-tyo1-r12-04"]["ok"] and "HTTP 500" in rows["mn-tyo1-r12-04"]["error"]
    assert rows["mn-tyo1-r12-05"]["ok"] and rows["mn-tyo1-r12-06"]["ok"]
    events = json.loads(cli("events", "list", "--output", "json").out)
    assert events  # the import at least
    assert cli("lab", "fault", "mn-tyo1-r12-04", "--clear").code == 0
    assert cli("power", "status", "mn-tyo1-r12-04").code == 0
    # The journal kept both runs, server by server.
    jobs = json.loads(cli("jobs", "list", "--kind", "power.status", "--output", "json").out)
    assert [(j["state"], j["servers"], j["failed"]) for j in jobs[:2]] == [("succeeded", 1, 0), ("failed", 3, 1)]
    steps = json.loads(cli("jobs", "show", str(jobs[1]["id"]), "--output", "json").out)["steps"]
    assert {s["server"]: s["state"] for s in steps} == {
        "mn-tyo1-r12-04": "failed", "mn-tyo1-r12-05": "succeeded", "mn-tyo1-r12-06": "succeeded"
    }  # fmt: skip


def _set_pin(name: str, fingerprint: str | None) -> None:
    """Change a server's pin in the lab's fleet (the database the CLI is pointed at)."""
    from sqlalchemy import text

    engine = selected_engine()
    with engine.begin() as c:
        c.execute(text("UPDATE server SET bmc_fingerprint = :fp WHERE name = :n"), {"fp": fingerprint, "n": name})
    engine.dispose()


def _direct(cli, monkeypatch, tmp_path, lab, name):  # type: ignore[no-untyped-def]
    """A server whose BMC was never seen: the lab's pin forgotten. Returns the lab BMC's real fingerprint."""
    _set_pin(name, None)
    return lab["servers"][name]["fingerprint"].removeprefix("sha256:").replace(":", "").lower()


def test_trust_on_first_use_pins_into_the_inventory(lab, cli, monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    real = _direct(cli, monkeypatch, tmp_path, lab, "mn-tyo1-r12-05")
    assert json.loads(cli("server", "show", "mn-tyo1-r12-05", "--output", "json").out)["fingerprint"] is None
    r = cli("power", "status", "mn-tyo1-r12-05", "--output", "json")
    assert r.code == 0, r.out
    assert json.loads(cli("server", "show", "mn-tyo1-r12-05", "--output", "json").out)["fingerprint"] == real
    assert cli("power", "status", "mn-tyo1-r12-05").code == 0  # the pin now holds


def test_a_changed_certificate_is_refused_naming_both_fingerprints(lab, cli, monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    real = _direct(cli, monkeypatch, tmp_path, lab, "mn-tyo1-r12-05")
    _set_pin("mn-tyo1-r12-05", "ab" * 32)
    r = cli("power", "status", "mn-tyo1-r12-05", "--output", "json")
    assert r.code == 1
    err = json.loads(r.out)[0]["error"].upper().replace(":", "").replace(" ", "")
    assert "AB" * 32 in err and real.upper() in err
    # and the pin in the inventory is not silently replaced
    assert json.loads(cli("server", "show", "mn-tyo1-r12-05", "--output", "json").out)["fingerprint"] == "ab" * 32


def test_bios_stage_apply_verify_and_boot_media(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("bios", "set", "mn-tyo1-r12-06", "--set", "ProcTurboMode=Disabled", "--dry-run", "--output", "json")
    assert r.code == 0 and "ProcTurboMode" in json.loads(r.out)[0]["would_change"]
    r = cli("bios", "set", "mn-tyo1-r12-06", "--set", "ProcTurboMode=Disabled", "--apply", "--output", "json")
    assert r.code == 0, r.out
    assert json.loads(r.out)[0]["verified"] == "yes"
    r = cli("bios", "show", "mn-tyo1-r12-06", "-a", "ProcTurboMode", "--output", "json")
    assert json.loads(json.loads(r.out)[0]["attributes"]) == {"ProcTurboMode": "Disabled"}
    r = cli("boot", "set", "mn-tyo1-r12-06", "--device", "pxe", "--output", "json")
    assert r.code == 0 and json.loads(r.out)[0]["device"] == "pxe"
    r = cli("media", "insert", "mn-tyo1-r12-06", "--image", "http://127.0.0.1:9/install.iso", "--output", "json")
    assert r.code == 0 and json.loads(r.out)[0]["image"] == "http://127.0.0.1:9/install.iso"
    r = cli("media", "eject", "mn-tyo1-r12-06", "--output", "json")
    assert r.code == 0 and json.loads(r.out)[0]["inserted"] is False


def test_firmware_list_compares_with_the_baseline(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("firmware", "list", "mn-tyo1-r12-01", "--output", "json")
    assert r.code == 0, r.out
    rows = json.loads(r.out)
    assert {x["component"]: x["status"] for x in rows if x["baseline"]} == {
        "BMC": "ok", "BIOS": "ok", **{f"mncore2_slot{i}_mncore2-board": "ok" for i in range(4)}
    }


def test_targets_and_bad_usage(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("power", "status", "no-such-thing")
    assert r.code == 2 and "no server, rack or site named 'no-such-thing'" in r.err
    r = cli("power", "status", "color=blue")
    assert r.code == 2 and "unknown selector" in r.err
    r = cli("boot", "set", "mn-tyo1-r12-01", "--device", "uefi")
    assert r.code == 2 and "--uefi-target" in r.err
    # A server the lab does not serve has no BMC in the lab's fleet: reported, not contacted.
    r = cli("power", "status", "mn-tyo1-r12-01", "state=registered", "--output", "json")
    rows = {x["server"]: x for x in json.loads(r.out)}
    assert rows["mn-tyo1-r12-01"]["ok"]
    assert not rows["mn-tyo1-r12-10"]["ok"] and rows["mn-tyo1-r12-10"]["error"] == "no BMC URL in the inventory"


def test_in_service_servers_are_protected(lab, cli):  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    engine = selected_engine()  # the lab's fleet
    with engine.begin() as c:
        c.execute(text("UPDATE server SET state = 'in-service' WHERE name = 'mn-tyo1-r12-01'"))
    engine.dispose()
    r = cli("power", "off", "mn-tyo1-r12-01")
    assert r.code == 2 and "in service" in r.err and "--allow-in-service" in r.err
    assert counters(lab, "mn-tyo1-r12-01")["power_off"] == 0


def test_health_reports_injected_faults_and_reads_logs_from_a_cursor(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("server", "health", "mn-tyo1-r12-01", "mn-tyo1-r12-02", "--output", "json")
    assert r.code == 0, r.out
    faults = ("--set", "psu_failed=true", "--set", "hot_sensor=Inlet", "--set", "clock_skew_s=300")
    assert cli("lab", "fault", "mn-tyo1-r12-02", *faults).code == 0
    r = cli("server", "health", "mn-tyo1-r12-01", "mn-tyo1-r12-02", "--logs", "--output", "json")
    assert r.code == 1
    rows = {x["server"]: x for x in json.loads(r.out)}
    assert rows["mn-tyo1-r12-01"]["ok"] and rows["mn-tyo1-r12-01"]["problems"] == []
    problems = " ".join(rows["mn-tyo1-r12-02"]["problems"])
    assert "psu" in problems and "Inlet" in problems and "clock off by +" in problems
    first = rows["mn-tyo1-r12-02"]["new_log_entries"]
    assert first > 0
    again = {x["server"]: x for x in json.loads(cli("server", "health", "mn-tyo1-r12-02", "--logs", "--output", "json").out)}
    assert again["mn-tyo1-r12-02"]["new_log_entries"] == 0  # the cursor moved past what was read


def test_lab_of_generated_bmcs(cli, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "genlab"))
    r = lab_up(cli, monkeypatch, "--generate", "30", "--output", "json")
    try:
        assert r.code == 0, r.err
        st = json.loads(cli("lab", "status", "--output", "json").out)
        assert st["running"] and st["count"] == 30 and len(st["servers"]) == 30
        assert cli("lab", "up", "--generate", "5").code == 1  # one lab per folder; the running one is untouched
        assert json.loads(cli("lab", "status", "--output", "json").out)["count"] == 30
        # A second generated lab (another folder: a second user, a parallel test) takes the next free range.
        monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "genlab2"))
        r2 = cli("lab", "up", "--generate", "2", "--output", "json")
        assert r2.code == 0, r2.err
        try:
            second = json.loads(cli("lab", "status", "--output", "json").out)["servers"]
            ranges = {u["url"].split("//")[1].split(".")[1] for u in [*st["servers"].values(), *second.values()]}
            assert len(ranges) == 2, ranges  # each lab its own 127.S.0.0/16
        finally:
            assert cli("lab", "down").code == 0
            monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "genlab"))
    finally:
        assert cli("lab", "down").code == 0
    assert cli("lab", "status").code == 1


def test_firmware_update_in_waves_is_idempotent_and_halts_on_failure(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("firmware", "update", "gpu-tyo1-r12-19", "mn-tyo1-r12-01", "--image-base", "http://127.0.0.1:9/fw", "--allow-downgrade",
            "--dry-run", "--output", "json")  # fmt: skip
    assert r.code == 0, r.out
    rows = json.loads(r.out)
    plan = [x for x in rows if x["server"] == "gpu-tyo1-r12-19"]
    assert len(plan) == 8 and {x["result"] for x in plan} == {"would downgrade"}  # the lab vbios is newer than the baseline
    assert plan[0]["message"] == "http://127.0.0.1:9/fw/gpu_slot0_vbios-92.00.45.00.03.bin"
    assert [x["result"] for x in rows if x["server"] == "mn-tyo1-r12-01"] == ["at baseline"]
    assert counters(lab, "gpu-tyo1-r12-19")["firmware_flashes"] == 0  # the dry run flashed nothing
    # A failing canary halts the waves after it.
    assert cli("lab", "fault", "gpu-tyo1-r12-19", "--set", "firmware_fail=1").code == 0
    r = cli("firmware", "update", "gpu-tyo1-r12-19", "mn-tyo1-r12-01", "--image-base", "http://127.0.0.1:9/fw", "--allow-downgrade",
            "--output", "json")  # fmt: skip
    assert r.code == 1
    res = {x["server"]: x["result"] for x in json.loads(r.out)}
    assert res == {"gpu-tyo1-r12-19": "failed", "mn-tyo1-r12-01": "not attempted"}
    # Then it goes through; a second run flashes nothing more.
    r = cli("firmware", "update", "gpu-tyo1-r12-19", "--image-base", "http://127.0.0.1:9/fw", "--allow-downgrade", "--output", "json")
    assert r.code == 0, r.out
    assert {x["result"] for x in json.loads(r.out)} == {"updated"}
    flashed = counters(lab, "gpu-tyo1-r12-19")["firmware_flashes"]
    assert flashed == 8
    r = cli("firmware", "update", "gpu-tyo1-r12-19", "--image-base", "http://127.0.0.1:9/fw", "--allow-downgrade", "--output", "json")
    assert [x["result"] for x in json.loads(r.out)] == ["at baseline"]
    assert counters(lab, "gpu-tyo1-r12-19")["firmware_flashes"] == flashed
    assert cli("firmware", "list", "gpu-tyo1-r12-19").code == 0


def test_bios_apply_profile_brings_servers_to_their_models_profile(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("bios", "apply-profile", "mn-tyo1-r12-01", "gpu-tyo1-r12-19", "--dry-run", "--output", "json")
    assert r.code == 0, r.out
    plan = {x["server"]: x["would_change"] for x in json.loads(r.out)}
    assert "WorkloadProfile" in plan["mn-tyo1-r12-01"] and "PowerRegulator" in plan["gpu-tyo1-r12-19"]
    r = cli("bios", "apply-profile", "mn-tyo1-r12-01", "gpu-tyo1-r12-19", "--apply", "--output", "json")
    assert r.code == 0, r.out
    assert {x["verified"] for x in json.loads(r.out)} == {"yes"}
    r = cli("bios", "apply-profile", "mn-tyo1-r12-01", "gpu-tyo1-r12-19", "--dry-run", "--output", "json")
    assert {x["would_change"] for x in json.loads(r.out)} == {"(nothing)"}


RACK13 = [f"mn-tyo1-r13-{i:02d}" for i in range(1, 9)]


@pytest.fixture
def rack13_lab(example_loaded, cli, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Rack 13's eight MN-Core servers, off, in a lab of their own; the rack's budget room for three (1,600 W peak)."""
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab13"))
    assert cli("rack", "set", "rack-13", "--power-budget", "5000").code == 0
    assert lab_up(cli, monkeypatch, "--power-transition", "0.2", *serve(RACK13)).code == 0
    try:
        yield lab_doc(tmp_path / "lab13")
    finally:
        assert cli("lab", "down").code == 0


def test_power_on_is_staggered_and_keeps_the_rack_within_budget(rack13_lab, cli):  # type: ignore[no-untyped-def]
    doc = rack13_lab
    r = cli("power", "on", "rack-13", "--stagger", "0.4", "--output", "json")
    assert r.code == 1  # five servers could not be started
    started = [n for n in RACK13 if counters(doc, n)["power_on"] == 1]
    assert len(started) == 3
    # The lab's own record of when each server drew power: never over budget, starts spread out.
    spans = [(t["on"], t["off"]) for n in RACK13 for t in counters(doc, n)["power_timeline"]]
    starts = sorted(on for on, _ in spans)
    assert all(b - a >= 0.35 for a, b in itertools.pairwise(starts)), starts
    for t in starts:
        drawing = sum(1 for on, off in spans if on <= t and (off is None or off > t))
        assert drawing * 1600 <= 5000
    # Nothing more can start until the budget is raised; then the rest go.
    assert cli("rack", "set", "rack-13", "--power-budget", "16000").code == 0
    assert cli("power", "on", "rack-13", "--stagger", "0", "--output", "json").code == 0
    assert all(counters(doc, n)["power_on"] == 1 for n in RACK13)  # and nobody twice


def test_two_power_on_commands_share_the_rack_s_budget_and_stagger(rack13_lab):  # type: ignore[no-untyped-def]
    """Two operators power on the two halves of one rack at once: the budget and the stagger hold across both
    (before, each counted only its own starts: each started three, six in all, 9,600 W on a 5,000 W rack)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    doc = rack13_lab
    fleetctl = str(Path(sys.executable).parent / "fleetctl")
    procs = [subprocess.Popen([fleetctl, "power", "on", *half, "--stagger", "1", "--output", "json"], env=dict(os.environ),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
             for half in (RACK13[:4], RACK13[4:])]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs  # four servers each, room for three in all: both refused some
    started = [n for n in RACK13 if counters(doc, n)["power_on"] == 1]
    assert len(started) == 3, (started, outs)
    assert all("over its 5000 W budget" in out for out, _ in outs), outs  # each says why it left some off
    # a server left off after the other command took the room is a failed row of the main table, never "ok"
    rows = [r for out, _ in outs for r in json.JSONDecoder().raw_decode(out.lstrip())[0]]
    assert {r["server"] for r in rows if r["ok"]} <= set(started), rows
    starts = sorted(t["on"] for n in RACK13 for t in counters(doc, n)["power_timeline"])
    # 1 s apart in the store; the lab stamps each request's arrival, a little later for one than another
    assert all(b - a >= 0.6 for a, b in itertools.pairwise(starts)), starts


def test_board_check_finds_degraded_links_and_firmware_off_baseline(lab, cli):  # type: ignore[no-untyped-def]
    r = cli("board", "check", "mn-tyo1-r12-01", "--output", "json")
    assert r.code == 0, r.out
    assert json.loads(r.out)[0]["found"] == 4
    degrade = 'pcie_degraded={"slot": 2, "lanes": 8, "gen": "Gen3"}'
    assert cli("lab", "fault", "mn-tyo1-r12-01", "--set", degrade).code == 0
    r = cli("board", "check", "mn-tyo1-r12-01", "gpu-tyo1-r12-19", "--output", "json")
    assert r.code == 1
    rows = {x["server"]: x for x in json.loads(r.out)}
    assert rows["mn-tyo1-r12-01"]["problems"] == ["board MN2B-01012012 (slot 2): PCIe link Gen3 x8, expected Gen4 x16"]
    gpu = rows["gpu-tyo1-r12-19"]["problems"]
    assert len(gpu) == 8 and all("vbios: firmware 96.00.74.00.01, baseline 92.00.45.00.03" in p for p in gpu)
