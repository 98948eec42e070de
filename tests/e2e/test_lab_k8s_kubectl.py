"""The real kubectl against the lab's Kubernetes API stand-in: the third-party check of its fidelity.

No Kubernetes API server can run on these machines; kubectl (v1.32) can. What
fleetctl will rely on must work here exactly as against a cluster: get,
cordon, uncordon, label, taint, watch, and drain through the Eviction API
with PodDisruptionBudgets honoured (DaemonSet pods left, emptyDir pods only
with --delete-emptydir-data, a budget that refuses making the drain wait or
time out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.bmc.spec import generate_specs
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, seeds_from_specs, serve_k8s
from fleetctl_lab.k8s.store import StoreConfig

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (Debian package kubectl): nothing checks the stand-in")

SPECS = generate_specs(4)  # lab-mncore-00000 (4 MN-Core 2), lab-gpu-00001 (8 GPUs), ...


@pytest.fixture
def k8s(tmp_path: Path) -> Iterator[K8sLabHandle]:
    cfg = K8sLabConfig(state_dir=tmp_path / "k8s", pods_per_node=1, store=StoreConfig(reschedule_s=0.2))
    with serve_k8s(seeds_from_specs(SPECS), cfg) as handle:
        yield handle


def kubectl(k: K8sLabHandle, *args: str, home: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # A HOME of its own: kubectl's discovery cache stays out of the user's ~/.kube.
    env = {**os.environ, "KUBECONFIG": str(k.kubeconfig), "HOME": str(home or k.kubeconfig.parent)}
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def node(k: K8sLabHandle, name: str) -> dict[str, Any]:
    obj = k.obj("Node", name)
    assert obj is not None
    return obj


def test_get_nodes_json_over_tls_with_the_token(k8s: K8sLabHandle) -> None:
    assert k8s.url.startswith("https://")
    r = kubectl(k8s, "get", "nodes", "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "List" or doc["kind"] == "NodeList"
    by_name = {n["metadata"]["name"]: n for n in doc["items"]}
    assert sorted(by_name) == sorted(s.name for s in SPECS)
    for spec in SPECS:
        alloc = by_name[spec.name]["status"]["allocatable"]
        kinds = {b.kind for b in spec.boards}
        want = {"mncore2": "mn-core.preferred.jp/mncore", "gpu": "nvidia.com/gpu"}
        for kind, resource in want.items():
            expected = str(sum(1 for b in spec.boards if b.kind == kind)) if kind in kinds else None
            assert alloc.get(resource) == expected, (spec.name, resource)
        ready = {c["type"]: c["status"] for c in by_name[spec.name]["status"]["conditions"]}["Ready"]
        assert ready == "True"
    table = kubectl(k8s, "get", "nodes")
    assert table.returncode == 0 and table.stdout.split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    # The stand-in checks the token: a kubeconfig without it is refused as a cluster refuses it.
    bad = k8s.kubeconfig.parent / "bad-kubeconfig"
    doc = json.loads(k8s.kubeconfig.read_text())
    doc["users"][0]["user"]["token"] = "not-the-token"
    bad.write_text(json.dumps(doc))
    env = {**os.environ, "KUBECONFIG": str(bad), "HOME": str(bad.parent)}
    r = subprocess.run([KUBECTL or "kubectl", "get", "nodes"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0 and "Unauthorized" in r.stderr


def test_cordon_uncordon_label_taint(k8s: K8sLabHandle) -> None:
    name = SPECS[1].name
    r = kubectl(k8s, "cordon", name)
    assert r.returncode == 0 and f"node/{name} cordoned" in r.stdout, r.stderr
    assert node(k8s, name)["spec"]["unschedulable"] is True
    r = kubectl(k8s, "uncordon", name)
    assert r.returncode == 0 and f"node/{name} uncordoned" in r.stdout, r.stderr
    assert node(k8s, name)["spec"].get("unschedulable", False) is False
    r = kubectl(k8s, "label", "node", name, "fleetctl.io/rack=r07", "topology.kubernetes.io/zone=site-a")
    assert r.returncode == 0, r.stderr
    labels = node(k8s, name)["metadata"]["labels"]
    assert labels["fleetctl.io/rack"] == "r07" and labels["topology.kubernetes.io/zone"] == "site-a"
    assert labels["kubernetes.io/hostname"] == name  # other labels kept
    r = kubectl(k8s, "taint", "node", name, "fleetctl.io/maintenance=job-42:NoSchedule")
    assert r.returncode == 0, r.stderr
    assert node(k8s, name)["spec"]["taints"] == [{"key": "fleetctl.io/maintenance", "value": "job-42", "effect": "NoSchedule"}]
    r = kubectl(k8s, "taint", "node", name, "fleetctl.io/maintenance:NoSchedule-")
    assert r.returncode == 0, r.stderr
    assert not node(k8s, name)["spec"].get("taints")
    r = kubectl(k8s, "label", "node", name, "fleetctl.io/rack-")
    assert r.returncode == 0 and "fleetctl.io/rack" not in node(k8s, name)["metadata"]["labels"]


def test_drain_evicts_all_but_daemonset_pods(k8s: K8sLabHandle) -> None:
    name = SPECS[0].name
    r = kubectl(k8s, "drain", name, "--ignore-daemonsets", "--timeout=60s")
    # Training pods keep scratch data in an emptyDir: kubectl refuses, as on a cluster, without the flag.
    assert r.returncode != 0 and "cannot delete Pods with local storage" in r.stderr
    r = kubectl(k8s, "drain", name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")
    assert r.returncode == 0, r.stderr
    assert f"node/{name} drained" in r.stdout
    assert "ignoring DaemonSet-managed Pods" in r.stderr
    left = k8s.pods_on(name)
    assert left and all(p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet" for p in left)
    assert {p["metadata"]["labels"].get("name") or p["metadata"]["labels"].get("k8s-app") for p in left} == {"kube-proxy",
                                                                                                                "mncore-device-plugin"}
    assert node(k8s, name)["spec"]["unschedulable"] is True
    counters = k8s.counters()
    # Through the Eviction API (not deletes), and the gang's budget (maxUnavailable 1) let its one pod go at once.
    assert counters["evictions"] == 1 and counters.get("evictions_refused", 0) == 0


@pytest.mark.slow  # kubectl retries a refused eviction after 5 s
def test_drain_waits_for_the_budget_then_succeeds(k8s: K8sLabHandle) -> None:
    name = SPECS[2].name
    k8s.set_fault(pdb="training/gang-000", refuse=1)
    r = kubectl(k8s, "drain", name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s")
    assert r.returncode == 0, r.stderr
    # kubectl's own words for a 429 from the eviction subresource: it waited and retried.
    assert "Cannot evict pod as it would violate the pod's disruption budget" in r.stderr and "will retry after 5s" in r.stderr
    assert k8s.counters()["evictions_refused"] >= 1
    assert all(p["metadata"]["namespace"] == "kube-system" for p in k8s.pods_on(name))


@pytest.mark.slow  # kubectl retries a refused eviction after 5 s
def test_drain_times_out_while_the_budget_forbids(k8s: K8sLabHandle) -> None:
    name = SPECS[3].name
    k8s.set_fault(pdb="training/gang-000", seconds=3600)
    r = kubectl(k8s, "drain", name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3s")
    assert r.returncode != 0
    assert "global timeout reached" in r.stderr
    assert node(k8s, name)["spec"]["unschedulable"] is True  # a timed-out drain leaves the node cordoned
    assert any(p["metadata"]["namespace"] == "training" for p in k8s.pods_on(name))


def test_watch_sees_a_cordon(k8s: K8sLabHandle, tmp_path: Path) -> None:
    name = SPECS[1].name
    env = {**os.environ, "KUBECONFIG": str(k8s.kubeconfig), "HOME": str(tmp_path)}
    assert KUBECTL is not None
    watch = subprocess.Popen([KUBECTL, "get", "node", name, "-o", "jsonpath={.spec.unschedulable}{\"\\n\"}", "--watch",
                              "--request-timeout=20s"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().strip() == ""  # the initial state: schedulable
        assert kubectl(k8s, "cordon", name).returncode == 0
        assert watch.stdout.readline().strip() == "true"  # the event, as it happened
    finally:
        watch.terminate()
        watch.wait(10)
