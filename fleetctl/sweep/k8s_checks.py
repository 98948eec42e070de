"""The Kubernetes checks (``sweep --level k8s``): each server's node, as its cluster says.

They read ``reading.k8s`` (:class:`~fleetctl.k8s.status.NodeStatus`), set for
the servers in a cluster (docs/kubernetes.md); a server in none is not judged.
A cluster that cannot be read is that server's unknown, never the sweep's end.
"""

from __future__ import annotations

from collections.abc import Iterator

from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.model import Problem, Status, problem
from fleetctl.sweep.registry import check

C, U = Status.CRITICAL, Status.UNKNOWN


@check("k8s.accelerators", kind="server", severity=C, reads=("the node's status.allocatable (Kubernetes API)",),
       cost="1 request per node (a listing per cluster past 16 nodes)", level="k8s")  # fmt: skip
def accelerators_advertised(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """A node advertises (allocatable, from its device plugin) as many accelerators as the inventory's boards in it."""
    st = r.k8s
    if st is None:
        return
    if st.error:
        yield problem(U, st.error, "node")
        return
    if st.node is None:
        return  # no node of its names: not (yet) in the cluster; nothing to compare
    for a in st.accelerators:
        if a.short:
            yield problem(
                C, f"node {st.node.name} advertises {a.advertised} {a.resource} of the {a.inventory} {a.kind} boards the inventory holds",
                a.kind, node=st.node.name, resource=a.resource, advertised=a.advertised, inventory=a.inventory,
            )  # fmt: skip
