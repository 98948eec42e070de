"""The lab cluster's objects, made from the lab's servers: nodes, their pods, budgets.

Every lab server is a node. On each: the device-plugin DaemonSet pod of its
accelerator kind and kube-proxy (DaemonSet-owned, left alone by a drain),
and the training pods of a gang (owned by a Job, a priority class, an
``emptyDir`` scratch volume: local data a drain deletes only with
``--delete-emptydir-data``). Each gang has a PodDisruptionBudget.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

#: The extended resource each accelerator kind's device plugin advertises.
#: NOTE: nvidia.com/gpu is NVIDIA's k8s-device-plugin, amd.com/gpu ROCm's
#: k8s-device-plugin (both public). The MN-Core device plugin's resource
#: name is not public: ``mn-core.preferred.jp/mncore`` is an assumption, kept here.
RESOURCE_OF_KIND: dict[str, str] = {
    "gpu": "nvidia.com/gpu",
    "mncore2": "mn-core.preferred.jp/mncore",
    "amd-instinct": "amd.com/gpu",
}

#: The device plugin DaemonSet of each accelerator kind: (namespace, name, pod label).
#: NVIDIA's and AMD's names are those of their public manifests
#: (nvidia-device-plugin.yml, k8s-ds-amdgpu-dp.yaml); MN-Core's is a lab name.
DEVICE_PLUGIN_OF_KIND: dict[str, tuple[str, str, dict[str, str]]] = {
    "gpu": ("kube-system", "nvidia-device-plugin-daemonset", {"name": "nvidia-device-plugin-ds"}),
    "mncore2": ("kube-system", "mncore-device-plugin", {"name": "mncore-device-plugin"}),
    "amd-instinct": ("kube-system", "amdgpu-device-plugin-daemonset", {"name": "amdgpu-dp-ds"}),
}

KUBE_PROXY = ("kube-system", "kube-proxy", {"k8s-app": "kube-proxy"})
TRAINING_NS = "training"
GANG_LABEL = "fleetctl.io/gang"
PRIORITY_CLASS = ("training-high", 1_000_000)
KUBELET_VERSION = "v1.32.4"


def now() -> str:
    """An RFC 3339 time as the API writes it (seconds, Z)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_uid() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True)
class NodeSeed:
    """What the cluster needs of a lab server: its name, address and accelerator boards."""

    name: str
    address: str = "127.0.0.1"
    boards: tuple[tuple[str, int], ...] = ()  # ((kind, count), ...)
    model: str = "Lab Server"


def node_condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "lastHeartbeatTime": at, "lastTransitionTime": at, "reason": reason, "message": message}


def ready_conditions(at: str, *, ready: bool = True) -> list[dict[str, Any]]:
    """A kubelet's four conditions (kubelet's nodestatus setters: their reasons and messages)."""
    conds = [
        node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", at),
        node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", at),
        node_condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", at),
    ]
    if ready:
        conds.append(node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", at))
    else:
        conds.append(node_condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", at))
    return conds


def make_node(seed: NodeSeed, index: int) -> dict[str, Any]:
    at = now()
    resources = {"cpu": "128", "memory": "1056269884Ki", "pods": "110", "ephemeral-storage": "1873549520Ki", "hugepages-1Gi": "0",
                 "hugepages-2Mi": "0"}  # fmt: skip
    for kind, count in seed.boards:
        if kind in RESOURCE_OF_KIND:
            resources[RESOURCE_OF_KIND[kind]] = str(count)
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": seed.name,
        "kubernetes.io/os": "linux",
    }
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": seed.name,
            "uid": new_uid(),
            "creationTimestamp": at,
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {
            "podCIDR": f"10.{64 + index // 256 % 64}.{index % 256}.0/24",
            "podCIDRs": [f"10.{64 + index // 256 % 64}.{index % 256}.0/24"],
        },  # fmt: skip
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": ready_conditions(at),
            "addresses": [{"type": "InternalIP", "address": seed.address}, {"type": "Hostname", "address": seed.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, seed.name).hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, seed.name)),
                "bootID": new_uid(),
                "kernelVersion": "6.8.0-49-generic",
                "osImage": "Ubuntu 24.04.1 LTS",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def make_daemonset(namespace: str, name: str, labels: dict[str, str], node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    at = now()
    return {
        "kind": "DaemonSet",
        "apiVersion": "apps/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": new_uid(),
            "creationTimestamp": at,
            "generation": 1,
            "labels": dict(labels),
        },
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [{"name": name, "image": f"registry.lab/{name}:v1"}],
                    "nodeSelector": node_selector or {},
                    "priorityClassName": "system-node-critical",
                },  # fmt: skip
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
            "observedGeneration": 1,
        },  # fmt: skip
    }


def make_pod(
    *,
    name: str,
    namespace: str,
    node: str,
    labels: dict[str, str],
    owner: dict[str, Any],
    host_ip: str,
    pod_ip: str,
    resources: dict[str, str] | None = None,
    scratch: bool = False,
    priority: tuple[str, int] | None = None,
    daemon: bool = False,
) -> dict[str, Any]:
    """A running, ready pod on ``node`` (``node=""``: Pending, not scheduled)."""
    at = now()
    container: dict[str, Any] = {"name": "main", "image": f"registry.lab/{labels.get('app', 'app')}:v1",
                                 "resources": {"limits": dict(resources or {}), "requests": dict(resources or {})}}  # fmt: skip
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always" if daemon else "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    }
    if node:
        spec["nodeName"] = node
    if daemon:
        spec["tolerations"] += [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
        spec["priorityClassName"], spec["priority"] = "system-node-critical", 2_000_001_000
    elif priority:
        spec["priorityClassName"], spec["priority"] = priority
    if scratch:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    status: dict[str, Any]
    if node:
        status = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": at}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": at,
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {"running": {"startedAt": at}},
                    "ready": True,
                    "restartCount": 0,
                    "image": container["image"],
                    "imageID": "",
                    "containerID": f"containerd://{uuid.uuid4().hex}",
                    "started": True,
                }
            ],  # fmt: skip
            "qosClass": "Guaranteed" if resources else "BestEffort",
        }
    else:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                  "lastTransitionTime": at, "reason": "Unschedulable",
                  "message": "0/0 nodes are available: no node can take this pod."}],
                  "qosClass": "Guaranteed" if resources else "BestEffort"}  # fmt: skip
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": new_uid(),
            "creationTimestamp": at,
            "labels": dict(labels),
            "ownerReferences": [owner],
        },  # fmt: skip
        "spec": spec,
        "status": status,
    }


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference naming ``obj`` as the controller."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def make_pdb(namespace: str, name: str, match_labels: dict[str, str], *, max_unavailable: int | str | None = 1,
             min_available: int | str | None = None) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    else:
        spec["maxUnavailable"] = max_unavailable
    return {
        "kind": "PodDisruptionBudget",
        "apiVersion": "policy/v1",
        "metadata": {"name": name, "namespace": namespace, "uid": new_uid(), "creationTimestamp": now(), "generation": 1},
        "spec": spec,
        "status": {},
    }


def make_namespace(name: str) -> dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "uid": new_uid(), "creationTimestamp": now(), "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}  # fmt: skip


def seed_cluster(nodes: list[NodeSeed], *, pods_per_node: int = 1, gang_size: int = 4) -> list[dict[str, Any]]:
    """Every object of a fresh lab cluster (without resourceVersions: the store gives them)."""
    out: list[dict[str, Any]] = [make_namespace(n) for n in ("default", "kube-system", "kube-public", "kube-node-lease", TRAINING_NS)]
    pc_name, pc_value = PRIORITY_CLASS
    out.append({"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1",
                "metadata": {"name": pc_name, "uid": new_uid(), "creationTimestamp": now()}, "value": pc_value,
                "preemptionPolicy": "PreemptLowerPriority", "description": "gang-scheduled training jobs"})  # fmt: skip
    daemonsets: dict[str, dict[str, Any]] = {}

    def ds(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
        if name not in daemonsets:
            daemonsets[name] = make_daemonset(ns, name, labels)
            out.append(daemonsets[name])
        return daemonsets[name]

    jobs: dict[str, dict[str, Any]] = {}
    for i, seed in enumerate(nodes):
        out.append(make_node(seed, i))
        pod_net = f"10.{64 + i // 256 % 64}.{i % 256}"
        plugins = [DEVICE_PLUGIN_OF_KIND[k] for k, c in seed.boards if c and k in DEVICE_PLUGIN_OF_KIND]
        for ns, name, labels in [KUBE_PROXY, *plugins]:
            d = ds(ns, name, labels)
            suffix = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}/{seed.name}").hex[:5]
            out.append(make_pod(name=f"{name}-{suffix}", namespace=ns, node=seed.name, labels=dict(labels), owner=owner_ref(d),
                                host_ip=seed.address, pod_ip=seed.address if name == "kube-proxy" else f"{pod_net}.2",
                                daemon=True))  # fmt: skip
        gang = f"gang-{i // max(gang_size, 1):03d}"
        if gang not in jobs:
            jobs[gang] = {"kind": "Job", "apiVersion": "batch/v1", "metadata": {"name": gang, "namespace": TRAINING_NS, "uid": new_uid()}}
            out.append(make_pdb(TRAINING_NS, gang, {GANG_LABEL: gang}))
        accel = {RESOURCE_OF_KIND[k]: str(c // max(pods_per_node, 1) or 1) for k, c in seed.boards if c and k in RESOURCE_OF_KIND}
        for p in range(pods_per_node):
            out.append(make_pod(name=f"{gang}-{seed.name}-{p}", namespace=TRAINING_NS, node=seed.name,
                                labels={"app": "trainer", GANG_LABEL: gang, "batch.kubernetes.io/job-name": gang},
                                owner=owner_ref(jobs[gang]), host_ip=seed.address, pod_ip=f"{pod_net}.{10 + p % 240}",
                                resources=accel, scratch=True, priority=PRIORITY_CLASS))  # fmt: skip
    return out
