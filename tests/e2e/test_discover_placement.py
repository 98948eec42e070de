"""Placement end to end: the lab's switches' MAC tables, read over SNMP and over the CLI, place every lab
BMC where the lab's fleet plans it, and each unregistered BMC as `lab up --unregistered` cabled it.

One lab for the module: three servers of rack-12 served (with their management and leaf switches,
which hold the MACs of every NIC cabled to them), and three unregistered BMCs: a lease, a fixed
address and one on a port the plan cables to nothing.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import lab_db_of  # (path set in conftest)

REPO = Path(__file__).resolve().parents[2]
FLEETCTL = str(Path(sys.executable).with_name("fleetctl"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("asyncssh", reason="the switch lab needs asyncssh")
    pytest.importorskip("snmpsim", reason="the switch lab's SNMP agents need snmpsim")
    tmp = tmp_path_factory.mktemp("placelab")
    env = {**os.environ, "FLEETCTL_DB": str(tmp / "inv.db"), "FLEETCTL_LAB_DIR": str(tmp / "lab"),
           "FLEETCTL_DATA_DIR": str(tmp / "data"), "FLEETCTL_ACTOR": "tester@ci"}  # fmt: skip
    subprocess.run([FLEETCTL, "inventory", "import", str(REPO / "inventory")], env=env, check=True, capture_output=True)
    serve = [arg for i in (1, 2, 3) for arg in ("--server", f"mn-tyo1-r12-0{i}")]
    up = subprocess.run([FLEETCTL, "lab", "up", *serve, "--no-hosts", "--unregistered", "3"], env=env, capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    env["FLEETCTL_DB"] = lab_db_of(up.stdout)
    if not json.loads((tmp / "lab" / "lab.json").read_text()).get("switches"):
        subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)
        pytest.skip("the lab serves no switches here (asyncssh or snmpsim missing)")
    yield env, tmp / "lab"
    subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)


def _planned(c: Any) -> dict[str, tuple[str, int, str]]:
    """Every BMC NIC the lab's fleet cables to a switch, by MAC: (rack, position, server)."""
    from sqlalchemy import text

    q = text("SELECT nic.mac, rack.name, server.position, server.name FROM link JOIN nic ON nic.id = link.nic_id "
             "JOIN server ON server.id = nic.server_id JOIN rack ON rack.id = server.rack_id "
             "WHERE nic.name = 'bmc' AND nic.mac IS NOT NULL")  # fmt: skip
    return {r[0]: (r[1], r[2], r[3]) for r in c.execute(q)}


@pytest.mark.parametrize("via", ["snmp", "cli"])
def test_every_lab_bmc_is_placed_right_from_the_lab_switches(lab: Any, monkeypatch: pytest.MonkeyPatch, via: str) -> None:
    from fleetctl.discovery.mactable import read_inventory_switches
    from fleetctl.discovery.placement import Placement, PlacementProblem, place
    from fleetctl.store import get_engine, reset_engines

    env, lab_dir = lab
    for k in ("FLEETCTL_DB", "FLEETCTL_LAB_DIR", "FLEETCTL_DATA_DIR"):
        monkeypatch.setenv(k, env[k])
    note = json.loads((lab_dir / "leases" / "unregistered.json").read_text())
    try:
        with get_engine().connect() as c:
            planned = _planned(c)
            sightings, errors = read_inventory_switches(c, ["rack-12"], via=via, deadline_s=120)
            assert errors == []
            assert {s.source for s in sightings} <= {via, "lldp"} and any(s.source == via for s in sightings)
            unreg = {b["mac"]: b for b in note["bmcs"]}
            got = place(c, sightings, [*planned, *unreg])
    finally:
        reset_engines()
    # Every BMC the lab's management switch holds (the served three and the rest of rack-12, cabled in the plan) ...
    in_rack = {m: v for m, v in planned.items() if v[0] == "rack-12"}
    assert len(in_rack) >= 19
    for mac, (rack, position, server) in in_rack.items():
        p = got[mac]
        assert isinstance(p, Placement), p
        assert (p.rack, p.position, p.server, p.switch, p.nic) == (rack, position, server, "mgmt-tyo1-r12", "bmc")
    # ... and the unregistered: planned ones at their planned unit, the other one on a port the plan lacks.
    assert sorted(b["kind"] for b in note["bmcs"]) == ["fixed", "lease", "unplanned"]
    for mac, b in unreg.items():
        p = got[mac]
        if b["kind"] == "unplanned":
            assert isinstance(p, PlacementProblem) and p.kind == "port-not-in-plan" and p.ports == (f"{b['switch']}:{b['port']}",)
        else:
            assert isinstance(p, Placement) and (p.rack, p.position, p.server, p.port) == (b["rack"], b["position"], b["name"], b["port"])
    # The uplinks carry many MACs, some BMCs' among them (the peer switch's stations); they placed nothing.
    from fleetctl.discovery.placement import UPLINK_MACS

    per_port: dict[tuple[str, str], set[str]] = {}
    for s in sightings:
        per_port.setdefault((s.switch, s.port), set()).add(s.mac)
    busy = {k for k, macs in per_port.items() if len(macs) > UPLINK_MACS}
    assert busy and not any((p.switch, p.port) in busy for p in got.values() if isinstance(p, Placement))


def test_lab_status_names_the_leases_files_and_they_hold_the_leased_bmcs(lab: Any) -> None:
    env, lab_dir = lab
    r = subprocess.run([FLEETCTL, "lab", "status", "-o", "json"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["unregistered"] == 3
    kea, dnsmasq = Path(st["leases_kea"]), Path(st["leases_dnsmasq"])
    assert kea.parent == lab_dir / "leases" and dnsmasq.parent == lab_dir / "leases"
    bmcs = {b["name"]: b for b in st["unregistered_bmcs"]}
    with kea.open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["hostname"]: (r["address"], r["hwaddr"]) for r in rows} == {
        n: (b["address"], b["mac"]) for n, b in bmcs.items() if b["kind"] != "fixed"}
    assert all(r["state"] == "0" and r["valid_lifetime"] == "86400" for r in rows)
    lines = [line.split() for line in dnsmasq.read_text().splitlines()]
    assert {(f[1], f[2], f[3]) for f in lines} == {(b["mac"], b["address"], n) for n, b in bmcs.items() if b["kind"] != "fixed"}
    # The lab's fleet holds no BMC for any of them: the planned ones have no address and no MAC, the other is absent.
    from sqlalchemy import text

    from fleetctl.store import get_engine, reset_engines

    try:
        with get_engine(f"sqlite:///{env['FLEETCTL_DB']}").connect() as c:
            q = text("SELECT server.name, server.bmc_url, nic.mac FROM server JOIN nic ON nic.server_id = server.id "
                     "WHERE nic.name = 'bmc'")  # fmt: skip
            rows2 = {r[0]: (r[1], r[2]) for r in c.execute(q)}
    finally:
        reset_engines()
    for n, b in bmcs.items():
        assert (rows2.get(n) == (None, None)) if b["kind"] != "unplanned" else (n not in rows2)


def test_a_switch_whose_agent_does_not_answer_is_read_over_its_cli(lab: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import text

    from fleetctl.discovery.mactable import read_inventory_switches
    from fleetctl.store import get_engine, reset_engines

    env, _ = lab
    for k in ("FLEETCTL_DB", "FLEETCTL_LAB_DIR", "FLEETCTL_DATA_DIR"):
        monkeypatch.setenv(k, env[k])
    engine = get_engine()
    with engine.begin() as c:
        old = c.execute(text("SELECT snmp_port FROM switch WHERE name = 'mgmt-tyo1-r12'")).scalar()
        c.execute(text("UPDATE switch SET snmp_port = 9 WHERE name = 'mgmt-tyo1-r12'"))  # discard: nothing answers
    try:
        with engine.connect() as c:
            sightings, errors = read_inventory_switches(c, ["mgmt-tyo1-r12"], deadline_s=120)
        assert errors == []
        assert {s.source for s in sightings} == {"cli", "lldp"} and len({s.port for s in sightings if s.source == "cli"}) >= 19
        with engine.connect() as c:
            only_snmp = read_inventory_switches(c, ["mgmt-tyo1-r12"], via="snmp", deadline_s=120)
        assert only_snmp[0] == [] and len(only_snmp[1]) == 1 and only_snmp[1][0].startswith("mgmt-tyo1-r12: ")
    finally:
        with engine.begin() as c:
            c.execute(text("UPDATE switch SET snmp_port = :p WHERE name = 'mgmt-tyo1-r12'"), {"p": old})
        reset_engines()
