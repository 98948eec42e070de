"""The Kubernetes client's edge: the API's objects as fleetctl's models, bounded reads, errors without secrets.

The parsing is checked on the API's own full-field fixtures (tests/data/k8s/upstream, from kubernetes/kubernetes:
SOURCES.md); the reads against the lab's stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.k8s import lightkube_client as lk
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabHandle, serve_k8s

from fleetctl.interfaces.k8s import Budget, ClusterRef, K8sError, Pod, with_budgets

DATA = Path(__file__).resolve().parents[2] / "data" / "k8s" / "upstream"


def upstream(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def test_a_full_node_from_the_api_fixture_parses() -> None:
    from lightkube.resources.core_v1 import Node

    raw = upstream("core.v1.Node.json")
    node = lk._node(Node.from_dict(raw))
    assert node.name == raw["metadata"]["name"]
    assert node.unschedulable is raw["spec"]["unschedulable"]
    assert [(t.key, t.value, t.effect) for t in node.taints] == [(t["key"], t["value"], t["effect"]) for t in raw["spec"]["taints"]]
    assert node.allocatable == raw["status"]["allocatable"]
    # the fixture's condition statuses are random strings: not True/False, so Unknown (a table, never a crash)
    assert {c.status for c in node.conditions} <= {"True", "False", "Unknown"}
    assert len(node.conditions) == len(raw["status"]["conditions"])


def test_a_full_budget_from_the_api_fixture_parses() -> None:
    from lightkube.resources.policy_v1 import PodDisruptionBudget

    raw = upstream("policy.v1.PodDisruptionBudget.json")
    b = lk._budget(PodDisruptionBudget.from_dict(raw))
    assert (b.namespace, b.name) == (raw["metadata"]["namespace"], raw["metadata"]["name"])
    assert b.match_labels == raw["spec"]["selector"]["matchLabels"]
    assert [e["key"] for e in b.match_expressions] == [e["key"] for e in raw["spec"]["selector"]["matchExpressions"]]
    assert b.disruptions_allowed == raw["status"]["disruptionsAllowed"]


def test_budget_selectors_follow_the_label_selector_rules() -> None:
    b = Budget(namespace="t", name="b", match_labels={"gang": "g1"},
               match_expressions=({"key": "tier", "operator": "In", "values": ["a", "b"]},
                                  {"key": "canary", "operator": "DoesNotExist"}))  # fmt: skip
    assert b.selects("t", {"gang": "g1", "tier": "a"})
    assert not b.selects("other", {"gang": "g1", "tier": "a"})  # a budget covers its own namespace only
    assert not b.selects("t", {"gang": "g1", "tier": "c"})
    assert not b.selects("t", {"gang": "g1", "tier": "a", "canary": "1"})
    assert not Budget(namespace="t", name="empty").selects("t", {"any": "x"})  # an empty selector selects nothing
    notin = Budget(namespace="t", name="n", match_expressions=({"key": "tier", "operator": "NotIn", "values": ["a"]},))
    assert notin.selects("t", {}) and not notin.selects("t", {"tier": "a"})
    weird = Budget(namespace="t", name="w", match_expressions=({"key": "tier", "operator": "Gt", "values": ["1"]},))
    assert not weird.selects("t", {"tier": "2"})  # an operator the API refuses: nothing, not everything


def test_pods_sorted_by_priority_with_their_budgets() -> None:
    pods = [Pod(namespace="t", name="low", priority=0, labels={"gang": "g1"}), Pod(namespace="k", name="ds", priority=2_000_001_000),
            Pod(namespace="t", name="high", priority=1_000_000, labels={"gang": "g1"})]  # fmt: skip
    out = with_budgets(pods, [Budget(namespace="t", name="g1", match_labels={"gang": "g1"})])
    assert [(p.name, p.budgets) for p in out] == [("ds", ()), ("high", ("t/g1",)), ("low", ("t/g1",))]


@pytest.fixture
def k8s() -> Iterator[K8sLabHandle]:
    with serve_k8s([NodeSeed(f"n{i}", boards=(("gpu", 8),)) for i in range(5)]) as handle:
        yield handle


def _ref(k8s: K8sLabHandle) -> ClusterRef:
    return ClusterRef("lab", kubeconfig=str(k8s.kubeconfig), context="fleetctl-lab")


def test_lists_are_paged(k8s: K8sLabHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lk, "PAGE", 2)
    before = k8s.lab.requests
    with lk.LightkubeCluster.open(_ref(k8s)) as c:
        assert [n.name for n in c.nodes()] == [f"n{i}" for i in range(5)]
    assert k8s.lab.requests - before == 3  # limit=2: 2 + 2 + 1, following the continue tokens


def test_a_listing_stops_at_its_cap(k8s: K8sLabHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lk, "MAX_ITEMS", 3)
    with lk.LightkubeCluster.open(_ref(k8s)) as c, pytest.raises(K8sError, match="more than 3 Node objects"):
        c.nodes()


def test_a_deadline_bounds_every_call(k8s: K8sLabHandle) -> None:
    with lk.LightkubeCluster.open(_ref(k8s), deadline=-1) as c, pytest.raises(K8sError, match="no complete answer within -1 s"):
        c.nodes()


def test_a_wrong_token_is_a_401_and_no_token_is_ever_in_a_message(k8s: K8sLabHandle, tmp_path: Path) -> None:
    cfg = json.loads(k8s.kubeconfig.read_text())
    real = cfg["users"][0]["user"]["token"]
    cfg["users"][0]["user"]["token"] = "wrong-" + real[::-1]
    bad = tmp_path / "kubeconfig"
    bad.write_text(json.dumps(cfg))
    with lk.LightkubeCluster.open(ClusterRef("lab", kubeconfig=str(bad))) as c, pytest.raises(K8sError) as e:
        c.node("n0")
    assert "401" in str(e.value) and e.value.exit_code == 2
    assert real not in str(e.value) and real[::-1] not in str(e.value) and "wrong-" not in str(e.value)
