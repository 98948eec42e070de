"""Lab switches built from the example site's cabling, and the switch lab inside the lab daemon."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from swlab_helpers import LLDP_REM_SYSNAME, SYS_NAME, connect, need_deps, snmp_get

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def example_specs(cli: Any) -> list[Any]:
    need_deps()
    r = cli("inventory", "import", str(REPO / "inventory"))
    assert r.code == 0, r.err
    from fleetctl_lab.switch.inventory import switch_specs_from_inventory

    from fleetctl.store import get_engine

    with get_engine().connect() as conn:
        return switch_specs_from_inventory(conn, "labpass", names={"mn-tyo1-r12-01"})


def test_specs_follow_the_cabling_plan(example_specs: list[Any]) -> None:
    by = {s.name: s for s in example_specs}
    assert sorted(by) == ["leaf-tyo1-r12-a", "leaf-tyo1-r12-b", "mgmt-tyo1-r12"]  # cabled to the server
    leaf = by["leaf-tyo1-r12-a"]
    assert leaf.platform == "sonic" and leaf.os_version == "SONiC.202311.1"
    ports = {p.name: p for p in leaf.ports}
    assert len(ports) == 128
    nb = ports["Ethernet0"].neighbor
    assert (nb.system, nb.port, nb.kind) == ("mn-tyo1-r12-01", "eth0", "server") and nb.chassis_id
    assert ports["Ethernet0"].mode == "access" and ports["Ethernet0"].vlans == []  # unconfigured until apply-plan
    up = ports["Ethernet120"]
    assert (up.neighbor.system, up.neighbor.port, up.neighbor.kind) == ("spine-tyo1-01", "Ethernet24", "switch")
    assert up.mode == "trunk" and up.vlans == [10, 100, 200]
    assert ports["Ethernet100"].neighbor is None
    mgmt = by["mgmt-tyo1-r12"]
    assert mgmt.platform == "eos" and mgmt.model == "DCS-7050SX3-48YC8"
    mp = {p.name: p for p in mgmt.ports}
    assert mp["Ethernet1"].neighbor.system == "mn-tyo1-r12-01" and mp["Ethernet1"].neighbor.port == "bmc"
    assert mp["Ethernet1"].speed_mbps == 25_000 and mp["Ethernet49/1"].speed_mbps == 100_000


def test_lldp_from_the_cabling_over_ssh_and_snmp(example_specs: list[Any], tmp_path: Path) -> None:
    from fleetctl_lab.switch import SwitchLabConfig, run_switch_lab_in_thread

    cfg = SwitchLabConfig(state_dir=str(tmp_path), base_address="127.152.0.1")
    with run_switch_lab_in_thread(example_specs, cfg) as lab:
        c = connect(lab, "mgmt-tyo1-r12")
        try:
            rows = {r["local_interface"]: r for r in c.send_command("show lldp neighbors", use_textfsm=True)}
            assert (rows["Et1"]["neighbor_name"], rows["Et1"]["neighbor_interface"]) == ("mn-tyo1-r12-01", "bmc")
            assert len(rows) == 19  # 16 MN-Core + 3 GPU servers in rack-12
        finally:
            c.disconnect()
        c = connect(lab, "leaf-tyo1-r12-b")
        try:
            rows = {ln.split()[0]: ln.split()[1:3] for ln in c.send_command("show lldp table").splitlines()
                    if ln.startswith("Ethernet")}  # fmt: skip
            assert rows["Ethernet120"] == ["spine-tyo1-01", "Ethernet25"] and rows["Ethernet0"] == ["mn-tyo1-r12-01", "eth1"]
        finally:
            c.disconnect()
        assert snmp_get(lab, "leaf-tyo1-r12-a", SYS_NAME, f"{LLDP_REM_SYSNAME}.0.121.1") == {
            SYS_NAME: "leaf-tyo1-r12-a", f"{LLDP_REM_SYSNAME}.0.121.1": "spine-tyo1-01"}  # fmt: skip


def test_the_daemon_serves_switches_and_lab_json_lists_them(tmp_path: Path) -> None:
    need_deps()
    from fleetctl_lab.daemon import lab_down, lab_status, lab_up
    from swlab_helpers import small_specs

    sd = tmp_path / "lab"
    try:
        st = lab_up([], sd, switches=small_specs(), switch_config={"base_address": "127.153.0.1"}, timeout=60)
        assert st["running"] and st["count"] == 0
        doc = json.loads((sd / "lab.json").read_text())
        assert "labpass" not in json.dumps(doc)
        sw = doc["switches"]["lab-eos-1"]
        assert sw["platform"] == "eos" and sw["device_type"] == "arista_eos" and sw["community"] == "public@lab-eos-1"
        assert sw["ssh"].startswith("127.153.0.1:") and sw["snmp"].startswith("127.153.0.1:")

        class Via:  # the helpers' view of a lab, from lab.json
            def status(self) -> dict[str, Any]:
                return doc

            def ssh_of(self, n: str) -> tuple[str, int]:
                h, _, p = doc["switches"][n]["ssh"].rpartition(":")
                return h, int(p)

            def snmp_of(self, n: str) -> tuple[str, int]:
                h, _, p = doc["switches"][n]["snmp"].rpartition(":")
                return h, int(p)

            def community(self, n: str) -> str:
                return doc["switches"][n]["community"]

        c = connect(Via(), "lab-sonic-1")
        try:
            assert "SONiC Software Version" in c.send_command("show version")
        finally:
            c.disconnect()
        assert snmp_get(Via(), "lab-eos-1", SYS_NAME)[SYS_NAME] == "lab-eos-1"
        import urllib.request

        with urllib.request.urlopen(doc["switch_control_url"] + "/lab/v1/switches", timeout=5) as r:
            assert sorted(json.load(r)) == ["lab-eos-1", "lab-sonic-1"]
    finally:
        assert lab_down(sd)["stopped"]
    assert not lab_status(sd)["running"]


def test_taken_ports_fall_back_to_ephemeral_ones(swlab: Any, tmp_path: Path) -> None:
    """A second lab on the same addresses (another user, another test run) still comes up."""
    from fleetctl_lab.switch import SwitchLabConfig, run_switch_lab_in_thread
    from swlab_helpers import small_specs

    taken_ssh = swlab.ssh_of("lab-eos-1")
    cfg = SwitchLabConfig(state_dir=str(tmp_path), base_address=taken_ssh[0])
    with run_switch_lab_in_thread(small_specs(), cfg) as lab:
        ssh, snmp = lab.ssh_of("lab-eos-1"), lab.snmp_of("lab-eos-1")
        assert ssh[0] == taken_ssh[0] and ssh[1] != taken_ssh[1]
        assert snmp[0] == taken_ssh[0] and snmp[1] != swlab.snmp_of("lab-eos-1")[1]
        c = connect(lab, "lab-eos-1")
        try:
            assert c.find_prompt() == "lab-eos-1>"
        finally:
            c.disconnect()
        assert snmp_get(lab, "lab-eos-1", SYS_NAME)[SYS_NAME] == "lab-eos-1"
