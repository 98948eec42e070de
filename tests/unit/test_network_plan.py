"""The cabling plan as port configurations and expected LLDP neighbours (no switch needed)."""

from __future__ import annotations

from types import SimpleNamespace as N


def _conn():  # type: ignore[no-untyped-def]
    from fleetctl.store import get_engine

    return get_engine().connect()


def test_port_plan_names_only_server_ports_of_the_target(example_loaded):  # type: ignore[no-untyped-def]
    from fleetctl.workflows.network import port_plan

    with _conn() as c:
        plan = port_plan(c, servers={"mn-tyo1-r12-01", "gpu-tyo1-r12-19"})
    assert set(plan) == {"mgmt-tyo1-r12", "leaf-tyo1-r12-a", "leaf-tyo1-r12-b"}
    ports = {(w.switch, w.port): (w.mode, w.vlans, w.who) for ws in plan.values() for w in ws}
    assert ports[("leaf-tyo1-r12-a", "Ethernet0")] == ("access", [100], "mn-tyo1-r12-01/eth0")
    assert ports[("mgmt-tyo1-r12", "Ethernet19")] == ("access", [10], "gpu-tyo1-r12-19/bmc")
    assert len(ports) == 6  # three NICs each, no uplink ever
    assert all(not w.uplink for ws in plan.values() for w in ws)
    cfg = plan["leaf-tyo1-r12-a"][0].config()
    assert cfg.access_vlan == 100 and str(cfg.mode) == "access"


def test_uplinks_and_in_service_ports_are_protected(example_loaded, cli):  # type: ignore[no-untyped-def]
    from fleetctl.workflows.network import protected_ports

    assert cli("server", "set-state", "mn-tyo1-r12-02", "in-service", "--reason", "t", "--force").code == 0
    with _conn() as c:
        prot = protected_ports(c)
    assert {"Ethernet120", "Ethernet121"} <= prot["leaf-tyo1-r12-a"]  # uplinks to both spines
    assert "Ethernet24" in prot["spine-tyo1-01"]  # and the spine's end of them
    assert "Ethernet1" in prot["leaf-tyo1-r12-a"]  # mn-tyo1-r12-02/eth0 is in service
    assert "Ethernet0" not in prot["leaf-tyo1-r12-a"]


def test_lldp_comparison_finds_miscabled_missing_and_unexpected(example_loaded):  # type: ignore[no-untyped-def]
    from fleetctl.workflows.network import compare_lldp, expected_neighbours

    with _conn() as c:
        exp = expected_neighbours(c, {"leaf-tyo1-r12-a", "spine-tyo1-01"})
    leaf = exp["leaf-tyo1-r12-a"]
    assert leaf["Ethernet0"].system == "mn-tyo1-r12-01" and "eth0" in leaf["Ethernet0"].ports
    assert exp["spine-tyo1-01"]["Ethernet24"].system == "leaf-tyo1-r12-a"  # the far end of a switch link
    seen = [N(local_port=p, remote_system=e.system, remote_port=sorted(e.ports)[0]) for p, e in leaf.items()]
    assert compare_lldp("leaf-tyo1-r12-a", leaf, seen).problems == 0
    seen = [s for s in seen if s.local_port != "Ethernet3"]  # a cable gone
    seen[0] = N(local_port=seen[0].local_port, remote_system="mn-tyo1-r12-09", remote_port="eth0")  # swapped
    seen.append(N(local_port="Ethernet99", remote_system="stray", remote_port="eth9"))  # not in the plan
    rep = compare_lldp("leaf-tyo1-r12-a", leaf, seen)
    assert [m["port"] for m in rep.missing] == ["Ethernet3"]
    assert len(rep.miscabled) == 1 and rep.miscabled[0]["port"] == "Ethernet0"
    assert rep.miscabled[0]["expected"].startswith("mn-tyo1-r12-01:") and rep.miscabled[0]["found"] == "mn-tyo1-r12-09:eth0"
    assert rep.unexpected == [{"port": "Ethernet99", "found": "stray:eth9"}]
    # A neighbour that reports its MAC as port id, or an FQDN, still matches.
    ok = [N(local_port="Ethernet0", remote_system="mn-tyo1-r12-01.tyo1.example", remote_port="02:fc:01:0c:01:01")]
    assert compare_lldp("x", {"Ethernet0": leaf["Ethernet0"]}, ok).problems == 0
