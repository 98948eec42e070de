"""`fleetctl provision` end to end: the real CLI, lab BMCs over HTTPS, lab
switches over SSH (netmiko), lab hosts that install after a PXE boot and that
Ansible reaches over SSH to run the real playbooks.

The lab serves the whole of rack-12 (so every server's power state is known
to the power budget), with short timings. What happened is read on the
device side: the lab's counters (power actions, firmware flashes, boots and
installs), its power timeline, the switch ports, and the hosts' sandboxes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, lab_doc, lab_up, serve  # (path set in conftest)

RACK12 = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 17)] + ["gpu-tyo1-r12-17", "gpu-tyo1-r12-18", "gpu-tyo1-r12-19"]
TOKEN = "abcdef.0123456789abcdef"  # a well-formed kubeadm token; must never be written anywhere
FAST = ["--poll", "0.3", "--stagger", "0.3", "--ansible-window", "2"]
FLEETCTL = Path(sys.executable).parent / "fleetctl"

pytestmark = [
    pytest.mark.skipif(shutil.which("ssh") is None, reason="the ssh client (openssh-client) is needed: "
                       "Ansible reaches the lab hosts over SSH"),
    pytest.mark.skipif(not (Path(sys.executable).parent / "ansible-playbook").exists(), reason="ansible-playbook (ansible-core) is not "
                       "installed beside this Python"),
]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("FLEETCTL_K8S_TOKEN", TOKEN)
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.3", "--firmware-time", "0.3", "--install-time", "2",
               "--os-boot-time", "0.5", *serve(RACK12))  # fmt: skip
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _provision(cli, *args: str) -> tuple[int, dict[str, Any]]:  # type: ignore[no-untyped-def]
    r = cli("provision", *args, *FAST, "--output", "json")
    assert r.out.strip(), r.err
    return r.code, json.loads(r.out)


def _host(lab: dict[str, Any], name: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(f"{lab['control_url']}/lab/v1/bmcs/{name}/counters", timeout=10) as resp:
        return json.loads(resp.read())["host"]


def _power_actions(lab: dict[str, Any], name: str) -> int:
    c = counters(lab, name)
    return c["power_on"] + c["power_cycle"]


def _ports(cli, switch: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    r = cli("switch", "ports", switch, "--output", "json")
    assert r.code in (0, 1) and r.out, r.err  # 1: ports of servers not provisioned yet differ from the plan
    return {p["port"]: p for p in json.loads(r.out)}


@sqlite_only
def test_provision_takes_servers_to_ready_end_to_end(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    names = ["mn-tyo1-r12-01", "mn-tyo1-r12-02", "gpu-tyo1-r12-17"]
    before = {n: counters(lab, n) for n in names}
    assert all(c["power_state"] == "Off" for c in before.values())
    code, doc = _provision(cli, *names)
    rows = {r["server"]: r for r in doc["servers"]}
    assert code == 0, rows
    for n in names:
        assert rows[n]["result"] == "ready" and rows[n]["state"] == "ready", rows[n]
        assert rows[n]["done"] == ["bmc", "inspect", "firmware", "bios", "vlan-provisioning", "boot", "os",
                                   "vlan-production", "ansible", "accel"]  # fmt: skip
        show = json.loads(cli("server", "show", n, "--output", "json").out)
        assert show["state"] == "ready" and show["last_error"] is None
        c = counters(lab, n)
        # One power action each (they were off: a power-on, never a cycle), one PXE boot, one install.
        assert c["power_on"] == 1 and c["power_cycle"] == 0, c
        assert [b["source"] for b in c["boot_log"]] == ["Pxe"], c["boot_log"]
        assert _host(lab, n)["installs"] == 1 and _host(lab, n)["phase"] == "up"
        # The profile's BIOS settings were applied by the install boot.
        assert c["bios_pending"] == {}
    # The GPU server's 8 vbios were below the baseline: each flashed exactly once, and now at the baseline.
    gpu = counters(lab, "gpu-tyo1-r12-17")
    assert gpu["firmware_flashes"] == 8 and gpu["firmware_failures"] == 0
    assert set(v for k, v in gpu["firmware"].items() if "vbios" in k) == {"92.00.45.00.03"}
    assert counters(lab, "mn-tyo1-r12-01")["firmware_flashes"] == 0  # already at the baseline: never flashed
    # Switch ports: on the production VLAN of the plan now; the journal shows the provisioning VLAN in between.
    assert _ports(cli, "leaf-tyo1-r12-a")["Ethernet0"]["vlans"] == "100"
    assert _ports(cli, "leaf-tyo1-r12-b")["Ethernet16"]["vlans"] == "100"
    jobs = json.loads(cli("jobs", "show", str(doc["job"]), "--output", "json").out)
    steps = [s for s in jobs["steps"] if s["server"] == "mn-tyo1-r12-01"]
    assert [s["step"] for s in steps] == ["provision.begin"] + [f"provision.{s}" for s in rows[names[0]]["done"]]
    vlan_step = next(s for s in steps if s["step"] == "provision.vlan-provisioning")
    assert "200" in vlan_step["output"]
    # Ansible really ran the playbooks on the lab hosts: their markers are in each host's sandbox.
    hosts = Path(os.environ["FLEETCTL_LAB_DIR"]) / "hosts"
    applied = hosts / "mn-tyo1-r12-01" / "root" / "var" / "lib" / "fleetctl" / "applied"
    assert {p.name for p in applied.iterdir()} >= {"base.json", "mncore.json", "k8s-join.json"}
    assert json.loads((applied / "mncore.json").read_text())
    assert (hosts / "gpu-tyo1-r12-17" / "root" / "var" / "lib" / "fleetctl" / "applied" / "gpu.json").exists()
    # The Kubernetes join token reached the hosts' kubeadm but was never written by fleetctl or ansible-runner.
    for folder in (tmp_path / "data", tmp_path / "fleet.db"):
        for f in [folder] if folder.is_file() else folder.rglob("*"):
            if f.is_file():
                assert TOKEN.encode() not in f.read_bytes(), f
    # A second run finds them ready and changes nothing.
    code, doc = _provision(cli, *names)
    assert code == 0 and {r["result"] for r in doc["servers"]} == {"skipped"}
    assert all(_power_actions(lab, n) == 1 for n in names)


@sqlite_only
def test_dry_run_changes_nothing_in_the_store_or_on_devices(lab, cli, example_loaded):  # type: ignore[no-untyped-def]
    from sqlalchemy import create_engine, text

    names = ["mn-tyo1-r12-03", "gpu-tyo1-r12-18"]

    def devices() -> Any:
        out = {}
        for n in names:
            c = counters(lab, n)
            out[n] = {k: c[k] for k in ("power_state", "firmware", "bios_pending", "boot_log", "power_on", "power_cycle",
                                        "firmware_flashes")} | {"host": _host(lab, n)["phase"]}  # fmt: skip
        out["ports"] = [_ports(cli, "leaf-tyo1-r12-a")[p] for p in ("Ethernet2", "Ethernet17")]
        return out

    def store() -> Any:
        from fleetctl.config import database_url

        eng = create_engine(database_url())  # the lab's fleet, which the dry run reads
        with eng.connect() as c:
            out = {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in ("job", "job_step", "event")}
            q = "SELECT name, state, target_state, last_error, reservation, bmc_fingerprint FROM server ORDER BY name"
            out["servers"] = [tuple(r) for r in c.execute(text(q))]
        eng.dispose()
        return out

    dev0, store0 = devices(), store()
    r = cli("provision", *names, "--dry-run", "--output", "json")
    assert r.code == 0, r.out + r.err
    plan = {x["server"]: x["plan"] for x in json.loads(r.out)["servers"]}
    assert plan["gpu-tyo1-r12-18"]["firmware"][0].endswith("-> 92.00.45.00.03")
    assert "WorkloadProfile" in plan["mn-tyo1-r12-03"]["bios"]
    assert plan["mn-tyo1-r12-03"]["vlans"] == [f"leaf-tyo1-r12-{x} Ethernet2: access 200 during the install, then access 100" for x in "ab"]
    assert plan["mn-tyo1-r12-03"]["power"] == "on" and plan["mn-tyo1-r12-03"]["boot"] == "one-time pxe"
    assert plan["mn-tyo1-r12-03"]["playbooks"] == ["base.yml", "mncore.yml", "k8s-join.yml"]
    assert plan["gpu-tyo1-r12-18"]["playbooks"] == ["base.yml", "gpu.yml", "k8s-join.yml"]
    assert store() == store0
    assert devices() == dev0


@sqlite_only
def test_a_failing_server_fails_alone_with_its_step_and_reason(lab, cli):  # type: ignore[no-untyped-def]
    # mn-01: its BMC answers 500 to everything; gpu-17: its firmware update fails; mn-03: a board's device
    # node is missing on the installed host (the playbook's device check); gpu-18: the rack's budget has no
    # room for its 6500 W; mn-04: healthy.
    assert cli("lab", "fault", "mn-tyo1-r12-01", "--set", "error_rate=1").code == 0
    assert cli("lab", "fault", "gpu-tyo1-r12-17", "--set", "firmware_fail=true").code == 0
    assert cli("lab", "fault", "mn-tyo1-r12-03", "--set", "device_missing=1").code == 0
    assert cli("rack", "set", "tyo1/rack-12", "--power-budget", "5000").code == 0
    names = ["mn-tyo1-r12-01", "gpu-tyo1-r12-17", "mn-tyo1-r12-03", "gpu-tyo1-r12-18", "mn-tyo1-r12-04"]
    code, doc = _provision(cli, *names)
    assert code == 1
    rows = {r["server"]: r for r in doc["servers"]}
    assert rows["mn-tyo1-r12-04"]["result"] == "ready", rows["mn-tyo1-r12-04"]
    expect = {"mn-tyo1-r12-01": ("bmc", "HTTP 5"), "gpu-tyo1-r12-17": ("firmware", "failed"),
              "mn-tyo1-r12-03": ("ansible", "MN-Core device check"), "gpu-tyo1-r12-18": ("boot", "over its 5000 W budget")}  # fmt: skip
    for n, (step, words) in expect.items():
        assert rows[n]["result"] == "failed" and rows[n]["step"] == step, rows[n]
        assert words in rows[n]["error"], rows[n]["error"]
        show = json.loads(cli("server", "show", n, "--output", "json").out)
        assert show["state"] == "failed" and show["last_error"].startswith(step), show
    # The budget held at every instant: sum the peaks of the servers drawing power over the lab's timeline.
    peaks = {n: (6500 if n.startswith("gpu") else 1600) for n in RACK12}
    edges = []
    for n in RACK12:
        for span in counters(lab, n)["power_timeline"]:
            edges.append((span["on"], peaks[n]))
            if span["off"] is not None:
                edges.append((span["off"], -peaks[n]))
    draw, worst = 0, 0
    for _, delta in sorted(edges, key=lambda e: (e[0], e[1])):
        draw += delta
        worst = max(worst, draw)
    assert 0 < worst <= 5000, worst
    assert counters(lab, "gpu-tyo1-r12-18")["power_on"] == 0
    # Resuming after the faults are cleared: the firmware retry starts at the failed step.
    assert cli("lab", "fault", "gpu-tyo1-r12-17", "--clear").code == 0
    assert cli("lab", "fault", "mn-tyo1-r12-01", "--clear").code == 0
    assert cli("rack", "set", "tyo1/rack-12", "--power-budget", "46000").code == 0
    code, doc = _provision(cli, "gpu-tyo1-r12-17", "mn-tyo1-r12-01")
    rows = {r["server"]: r for r in doc["servers"]}
    assert code == 0, rows
    assert rows["gpu-tyo1-r12-17"]["resumed"] == ["bmc", "inspect"]
    assert rows["gpu-tyo1-r12-17"]["done"][0] == "firmware"


def _step_running(db: str, server: str, step: str, *, noted: str | None = None) -> bool:
    from sqlalchemy import create_engine, text

    eng = create_engine(db)
    try:
        with eng.connect() as c:
            rows = c.execute(text(
                "SELECT js.state, js.output FROM job_step js JOIN server s ON s.id = js.server_id "
                "WHERE s.name = :n AND js.name = :step ORDER BY js.id DESC LIMIT 1"),
                {"n": server, "step": f"provision.{step}"}).all()  # fmt: skip
    finally:
        eng.dispose()
    return bool(rows) and rows[0][0] == "running" and (noted is None or noted in (rows[0][1] or ""))


def _spawn(names: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([str(FLEETCTL), "provision", *names, *FAST, "--output", "json"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def _kill_when(proc: subprocess.Popen[str], cond: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"provision ended before the kill point: {proc.communicate()}"
        assert time.monotonic() < deadline, "the kill point was never reached"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the process and its ansible-playbook, as a crash would
    proc.wait()


@sqlite_only
def test_resume_after_sigkill_at_several_steps_never_flashes_or_cycles_twice(lab, cli, example_loaded):  # type: ignore[no-untyped-def]
    names = ["gpu-tyo1-r12-19", "mn-tyo1-r12-05", "mn-tyo1-r12-06"]
    from fleetctl.config import database_url

    env = dict(os.environ)
    db = database_url()  # the lab's fleet, where provision journals
    # 1. Killed while the GPU server's firmware is being flashed (the update goes on in the BMC).
    proc = _spawn(names, env)
    _kill_when(proc, lambda: _step_running(db, "gpu-tyo1-r12-19", "firmware", noted="updating"))
    # 2. Killed once a server's power action was decided and requested (the journal wrote it first).
    proc = _spawn(names, env)
    _kill_when(proc, lambda: any(_step_running(db, n, "boot", noted="power_action") for n in names[1:]))
    time.sleep(0.4)  # let the requested power-on take effect in the BMC, as it would after a crash
    # 3. Killed while a server waits for its OS, then 4. while Ansible runs.
    proc = _spawn(names, env)
    _kill_when(proc, lambda: any(_step_running(db, n, "os") for n in names))
    proc = _spawn(names, env)
    _kill_when(proc, lambda: any(_step_running(db, n, "ansible") for n in names), timeout=180)
    states = {json.loads(cli("server", "show", n, "--output", "json").out)["state"] for n in names}
    assert states <= {"preparing", "installing", "configuring", "validating", "ready"}, states
    # 5. The last run finishes the work from the journal (the dead runs' locks are recovered).
    code, doc = _provision(cli, *names)
    rows = {r["server"]: r for r in doc["servers"]}
    assert code == 0, rows
    assert all(r["result"] == "ready" for r in rows.values())
    assert all(r["resumed"] for r in rows.values()), rows  # nothing started over
    for n in names:
        c = counters(lab, n)
        assert c["power_on"] + c["power_cycle"] == 1, (n, c)  # powered on once across five runs
        assert [b["source"] for b in c["boot_log"]] == ["Pxe"], (n, c["boot_log"])
        assert _host(lab, n)["installs"] == 1
    gpu = counters(lab, "gpu-tyo1-r12-19")
    assert gpu["firmware_flashes"] == 8 and gpu["firmware_failures"] == 0  # 8 components, each flashed once
    events = json.loads(cli("events", "list", "--output", "json").out)
    assert any(e["action"] == "server.unlock" and "stale lock" in (e["detail"] or "") for e in events)


def test_two_processes_on_overlapping_targets_work_each_server_once(lab, cli, example_loaded):  # type: ignore[no-untyped-def]
    # Runs on SQLite and on PostgreSQL (the db_url fixture's two backends).
    a, b = ["mn-tyo1-r12-07", "mn-tyo1-r12-08"], ["mn-tyo1-r12-08", "mn-tyo1-r12-09"]
    env = dict(os.environ)
    pa, pb = _spawn(a, env), _spawn(b, env)
    out_a, err_a = pa.communicate(timeout=300)
    out_b, err_b = pb.communicate(timeout=300)
    assert out_a.strip() and out_b.strip(), err_a + err_b
    rows_a = {r["server"]: r for r in json.loads(out_a)["servers"]}
    rows_b = {r["server"]: r for r in json.loads(out_b)["servers"]}
    both = [rows_a["mn-tyo1-r12-08"], rows_b["mn-tyo1-r12-08"]]
    worked = [r for r in both if r["result"] != "locked"]
    locked = [r for r in both if r["result"] == "locked"]
    assert len(worked) == 1 and len(locked) == 1, both
    assert worked[0]["result"] == "ready"
    assert locked[0]["error"].startswith("locked by tester@ci:") and "for provision" in locked[0]["error"]
    assert rows_a["mn-tyo1-r12-07"]["result"] == "ready" and rows_b["mn-tyo1-r12-09"]["result"] == "ready", (rows_a, rows_b)
    jobs = {json.loads(out_a)["job"], json.loads(out_b)["job"]}
    steps = []
    for j in jobs:
        shown = json.loads(cli("jobs", "show", str(j), "--output", "json").out)["steps"]
        steps += [(j, s["step"]) for s in shown if s["server"] == "mn-tyo1-r12-08"]
    assert len({j for j, _ in steps}) == 1  # every step of mn-08 belongs to one job
    for n in ("mn-tyo1-r12-07", "mn-tyo1-r12-08", "mn-tyo1-r12-09"):
        assert _power_actions(lab, n) == 1 and _host(lab, n)["installs"] == 1


@sqlite_only
def test_a_host_failing_a_whole_play_does_not_take_the_others_down(lab, cli):  # type: ignore[no-untyped-def]
    # The only MN-Core host of the batch fails its device check: Ansible then ends the playbook for
    # everybody (every host of that play failed), before the GPU host's plays. The GPU host is run again
    # alone and reaches ready; the MN-Core host fails alone.
    assert cli("lab", "fault", "mn-tyo1-r12-10", "--set", "device_missing=2").code == 0
    code, doc = _provision(cli, "mn-tyo1-r12-10", "gpu-tyo1-r12-19")
    rows = {r["server"]: r for r in doc["servers"]}
    assert code == 1
    assert rows["gpu-tyo1-r12-19"]["result"] == "ready", rows["gpu-tyo1-r12-19"]
    assert rows["mn-tyo1-r12-10"]["step"] == "ansible" and "found 2 device nodes" in rows["mn-tyo1-r12-10"]["error"], rows
    gpu = Path(os.environ["FLEETCTL_LAB_DIR"]) / "hosts" / "gpu-tyo1-r12-19" / "root" / "var" / "lib" / "fleetctl" / "applied"
    assert (gpu / "gpu.json").exists() and (gpu / "k8s-join.json").exists()


@sqlite_only
def test_virtual_media_install_boots_the_iso_once_and_ejects_it(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    import yaml

    iso = "https://deploy.tyo1.example/images/debian-12-fleet.iso"
    doc = yaml.safe_load(cli("inventory", "export").out)
    doc["sites"][0]["provisioning"].update(boot="vmedia", image=iso)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert cli("inventory", "import", str(tmp_path / "site.yaml")).code == 0
    code, out = _provision(cli, "mn-tyo1-r12-11")
    assert code == 0, out
    c = counters(lab, "mn-tyo1-r12-11")
    assert [(b["source"], b.get("image")) for b in c["boot_log"]] == [("Cd", iso)]
    assert _host(lab, "mn-tyo1-r12-11")["installs"] == 1
    media = json.loads(cli("media", "show", "mn-tyo1-r12-11", "--output", "json").out)
    assert not any(m.get("inserted") for m in media), media  # ejected once the OS was up


@sqlite_only
def test_servers_in_service_are_refused_unless_reprovision_is_confirmed(example_loaded, cli, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", "/nonexistent-lab")  # no lab: nothing may be contacted
    for state in ("inspected", "preparing", "installing", "configuring", "validating", "ready", "in-service"):
        assert cli("server", "set-state", "mn-tyo1-r12-12", state, "--reason", "test").code == 0
    assert cli("server", "set-state", "mn-tyo1-r12-13", "rma", "--reason", "test", "--force").code == 0
    r = cli("provision", "mn-tyo1-r12-12", "mn-tyo1-r12-13", "--output", "json")
    assert r.code == 1, r.err
    rows = {x["server"]: x for x in json.loads(r.out)["servers"]}
    assert rows["mn-tyo1-r12-12"]["result"] == "refused" and "--reprovision" in rows["mn-tyo1-r12-12"]["error"]
    assert rows["mn-tyo1-r12-13"]["result"] == "refused" and "RMA" in rows["mn-tyo1-r12-13"]["error"]
    # --reprovision of a server in service must be confirmed; without a terminal, by --yes.
    r = cli("provision", "mn-tyo1-r12-12", "--reprovision")
    assert r.code == 2 and "give --yes" in r.err
    show = json.loads(cli("server", "show", "mn-tyo1-r12-12", "--output", "json").out)
    assert show["state"] == "in-service" and show["locked_by"] is None
    jobs = json.loads(cli("jobs", "list", "--output", "json").out)
    assert all(j["kind"] != "provision" or j["state"] != "running" for j in jobs)
