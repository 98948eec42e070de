"""What each server's cluster says of its node: readiness, cordon, taints, pods and budgets, accelerators.

One client per cluster, opened once; the node found by name (a GET per
candidate) for a few servers, from one listing of the nodes for many; the
pods read per node for a few nodes, in one listing for many (either way
paged and bounded by the client); the budgets once per cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fleetctl.errors import FleetError, InputError, NotFound
from fleetctl.interfaces.k8s import RESOURCE_OF_KIND, ClusterClient, ClusterRef, Node, Pod, with_budgets
from fleetctl.k8s.nodes import NodeRef

#: Up to this many nodes of one cluster, each is read by name and its pods by a field selector; more, one listing each.
FEW = 16

Opener = Callable[[ClusterRef], ClusterClient]


@dataclass(frozen=True)
class Accelerators:
    """One board kind of a server: the boards the inventory holds against what the device plugin advertises."""

    kind: str
    resource: str | None  # the extended resource (None: a kind no device plugin is known for)
    inventory: int
    advertised: int | None  # None: unknown resource

    @property
    def short(self) -> bool:
        return self.advertised is not None and self.advertised < self.inventory


@dataclass
class NodeStatus:
    """One server as its cluster sees it (``node`` None: the cluster has no node of its names)."""

    ref: NodeRef
    node: Node | None
    learned: str | None = None  # how its node was found: declared, server name, host name
    pods: list[Pod] = field(default_factory=list)
    accelerators: list[Accelerators] = field(default_factory=list)
    error: str | None = None  # the sweep's read: why its node or cluster could not be read (one line)

    def row(self) -> dict[str, Any]:
        """The machine-readable row (``-o json``): no secret, the cluster by name and reference."""
        n = self.node
        return {
            "server": self.ref.server,
            "cluster": self.ref.cluster.name if self.ref.cluster else None,
            "node": n.name if n else None,
            "node_from": self.learned,
            "ready": n.ready if n else None,
            "ready_reason": n.ready_reason if n else None,
            "cordoned": n.unschedulable if n else None,
            "taints": [t.model_dump() for t in n.taints] if n else [],
            "accelerators": [
                {"kind": a.kind, "resource": a.resource, "inventory": a.inventory, "advertised": a.advertised} for a in self.accelerators
            ],
            "pods": [
                {"namespace": p.namespace, "name": p.name, "priority": p.priority, "priority_class": p.priority_class,
                 "owner": p.owner_kind, "phase": p.phase, "budgets": list(p.budgets)}
                for p in self.pods
            ],  # fmt: skip
        }


def open_cluster(ref: ClusterRef) -> ClusterClient:
    """The cluster opened by the driver its reference names (``fleetctl.k8s`` entry points)."""
    from fleetctl.plugins import load_driver

    cls = load_driver("k8s", ref.driver)
    if not (isinstance(cls, type) and issubclass(cls, ClusterClient)):
        raise FleetError(f"k8s driver {ref.driver!r} is not a ClusterClient", exit_code=2)
    client: ClusterClient = cls.open(ref)
    return client


def accelerators(ref: NodeRef, node: Node | None) -> list[Accelerators]:
    """Each board kind the inventory holds in the server, against the node's allocatable count of its resource."""
    out = []
    for kind, count in sorted(ref.boards.items()):
        resource = RESOURCE_OF_KIND.get(kind)
        advertised = node.advertised(resource) if (node is not None and resource is not None) else None
        out.append(Accelerators(kind, resource, count, advertised))
    return out


def find_node(client: ClusterClient, ref: NodeRef, listed: dict[str, Node] | None) -> tuple[Node | None, str | None]:
    """The server's node and how it was found; a declared node the cluster lacks is an error (exit 2)."""
    for i, name in enumerate(ref.candidates()):
        node = listed.get(name) if listed is not None else client.node(name)
        if node is not None:
            how = "declared" if ref.node is not None else ("server name" if i == 0 and name == ref.server else "host name")
            return node, how
    if ref.node is not None:
        raise NotFound(f"{ref.server}: node {ref.node!r} is not in {client.ref.describe()}")
    return None, None


def statuses(refs: Iterable[NodeRef], *, pods: bool = True, opener: Opener | None = None) -> list[NodeStatus]:
    """The status of each server that is in a cluster, in the order given.

    Raises:
        InputError: (exit 2) none of the servers is in a cluster; a declared node is not in its cluster.
        K8sError: (exit 2) a cluster cannot be opened or does not answer.
    """
    refs = list(refs)
    in_cluster = [r for r in refs if r.cluster is not None]
    if not in_cluster:
        names = ", ".join(r.server for r in refs[:5]) + (" ..." if len(refs) > 5 else "")
        raise InputError(f"{names}: not in a Kubernetes cluster (declare it under the site's clusters:, docs/kubernetes.md)")
    by_cluster: dict[ClusterRef, list[NodeRef]] = {}
    for r in in_cluster:
        assert r.cluster is not None
        by_cluster.setdefault(r.cluster, []).append(r)
    found: dict[str, NodeStatus] = {}
    for cluster, members in by_cluster.items():
        with (opener or open_cluster)(cluster) as client:
            found.update(_cluster_statuses(client, members, pods=pods))
    return [found[r.server] for r in in_cluster]


def read_nodes(refs: Iterable[NodeRef], *, opener: Opener | None = None) -> dict[str, NodeStatus]:
    """For the sweep (``--level k8s``): each server in a cluster and its node, without pods.

    Failures are data, as every sweep reading: a cluster that cannot be opened or
    does not answer, or a declared node it lacks, is that server's ``error``;
    the other clusters and servers are read all the same.
    """
    by_cluster: dict[ClusterRef, list[NodeRef]] = {}
    for r in refs:
        if r.cluster is not None:
            by_cluster.setdefault(r.cluster, []).append(r)
    out: dict[str, NodeStatus] = {}
    for cluster, members in by_cluster.items():
        try:
            with (opener or open_cluster)(cluster) as client:
                out.update(_cluster_statuses(client, members, pods=False, strict=False))
        except FleetError as e:
            out.update({r.server: NodeStatus(r, None, error=str(e)) for r in members})
    return out


def _cluster_statuses(client: ClusterClient, members: list[NodeRef], *, pods: bool, strict: bool = True) -> dict[str, NodeStatus]:
    many = len(members) > FEW
    listed = {n.name: n for n in client.nodes()} if many else None
    out: dict[str, NodeStatus] = {}
    for r in members:
        try:
            node, how = find_node(client, r, listed)
        except NotFound as e:
            if strict:
                raise
            out[r.server] = NodeStatus(r, None, error=str(e))
            continue
        out[r.server] = NodeStatus(r, node, how, accelerators=accelerators(r, node))
    if not pods:
        return out
    nodes = [s.node.name for s in out.values() if s.node is not None]
    if not nodes:
        return out
    budgets = client.budgets()
    if many:
        on: dict[str, list[Pod]] = {}
        wanted = set(nodes)
        for p in client.pods():
            if p.node in wanted:
                on.setdefault(p.node, []).append(p)
    else:
        on = {n: client.pods(n) for n in dict.fromkeys(nodes)}
    for s in out.values():
        if s.node is not None:
            s.pods = with_budgets(on.get(s.node.name, []), budgets)
    return out
