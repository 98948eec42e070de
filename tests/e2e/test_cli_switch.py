"""The switch commands end to end: the real CLI against the lab's EOS and SONiC switches.

One lab (BMCs, SSH switches, snmpsim agents) serves the module; each test
works on its own ports so the order does not matter. The lab's control
endpoint tells what the switch really holds after a command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests_helpers_bmc import lab_db_of  # (path set in conftest)

REPO = Path(__file__).resolve().parents[2]
FLEETCTL = str(Path(sys.executable).with_name("fleetctl"))


@pytest.fixture(scope="module")
def swlab(tmp_path_factory):  # type: ignore[no-untyped-def]
    pytest.importorskip("asyncssh", reason="the switch lab needs asyncssh")
    pytest.importorskip("snmpsim", reason="the switch lab's SNMP agents need snmpsim")
    tmp = tmp_path_factory.mktemp("swlab")
    env = {**os.environ, "FLEETCTL_DB": str(tmp / "inv.db"), "FLEETCTL_LAB_DIR": str(tmp / "lab"),
           "FLEETCTL_DATA_DIR": str(tmp / "data"), "FLEETCTL_ACTOR": "tester@ci"}  # fmt: skip
    subprocess.run([FLEETCTL, "inventory", "import", str(REPO / "inventory")], env=env, check=True, capture_output=True)
    # The lab serves these servers and the switches cabled to them, and nothing else.
    serve = [arg for i in (1, 2, 3) for arg in ("--server", f"mn-tyo1-r12-0{i}")]
    up = subprocess.run([FLEETCTL, "lab", "up", *serve], env=env, capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    env["FLEETCTL_DB"] = lab_db_of(up.stdout)  # the lab is a fleet of its own
    doc = json.loads((tmp / "lab" / "lab.json").read_text())
    if not doc.get("switches"):
        subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)
        pytest.skip("the lab serves no switches here (asyncssh or snmpsim missing)")
    yield env
    subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)


@pytest.fixture
def sw(swlab, monkeypatch, cli):  # type: ignore[no-untyped-def]
    for k in ("FLEETCTL_DB", "FLEETCTL_LAB_DIR", "FLEETCTL_DATA_DIR"):
        monkeypatch.setenv(k, swlab[k])
    return cli


def test_facts_from_both_platforms(sw):  # type: ignore[no-untyped-def]
    r = sw("switch", "facts", "rack-12", "--output", "json")
    assert r.code == 0, r.out + r.err
    rows = {x["switch"]: x for x in json.loads(r.out)}
    assert rows["mgmt-tyo1-r12"]["platform"] == "eos" and rows["mgmt-tyo1-r12"]["serial"] == "JPE010123"
    assert rows["leaf-tyo1-r12-a"]["platform"] == "sonic" and rows["leaf-tyo1-r12-a"]["os_version"].startswith("SONiC")


def test_apply_plan_dry_run_then_for_real_on_eos_and_sonic(sw):  # type: ignore[no-untyped-def]
    r = sw("switch", "apply-plan", "mn-tyo1-r12-02", "--dry-run", "--output", "json")
    assert r.code == 0, r.out
    rows = {(x["switch"], x["port"]): x for x in json.loads(r.out)}
    assert rows[("mgmt-tyo1-r12", "Ethernet2")]["result"] == "would change"
    assert rows[("leaf-tyo1-r12-a", "Ethernet1")]["result"] == "would change"
    # the dry run changed nothing
    ports = {p["port"]: p for p in json.loads(sw("switch", "ports", "mgmt-tyo1-r12", "--output", "json").out)}
    assert ports["Ethernet2"]["vlans"] == "1"
    r = sw("switch", "apply-plan", "mn-tyo1-r12-02", "--save", "--output", "json")
    assert r.code == 0, r.out
    assert {x["result"] for x in json.loads(r.out)} == {"changed"}
    ports = {p["port"]: p for p in json.loads(sw("switch", "ports", "mgmt-tyo1-r12", "--output", "json").out)}
    assert ports["Ethernet2"]["vlans"] == "10" and ports["Ethernet2"]["matches_plan"] is True
    assert ports["Ethernet3"]["matches_plan"] is False  # another server's port was not touched
    leaf = {p["port"]: p for p in json.loads(sw("switch", "ports", "leaf-tyo1-r12-a", "--output", "json").out)}
    assert leaf["Ethernet1"]["mode"] == "access" and leaf["Ethernet1"]["vlans"] == "100"
    # a second run has nothing to do
    r = sw("switch", "apply-plan", "mn-tyo1-r12-02", "--output", "json")
    assert {x["result"] for x in json.loads(r.out)} == {"ok"}


def test_uplinks_and_in_service_ports_need_force(sw):  # type: ignore[no-untyped-def]
    r = sw("switch", "vlan", "set", "leaf-tyo1-r12-a", "Ethernet120", "--access", "100", "--output", "json")
    assert r.code == 2 and json.loads(r.out)[0]["result"] == "refused"  # a refusal is bad input, not a failure
    assert "protected" in json.loads(r.out)[0]["message"] and "--force" in json.loads(r.out)[0]["message"]
    assert sw("server", "set-state", "mn-tyo1-r12-03", "in-service", "--reason", "t", "--force").code == 0
    r = sw("switch", "apply-plan", "mn-tyo1-r12-03", "--output", "json")
    assert r.code == 2 and {x["result"] for x in json.loads(r.out)} == {"refused"}
    job = json.loads(sw("jobs", "list", "--kind", "switch.apply-plan", "--output", "json").out)[0]
    assert job["state"] == "failed" and job["failed"] == 3  # the journal does not call refusals a success
    r = sw("switch", "apply-plan", "mn-tyo1-r12-03", "--force", "--output", "json")
    assert r.code == 0 and {x["result"] for x in json.loads(r.out)} == {"changed"}


def test_vlan_set_by_hand_and_bad_input(sw):  # type: ignore[no-untyped-def]
    r = sw("switch", "vlan", "set", "mgmt-tyo1-r12", "Ethernet30", "--access", "10", "--output", "json")
    assert r.code == 0, r.out
    assert json.loads(r.out)[0]["result"] == "changed"
    r = sw("switch", "vlan", "set", "mgmt-tyo1-r12", "Ethernet30", "--access", "3999", "--output", "json")
    assert r.code == 2 and "does not exist" in json.loads(r.out)[0]["message"]
    assert sw("switch", "vlan", "set", "mgmt-tyo1-r12", "Ethernet30").code == 2
    r = sw("switch", "facts", "no-such-switch")
    assert r.code == 2 and "no switch, rack or site named 'no-such-switch'" in r.err


def test_verify_cabling_over_cli_and_snmp_finds_injected_faults(sw):  # type: ignore[no-untyped-def]
    assert sw("switch", "verify-cabling", "leaf-tyo1-r12-b").code == 0
    assert sw("lab", "fault", "leaf-tyo1-r12-b", "--port", "Ethernet7", "--set", "miscabled=true").code == 0
    assert sw("lab", "fault", "leaf-tyo1-r12-b", "--port", "Ethernet9", "--set", "down=true").code == 0
    for extra in ([], ["--snmp"]):
        r = sw("switch", "verify-cabling", "leaf-tyo1-r12-b", *extra, "--output", "json")
        assert r.code == 1, r.out
        bad = {(x["port"], x["finding"]) for x in json.loads(r.out) if x["finding"] != "ok"}
        assert bad == {("Ethernet7", "miscabled"), ("Ethernet8", "miscabled"), ("Ethernet9", "missing")}, (extra, bad)
    assert sw("lab", "fault", "leaf-tyo1-r12-b", "--clear").code == 0
    assert sw("switch", "verify-cabling", "leaf-tyo1-r12-b").code == 0


def test_poll_shows_rates_errors_and_planned_ports_down(sw):  # type: ignore[no-untyped-def]
    r = sw("switch", "poll", "mgmt-tyo1-r12", "--interval", "0", "--output", "json")
    assert r.code == 0, r.out
    assert sw("lab", "fault", "mgmt-tyo1-r12", "--port", "Ethernet11", "--set", "crc=200").code == 0
    assert sw("lab", "fault", "mgmt-tyo1-r12", "--port", "Ethernet12", "--set", "down=true").code == 0
    r = sw("switch", "poll", "mgmt-tyo1-r12", "--interval", "1.5", "--output", "json")
    assert r.code == 1
    row = json.loads(r.out)[0]
    assert row["planned_down"] == ["Ethernet12"]
    [err] = row["errors"]
    rate = float(err.split()[1].removesuffix("/s"))
    assert err.startswith("Ethernet11 ") and 150 <= rate <= 250
    assert any("Mb/s" in b for b in row["busiest"])
    assert sw("lab", "fault", "mgmt-tyo1-r12", "--clear").code == 0
    # a hot ASIC is flagged by its reading even where the agent calls it ok
    assert sw("lab", "fault", "mgmt-tyo1-r12", "--set", "overheat=true").code == 0
    r = sw("switch", "poll", "mgmt-tyo1-r12", "--interval", "0", "--output", "json")
    assert r.code == 1 and any(" C" in x or "nonoperational" in x for x in json.loads(r.out)[0]["sensors"]), r.out
    assert sw("lab", "fault", "mgmt-tyo1-r12", "--clear").code == 0
