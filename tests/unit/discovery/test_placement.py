"""Placement from MAC sightings and the cabling plan: each kind of answer, and what is never guessed.

The inventory is a hand-made site file (one rack, a management switch cabled to three servers' BMCs,
a port cabled to nothing, a peer link to a leaf); the sightings are hand-made too (the switches'
own readers are tested against recordings in tests/unit/switch and tests/unit/snmp, and against the
lab in tests/e2e/test_discover_placement.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetctl.discovery.placement import UPLINK_MACS, MacSighting, Placement, PlacementProblem, place

SITE = """
models:
- {name: srv-1u, kind: server, vendor: Lab, model: Lab 1U, height: 1}
- {name: sw, kind: switch, vendor: Arista, model: DCS-7050SX3-48YC8, height: 1, ports: ['Ethernet[1-8]']}
sites:
- name: s1
  racks:
  - name: r1
    height: 42
    servers:
    - {name: a, serial: SA, model: srv-1u, position: 3, nics: [{name: bmc, mac: '02:00:00:00:00:0a'}]}
    - {name: b, serial: SB, model: srv-1u, position: 5, nics: [{name: bmc}]}
    - {name: c, serial: SC, model: srv-1u, position: 7, nics: [{name: bmc, mac: '02:00:00:00:00:0c'}]}
    - {name: d, serial: SD, model: srv-1u, position: 9, nics: [{name: bmc, mac: '02:00:00:00:00:0d'}]}
    switches:
    - {name: mgmt-1, model: sw, platform: eos, role: management, address: 192.0.2.1, position: 40}
    - {name: leaf-1, model: sw, platform: eos, role: leaf, address: 192.0.2.2, position: 41}
  cabling:
  - {switch: mgmt-1, port: Ethernet1, server: a, nic: bmc, vlans: [10]}
  - {switch: mgmt-1, port: Ethernet2, server: b, nic: bmc, vlans: [10]}
  - {switch: mgmt-1, port: Ethernet3, server: c, nic: bmc, vlans: [10]}
  - {switch: mgmt-1, port: Ethernet4, server: d, nic: bmc, vlans: [10]}
  - {switch: mgmt-1, port: Ethernet8, peer: leaf-1, peer_port: Ethernet8, vlans: [10], mode: trunk}
"""


@pytest.fixture
def conn(tmp_path: Path) -> Any:
    from fleetctl.inventory.service import import_path
    from fleetctl.store import get_engine, reset_engines

    (tmp_path / "site.yaml").write_text(SITE)
    url = f"sqlite:///{tmp_path / 'inv.db'}"
    import_path(tmp_path / "site.yaml", url=url)
    with get_engine(url).connect() as c:
        yield c
    reset_engines()


def _s(port: str, mac: str, switch: str = "mgmt-1", source: str = "cli") -> MacSighting:
    return MacSighting(switch, port, mac, 10, source)


def test_a_declared_mac_on_its_planned_port_is_placed(conn: Any) -> None:
    got = place(conn, [_s("Ethernet1", "02:00:00:00:00:0a")], ["02-00-00-00-00-0A"])
    assert got == {"02:00:00:00:00:0a": Placement("02:00:00:00:00:0a", "s1", "r1", 3, "mgmt-1", "Ethernet1", "bmc", "a")}


def test_a_new_bmc_on_a_port_planned_for_a_server_without_a_mac_takes_its_position(conn: Any) -> None:
    # The site file cables ports to servers, never to bare positions: the planned server is named.
    new = "02:00:00:00:00:0b"
    got = place(conn, [_s("Ethernet2", new, source="snmp")], [new])[new]
    assert isinstance(got, Placement) and (got.rack, got.position, got.server, got.nic) == ("r1", 5, "b", "bmc")


def test_uplinks_place_nothing_and_hide_nothing(conn: Any) -> None:
    new = "02:00:00:00:00:0b"
    # the peer link carries the MAC too (a planned switch-to-switch cable) ...
    sightings = [_s("Ethernet2", new), _s("Ethernet8", new), _s("Ethernet8", new, switch="leaf-1")]
    # ... and a port the plan does not cable, carrying more than UPLINK_MACS MACs, is an uplink as well
    sightings += [_s("Ethernet7", new, switch="leaf-1")] + [_s("Ethernet7", f"02:00:00:00:01:{k:02x}", switch="leaf-1")
                                                           for k in range(UPLINK_MACS)]  # fmt: skip
    got = place(conn, sightings, [new])[new]
    assert isinstance(got, Placement) and got.port == "Ethernet2"


def test_two_access_ports_is_a_problem_not_a_guess(conn: Any) -> None:
    mac = "02:00:00:00:00:0a"
    got = place(conn, [_s("Ethernet1", mac), _s("Ethernet5", mac, switch="leaf-1")], [mac])[mac]
    assert isinstance(got, PlacementProblem) and got.kind == "two-ports"
    assert got.ports == ("leaf-1:Ethernet5", "mgmt-1:Ethernet1")


def test_a_port_the_plan_does_not_cable_or_does_not_have(conn: Any) -> None:
    got = place(conn, [_s("Ethernet5", "02:00:00:00:00:51"), _s("Ethernet99", "02:00:00:00:00:52"),
                       _s("Ethernet1", "02:00:00:00:00:53", switch="not-in-inventory")],
                ["02:00:00:00:00:51", "02:00:00:00:00:52", "02:00:00:00:00:53"])  # fmt: skip
    assert {m: (p.kind if isinstance(p, PlacementProblem) else p) for m, p in got.items()} == {
        "02:00:00:00:00:51": "port-not-in-plan", "02:00:00:00:00:52": "port-not-in-plan", "02:00:00:00:00:53": "port-not-in-plan"}
    assert "cabled to no server" in got["02:00:00:00:00:51"].detail  # type: ignore[union-attr]
    assert "no port of the plan" in got["02:00:00:00:00:52"].detail  # type: ignore[union-attr]


def test_a_position_taken_by_a_server_with_another_mac(conn: Any) -> None:
    stranger = "02:00:00:00:00:ee"
    got = place(conn, [_s("Ethernet3", stranger)], [stranger])[stranger]
    assert isinstance(got, PlacementProblem) and got.kind == "position-taken"
    assert "c bmc" in got.detail and "02:00:00:00:00:0c" in got.detail


def test_a_declared_mac_found_on_another_servers_port_is_a_taken_position(conn: Any) -> None:
    # d's BMC MAC on b's port (b has no MAC yet): b's position is the plan's, d is declared elsewhere.
    mac = "02:00:00:00:00:0d"
    got = place(conn, [_s("Ethernet2", mac)], [mac])[mac]
    assert isinstance(got, PlacementProblem) and got.kind == "position-taken" and "d bmc" in got.detail


def test_only_the_macs_asked_and_seen_are_answered(conn: Any) -> None:
    assert place(conn, [_s("Ethernet1", "02:00:00:00:00:0a")], ["02:00:00:00:00:0c"]) == {}
    assert place(conn, [], []) == {}
    with pytest.raises(ValueError):
        place(conn, [], ["not a mac"])


def test_a_switch_that_cannot_be_read_is_a_line_not_an_abort(conn: Any) -> None:
    from fleetctl.discovery.placement import read_sightings

    # The hand-made switches have neither a credential nor SNMP settings: nothing is contacted.
    sightings, errors = read_sightings(conn, None, deadline_s=5)
    assert sightings == []
    assert errors == ["leaf-1: no credential reference in the inventory", "mgmt-1: no credential reference in the inventory"]
    assert read_sightings(conn, ["role=management"], deadline_s=5) == ([], ["mgmt-1: no credential reference in the inventory"])
