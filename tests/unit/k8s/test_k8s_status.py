"""fleetctl.k8s: the node name rule, and the two ways of reading a cluster (a few nodes by name, many by listing)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s

from fleetctl.errors import NotFound
from fleetctl.interfaces.k8s import ClusterRef
from fleetctl.k8s.nodes import NodeRef, _host_name
from fleetctl.k8s.status import FEW, read_nodes, statuses


def ref(server: str, cluster: ClusterRef | None, *, node: str | None = None, host: str | None = None) -> NodeRef:
    return NodeRef(server=server, site="s", rack="r", state="in-service", cluster=cluster, node=node, host=host, boards={"gpu": 8})


def test_host_names_and_candidates() -> None:
    assert _host_name("n1.example:2222") == "n1.example" and _host_name("N1") == "n1"
    assert _host_name("10.0.0.1:22") is None and _host_name("[fd00::1]:22") is None and _host_name(None) is None
    assert ref("s1", None, host="h1").candidates() == ["s1", "h1"]
    assert ref("s1", None, node="n9", host="h1").candidates() == ["n9"]  # declared: that one alone
    assert ref("S1_x", None, host="h1").candidates() == ["h1"]  # no node may be named S1_x


@pytest.fixture
def k8s() -> Iterator[K8sLabHandle]:
    seeds = [NodeSeed(f"n{i:02d}", boards=(("gpu", 8),)) for i in range(FEW + 4)]
    with serve_k8s(seeds, K8sLabConfig(pods_per_node=1, gang_size=4)) as handle:
        yield handle


def test_a_node_named_as_the_host_is_found(k8s: K8sLabHandle) -> None:
    c = ClusterRef("lab", kubeconfig=str(k8s.kubeconfig))
    [st] = statuses([ref("srv-a", c, host="n03")])
    assert st.node is not None and (st.node.name, st.learned) == ("n03", "host name")


def test_many_nodes_are_listed_not_read_one_by_one(k8s: K8sLabHandle) -> None:
    c = ClusterRef("lab", kubeconfig=str(k8s.kubeconfig))
    refs = [ref(f"n{i:02d}", c) for i in range(FEW + 4)]
    before = k8s.lab.requests
    found = statuses(refs)
    # one listing of nodes, one of budgets, one of pods (each under a page): not a GET per node and per node's pods
    assert k8s.lab.requests - before <= 6, k8s.lab.requests - before
    assert [s.node.name for s in found if s.node] == [r.server for r in refs]
    assert all(len(s.pods) == 3 and all(p.node == s.node.name for p in s.pods) for s in found if s.node)


def test_the_sweeps_read_keeps_failures_as_data(k8s: K8sLabHandle, tmp_path) -> None:  # type: ignore[no-untyped-def]
    good = ClusterRef("lab", kubeconfig=str(k8s.kubeconfig))
    gone = ClusterRef("gone", kubeconfig=str(tmp_path / "nothing"))
    out = read_nodes([ref("n00", good), ref("x", good, node="nope"), ref("n01", gone), ref("free", None)])
    assert out["n00"].node is not None and out["n00"].error is None and out["n00"].pods == []
    assert "node 'nope' is not in cluster lab" in (out["x"].error or "")
    assert "no kubeconfig file" in (out["n01"].error or "")
    assert "free" not in out
    with pytest.raises(NotFound):  # the status command's read: a declared node the cluster lacks is an error
        statuses([ref("x", good, node="nope")])
