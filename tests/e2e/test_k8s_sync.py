"""#22 item 5 end to end: `fleetctl k8s sync` labels the nodes with what only fleetctl knows.

The example site (inventory/site-tyo1.yaml: its cabling plan cables each GPU
server of rack-11 to leaf-tyo1-r11-a and -b, whose uplinks reach
spine-tyo1-01 and -02), its cluster pointed at the lab's API stand-in, whose
nodes are named as the servers.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s

REPO = Path(__file__).resolve().parents[2]
RACK11 = ["gpu-tyo1-r11-01", "gpu-tyo1-r11-02", "gpu-tyo1-r11-03", "gpu-tyo1-r11-04"]
MN = "mn-tyo1-r12-01"
DECLARED = "  - {name: tyo1-train, kubeconfig: /etc/fleetctl/kubeconfig, context: tyo1-train-admin}\n"

WANTED = {
    "fleetctl.io/site": "tyo1",
    "topology.kubernetes.io/zone": "tyo1",
    "fleetctl.io/rack": "rack-11",
    "fleetctl.io/leaf": "leaf-tyo1-r11-a_leaf-tyo1-r11-b",
    "fleetctl.io/spine": "spine-tyo1-01_spine-tyo1-02",
    "fleetctl.io/block": "spine-tyo1-01_spine-tyo1-02",
    "fleetctl.io/accelerator": "gpu",
    "fleetctl.io/accelerator-count": "8",
    "fleetctl.io/firmware": "unknown",  # the model has a baseline; no sweep has read the firmware yet
}


@pytest.fixture
def k8s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any) -> Iterator[K8sLabHandle]:
    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///{tmp_path / 'inv.db'}")
    seeds = [NodeSeed(n, boards=(("gpu", 8),)) for n in RACK11] + [NodeSeed(MN, boards=(("mncore2", 4),))]
    with serve_k8s(seeds, K8sLabConfig(pods_per_node=0)) as handle:
        text = (REPO / "inventory" / "site-tyo1.yaml").read_text()
        assert DECLARED in text
        site = tmp_path / "site-tyo1.yaml"
        site.write_text(text.replace(DECLARED, f"  - {{name: tyo1-train, kubeconfig: {handle.kubeconfig}, context: fleetctl-lab}}\n"))
        r = cli("inventory", "import", str(site))
        assert r.code == 0, r.err
        # An operator's label and taint, a label of fleetctl's it no longer computes, and a stale one of its own.
        _patch(handle, RACK11[0], {"metadata": {"labels": {"example.com/team": "ml", "fleetctl.io/obsolete": "x",
                                                            "fleetctl.io/rack": "rack-99"}},
                                   "spec": {"taints": [{"key": "example.com/repair", "effect": "NoSchedule"}]}})  # fmt: skip
        yield handle


def _patch(handle: K8sLabHandle, node: str, body: dict[str, Any]) -> None:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Node

    with Client(KubeConfig.from_file(handle.kubeconfig).get(), trust_env=False) as c:  # type: ignore[attr-defined]
        c.patch(Node, node, body)


def _node(handle: K8sLabHandle, name: str) -> dict[str, Any]:
    obj = handle.obj("Node", name)
    assert obj is not None
    return obj


def _versions(handle: K8sLabHandle) -> dict[str, str]:
    return {n: _node(handle, n)["metadata"]["resourceVersion"] for n in [*RACK11, MN]}


def _count_methods(handle: K8sLabHandle) -> collections.Counter[str]:
    """The stand-in's requests by HTTP method from now on (its router wrapped, on its own loop)."""
    seen: collections.Counter[str] = collections.Counter()
    route = handle.lab._route

    async def counted(request: Any, path: str) -> Any:
        seen[request.method] += 1
        return await route(request, path)

    handle.lab._route = counted  # type: ignore[method-assign]
    return seen


def test_dry_run_shows_the_difference_and_changes_nothing(cli: Any, k8s: K8sLabHandle) -> None:
    before = _versions(k8s)
    methods = _count_methods(k8s)
    r = cli("k8s", "sync", "rack-11", "--dry-run", "-o", "json")
    assert r.code == 0, r.err
    rows = {row["server"]: row for row in json.loads(r.out)}
    assert sorted(rows) == RACK11
    first = rows[RACK11[0]]
    assert first["changed"] == {"fleetctl.io/rack": {"from": "rack-99", "to": "rack-11"}}
    assert first["removed"] == ["fleetctl.io/obsolete"]
    assert first["added"] == {k: v for k, v in WANTED.items() if k != "fleetctl.io/rack"}
    assert rows[RACK11[1]]["added"] == WANTED and rows[RACK11[1]]["removed"] == []
    assert not any(row["written"] for row in rows.values())
    assert _versions(k8s) == before and methods["PATCH"] == 0 and methods["GET"] > 0

    table = cli("k8s", "sync", "rack-11", "--dry-run")
    assert table.code == 0, table.err
    assert "~fleetctl.io/rack: rack-99 -> rack-11" in table.out and "-fleetctl.io/obsolete" in table.out
    assert "+fleetctl.io/leaf=leaf-tyo1-r11-a_leaf-tyo1-r11-b" in table.out and "no (dry run)" in table.out
    assert _versions(k8s) == before


def test_sync_applies_only_fleetctl_s_keys_and_a_second_run_writes_nothing(cli: Any, k8s: K8sLabHandle) -> None:
    r = cli("k8s", "sync", "rack-11", MN, "-o", "json")
    assert r.code == 0, r.err
    assert all(row["written"] for row in json.loads(r.out))
    for name in RACK11:
        labels = _node(k8s, name)["metadata"]["labels"]
        assert {k: v for k, v in labels.items() if k.startswith("fleetctl.io/") or k.startswith("topology.")} == WANTED
        assert labels["kubernetes.io/hostname"] == name  # the kubelet's labels stay
    first = _node(k8s, RACK11[0])
    assert first["metadata"]["labels"]["example.com/team"] == "ml" and "fleetctl.io/obsolete" not in first["metadata"]["labels"]
    assert first["spec"]["taints"] == [{"key": "example.com/repair", "effect": "NoSchedule"}]
    mn = _node(k8s, MN)["metadata"]["labels"]
    assert (mn["fleetctl.io/rack"], mn["fleetctl.io/accelerator"], mn["fleetctl.io/accelerator-count"]) == ("rack-12", "mncore2", "4")
    assert mn["fleetctl.io/leaf"] == "leaf-tyo1-r12-a_leaf-tyo1-r12-b"

    before = _versions(k8s)
    methods = _count_methods(k8s)
    again = cli("k8s", "sync", "rack-11", MN, "-o", "json")
    assert again.code == 0, again.err
    assert not any(row["written"] or row["added"] or row["changed"] or row["removed"] for row in json.loads(again.out))
    assert methods["PATCH"] == 0 and methods["PUT"] == 0 and _versions(k8s) == before

    # Someone sets a fleetctl key by hand: the next sync puts it back, and touches nothing else.
    _patch(k8s, RACK11[2], {"metadata": {"labels": {"fleetctl.io/rack": "elsewhere", "example.com/x": "y"}}})
    fixed = cli("k8s", "sync", "rack-11", "-o", "json")
    assert fixed.code == 0, fixed.err
    written = [row for row in json.loads(fixed.out) if row["written"]]
    assert [(w["server"], w["changed"]) for w in written] == [(RACK11[2], {"fleetctl.io/rack": {"from": "elsewhere", "to": "rack-11"}})]
    assert _node(k8s, RACK11[2])["metadata"]["labels"]["example.com/x"] == "y"


def test_an_unknown_declared_node_stops_the_sync_before_any_write(cli: Any, k8s: K8sLabHandle, tmp_path: Path) -> None:
    site = tmp_path / "site-tyo1.yaml"
    name = f"    - name: {RACK11[3]}\n"
    text = site.read_text()
    assert text.count(name) == 1
    site.write_text(text.replace(name, name + "      node: no-such-node\n"))
    assert cli("inventory", "import", str(site)).code == 0
    before = _versions(k8s)
    methods = _count_methods(k8s)
    r = cli("k8s", "sync", "rack-11")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "node 'no-such-node' is not in cluster tyo1-train" in r.err
    assert methods["PATCH"] == 0 and _versions(k8s) == before  # the three servers found first were not labelled either


def test_a_server_outside_any_cluster_is_one_line_exit_2(cli: Any, k8s: K8sLabHandle) -> None:
    r = cli("k8s", "sync", "nosuch")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
