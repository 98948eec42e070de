"""The plan: matching what was found against the inventory, and the --write fragment through `inventory import`.

The inventory and the sightings are hand-made (placements as D2's placement
module returns them); the service roots are what the probe returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetctl.discovery.expect import parse_sheet
from fleetctl.discovery.leases import Lease
from fleetctl.discovery.placement import Placement, PlacementProblem
from fleetctl.discovery.plan import DiscoveryPlan, build_plan, gather, lay_sheet, render_fragment
from fleetctl.discovery.probe import ServiceRoot

FP_A = "a" * 64
FP_B = "b" * 64
FP_C = "c" * 64

SITE = """
models:
- {name: gx, kind: server, vendor: Lab Systems, model: GPU Server 8x, height: 2}
- {name: unidentified, kind: server, vendor: unknown, model: unidentified, height: 1}
- {name: mgmt48, kind: switch, vendor: Acme, model: M48, height: 1, ports: ['Ethernet[1-48]']}
sites:
- name: lab1
  racks:
  - name: r1
    servers:
    - {name: srv-a, serial: SA, model: gx, position: 1, bmc: 'https://127.93.0.1:8443', fingerprint: FP_A,
       nics: [{name: bmc, mac: '02:00:00:00:00:0a'}]}
    - {name: srv-b, serial: SB, model: gx, position: 3, bmc: 'https://127.93.0.99:8443', fingerprint: FP_B}
    - {name: srv-c, serial: UNKNOWN-srv-c, model: unidentified, position: 5, nics: [{name: bmc}]}
    - {name: srv-d, serial: SD, model: gx, position: 7, bmc: 'https://127.93.0.4:8443'}
    - {name: srv-e, serial: SE, model: gx, position: 9}
    switches:
    - {name: mgmt-1, model: mgmt48, platform: sonic, role: management, address: 127.93.1.1, position: 40}
  cabling:
  - {switch: mgmt-1, port: Ethernet5, server: srv-c, nic: bmc, vlans: [10]}
""".replace("FP_A", FP_A).replace("FP_B", FP_B)


def root(address: str, fp: str | None, product: str = "GPU Server 8x") -> ServiceRoot:
    return ServiceRoot(address, 8443, f"https://{address}:8443", "uuid-" + address, "Lab", product, "1.17.0", fp, "Root Service")


def found_on_the_network() -> list[Any]:
    roots = [root("127.93.0.1", FP_A), root("127.93.0.2", FP_B), root("127.93.0.3", FP_C),
             root("127.93.0.5", "d" * 64), root("127.93.0.6", "e" * 64)]  # fmt: skip
    leases = [("kea.csv", Lease("127.93.0.3", "02:00:00:00:00:0c", None, 7)),
              ("kea.csv", Lease("127.93.0.6", "02:00:00:00:00:0f", None, 9))]
    found = gather(roots, leases)
    sheet = parse_sheet("serial,bmc_mac,model\nSC-REAL,02:00:00:00:00:0c,GPU Server 8x\n", "delivery.csv")
    lay_sheet(found, sheet, "delivery.csv")
    by = {f.address: f for f in found}
    by["127.93.0.3"].placement = Placement("02:00:00:00:00:0c", "lab1", "r1", 5, "mgmt-1", "Ethernet5", "bmc", "srv-c")
    by["127.93.0.6"].placement = PlacementProblem("02:00:00:00:00:0f", "port-not-in-plan", "on mgmt-1:Ethernet30, cabled to no server")
    return found


@pytest.fixture
def loaded(cli: Any, tmp_path: Path) -> Path:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    r = cli("inventory", "import", str(site))
    assert r.code == 0, r.err
    return site


def plan_now() -> tuple[Any, DiscoveryPlan]:
    from fleetctl.inventory.service import export_inventory

    inv = export_inventory()
    probed = [f"127.93.0.{i}" for i in range(1, 255)]
    return inv, build_plan(inv, found_on_the_network(), probed=probed, port=8443)


def test_each_kind_of_finding(loaded: Path) -> None:
    _, plan = plan_now()
    by = {p.found.address: p for p in plan.proposals}
    a, b, c = by["127.93.0.1"], by["127.93.0.2"], by["127.93.0.3"]
    assert (a.kind, a.server, a.matched_by, a.changes) == ("unchanged", "srv-a", "fingerprint", {})
    # Matched by its pinned certificate: the same server at a new address, a change, not a new server.
    assert (b.kind, b.server, b.matched_by) == ("moved", "srv-b", "fingerprint")
    assert b.changes == {"bmc": ("https://127.93.0.99:8443", "https://127.93.0.2:8443")}
    # Placed by the switch port the plan cables to srv-c: adopted, its placeholders filled from the sheet.
    assert (c.kind, c.server, c.matched_by) == ("adopt", "srv-c", "switch port mgmt-1:Ethernet5")
    assert c.changes == {"bmc": (None, "https://127.93.0.3:8443"), "fingerprint": (None, FP_C),
                         "nics.bmc.mac": (None, "02:00:00:00:00:0c"), "serial": ("UNKNOWN-srv-c", "SC-REAL"),
                         "model": ("unidentified", "gx")}  # fmt: skip
    assert c.found.sources["serial"] == "sheet delivery.csv:2"
    assert by["127.93.0.5"].kind == "unplaced"
    assert by["127.93.0.6"].kind == "problem" and "port-not-in-plan" in by["127.93.0.6"].detail
    # srv-d's BMC address was probed and did not answer; srv-e has no BMC address to probe.
    assert [(m.server, m.bmc) for m in plan.missing] == [("srv-d", "https://127.93.0.4:8443")]


def test_a_matched_server_whose_serial_differs_is_a_problem_not_a_change(loaded: Path) -> None:
    from fleetctl.inventory.service import export_inventory

    found = gather([root("127.93.0.1", FP_A)], [("l", Lease("127.93.0.1", "02:00:00:00:00:0a", None, 1))])
    lay_sheet(found, parse_sheet("serial,bmc_mac\nOTHER,02:00:00:00:00:0a\n", "s.csv"), "s.csv")
    plan = build_plan(export_inventory(), found, port=8443)
    assert [(p.kind, p.server) for p in plan.proposals] == [("problem", "srv-a")]
    assert "its serial is OTHER, not the declared SA" in plan.proposals[0].detail


def test_one_server_matched_by_two_bmcs_is_a_problem(loaded: Path) -> None:
    from fleetctl.inventory.service import export_inventory

    # .1 answers at srv-a's address; .7 holds a lease with srv-a's BMC MAC: one of them is not srv-a.
    found = gather([root("127.93.0.1", None), root("127.93.0.7", None)], [("l", Lease("127.93.0.7", "02:00:00:00:00:0a", None, 1))])
    plan = build_plan(export_inventory(), found, port=8443)
    assert [(p.found.address, p.kind, p.server) for p in plan.proposals] == [("127.93.0.1", "unchanged", "srv-a"),
                                                                              ("127.93.0.7", "problem", "srv-a")]  # fmt: skip
    assert plan.proposals[1].detail == "srv-a is matched by https://127.93.0.1:8443 too"


def test_a_declared_bmc_mac_is_never_written_over(loaded: Path) -> None:
    from fleetctl.inventory.service import export_inventory

    found = gather([root("127.93.0.1", FP_A)], [("l", Lease("127.93.0.1", "02:00:00:00:00:99", None, 1))])
    plan = build_plan(export_inventory(), found, port=8443)
    p = plan.proposals[0]
    assert (p.kind, p.server, p.changes) == ("unchanged", "srv-a", {})
    assert p.detail == "the inventory's bmc MAC is 02:00:00:00:00:0a; the BMC's: 02:00:00:00:00:99"


def test_a_lease_without_a_redfish_answer(loaded: Path) -> None:
    from fleetctl.inventory.service import export_inventory

    leases = [("l", Lease("127.93.0.50", "02:00:00:00:00:0a", None, 1)), ("l", Lease("127.93.0.51", "66:00:00:00:00:01", "laptop", 2))]
    found = gather([], leases, {"127.93.0.50": "refused", "127.93.0.51": "timeout"})
    plan = build_plan(export_inventory(), found, port=8443)
    # srv-a's BMC MAC holds a lease that does not answer: a person looks; the laptop is only listed.
    assert [(p.kind, p.server) for p in plan.proposals] == [("problem", "srv-a")]
    assert "holds the lease 127.93.0.50, which gave no Redfish answer (refused)" in plan.proposals[0].detail
    assert plan.as_dict()["no_redfish_answer"] == [{"address": "127.93.0.51", "mac": "66:00:00:00:00:01", "hostname": "laptop",
                                                    "reason": "timeout", "source": "lease l:2"}]  # fmt: skip


def test_write_then_import_round_trip(loaded: Path, cli: Any, tmp_path: Path) -> None:
    """The fragment is a site file `inventory import` takes: exactly the plan's changes, then nothing more to do."""
    inv, plan = plan_now()
    text = render_fragment(inv, plan)
    frag = tmp_path / "discovered.yaml"
    frag.write_text(text)
    # Each proposed value carries its source on its own line.
    assert "bmc: https://127.93.0.2:8443  # discover: range probe 127.93.0.2:8443" in text
    assert "serial: SC-REAL  # discover: sheet delivery.csv:2" in text
    assert "# discover: mac from lease kea.csv:7" in text
    assert "#   unplaced: https://127.93.0.5:8443" in text
    assert "#   srv-d (lab1/r1) https://127.93.0.4:8443" in text
    yaml.safe_load(text)  # comments aside, plain YAML

    dry = cli("inventory", "import", str(frag), "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err
    changes = {(c["action"], c["kind"], c["name"]) for c in json.loads(dry.out)["changes"]}
    assert ("change", "server", "srv-b") in changes and ("change", "server", "srv-c") in changes
    assert not any(a == "remove" for a, _, _ in changes), changes  # the site is written whole: nothing dropped
    assert not any(n in ("srv-a", "srv-d", "srv-e") for _, _, n in changes)

    assert cli("inventory", "import", str(frag)).code == 0
    out = yaml.safe_load(cli("inventory", "export").out)
    servers = {s["name"]: s for s in out["sites"][0]["racks"][0]["servers"]}
    assert servers["srv-b"]["bmc"] == "https://127.93.0.2:8443"
    assert servers["srv-c"]["bmc"] == "https://127.93.0.3:8443"
    assert servers["srv-c"]["serial"] == "SC-REAL" and servers["srv-c"]["model"] == "gx"
    assert servers["srv-c"]["fingerprint"] == FP_C
    assert servers["srv-c"]["nics"] == [{"name": "bmc", "mac": "02:00:00:00:00:0c"}]
    again = cli("inventory", "import", str(frag))
    assert again.code == 0 and "nothing to change" in again.out
    # And discovery now finds the two as they are.
    _, after = plan_now()
    assert {p.server: p.kind for p in after.proposals if p.server in ("srv-b", "srv-c")} == {"srv-b": "unchanged", "srv-c": "unchanged"}


def test_a_new_model_is_proposed_only_from_inspection_or_the_sheet(loaded: Path) -> None:
    from fleetctl.inventory.service import export_inventory

    found = gather([root("127.93.0.3", FP_C, product="Integrated Dell Remote Access Controller")],
                   [("l", Lease("127.93.0.3", "02:00:00:00:00:0c", None, 1))])  # fmt: skip
    found[0].placement = Placement("02:00:00:00:00:0c", "lab1", "r1", 5, "mgmt-1", "Ethernet5", "bmc", "srv-c")
    plan = build_plan(export_inventory(), found, port=8443)
    assert plan.new_models == [] and "model" not in plan.proposals[0].changes  # a Product alone proposes nothing
    lay_sheet(found, parse_sheet("serial,bmc_mac,model\nX9,02:00:00:00:00:0c,R760xa\n", "s.csv"), "s.csv")
    plan = build_plan(export_inventory(), found, port=8443)
    assert [m["model"] for m in plan.new_models] == ["R760xa"]
    assert plan.proposals[0].changes["model"] == ("unidentified", plan.new_models[0]["name"])
