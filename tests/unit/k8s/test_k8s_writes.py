"""The client's writes against the lab's API stand-in: node patches, a condition, evictions, the read-modify-write."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fleetctl_drivers.k8s.lightkube_client import LightkubeCluster
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabHandle, serve_k8s

from fleetctl.interfaces.k8s import ClusterRef, Condition, K8sError, Node, NodePatch, Taint
from fleetctl.k8s.writes import update_node, with_taint, without_taint

MAINT = Taint(key="fleetctl.io/maintenance", value="job-7", effect="NoSchedule")


@pytest.fixture(scope="module")
def k8s() -> Iterator[K8sLabHandle]:
    with serve_k8s([NodeSeed(f"n{i}", boards=(("gpu", 8),)) for i in range(3)]) as handle:
        yield handle


@pytest.fixture
def client(k8s: K8sLabHandle) -> Iterator[LightkubeCluster]:
    with LightkubeCluster.open(ClusterRef("lab", kubeconfig=str(k8s.kubeconfig), context="fleetctl-lab")) as c:
        yield c


def test_cordon_taint_label_and_back(k8s: K8sLabHandle, client: LightkubeCluster) -> None:
    other = Taint(key="example.com/theirs", value="x", effect="NoSchedule")
    client.patch_node("n0", NodePatch(taints=(other,)))
    node = update_node(client, "n0", lambda n: NodePatch(unschedulable=True, taints=with_taint(n.taints, MAINT),
                                                         labels={"fleetctl.io/rack": "r1"}))  # fmt: skip
    raw = k8s.obj("Node", "n0")
    assert raw is not None and raw["spec"]["unschedulable"] is True
    taints = {(t["key"], t.get("value")) for t in raw["spec"]["taints"]}
    assert taints == {("example.com/theirs", "x"), ("fleetctl.io/maintenance", "job-7")}
    assert raw["metadata"]["labels"]["fleetctl.io/rack"] == "r1"
    assert raw["metadata"]["labels"]["kubernetes.io/hostname"] == "n0"  # a merge patch leaves the others
    node = update_node(client, "n0", lambda n: NodePatch(unschedulable=False, taints=without_taint(n.taints, MAINT.key),
                                                         labels={"fleetctl.io/rack": None}))  # fmt: skip
    raw = k8s.obj("Node", "n0")
    assert raw is not None and "unschedulable" not in raw["spec"]
    assert [t["key"] for t in raw["spec"]["taints"]] == ["example.com/theirs"]  # only our key went
    assert "fleetctl.io/rack" not in raw["metadata"]["labels"]
    assert not node.unschedulable


def test_a_stale_version_is_refused_and_update_node_reads_again(client: LightkubeCluster) -> None:
    stale = client.node("n1")
    assert stale is not None
    client.patch_node("n1", NodePatch(labels={"someone.else/touched": "yes"}))
    with pytest.raises(K8sError) as e:
        client.patch_node("n1", NodePatch(unschedulable=True, resource_version=stale.resource_version))
    assert e.value.status == 409
    # update_node reads the node afresh: it sees the other writer's label and writes over the new version.
    seen: list[Node] = []

    def change(n: Node) -> NodePatch:
        seen.append(n)
        if len(seen) == 1:  # another writer comes between our read and our write, once
            client.patch_node("n1", NodePatch(labels={"someone.else/again": "yes"}))
        return NodePatch(unschedulable=True)

    after = update_node(client, "n1", change)
    assert len(seen) == 2 and after.unschedulable and after.labels["someone.else/again"] == "yes"
    client.patch_node("n1", NodePatch(unschedulable=False))


def test_update_node_gives_up_after_its_attempts(client: LightkubeCluster) -> None:
    def always_raced(n: Node) -> NodePatch:
        client.patch_node("n1", NodePatch(annotations={"race": n.resource_version}))
        return NodePatch(unschedulable=True)

    with pytest.raises(K8sError, match="changed under every one of 3 writes"):
        update_node(client, "n1", always_raced, attempts=3)
    node = client.node("n1")
    assert node is not None and not node.unschedulable


def test_an_unknown_node_is_404(client: LightkubeCluster) -> None:
    with pytest.raises(K8sError) as e:
        update_node(client, "nosuch", lambda n: NodePatch(unschedulable=True))
    assert e.value.status == 404 and e.value.exit_code == 2


def test_a_condition_is_merged_by_type_and_keeps_its_transition_time(k8s: K8sLabHandle, client: LightkubeCluster) -> None:
    client.set_condition("n2", Condition(type="FleetctlHealthy", status="False", reason="PsuFailed", message="PSU 1 failed"))
    first = k8s.obj("Node", "n2")
    assert first is not None
    conds = {c["type"]: c for c in first["status"]["conditions"]}
    assert conds["Ready"]["status"] == "True"  # the kubelet's conditions stay
    ours = conds["FleetctlHealthy"]
    assert (ours["status"], ours["reason"], ours["message"]) == ("False", "PsuFailed", "PSU 1 failed")
    client.set_condition("n2", Condition(type="FleetctlHealthy", status="False", reason="PsuFailed", message="PSU 1 failed, again"))
    again = {c["type"]: c for c in (k8s.obj("Node", "n2") or {})["status"]["conditions"]}["FleetctlHealthy"]
    assert again["lastTransitionTime"] == ours["lastTransitionTime"] and again["message"] == "PSU 1 failed, again"
    node = client.set_condition("n2", Condition(type="FleetctlHealthy", status="True", reason="NoFinding", message="healthy"))
    cond = node.condition("FleetctlHealthy")
    assert cond is not None and cond.status == "True"


def test_evictions_evicted_blocked_and_gone(k8s: K8sLabHandle, client: LightkubeCluster) -> None:
    pods = [p for p in client.pods("n0") if p.owner_kind != "DaemonSet"]
    assert pods, "the stand-in seeds workload pods on every node"
    pod = pods[0]
    budget = next(iter(b for b in client.budgets() if b.selects(pod.namespace, pod.labels)), None)
    assert budget is not None, "the stand-in's gang pods are covered by a budget"
    k8s.set_fault(pdb=f"{budget.namespace}/{budget.name}", refuse=1)
    blocked = client.evict(pod.namespace, pod.name, uid=pod.uid)
    assert blocked.outcome == "blocked" and budget.name in blocked.message
    assert client.evict(pod.namespace, pod.name, uid=pod.uid).outcome == "evicted"
    assert client.evict(pod.namespace, pod.name, uid="not-" + pod.uid).outcome == "gone"
    assert client.evict(pod.namespace, "nosuch-pod").outcome == "gone"
