"""The stand-in's objects have the real API's shape: every key it sends exists, with the same JSON type, in the
API's own full-field fixtures (tests/data/k8s/upstream, from kubernetes/kubernetes), and its eviction refusal is
the API server's body (tests/data/k8s/SOURCES.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.k8s.objects import NodeSeed, make_pdb, make_pod, new_uid, seed_cluster
from fleetctl_lab.k8s.store import BY_KIND, ApiError, Store, conflict, not_found

DATA = Path(__file__).resolve().parents[2] / "data" / "k8s"

#: Maps whose keys are data (labels, resource names), not schema.
FREE_MAPS = {"metadata.labels", "metadata.annotations", "status.capacity", "status.allocatable", "spec.selector.matchLabels",
             "status.disruptedPods"}  # fmt: skip
#: IntOrString fields: the fixture holds the string form.
INT_OR_STRING = {"spec.minAvailable", "spec.maxUnavailable"}


def upstream(name: str) -> dict[str, Any]:
    return json.loads((DATA / "upstream" / name).read_text())


def strays(ours: Any, ref: Any, path: str = "") -> list[str]:
    """The key paths of ``ours`` that ``ref`` does not have, or has with another JSON type."""
    if path in FREE_MAPS or path in INT_OR_STRING:
        return []
    if ref is None:
        return []  # the fixture leaves the type open (a null)
    if isinstance(ours, dict):
        if not isinstance(ref, dict):
            return [f"{path}: object, upstream {type(ref).__name__}"]
        out = []
        for k, v in ours.items():
            sub = f"{path}.{k}" if path else k
            if k not in ref:
                out.append(f"{sub}: not in the upstream fixture")
            else:
                out += strays(v, ref[k], sub)
        return out
    if isinstance(ours, list):
        if not isinstance(ref, list):
            return [f"{path}: list, upstream {type(ref).__name__}"]
        return [s for item in ours for s in strays(item, ref[0], path)] if ref else []
    kinds = {bool: "bool", int: "number", float: "number", str: "string"}
    if kinds.get(type(ours)) != kinds.get(type(ref)):
        return [f"{path}: {type(ours).__name__}, upstream {type(ref).__name__}"]
    return []


@pytest.fixture(scope="module")
def cluster() -> Store:
    async def make() -> Store:
        store = Store()
        store.load(seed_cluster([NodeSeed("gpu-0", boards=(("gpu", 8),)), NodeSeed("mnc-1", boards=(("mncore2", 4),))]))
        return store

    return asyncio.run(make())


def test_nodes_have_the_upstream_shape(cluster: Store) -> None:
    ref = upstream("core.v1.Node.json")
    for node in cluster.objects["nodes"].values():
        assert strays(node, ref) == []
        for key in ("capacity", "allocatable", "conditions", "addresses", "nodeInfo", "daemonEndpoints"):
            assert key in node["status"]
    # The checker does catch a stray key or a wrong type (it is not vacuous).
    assert strays({"spec": {"unschedulable": "true", "cordoned": True}}, ref) == [
        "spec.unschedulable: str, upstream bool", "spec.cordoned: not in the upstream fixture"]


def test_budgets_leases_and_statuses_have_the_upstream_shape(cluster: Store) -> None:
    for pdb in cluster.objects["poddisruptionbudgets"].values():
        pdb = {**pdb, "status": cluster.pdb_status(pdb)}
        assert strays(pdb, upstream("policy.v1.PodDisruptionBudget.json")) == []
    lease = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
             "metadata": {"name": "l", "namespace": "kube-node-lease", "uid": new_uid(), "resourceVersion": "3", "creationTimestamp": "x"},
             "spec": {"holderIdentity": "fleetctl", "leaseDurationSeconds": 30, "acquireTime": "2025-01-01T00:00:00.000000Z",
                      "renewTime": "2025-01-01T00:00:00.000000Z", "leaseTransitions": 0}}  # fmt: skip
    assert strays(lease, upstream("coordination.k8s.io.v1.Lease.json")) == []
    status = upstream("core.v1.Status.json")
    for err in (not_found(BY_KIND["Node"], "n"), conflict(BY_KIND["Lease"], "l"), ApiError(401, "Unauthorized", "Unauthorized")):
        assert strays(err.status(), status) == []
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "training"},
                "deleteOptions": {"gracePeriodSeconds": 30, "dryRun": ["All"]}}  # fmt: skip
    assert strays(eviction, upstream("policy.v1.Eviction.json")) == []  # what a client sends, fleetctl's later one included


def test_the_eviction_refusal_is_the_api_servers() -> None:
    async def refuse() -> dict[str, Any]:
        store = Store()
        store.load(seed_cluster([]))
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": new_uid(), "controller": True}
        store.load([make_pod(name="web-1", namespace="default", node="n", labels={"app": "web"}, owner=owner, host_ip="127.0.0.1",
                             pod_ip="10.0.0.1"),
                    make_pdb("default", "example-pdb", {"app": "web"}, min_available=1)])  # fmt: skip
        try:
            store.evict("default", "web-1", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}})
        except ApiError as e:
            return e.status()
        raise AssertionError("the eviction was not refused")

    assert asyncio.run(refuse()) == json.loads((DATA / "eviction-429-status.json").read_text())
