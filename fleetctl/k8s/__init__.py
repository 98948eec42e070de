"""Kubernetes-aware operations: the servers as the nodes of their clusters (docs/kubernetes.md).

- ``nodes``: which cluster and node each server is, from the inventory (references only).
- ``status``: what the cluster says of those nodes, for ``fleetctl k8s status`` and the sweep's ``k8s`` level.

The client is a driver (``fleetctl.k8s`` entry points, :mod:`fleetctl.interfaces.k8s`), loaded only
when a command talks to a cluster.
"""
