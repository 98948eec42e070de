"""The lab's ``$expand`` with ``$levels`` (DSP0266): MaxLevels per dialect as data, ``$levels=1`` unchanged (issue 24)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fleetctl_lab.bmc import LabConfig, SimBMC, generate_specs
from fleetctl_lab.bmc.expand import expanded, parse_expand
from fleetctl_lab.bmc.flavours import FLAVOURS
from fleetctl_lab.bmc.resources import dispatch


def _bmc(flavour: str) -> SimBMC:
    (spec,) = generate_specs(1, prefix="xl", flavours=(flavour,))
    return SimBMC(spec, LabConfig())


def _before_levels(bmc: SimBMC, doc: dict[str, Any], query: str | None) -> dict[str, Any]:
    """The answer the lab gave before ``$levels`` was served (its one-level ``_expanded``), as the reference."""
    if not query or query.split("(", 1)[0] not in (".", "*"):
        return doc
    members = []
    for ref in doc.get("Members") or []:
        link = ref.get("@odata.id") if isinstance(ref, dict) else None
        if link and len(ref) == 1:
            status, member, _ = dispatch(bmc, "GET", link.rstrip("/"), None)
            members.append(member if status == 200 else ref)
        else:
            members.append(ref)
    return {**doc, "Members": members}


def _collections(bmc: SimBMC) -> list[tuple[str, dict[str, Any]]]:
    """Every collection reachable from the service root by subordinate links."""
    seen: set[str] = set()
    out = []
    todo = ["/redfish/v1"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        status, doc, _ = dispatch(bmc, "GET", path, None)
        if status != 200 or not isinstance(doc, dict):
            continue
        if "Members" in doc:
            out.append((path, doc))

        def walk(v: Any, key: str = "") -> None:
            if key == "Links":
                return
            if isinstance(v, dict):
                if len(v) == 1 and isinstance(v.get("@odata.id"), str):
                    todo.append(v["@odata.id"].rstrip("/"))
                for k, x in v.items():
                    walk(x, k)
            elif isinstance(v, list):
                for x in v:
                    walk(x, key)

        walk(doc)
    return out


@pytest.mark.parametrize("flavour", sorted(f for f, fl in FLAVOURS.items() if fl.expand))
def test_levels_1_answers_are_byte_identical_to_before(flavour: str) -> None:
    bmc = _bmc(flavour)
    colls = _collections(bmc)
    assert len(colls) > 10
    for query in (".", ".($levels=1)", "*", "*($levels=1)"):
        for path, doc in colls:
            assert json.dumps(expanded(bmc, doc, query)) == json.dumps(_before_levels(bmc, doc, query)), (path, query)
    systems = dict(colls)["/redfish/v1/Systems"]
    status, system, _ = dispatch(bmc, "GET", systems["Members"][0]["@odata.id"], None)
    assert status == 200 and expanded(bmc, system, ".($levels=1)") is system  # no collection: as before levels


def test_max_levels_are_dialect_data_and_advertised() -> None:
    ami, hpe = _bmc("ami"), _bmc("hpe")
    assert dispatch(ami, "GET", "/redfish/v1", None)[1]["ProtocolFeaturesSupported"]["ExpandQuery"]["MaxLevels"] == 5
    assert dispatch(hpe, "GET", "/redfish/v1", None)[1]["ProtocolFeaturesSupported"]["ExpandQuery"]["MaxLevels"] == 1
    assert parse_expand(".($levels=3)", 5) == (".", 3)
    assert parse_expand(".($levels=9)", 5) == (".", 5)
    assert parse_expand(".($levels=3)", 1) == (".", 1)
    assert parse_expand("~", 5) == ("~", 1)
    assert parse_expand("bogus", 5) is None


def _pcie(bmc: SimBMC) -> tuple[str, dict[str, Any]]:
    path = f"/redfish/v1/Chassis/{bmc.flavour.chassis_id}/PCIeDevices"
    status, doc, _ = dispatch(bmc, "GET", path, None)
    assert status == 200 and doc["Members"], doc
    return path, doc


def test_levels_3_carries_devices_their_function_collections_and_functions() -> None:
    bmc = _bmc("ami")
    _, doc = _pcie(bmc)
    two = expanded(bmc, doc, ".($levels=2)")
    three = expanded(bmc, doc, ".($levels=3)")
    for dev2, dev3 in zip(two["Members"], three["Members"], strict=True):
        assert "Id" in dev3 and "Links" in dev3
        fn2, fn3 = dev2["PCIeFunctions"], dev3["PCIeFunctions"]
        # Level 2: the functions collection inline, its members still links; level 3: the functions themselves.
        assert "Members" in fn2 and all(set(m) == {"@odata.id"} for m in fn2["Members"])
        assert fn3["Members"] and all("FunctionId" in m or "Id" in m for m in fn3["Members"])
        assert all(len(m) > 1 for m in fn3["Members"])
        # "." leaves Links alone at every level.
        assert all(set(r) == {"@odata.id"} for refs in dev3["Links"].values() if isinstance(refs, list) for r in refs)


def test_levels_past_max_levels_stop_at_max_levels() -> None:
    bmc = _bmc("hpe")  # MaxLevels 1
    _, doc = _pcie(bmc)
    assert json.dumps(expanded(bmc, doc, ".($levels=3)")) == json.dumps(_before_levels(bmc, doc, "."))


def test_links_only_and_all() -> None:
    bmc = _bmc("ami")
    status, system, _ = dispatch(bmc, "GET", "/redfish/v1/Systems/Self", None)
    assert status == 200
    links_only = expanded(bmc, system, "~($levels=1)")
    chassis = links_only["Links"]["Chassis"][0]
    assert chassis.get("Id") == bmc.flavour.chassis_id  # Links expanded
    assert set(links_only["Processors"]) == {"@odata.id"}  # subordinate links not
    both = expanded(bmc, system, "*($levels=2)")
    assert both["Links"]["Chassis"][0].get("Id") == bmc.flavour.chassis_id
    assert both["Processors"]["Members"] and all("Id" in m for m in both["Processors"]["Members"])
    dot = expanded(bmc, system, ".($levels=2)")
    assert set(dot["Links"]["Chassis"][0]) == {"@odata.id"} and all("Id" in m for m in dot["Processors"]["Members"])
