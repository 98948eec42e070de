"""Which cluster and node each server is, as the inventory declares it.

A server's cluster is the one it names (``cluster:``), else its site's only
cluster; none when its site declares none. Its node is the one it names
(``node:``), else learned from the cluster (:func:`fleetctl.k8s.status.find_node`):
a node named as the server, else one named as its host name.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from fleetctl.interfaces.k8s import ClusterRef
from fleetctl.inventory.schema import NODE_NAME_RE

_NODE_NAME = re.compile(NODE_NAME_RE)


@dataclass(frozen=True)
class NodeRef:
    """One server as a (possible) node: where its cluster is referenced, and what its inventory holds."""

    server: str
    site: str
    rack: str
    state: str
    cluster: ClusterRef | None
    node: str | None  # declared; None: learned
    host: str | None  # the host name of its host address (host:port), a candidate node name
    boards: dict[str, int] = field(default_factory=dict)  # board kind -> boards the inventory holds (not in RMA)

    def candidates(self) -> list[str]:
        """The node names to look for, in order: the declared one alone, else the server's name, then its host name."""
        if self.node is not None:
            return [self.node]
        # Only names a Node may have (a DNS-1123 subdomain): a server named S1_A is no node's name.
        return list(dict.fromkeys(n for n in (self.server, self.host) if n and _NODE_NAME.match(n)))


def cluster_refs(stored: list[dict[str, Any]] | None) -> dict[str, ClusterRef]:
    """A site's stored clusters as references, by name."""
    return {
        c["name"]: ClusterRef(c["name"], kubeconfig=c.get("kubeconfig"), context=c.get("context"), in_cluster=bool(c.get("in_cluster")))
        for c in stored or []
    }


def _host_name(address: str | None) -> str | None:
    """The host part of ``host``, ``host:port`` or ``[v6]:port``; None for an IP address (no node is named so)."""
    if not address:
        return None
    host = address[1:].partition("]")[0] if address.startswith("[") else address.partition(":")[0] if address.count(":") == 1 else address
    if host.replace(".", "").isdigit() or ":" in host:
        return None
    return host.lower()


def node_refs(conn: Any, servers: list[str]) -> list[NodeRef]:
    """The servers named (in that order) as NodeRefs."""
    from fleetctl.inventory.queries import board_t, rack_t, site_t, srv_t

    rows: dict[str, Any] = {}
    boards: dict[int, Counter[str]] = {}
    for i in range(0, len(servers), 5000):
        chunk = servers[i : i + 5000]
        q = (
            select(srv_t.c.id, srv_t.c.name, srv_t.c.state, srv_t.c.k8s_cluster, srv_t.c.k8s_node, srv_t.c.host_address,
                   rack_t.c.name.label("rack"), site_t.c.name.label("site"), site_t.c.k8s_clusters)
            .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
            .join(site_t, site_t.c.id == rack_t.c.site_id)
            .where(srv_t.c.name.in_(chunk))
        )  # fmt: skip
        for r in conn.execute(q):
            rows[r.name] = r
        ids = [r.id for r in rows.values() if r.name in chunk]
        for b in conn.execute(select(board_t.c.server_id, board_t.c.kind).where(board_t.c.server_id.in_(ids), board_t.c.state != "rma")):
            boards.setdefault(b.server_id, Counter())[b.kind] += 1
    out = []
    for name in servers:
        r = rows.get(name)
        if r is None:
            continue
        clusters = cluster_refs(r.k8s_clusters)
        chosen = r.k8s_cluster or (next(iter(clusters)) if len(clusters) == 1 else None)
        out.append(
            NodeRef(server=name, site=r.site, rack=r.rack, state=r.state, cluster=clusters.get(chosen) if chosen else None,
                    node=r.k8s_node, host=_host_name(r.host_address), boards=dict(sorted(boards.get(r.id, Counter()).items())))  # fmt: skip
        )
    return out
