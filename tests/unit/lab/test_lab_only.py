"""The lab's ``only`` query (DSP0266, ``ProtocolFeaturesSupported.OnlyMemberQuery``), per dialect as data (issue 24).

``GET {collection}?only`` on a collection of exactly one member answers that member's document, byte for byte
the member's own answer (so the same ETag); a collection of several members answers itself. Advertised where
the vendor's recorded service advertises it (``shared/redfish-mockups``), the other dialects as they were.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.bmc import LabConfig, LabServerSpec, run_lab_in_thread
from fleetctl_lab.bmc.flavours import FLAVOURS
from lab_client_helpers import RF, assert_redfish_error

MOCKUPS = Path(__file__).resolve().parents[3].parent / "shared" / "redfish-mockups"
# The recording each dialect follows, where one was captured.
RECORDED = {"generic": "dmtf-public-rackmount1", "hpe": "hpe-dl325-ilo5", "openbmc": "openbmc-stock", "ami": "gigabyte-ami"}
SERVED = sorted(f for f, fl in FLAVOURS.items() if fl.only_query == "served")


def _spec(flavour: str) -> LabServerSpec:
    return LabServerSpec(name=f"on-{flavour}", flavour=flavour, serial=f"SN-{flavour}",
                         boards=[{"kind": "gpu", "serial": f"G-{flavour}-1", "slot": 1}])  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cfg = LabConfig(state_dir=tmp_path_factory.mktemp("lab"), initial_power="On")
    with run_lab_in_thread([_spec(f) for f in FLAVOURS], cfg) as running:
        yield running


def _rf(lab: Any, flavour: str) -> RF:
    return RF(lab.url_of(f"on-{flavour}"))


def test_the_dialects_advertise_only_as_their_recorded_bmc_does(lab: Any) -> None:
    assert set(RECORDED) <= set(SERVED)
    for flavour in FLAVOURS:
        features = _rf(lab, flavour).get("/redfish/v1")["ProtocolFeaturesSupported"]
        if flavour in RECORDED and (MOCKUPS / RECORDED[flavour]).is_dir():
            recorded = json.loads((MOCKUPS / RECORDED[flavour] / "index.json").read_text())
            assert recorded["ProtocolFeaturesSupported"]["OnlyMemberQuery"] is True, flavour
        if flavour in SERVED:
            assert features["OnlyMemberQuery"] is True, flavour
        else:  # no recording says: the service root as it was
            assert "OnlyMemberQuery" not in features, (flavour, features)


@pytest.mark.parametrize("flavour", SERVED)
def test_a_one_member_collection_answers_its_member_with_the_members_etag(lab: Any, flavour: str) -> None:
    rf = _rf(lab, flavour)
    coll = rf.get("/redfish/v1/Systems")
    assert len(coll["Members"]) == 1
    member = coll["Members"][0]["@odata.id"]
    status, doc, hdrs = rf.req("GET", member)
    assert status == 200
    for _ in range(2):  # rendered, then answered from the render cache: the same
        s, only, oh = rf.req("GET", "/redfish/v1/Systems?only")
        assert s == 200 and only == doc and "Members" not in only
        assert oh["ETag"] == hdrs["ETag"]
    # the member's ETag names this answer too
    s, body, _ = rf.req("GET", "/redfish/v1/Systems?only", headers={"If-None-Match": hdrs["ETag"]})
    assert s == 304 and body is None


@pytest.mark.parametrize("flavour", SERVED)
def test_a_collection_of_several_members_answers_itself(lab: Any, flavour: str) -> None:
    rf = _rf(lab, flavour)
    procs = rf.get("/redfish/v1/Systems")["Members"][0]["@odata.id"] + "/Processors"
    coll = rf.get(procs)
    assert len(coll["Members"]) >= 2
    assert rf.get(procs + "?only") == coll


@pytest.mark.parametrize("flavour", SERVED)
def test_only_with_another_query_or_on_a_resource_is_refused_as_dsp0266_says(lab: Any, flavour: str) -> None:
    rf = _rf(lab, flavour)
    s, doc, _ = rf.req("GET", "/redfish/v1/Systems?only&$skip=0")
    assert s == 400
    assert_redfish_error(doc, "QueryCombinationInvalid")
    s, doc, _ = rf.req("GET", "/redfish/v1/Managers" + "?only")
    assert s == 200 and "Members" not in doc  # one manager
    s, doc, _ = rf.req("GET", doc["@odata.id"] + "?only")
    assert s == 400
    assert_redfish_error(doc, "QueryNotSupportedOnResource")


def test_a_dialect_that_does_not_offer_it_ignores_it(lab: Any) -> None:
    others = [f for f in FLAVOURS if f not in SERVED]
    assert others
    for flavour in others:
        rf = _rf(lab, flavour)
        assert rf.get("/redfish/v1/Systems?only") == rf.get("/redfish/v1/Systems"), flavour


def test_the_kept_answer_follows_the_member(lab: Any) -> None:
    """The answer of ``?only`` is kept in the render cache by path and query: a change of the member shows."""
    rf = _rf(lab, "openbmc")
    before = rf.get("/redfish/v1/Systems?only")
    target = "Pxe" if before["Boot"]["BootSourceOverrideTarget"] != "Pxe" else "Hdd"
    s, _, _ = rf.req("PATCH", before["@odata.id"], {"Boot": {"BootSourceOverrideTarget": target,
                                                             "BootSourceOverrideEnabled": "Once"}})  # fmt: skip
    assert s in (200, 204)
    after = rf.get("/redfish/v1/Systems?only")
    assert after["Boot"]["BootSourceOverrideTarget"] == target
    assert after == rf.get(before["@odata.id"])


@pytest.mark.parametrize(("mode", "status"), [("ignored", 200), ("refused", 501)])
def test_the_fallback_modes_for_client_tests(lab: Any, mode: str, status: int) -> None:
    """``Flavour.only_query`` "ignored" (advertised, the collection answered) and "refused" (advertised, 501)."""
    bmc = lab.lab.bmc("on-ami")
    flavour = bmc.flavour
    try:
        lab.call(setattr, bmc, "flavour", dataclasses.replace(flavour, only_query=mode))
        lab.call(bmc.touch)
        rf = _rf(lab, "ami")
        assert rf.get("/redfish/v1")["ProtocolFeaturesSupported"]["OnlyMemberQuery"] is True
        s, doc, _ = rf.req("GET", "/redfish/v1/Systems?only")
        assert s == status
        if mode == "ignored":
            assert doc == rf.get("/redfish/v1/Systems")
        else:
            assert_redfish_error(doc, "QueryNotSupported")
    finally:
        lab.call(setattr, bmc, "flavour", flavour)
        lab.call(bmc.touch)
