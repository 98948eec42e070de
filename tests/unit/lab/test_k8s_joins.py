"""The lab's cluster: hosts join it at provisioning (`kubeadm join` registers their node), and device plugin faults."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from fleetctl_lab import host_standins
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, serve_k8s
from fleetctl_lab.k8s.store import StoreConfig


def _wait(pred: object, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_node_appears_when_its_host_runs_kubeadm_join(tmp_path: Path) -> None:
    joins = tmp_path / "joins"
    script = tmp_path / "kubeadm"
    host_standins.write_script(script, host_standins.kubeadm(tmp_path / "calls.log", tmp_path / "root", joins, "mn-2"))
    joins.mkdir()
    (joins / "mn-1").write_text("2026-12-03T00:00:00Z\n")  # joined before the stand-in started
    seeds = [NodeSeed(f"mn-{i}", boards=(("mncore2", 4),)) for i in range(1, 4)]
    cfg = K8sLabConfig(pods_per_node=1, gang_size=2, joins_dir=joins, join_poll_s=0.05, store=StoreConfig(reschedule_s=0.05))
    with serve_k8s(seeds, cfg) as k8s:
        assert k8s.obj("Node", "mn-1") is not None
        assert k8s.obj("Node", "mn-2") is None and k8s.obj("Node", "mn-3") is None
        assert k8s.pods_on("mn-2") == []
        subprocess.run([str(script), "join", "10.0.0.1:6443", "--token", "abcdef.0123456789abcdef"], check=True, timeout=30)
        assert (tmp_path / "root/etc/kubernetes/kubelet.conf").exists()  # what the provisioning playbook checks
        assert _wait(lambda: k8s.obj("Node", "mn-2") is not None)
        pods = k8s.pods_on("mn-2")
        owners = sorted(p["metadata"]["ownerReferences"][0]["kind"] for p in pods)
        assert "DaemonSet" in owners and "Job" in owners  # its kubelet's DaemonSet pods, and its share of a gang
        assert k8s.obj("Node", "mn-3") is None  # never joined: never a node


def test_without_a_joins_folder_every_server_is_a_node(tmp_path: Path) -> None:
    with serve_k8s([NodeSeed("a"), NodeSeed("b")]) as k8s:
        assert k8s.obj("Node", "a") is not None and k8s.obj("Node", "b") is not None


def test_the_kubeadm_standin_without_a_joins_folder_only_records(tmp_path: Path) -> None:
    script = tmp_path / "kubeadm"
    host_standins.write_script(script, host_standins.kubeadm(tmp_path / "calls.log", tmp_path / "root"))
    subprocess.run([str(script), "join", "10.0.0.1:6443"], check=True, timeout=30)
    assert (tmp_path / "calls.log").read_text() == "kubeadm join 10.0.0.1:6443\n"
    assert not (tmp_path / "joins").exists()


def test_unhealthy_devices_lower_what_the_node_advertises(tmp_path: Path) -> None:
    with serve_k8s([NodeSeed("g", boards=(("gpu", 8),))]) as k8s:
        k8s.set_fault(node="g", unhealthy=2)
        node = k8s.obj("Node", "g")
        assert node is not None
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "6" and node["status"]["capacity"]["nvidia.com/gpu"] == "8"
        k8s.set_fault(node="g", unhealthy=0)
        node = k8s.obj("Node", "g")
        assert node is not None and node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
