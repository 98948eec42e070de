"""The switch driver's MAC table (``mac_table``) against recorded outputs of real switches.

Recordings: tests/data/switch/mactable/ (SOURCES.md names each one's repository, path, commit and
licence). Each platform's command and parser are data (platforms/*.yaml); these tests hold them to
what the switches print.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetctl_drivers.switch import NetmikoSwitch
from fleetctl_drivers.switch import parse as P
from fleetctl_drivers.switch.platform import load_platform

from fleetctl.errors import SwitchError
from fleetctl.interfaces.switch import MacEntry, NoopMacTable, SwitchTarget, canonical_mac

DATA = Path(__file__).resolve().parents[2] / "data" / "switch" / "mactable"


def _entries(platform: str, name: str) -> list[MacEntry]:
    p = load_platform(platform)
    return P.to_mac_entries(P.parse_show(p.show["mac_table"], (DATA / name).read_text()), p.interface_names)


def test_eos_unicast_rows_are_entries_and_multicast_groups_are_not() -> None:
    got = _entries("eos", "arista_eos_show_mac_address-table.raw")
    assert len(got) == 19  # 23 records (ntc-templates' .yml): 3 multi-port groups and one non-MAC left out
    assert got[0] == MacEntry(mac="00:12:36:94:03:ec", port="Ethernet7", vlan=3, kind="static")
    assert MacEntry(mac="00:1c:73:13:a3:de", port="Ethernet32", vlan=55, kind="dynamic") in got
    assert MacEntry(mac="00:1c:82:24:36:d7", port="Port-Channel2", vlan=101, kind="dynamic") in got
    assert not any(e.mac.startswith(("c8:67", "53:09", "42:42")) for e in got)


def test_nxos_rows_and_a_layout_the_template_does_not_follow() -> None:
    got = _entries("nxos", "cisco_nxos_show_mac_address-table.raw")
    assert [(e.mac, e.port, e.vlan) for e in got] == [
        ("50:87:89:a1:de:75", "sup-eth1(R)", 100), ("00:0a:00:0a:00:0a", "Drop", 145), ("00:0e:00:0e:00:0e", "port-channel10", 145)]
    with pytest.raises(SwitchError, match="not recognised"):
        _entries("nxos", "cisco_nxos_show_mac_address-table3.raw")


def test_sonic_show_mac() -> None:
    got = _entries("sonic", "sonic_show_mac.raw")
    assert [(e.mac, e.port, e.vlan, e.kind) for e in got] == [
        ("11:22:33:44:55:66", "Ethernet0", 2, "dynamic"), ("11:22:33:66:55:44", "Ethernet4", 3, "static"),
        ("66:55:44:33:22:11", "Ethernet0", 4, "dynamic"), ("77:66:44:33:22:11", "1000000000fff", 4, "dynamic"),
        ("77:66:55:44:22:11", "Ethernet4", 5, "dynamic")]  # fmt: skip
    assert _entries("sonic", "sonic_show_mac_empty.raw") == []


def test_garbage_is_refused_not_read_as_an_empty_table() -> None:
    for platform in ("eos", "nxos", "sonic"):
        with pytest.raises(SwitchError):
            P.parse_show(load_platform(platform).show["mac_table"], "% this is not a MAC table\n")


class _Fake:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def send_command(self, command: str, **_: object) -> str:
        return self.answers[command]

    def enable(self) -> str:
        return ""

    def disconnect(self) -> None:
        pass


def test_the_driver_keeps_front_panel_ports_only_and_caps_rows() -> None:
    text = (DATA / "cisco_nxos_show_mac_address-table.raw").read_text()
    text3 = text.replace("*    145        000e.000e.000e   static     -        F      F    Po10",
                         "*    145        000e.000e.000e   static     -        F      F    Eth1/7\n"
                         "*    145        000e.000e.000f   dynamic    0        F      F    Eth1/8")  # fmt: skip
    fake = _Fake({"show mac address-table": text3})
    sw = NetmikoSwitch(SwitchTarget("leaf1", "192.0.2.1", platform="nxos"), connect=lambda **_: fake)
    assert [(e.port, e.mac) for e in sw.get_mac_table()] == [("Ethernet1/7", "00:0e:00:0e:00:0e"), ("Ethernet1/8", "00:0e:00:0e:00:0f")]
    assert len(sw.get_mac_table(limit=1)) == 1
    linux = NetmikoSwitch(SwitchTarget("srv", "192.0.2.2", platform="linux"), connect=lambda **_: fake)
    assert isinstance(linux.mac_table, NoopMacTable)
    with pytest.raises(SwitchError, match="MAC address table is not supported"):
        linux.get_mac_table()


@pytest.mark.parametrize(("text", "mac"), [("0012.3694.03EC", "00:12:36:94:03:ec"), ("11:22:33:44:55:66", "11:22:33:44:55:66"),
                                          ("00-1e-58-a3-2f-cd", "00:1e:58:a3:2f:cd"), ("001e58-a32fcd", "00:1e:58:a3:2f:cd"),
                                          ("jenn.3057.8423", None), ("", None), ("0012.3694", None)])  # fmt: skip
def test_canonical_mac(text: str, mac: str | None) -> None:
    assert canonical_mac(text) == mac
