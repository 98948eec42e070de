"""Node labels (#22 item 5): values the API accepts, the difference touching only fleetctl's keys, and what is computed
from the inventory, the cabling plan, the sweep's firmware verdict and burn-in (both backends)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import insert

from fleetctl.k8s.labels import compute, diff, label_value, valid_value
from fleetctl.k8s.nodes import node_refs
from fleetctl.k8s.policy import Policy
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.sweep.engine import SweepOptions, TargetVerdict, run
from fleetctl.sweep.model import Finding, Status

# The API's rule for a label value, written out independently of the module's own pattern.
API_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.mark.parametrize("raw", ["rack-11", "tyo1", "gpu", "8", "leaf-a_leaf-b", "a.b", "x" * 63])
def test_a_valid_value_is_kept(raw: str) -> None:
    assert label_value(raw) == raw


@pytest.mark.parametrize(
    ("raw", "start"),
    [("Tokyo 1, hall B", "Tokyo-1-hall-B-"), ("-rack-", "rack-"), ("r/1", "r-1-"), ("x" * 64, "x" * 54 + "-"), ("東京", "")],
)
def test_an_invalid_value_is_made_valid_with_a_digest(raw: str, start: str) -> None:
    v = label_value(raw)
    assert API_VALUE.match(v) and len(v) <= 63, v
    assert v.startswith(start) and re.fullmatch(r"[0-9a-f]{8}", v[len(start) :]), v
    assert label_value(raw) == v  # deterministic


def test_names_differing_only_in_what_is_replaced_stay_apart() -> None:
    # Two racks must never become one topology domain.
    assert len({label_value(x) for x in ("r 1", "r/1", "r:1", "r-1")}) == 4
    assert label_value("y" * 80) != label_value("y" * 81)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_every_text_becomes_a_valid_value(raw: str) -> None:
    v = label_value(raw)
    assert len(v) <= 63 and API_VALUE.match(v) and valid_value(v), (raw, v)
    assert label_value(v) == v  # a valid value is its own label value


def test_the_difference_touches_only_fleetctl_s_keys() -> None:
    p = Policy()
    current = {"kubernetes.io/hostname": "n1", "example.com/team": "ml", "fleetctl.io/rack": "old", "fleetctl.io/gone": "x",
               "topology.kubernetes.io/zone": "elsewhere", "topology.kubernetes.io/region": "r"}  # fmt: skip
    wanted = {"fleetctl.io/rack": "r1", "fleetctl.io/site": "s1", "topology.kubernetes.io/zone": "s1"}
    d = diff(current, wanted, p.labels.prefix, p.owns)
    assert d.added == {"fleetctl.io/site": "s1"}
    assert d.changed == {"fleetctl.io/rack": ("old", "r1"), "topology.kubernetes.io/zone": ("elsewhere", "s1")}
    assert d.removed == ("fleetctl.io/gone",)
    assert d.patch() == {"fleetctl.io/site": "s1", "fleetctl.io/rack": "r1", "topology.kubernetes.io/zone": "s1", "fleetctl.io/gone": None}
    # The same labels again: nothing to do.
    same = {k: v for k, v in {**current, **wanted}.items() if k != "fleetctl.io/gone"}
    assert not diff(same, wanted, p.labels.prefix, p.owns)
    # Without the zone in the policy, the zone key is not fleetctl's: never set, never changed.
    nozone = Policy.model_validate({"labels": {"zone": False}})
    assert "topology.kubernetes.io/zone" not in diff(current, wanted, nozone.labels.prefix, nozone.owns).changed


def _sweep(*verdicts: TargetVerdict) -> int:
    async def collect(rec):  # type: ignore[no-untyped-def]
        for v in verdicts:
            rec.add(v, None)

    return run([], [], selector="test", options=SweepOptions(retention_days=0), collect=collect).run_id


def _burnin(c, *, state: str, finished: dt.datetime, results: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    rid = c.execute(insert(T.burnin_run).values(started_at=finished - dt.timedelta(hours=1), finished_at=finished, state=state,
                                                kind="gpu", level="quick", duration_s=3600.0, selector="test", actor="t", host="h",
                                                pid=1, servers=sorted(results), counts={})
                    .returning(T.burnin_run.c.id)).scalar_one()  # fmt: skip
    for server, verdicts in results.items():
        for slot, v in enumerate(verdicts):
            c.execute(insert(T.burnin_result).values(run_id=rid, server=server, serial=f"{server}-{slot}", device=f"GPU {slot}", slot=slot,
                                                     model="A100", verdict=v, reasons=[], metrics={}, telemetry=[],
                                                     started_at=finished, finished_at=finished))  # fmt: skip


def test_computed_from_the_inventory_cabling_firmware_and_burn_in(example_loaded) -> None:  # type: ignore[no-untyped-def]
    r1, r2, r3, r4 = (f"gpu-tyo1-r11-0{i}" for i in range(1, 5))
    fw = {"metrics": {"firmware": {"BMC": "1.0"}}}
    _sweep(
        TargetVerdict("server", r1, Status.WARNING, [Finding("server", r1, "firmware.baseline", Status.WARNING, "off", "vbios")], **fw),
        TargetVerdict("server", r2, Status.OK, [], **fw),
        TargetVerdict("server", r3, Status.UNKNOWN, [], error="BMC did not answer"),
    )  # fmt: skip
    with get_engine().begin() as c:
        nov2 = dt.datetime(2026, 11, 2, 12, tzinfo=dt.UTC)
        _burnin(c, state="finished", finished=nov2, results={r1: ["pass", "fail", "degraded"], r2: ["pass"]})
        _burnin(c, state="finished", finished=dt.datetime(2026, 11, 30, 23, tzinfo=dt.UTC), results={r2: ["pass", "degraded"]})
        _burnin(c, state="running", finished=dt.datetime(2026, 12, 1, tzinfo=dt.UTC), results={r2: ["fail"]})  # not finished: not it
    with get_engine().connect() as c:
        got = compute(c, node_refs(c, [r1, r2, r3, r4, "mn-tyo1-r12-01"]), Policy())
    assert got[r1] == {
        "fleetctl.io/accelerator": "gpu", "fleetctl.io/accelerator-count": "8", "fleetctl.io/block": "spine-tyo1-01_spine-tyo1-02",
        "fleetctl.io/burnin": "fail", "fleetctl.io/burnin-date": "2026-11-02", "fleetctl.io/firmware": "noncompliant",
        "fleetctl.io/leaf": "leaf-tyo1-r11-a_leaf-tyo1-r11-b", "fleetctl.io/rack": "rack-11", "fleetctl.io/site": "tyo1",
        "fleetctl.io/spine": "spine-tyo1-01_spine-tyo1-02", "topology.kubernetes.io/zone": "tyo1",
    }  # fmt: skip
    assert (got[r2]["fleetctl.io/burnin"], got[r2]["fleetctl.io/burnin-date"], got[r2]["fleetctl.io/firmware"]) == (
        "degraded", "2026-11-30", "compliant")  # fmt: skip
    assert got[r3]["fleetctl.io/firmware"] == "unknown" and "fleetctl.io/burnin" not in got[r3]  # the BMC was not read
    assert got[r4]["fleetctl.io/firmware"] == "unknown"  # never swept
    mn = got["mn-tyo1-r12-01"]
    assert (mn["fleetctl.io/rack"], mn["fleetctl.io/accelerator"], mn["fleetctl.io/accelerator-count"]) == ("rack-12", "mncore2", "4")
    assert all(valid_value(v) for labels in got.values() for v in labels.values())
    # Another prefix: every key of fleetctl's under it, the zone unchanged.
    other = Policy.model_validate({"labels": {"prefix": "example.org/"}})
    with get_engine().connect() as c:
        keys = set(compute(c, node_refs(c, [r1]), other)[r1])
    assert "example.org/rack" in keys and "topology.kubernetes.io/zone" in keys and not any(k.startswith("fleetctl.io/") for k in keys)


API_CASES = json.loads((Path(__file__).resolve().parents[2] / "data" / "k8s" / "labels" / "apimachinery-validation-cases.json").read_text())


@pytest.mark.parametrize("value", API_CASES["label_value"]["valid"])
def test_the_api_s_valid_values_are_kept(value: str) -> None:
    assert valid_value(value) and label_value(value) == value


@pytest.mark.parametrize("value", API_CASES["label_value"]["invalid"])
def test_the_api_s_invalid_values_are_made_valid(value: str) -> None:
    assert not valid_value(value)
    v = label_value(value)
    assert v != value and API_VALUE.match(v) and len(v) <= 63
