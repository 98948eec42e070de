"""The lab's Kubernetes API stand-in over HTTP: auth, discovery, lists, writes, eviction, leases, watch.

A plain client (urllib), not fleetctl's: these tests pin the stand-in's own
behaviour against the real API's (status codes, Status bodies, semantics).
kubectl's view is tests/e2e/test_lab_k8s_kubectl.py.
"""

from __future__ import annotations

import json
import re
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s
from fleetctl_lab.k8s.store import StoreConfig

SEEDS = [
    NodeSeed("gpu-0", "127.70.0.1", (("gpu", 8),)),
    NodeSeed("mnc-1", "127.70.0.2", (("mncore2", 4),)),
    NodeSeed("gpu-2", "127.70.0.3", (("gpu", 8),)),
    NodeSeed("mnc-3", "127.70.0.4", (("mncore2", 4),)),
]


@pytest.fixture
def k8s(tmp_path: Any) -> Iterator[K8sLabHandle]:
    cfg = K8sLabConfig(tls=False, state_dir=tmp_path, pods_per_node=2, gang_size=4, store=StoreConfig(reschedule_s=0.05, history=64))
    with serve_k8s(SEEDS, cfg) as handle:
        yield handle


def token_of(k: K8sLabHandle) -> str:
    return json.loads(k.kubeconfig.read_text())["users"][0]["user"]["token"]


def call(k: K8sLabHandle, method: str, path: str, body: Any = None, *, ctype: str = "application/json",
         token: str | None = "", accept: str = "application/json") -> tuple[int, Any]:  # fmt: skip
    """(status, JSON body); token "" means the kubeconfig's."""
    headers = {"Content-Type": ctype, "Accept": accept}
    if token is not None:
        headers["Authorization"] = f"Bearer {token or token_of(k)}"
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(k.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw.strip().startswith((b"{", b"[")) else raw.decode()
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw.strip().startswith(b"{") else raw.decode()


def test_token_required_and_never_shown(k8s: K8sLabHandle) -> None:
    code, body = call(k8s, "GET", "/api/v1/nodes", token=None)
    assert code == 401
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                    "reason": "Unauthorized", "code": 401}  # fmt: skip
    assert call(k8s, "GET", "/api/v1/nodes", token="wrong")[0] == 401
    assert call(k8s, "GET", "/healthz", token=None) == (200, "ok")
    assert stat.S_IMODE(k8s.kubeconfig.stat().st_mode) == 0o600
    assert token_of(k8s) not in json.dumps(k8s.call(k8s.lab.status))


def test_discovery_names_the_eviction_subresource(k8s: K8sLabHandle) -> None:
    code, v1 = call(k8s, "GET", "/api/v1")
    assert code == 200 and v1["kind"] == "APIResourceList"
    ev = next(r for r in v1["resources"] if r["name"] == "pods/eviction")
    # kubectl drain evicts only when it finds exactly this (drain.CheckEvictionSupport); otherwise it deletes.
    assert (ev["group"], ev["version"], ev["kind"]) == ("policy", "v1", "Eviction")
    groups = {g["name"] for g in call(k8s, "GET", "/apis")[1]["groups"]}
    assert {"apps", "policy", "coordination.k8s.io"} <= groups
    assert call(k8s, "GET", "/apis/policy/v1")[1]["resources"][0]["name"] == "poddisruptionbudgets"
    assert call(k8s, "GET", "/version")[1]["major"] == "1"
    assert call(k8s, "GET", "/apis/batch/v1")[0] == 404


def test_nodes_allocatable_selectors_and_pages(k8s: K8sLabHandle) -> None:
    code, lst = call(k8s, "GET", "/api/v1/nodes")
    assert code == 200 and lst["kind"] == "NodeList" and lst["metadata"]["resourceVersion"]
    alloc = {n["metadata"]["name"]: n["status"]["allocatable"] for n in lst["items"]}
    assert alloc["gpu-0"]["nvidia.com/gpu"] == "8" and "mn-core.preferred.jp/mncore" not in alloc["gpu-0"]
    assert alloc["mnc-1"]["mn-core.preferred.jp/mncore"] == "4"
    sel = urllib.parse.quote("kubernetes.io/hostname in (gpu-0,mnc-3)")
    assert [n["metadata"]["name"] for n in call(k8s, "GET", f"/api/v1/nodes?labelSelector={sel}")[1]["items"]] == ["gpu-0", "mnc-3"]
    names: list[str] = []
    path = "/api/v1/pods?limit=5"
    pages = 0
    while True:
        _, page = call(k8s, "GET", path)
        pages += 1
        names += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] > 0
        path = "/api/v1/pods?limit=5&continue=" + urllib.parse.quote(token)
    assert pages > 1 and len(names) == len(set(names)) == len(call(k8s, "GET", "/api/v1/pods")[1]["items"])
    assert call(k8s, "GET", "/api/v1/pods?continue=garbage")[0] == 400
    on = call(k8s, "GET", "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.nodeName=gpu-0"))[1]["items"]
    owners = sorted(p["metadata"]["ownerReferences"][0]["kind"] for p in on)
    assert owners == ["DaemonSet", "DaemonSet", "Job", "Job"]  # kube-proxy, the device plugin, two training pods
    trainer = next(p for p in on if p["metadata"]["namespace"] == "training")
    assert trainer["spec"]["priorityClassName"] == "training-high" and trainer["spec"]["volumes"][0]["emptyDir"] == {}
    assert call(k8s, "GET", "/api/v1/namespaces/training/pods?labelSelector=fleetctl.io%2Fgang%3Dgang-000")[1]["items"]
    assert call(k8s, "GET", "/api/v1/pods?fieldSelector=spec.host%3Dx")[0] == 400


def test_node_patch_kinds_and_status_subresource(k8s: K8sLabHandle) -> None:
    code, node = call(k8s, "PATCH", "/api/v1/nodes/gpu-0", {"spec": {"unschedulable": True}, "status": {"conditions": []}},
                      ctype="application/strategic-merge-patch+json")  # fmt: skip
    assert code == 200 and node["spec"]["unschedulable"] is True
    assert len(node["status"]["conditions"]) == 4  # the main resource leaves status alone
    rv = node["metadata"]["resourceVersion"]
    cond = {"type": "FleetctlHealthy", "status": "False", "reason": "BoardMissing", "message": "slot 3: no board"}
    code, node = call(k8s, "PATCH", "/api/v1/nodes/gpu-0/status", {"status": {"conditions": [cond]}, "spec": {"unschedulable": False}},
                      ctype="application/strategic-merge-patch+json")  # fmt: skip
    assert code == 200 and node["spec"]["unschedulable"] is True  # the status subresource leaves spec alone
    kinds = {c["type"] for c in node["status"]["conditions"]}
    assert kinds == {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "FleetctlHealthy"}
    assert int(node["metadata"]["resourceVersion"]) > int(rv)
    code, node = call(k8s, "PATCH", "/api/v1/nodes/gpu-0", [{"op": "add", "path": "/metadata/labels/fleetctl.io~1rack", "value": "r1"}],
                      ctype="application/json-patch+json")  # fmt: skip
    assert code == 200 and node["metadata"]["labels"]["fleetctl.io/rack"] == "r1"
    code, node = call(k8s, "PATCH", "/api/v1/nodes/gpu-0", {"metadata": {"labels": {"fleetctl.io/rack": None}}},
                      ctype="application/merge-patch+json")  # fmt: skip
    assert code == 200 and "fleetctl.io/rack" not in node["metadata"]["labels"]
    stale = {"metadata": {"resourceVersion": rv}, "spec": {"unschedulable": False}}
    code, body = call(k8s, "PATCH", "/api/v1/nodes/gpu-0", stale, ctype="application/merge-patch+json")
    assert code == 409 and body["reason"] == "Conflict"
    code, body = call(k8s, "PATCH", "/api/v1/nodes/nope", {}, ctype="application/merge-patch+json")
    assert (code, body["reason"], body["details"]) == (404, "NotFound", {"name": "nope", "kind": "nodes"})
    assert call(k8s, "PATCH", "/api/v1/nodes/gpu-0", {}, ctype="application/apply-patch+yaml")[0] == 415


def test_eviction_honours_the_budget(k8s: K8sLabHandle) -> None:
    _, pdb = call(k8s, "GET", "/apis/policy/v1/namespaces/training/poddisruptionbudgets/gang-000")
    # 8 training pods of gang-000 (4 nodes x 2), maxUnavailable 1: one may go.
    assert {k: pdb["status"][k] for k in ("expectedPods", "currentHealthy", "desiredHealthy", "disruptionsAllowed")} == {
        "expectedPods": 8, "currentHealthy": 8, "desiredHealthy": 7, "disruptionsAllowed": 1}
    def ev(name: str) -> tuple[int, Any]:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "training"}}
        return call(k8s, "POST", f"/api/v1/namespaces/training/pods/{name}/eviction", body)

    code, body = ev("gang-000-gpu-0-0")
    assert (code, body) == (201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    assert k8s.obj("Pod", "gang-000-gpu-0-0", "training") is None
    # Its replacement is not ready yet (or just became so): a second eviction now is refused as the API refuses it.
    k8s.set_fault(pdb="training/gang-000", refuse=2)
    code, body = ev("gang-000-gpu-0-1")
    assert code == 429
    cause = body["details"].pop("causes")
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Cannot evict pod as it would violate the pod's disruption budget.", "reason": "TooManyRequests",
                    "details": {}, "code": 429}  # fmt: skip
    m = re.fullmatch(r"The disruption budget gang-000 needs (\d+) healthy pods and has (\d+) currently", cause[0]["message"])
    assert cause[0]["reason"] == "DisruptionBudget" and m and int(m[1]) > int(m[2])
    assert ev("gang-000-gpu-0-1")[0] == 429
    # Two refusals spent: the budget counts pods again, and the replacement is ready by now.
    deadline = time.monotonic() + 10
    while (code := ev("gang-000-gpu-0-1")[0]) == 429 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert code == 201
    assert k8s.counters()["evictions_refused"] >= 2
    assert ev("nope")[0] == 404
    # DaemonSet pods have no budget: evicted at once (kubectl drain skips them itself with --ignore-daemonsets).
    ds_pod = next(p for p in k8s.pods_on("gpu-2") if p["metadata"]["namespace"] == "kube-system")
    code, _ = call(k8s, "POST", f"/api/v1/namespaces/kube-system/pods/{ds_pod['metadata']['name']}/eviction",
                   {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": ds_pod["metadata"]["name"]}})  # fmt: skip
    assert code == 201


def test_two_budgets_over_one_pod_is_a_500(k8s: K8sLabHandle) -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "all-trainers"},
           "spec": {"selector": {"matchLabels": {"app": "trainer"}}, "minAvailable": "50%"}}  # fmt: skip
    code, made = call(k8s, "POST", "/apis/policy/v1/namespaces/training/poddisruptionbudgets", pdb)
    assert code == 201 and made["metadata"]["resourceVersion"]
    assert call(k8s, "POST", "/apis/policy/v1/namespaces/training/poddisruptionbudgets", pdb)[1]["reason"] == "AlreadyExists"
    code, body = call(k8s, "POST", "/api/v1/namespaces/training/pods/gang-000-mnc-1-0/eviction",
                      {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "gang-000-mnc-1-0"}})  # fmt: skip
    assert code == 500 and "more than one PodDisruptionBudget" in body["message"]


def test_leases_resource_version_conflicts(k8s: K8sLabHandle) -> None:
    base = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "fleetctl-drain"},
             "spec": {"holderIdentity": "run-1", "leaseDurationSeconds": 30}}  # fmt: skip
    code, made = call(k8s, "POST", base, lease)
    assert code == 201
    code, body = call(k8s, "POST", base, lease)
    assert (code, body["reason"], body["message"]) == (409, "AlreadyExists", 'leases.coordination.k8s.io "fleetctl-drain" already exists')
    mine = {**made, "spec": {**made["spec"], "holderIdentity": "run-2"}}
    code, updated = call(k8s, "PUT", f"{base}/fleetctl-drain", mine)
    assert code == 200 and updated["spec"]["holderIdentity"] == "run-2"
    code, body = call(k8s, "PUT", f"{base}/fleetctl-drain", {**made, "spec": {**made["spec"], "holderIdentity": "run-3"}})
    assert code == 409 and body["reason"] == "Conflict" and body["details"]["group"] == "coordination.k8s.io"
    assert call(k8s, "GET", f"{base}/fleetctl-drain")[1]["spec"]["holderIdentity"] == "run-2"
    assert call(k8s, "PUT", f"{base}/fleetctl-drain", {"metadata": {"name": "fleetctl-drain"}, "spec": {}})[0] == 422
    assert call(k8s, "DELETE", f"{base}/fleetctl-drain")[0] == 200
    assert call(k8s, "GET", f"{base}/fleetctl-drain")[0] == 404


def test_watch_from_a_resource_version_and_too_old(k8s: K8sLabHandle) -> None:
    _, lst = call(k8s, "GET", "/api/v1/nodes")
    rv = lst["metadata"]["resourceVersion"]
    call(k8s, "PATCH", "/api/v1/nodes/mnc-3", {"spec": {"unschedulable": True}}, ctype="application/merge-patch+json")
    req = urllib.request.Request(f"{k8s.url}/api/v1/nodes?watch=1&resourceVersion={rv}&timeoutSeconds=1",
                                 headers={"Authorization": f"Bearer {token_of(k8s)}"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=10) as r:
        events = [json.loads(line) for line in r.read().splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["spec"].get("unschedulable")) for e in events] == [
        ("MODIFIED", "mnc-3", True)]
    # Enough writes to push rv out of the (64-event) history: one ERROR event, 410 Expired.
    for i in range(70):
        call(k8s, "PATCH", "/api/v1/nodes/mnc-3", {"metadata": {"labels": {"n": str(i)}}}, ctype="application/merge-patch+json")
    with urllib.request.urlopen(req, timeout=10) as r:
        events = [json.loads(line) for line in r.read().splitlines() if line.strip()]
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


def test_bounds_body_cap_and_list_cap(tmp_path: Any) -> None:
    cfg = K8sLabConfig(tls=False, state_dir=tmp_path, store=StoreConfig(max_list=3))
    with serve_k8s(SEEDS, cfg) as k:
        code, lst = call(k, "GET", "/api/v1/nodes")
        assert len(lst["items"]) == 3 and lst["metadata"]["continue"]  # no ?limit=: cut at the cap, with a continue token
        code, _ = call(k, "PATCH", "/api/v1/nodes/gpu-0", b'{"metadata":{"labels":{"x":"' + b"y" * (2 * 1024 * 1024) + b'"}}}',
                       ctype="application/merge-patch+json")  # fmt: skip
        assert code == 413


def test_budget_status_follows_pod_labels_and_selector_kinds(k8s: K8sLabHandle) -> None:
    def status(name: str) -> dict[str, Any]:
        return call(k8s, "GET", f"/apis/policy/v1/namespaces/training/poddisruptionbudgets/{name}")[1]["status"]

    assert status("gang-000")["expectedPods"] == 8
    relabel = {"metadata": {"labels": {"fleetctl.io/gang": "other"}}}
    code, _ = call(k8s, "PATCH", "/api/v1/namespaces/training/pods/gang-000-gpu-0-0", relabel, ctype="application/merge-patch+json")
    assert code == 200 and status("gang-000")["expectedPods"] == 7  # relabelled out of the gang: no longer the budget's
    by_expr = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "by-expr"},
               "spec": {"selector": {"matchExpressions": [{"key": "fleetctl.io/gang", "operator": "In", "values": ["other"]}]},
                        "maxUnavailable": 0}}  # fmt: skip
    assert call(k8s, "POST", "/apis/policy/v1/namespaces/training/poddisruptionbudgets", by_expr)[0] == 201
    st = status("by-expr")
    assert (st["expectedPods"], st["currentHealthy"], st["disruptionsAllowed"]) == (1, 1, 0)
    code, body = call(k8s, "POST", "/api/v1/namespaces/training/pods/gang-000-gpu-0-0/eviction",
                      {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "gang-000-gpu-0-0"}})  # fmt: skip
    assert code == 429 and "by-expr needs 1 healthy pods and has 1 currently" in body["details"]["causes"][0]["message"]
    assert call(k8s, "DELETE", "/apis/policy/v1/namespaces/training/poddisruptionbudgets/by-expr")[0] == 200
    code, _ = call(k8s, "POST", "/api/v1/namespaces/training/pods/gang-000-gpu-0-0/eviction",
                   {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "gang-000-gpu-0-0"}})  # fmt: skip
    assert code == 201  # no budget selects it any more


def test_an_eviction_with_a_grace_period_terminates_then_deletes(k8s: K8sLabHandle) -> None:
    name = "gang-000-mnc-3-1"
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, "deleteOptions": {"gracePeriodSeconds": 1}}
    assert call(k8s, "POST", f"/api/v1/namespaces/training/pods/{name}/eviction", body)[0] == 201
    code, pod = call(k8s, "GET", f"/api/v1/namespaces/training/pods/{name}")
    # Terminating first (what kubectl drain polls on), then gone; its budget no longer counts it healthy meanwhile.
    assert code == 200 and pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 1
    pdb = call(k8s, "GET", "/apis/policy/v1/namespaces/training/poddisruptionbudgets/gang-000")[1]
    assert pdb["status"]["currentHealthy"] < pdb["status"]["expectedPods"]
    # A second eviction of a terminating pod bypasses the budget (canIgnorePDB); the first grace period stands.
    k8s.set_fault(pdb="training/gang-000", seconds=600)
    again = dict(body, deleteOptions={"gracePeriodSeconds": 30})
    assert call(k8s, "POST", f"/api/v1/namespaces/training/pods/{name}/eviction", again)[0] == 201
    assert call(k8s, "GET", f"/api/v1/namespaces/training/pods/{name}")[1]["metadata"]["deletionGracePeriodSeconds"] == 1
    deadline = time.monotonic() + 30
    while call(k8s, "GET", f"/api/v1/namespaces/training/pods/{name}")[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert call(k8s, "GET", f"/api/v1/namespaces/training/pods/{name}")[0] == 404
    assert k8s.counters()["pods_deleted"] == 1
