"""A Kubernetes API server stand-in for the lab: the lab's servers as a cluster's nodes.

No Kubernetes API server can be installed on the machines the lab runs on;
this stand-in serves the subset fleetctl uses (nodes and their status,
pods, PodDisruptionBudgets, the eviction subresource, leases, watch) with
the real API's shapes and semantics, and the real ``kubectl`` is the check
of its fidelity (tests/e2e/test_lab_k8s_kubectl.py). See docs/lab.md.

- ``objects``: the cluster made from the lab's servers (nodes, pods, budgets).
- ``store``: the state, resourceVersions, watch events, eviction and the
  controllers' part.
- ``server``: the aiohttp API server, its control port, ``serve_k8s`` for
  tests.
- ``daemon``: ``fleetctl lab k8s up|down|status|fault`` run it in the background.
"""

from __future__ import annotations

from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLab, K8sLabConfig, K8sLabHandle, seeds_from_specs, serve_k8s

__all__ = ["K8sLab", "K8sLabConfig", "K8sLabHandle", "NodeSeed", "seeds_from_specs", "serve_k8s"]
