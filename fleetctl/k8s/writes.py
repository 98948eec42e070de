"""Changing a node safely: read, change, write naming the version read, again when another writer came between.

The API merges no taint by key (``spec.taints`` is replaced whole), so adding
or removing one taint is a read-modify-write; the write names the
``resourceVersion`` it read, and a node changed in between (the kubelet, the
node lifecycle controller, an operator's ``kubectl taint``) is refused with a
409 and read again, a bounded number of times. Only fleetctl's own keys are
ever added or removed: every other taint, label and annotation is written
back as it was read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fleetctl.interfaces.k8s import ClusterClient, K8sError, Node, NodePatch, Taint

#: Reads and writes of one node before giving up on a node that keeps changing under us.
ATTEMPTS = 5


def update_node(client: ClusterClient, name: str, change: Callable[[Node], NodePatch | None], *, attempts: int = ATTEMPTS) -> Node:
    """Apply ``change(node)`` (None: nothing to change) to the node as it is now; the node after.

    Raises:
        K8sError: no such node (status 404), or it changed under us ``attempts`` times (409), or any other answer.
    """
    for _ in range(max(1, attempts)):
        node = client.node(name)
        if node is None:
            raise K8sError(f"{client.ref.describe()}: no node {name!r}", exit_code=2, status=404)
        patch = change(node)
        if patch is None:
            return node
        try:
            return client.patch_node(name, _pinned(patch, node.resource_version))
        except K8sError as e:
            if e.status != 409:
                raise
    raise K8sError(f"{client.ref.describe()}: node {name!r} changed under every one of {attempts} writes; not changed", status=409)


def _pinned(patch: NodePatch, version: str) -> NodePatch:
    return NodePatch(patch.unschedulable, patch.taints, patch.labels, patch.annotations, version or None)


def with_taint(taints: Iterable[Taint], taint: Taint) -> tuple[Taint, ...]:
    """The list with ``taint`` in place of any of the same key and effect (the API's identity of a taint)."""
    return (*(t for t in taints if (t.key, t.effect) != (taint.key, taint.effect)), taint)


def without_taint(taints: Iterable[Taint], key: str, effect: str | None = None) -> tuple[Taint, ...]:
    """The list without the taints of ``key`` (of that effect only, when given)."""
    return tuple(t for t in taints if not (t.key == key and (effect is None or t.effect == effect)))
