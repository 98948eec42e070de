"""A firmware campaign on servers in service that are live nodes of the lab's cluster: drained first, uncordoned after.

The lab's BMCs serve the servers; `fleetctl lab k8s up` serves them as the nodes of the lab's Kubernetes API stand-in
(the lab's fleet declares that cluster: docs/lab.md), with gang-scheduled training pods under PodDisruptionBudgets.
What happened is read on both peers: the BMCs' counters (what was flashed) and the nodes as the API serves them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, lab_doc, lab_up, serve  # (path set in conftest)

MN = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 5)]
BASE = "http://127.0.0.1:9/fw"
MAINT = "fleetctl.io/maintenance"

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    pytest.importorskip("lightkube")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.2", "--firmware-time", "0.3", *serve(MN))
    assert r.code == 0, r.err
    k = cli("lab", "k8s", "up", "--pods-per-node", "1", "--gang-size", "4", "--reschedule", "0.2")
    try:
        assert k.code == 0, k.err
        doc = lab_doc(tmp_path / "lab")
        doc["kubeconfig"] = Path(k.out.strip().splitlines()[-1].split("=", 1)[1])
        yield doc
    finally:
        cli("lab", "k8s", "down")
        cli("lab", "down")


def _node(lab: dict[str, Any], name: str) -> dict[str, Any]:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Node

    with Client(KubeConfig.from_file(lab["kubeconfig"]).get(), trust_env=False) as c:  # type: ignore[attr-defined]
        return Node.to_dict(c.get(Node, name))  # type: ignore[no-any-return]


def _in_service(*names: str) -> None:
    """Servers in service, as provisioning and `server set-state` would leave them (the lab's servers start registered)."""
    from sqlalchemy import text
    from tests_helpers_bmc import selected_engine

    eng = selected_engine()
    with eng.begin() as c:
        for n in names:
            c.execute(text("UPDATE server SET state = 'in-service' WHERE name = :n"), {"n": n})
    eng.dispose()


def _baseline(cli, version: str) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text
    from tests_helpers_bmc import selected_engine

    eng = selected_engine()
    with eng.begin() as c:
        mid = c.execute(text("SELECT id FROM hardware_model WHERE name = 'mn-server-2'")).scalar_one()
        c.execute(text("UPDATE firmware_baseline SET version = :v WHERE model_id = :m AND component = 'BIOS'"), {"v": version, "m": mid})
    eng.dispose()


def _update(cli, *args: str) -> tuple[int, list[dict[str, Any]], str]:  # type: ignore[no-untyped-def]
    r = cli("firmware", "update", *args, "--image-base", BASE, "--component", "BIOS", "--poll", "0.2", "--output", "json")
    assert r.out.strip(), (r.code, r.err)
    return r.code, json.loads(r.out), r.err


def test_in_service_nodes_are_drained_in_waves_flashed_and_uncordoned(lab, cli) -> None:  # type: ignore[no-untyped-def]
    _in_service(*MN[:2])
    _baseline(cli, "1.9.0")
    # The first eviction of the gang's pods is refused (429): the drain waits and asks again.
    assert cli("lab", "k8s", "fault", "--pdb", "training/gang-000", "--refuse", "1").code == 0
    code, rows, err = _update(cli, *MN[:2], "--allow-in-service", "--delete-emptydir-data", "--max-unavailable", "1")
    assert code == 0, (rows, err)
    assert {(x["server"], x["result"]) for x in rows} == {(MN[0], "updated"), (MN[1], "updated")}
    # One node of the rack out at a time: the two servers were in two waves.
    assert len({x["wave"] for x in rows}) == 2, rows
    for n in MN[:2]:
        assert counters(lab, n)["firmware_by_component"] == {"BIOS": 1}
        node = _node(lab, n)
        assert not node["spec"].get("unschedulable") and not any(t["key"] == MAINT for t in node["spec"].get("taints") or [])
    # Each node's training pod was evicted through the Eviction API (the first asking refused by its budget, 429), none
    # deleted behind the budgets' back; the DaemonSet pods stayed.
    st = json.loads(cli("lab", "k8s", "status", "-o", "json").out)["counters"]
    # (the first node's pod, replaced, may be scheduled onto the second before its wave: then that one is evicted too)
    assert st["evictions"] >= 2 and st["evictions_refused"] >= 1, st


def test_a_budget_held_past_the_timeout_keeps_the_node_cordoned_and_flashes_nothing(lab, cli) -> None:  # type: ignore[no-untyped-def]
    _in_service(MN[2])
    _baseline(cli, "1.9.0")
    assert cli("lab", "k8s", "fault", "--pdb", "training/gang-000", "--seconds", "120").code == 0
    code, rows, err = _update(cli, MN[2], "--allow-in-service", "--delete-emptydir-data", "--drain-timeout", "2")
    assert code == 1, (rows, err)
    [row] = [x for x in rows if x["server"] == MN[2]]
    assert row["result"] == "failed" and "drain" in (row["message"] or "").lower(), row
    assert counters(lab, MN[2])["firmware_by_component"] == {}  # never flashed
    node = _node(lab, MN[2])
    assert node["spec"]["unschedulable"] is True
    [taint] = [t for t in node["spec"]["taints"] if t["key"] == MAINT]
    assert taint["value"].startswith("job-") and taint["effect"] == "NoSchedule"


def test_pods_with_local_data_refuse_before_anything_is_touched(lab, cli) -> None:  # type: ignore[no-untyped-def]
    _in_service(MN[3])
    _baseline(cli, "1.9.0")
    r = cli("firmware", "update", MN[3], "--allow-in-service", "--image-base", BASE, "--component", "BIOS")
    pods = json.loads(cli("k8s", "status", MN[3], "-o", "json").out)[0]["pods"]
    if r.code == 0:  # (the stand-in gives none of this node's pods an emptyDir: nothing to refuse here)
        pytest.skip(f"no pod with local data on {MN[3]}: {pods}")
    assert r.code == 2 and "nothing was cordoned" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert counters(lab, MN[3])["firmware_by_component"] == {}
    assert not _node(lab, MN[3])["spec"].get("unschedulable")


def test_a_rack_with_a_node_out_already_refuses_with_the_figures(lab, cli) -> None:  # type: ignore[no-untyped-def]
    _in_service(*MN[:2])
    assert cli("lab", "k8s", "fault", "--node", MN[3]).code == 0  # NotReady: out already
    r = cli("firmware", "update", *MN[:2], "--allow-in-service", "--image-base", BASE, "--max-unavailable", "1")
    assert r.code == 2 and "--max-unavailable" in r.err and "1 are out already" in r.err, r.err
    assert all(counters(lab, n)["firmware_by_component"] == {} for n in MN[:2])
