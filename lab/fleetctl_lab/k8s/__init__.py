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

# Nothing imported here: `fleetctl lab k8s` loads this package's CLI, and
# aiohttp only when a command serves (tests: fleetctl_lab.k8s.server.serve_k8s).
