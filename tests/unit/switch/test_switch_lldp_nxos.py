"""NX-OS LLDP neighbours whose chassis id is not a MAC are read (issue 20, item 8).

ntc-templates' NX-OS template reads only MAC-shaped chassis ids and requires a
one-word port id and system name, so a server NIC that sends a locally
assigned chassis id (the recording: an HPE ProLiant) vanishes from the
neighbour list. The nxos platform uses a template of ours instead
(platforms/nxos/show_lldp_neighbors_detail.textfsm).
"""

from __future__ import annotations

from pathlib import Path

from fleetctl_drivers.switch import NetmikoSwitch, load_platform, parse

from fleetctl.interfaces.switch import SwitchTarget

DATA = Path(__file__).resolve().parents[2] / "data" / "switch" / "nxos"
RECORDING = DATA / "show_lldp_neighbors_detail_locally_assigned.raw"  # genieparser, Apache-2.0: see SOURCES.md


class _Fake:
    def __init__(self, text: str) -> None:
        self.text = text

    def send_command(self, command: str, **_: object) -> str:
        assert command == "show lldp neighbors detail"
        return self.text

    def disconnect(self) -> None:
        pass


def _neighbors(text: str) -> dict[str, tuple[str | None, str | None, str | None]]:
    fake = _Fake(text)
    sw = NetmikoSwitch(SwitchTarget("spine1", "192.0.2.9", platform="nxos"), connect=lambda **_: fake)
    return {n.local_port: (n.remote_chassis_id, n.remote_port, n.remote_system) for n in sw.lldp.neighbors()}


def test_recorded_server_nic_with_a_locally_assigned_chassis_id_is_read() -> None:
    got = _neighbors(RECORDING.read_text())
    assert len(got) == 7
    # the ProLiant: chassis id locally assigned, port id with spaces, system name "null" (none sent)
    assert got["Ethernet1/14"] == ("3935-5A43-4A37-39373638-35303036574C", "PCI-E Slot 1, Port 2", None)
    assert got["Ethernet1/38"] == ("e0cb.bcff.4290", "0", "VPN-1")
    assert got["Ethernet1/54"] == ("70ea.1aff.854d", "Ethernet1/54", "NX2-2")


def test_ntc_templates_drops_that_neighbour() -> None:
    # Why our template exists. Should ntc-templates read it one day, use theirs again.
    theirs = parse.run_parser({"textfsm": ["cisco_nxos", "show lldp neighbors detail"]}, RECORDING.read_text())
    assert "Eth1/14" not in {r["local_interface"] for r in theirs}
    assert len(theirs) == 6


def test_other_chassis_id_subtypes_hand_made() -> None:
    # Hand-made (no public recording found): a hostname-like locally assigned id, a network
    # address, a system name not advertised, and a neighbour printed without a "Vlan ID:" line.
    text = (
        "Capability codes:\n  (R) Router, (B) Bridge, (T) Telephone, (C) DOCSIS Cable Device\n"
        "Device ID            Local Intf      Hold-time  Capability  Port ID\n\n"
        "Chassis id: gpu-node-07.rack3\nPort id: enp65s0f0np0\nLocal Port id: Eth1/7\n"
        "System Name: gpu-node-07\nManagement Address: 10.0.3.7\n\n"
        "Chassis id: 10.0.3.8\nPort id: eth0\nLocal Port id: Eth1/8\nSystem Name: not advertised\n"
        "Vlan ID: 30\n\nTotal entries displayed: 2\n"
    )
    assert _neighbors(text) == {
        "Ethernet1/7": ("gpu-node-07.rack3", "enp65s0f0np0", "gpu-node-07"),
        "Ethernet1/8": ("10.0.3.8", "eth0", None),
    }


def test_ours_is_what_the_platform_uses() -> None:
    spec = load_platform("nxos").show["lldp"].parser
    assert spec["template"] == "nxos/show_lldp_neighbors_detail.textfsm"
    assert spec["replaces"] == ["cisco_nxos", "show lldp neighbors detail"]
