"""The lab switches' MAC tables (issue #23 item 5): one state, three answers (EOS CLI, SONiC CLI, SNMP).

No daemon: a SimSwitch of the folder's small specs, its CLI sessions called directly, its SNMP data
rendered. The EOS answer is read with ntc-templates (what real EOS output is parsed with), the SONiC
one is compared with sonic-utilities' layout (tests/data/switch/mactable/sonic_show_mac.raw).
"""

from __future__ import annotations

from fleetctl_lab.switch.eos import EOSSession
from fleetctl_lab.switch.snmp import render_snmprec
from fleetctl_lab.switch.sonic import SonicSession
from fleetctl_lab.switch.state import SimSwitch
from ntc_templates.parse import parse_output
from swlab_helpers import small_specs


def _switches() -> tuple[SimSwitch, SimSwitch]:
    eos, sonic = small_specs()[:2]
    eos.ports[4].learned = ["02:00:00:00:05:05"]  # Ethernet5: a BMC the plan does not cable
    return SimSwitch(eos), SimSwitch(sonic)


def test_eos_learns_each_cabled_nic_in_its_vlan_and_what_is_behind_a_port() -> None:
    eos, _ = _switches()
    rows = {(v, m, p.name) for v, m, p in eos.mac_table()}
    assert (100, "02:00:00:00:01:01", "Ethernet1") in rows
    assert (1, "02:00:00:00:02:01", "Ethernet2") in rows  # an unconfigured port: VLAN 1
    assert (1, "02:00:00:00:05:05", "Ethernet5") in rows
    assert not any(p == "Ethernet49/1" for _, _, p in rows)  # a switch neighbour's own MAC is not learned
    eos.set_fault("Ethernet1", "down", True)
    assert not any(p.name == "Ethernet1" for _, _, p in eos.mac_table())  # cable pulled: nothing learned


def test_a_sonic_port_in_no_vlan_learns_nothing() -> None:
    _, sonic = _switches()
    rows = {(m, p.name) for _, m, p in sonic.mac_table()}
    assert ("02:00:00:00:01:02", "Ethernet0") in rows
    assert not any(p == "Ethernet4" for _, p in rows)  # routed (no VLAN yet): no FDB


def test_eos_cli_prints_what_ntc_templates_reads() -> None:
    eos, _ = _switches()
    out = EOSSession(eos).execute("show mac address-table")
    parsed = parse_output(platform="arista_eos", command="show mac address-table", data=out)
    assert {(r["mac_address"], r["vlan_id"], tuple(r["destination_port"])) for r in parsed} == {
        ("0200.0000.0101", "100", ("Et1",)), ("0200.0000.0201", "1", ("Et2",)), ("0200.0000.0301", "1", ("Et3",)),
        ("0200.0000.0401", "1", ("Et4",)), ("0200.0000.0505", "1", ("Et5",))}  # fmt: skip
    assert "Total Mac Addresses for this criterion: 5" in out


def test_sonic_cli_prints_fdbshow_layout() -> None:
    _, sonic = _switches()
    out = SonicSession(sonic).execute("show mac")
    lines = out.splitlines()
    assert lines[0].split() == ["No.", "Vlan", "MacAddress", "Port", "Type"] and set(lines[1]) <= {"-", " "}
    assert "02:00:00:00:01:02".upper() in out and lines[-1] == "Total number of entries 1"


def test_snmp_serves_the_same_table_in_q_bridge_mib() -> None:
    eos, _ = _switches()
    rec = render_snmprec(eos)
    fdb = {line.split("|")[0]: line.split("|")[2] for line in rec.splitlines() if line.startswith("1.3.6.1.2.1.17.7.1.2.2.1.2.")}
    assert fdb["1.3.6.1.2.1.17.7.1.2.2.1.2.100.2.0.0.0.1.1"] == "1"  # VLAN 100, 02:00:00:00:01:01 on bridge port 1
    assert len(fdb) == len(eos.mac_table())
    assert "1.3.6.1.2.1.17.1.4.1.2.1|2|1" in rec  # bridge port 1 is ifIndex 1
