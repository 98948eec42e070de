"""The stand-in's indexes (a node's pods, the scheduler's load) answer as a pass over every pod would."""

from __future__ import annotations

import json
import ssl
import urllib.parse
import urllib.request
from typing import Any

from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s
from fleetctl_lab.k8s.store import StoreConfig


def _pods(k8s: K8sLabHandle, field_selector: str) -> list[str]:
    cfg = json.loads(k8s.kubeconfig.read_text())
    token = cfg["users"][0]["user"]["token"]
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # the lab's own certificate; loopback only
    url = f"{k8s.url}/api/v1/pods?fieldSelector={urllib.parse.quote(field_selector)}"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return sorted(p["metadata"]["name"] for p in doc["items"])


def test_a_nodes_pods_by_field_selector_match_a_full_pass() -> None:
    seeds = [NodeSeed(f"n{i}", boards=(("gpu", 8),)) for i in range(6)]
    cfg = K8sLabConfig(pods_per_node=3, gang_size=2, store=StoreConfig(reschedule_s=0.01))
    with serve_k8s(seeds, cfg) as k8s:
        for n in ("n0", "n3", "nosuch"):
            want = sorted(p["metadata"]["name"] for p in k8s.pods_on(n))
            assert _pods(k8s, f"spec.nodeName={n}") == want
            assert _pods(k8s, f"spec.nodeName=={n},metadata.namespace=training") == [x for x in want if x.startswith("gang-")]
        others = _pods(k8s, "spec.nodeName!=n0")  # not an index's: a pass over every pod
        assert others and not set(others) & {p["metadata"]["name"] for p in k8s.pods_on("n0")}
