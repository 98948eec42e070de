"""What fleetctl reads from a Kubernetes cluster, independent of the client library.

A cluster is a device-like peer, as a BMC or a switch is: a driver registered
in the ``fleetctl.k8s`` entry-point group (the bundled one is ``lightkube``,
in the drivers distribution; ``fleetctl.k8s.status.open_cluster`` loads it) opens a :class:`ClusterClient` from a
:class:`ClusterRef` and fills the typed models here; the CLI and the sweep
read them and never see the API's JSON. docs/kubernetes.md has the rules.

A :class:`ClusterRef` is a reference (a kubeconfig's path and context, or the
in-cluster service account), never a credential: the client reads the token
when it opens the cluster and keeps it in its own memory only. It is never in
a model here, a message, a log line or the store.

Every loop over what the API returns is bounded: lists are read in pages of
:data:`PAGE` with at most :data:`MAX_ITEMS` items in all, and every call
stops at the client's deadline.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from fleetctl.errors import DriverError

#: The extended resource each board kind's device plugin advertises (vendor facts, kept as data).
#: NOTE: nvidia.com/gpu is NVIDIA's k8s-device-plugin, amd.com/gpu ROCm's k8s-device-plugin (both public
#: manifests). The MN-Core device plugin's resource name is not public: ``mn-core.preferred.jp/mncore`` is
#: an assumption, the same as the lab's Kubernetes stand-in's table of the same name.
RESOURCE_OF_KIND: dict[str, str] = {
    "gpu": "nvidia.com/gpu",
    "amd-instinct": "amd.com/gpu",
    "mncore2": "mn-core.preferred.jp/mncore",
    "mncore": "mn-core.preferred.jp/mncore",
}

#: Items asked for per list request (the API's ``limit``), and the most one listing reads in all.
PAGE = 500
MAX_ITEMS = 50_000
#: Seconds one command may spend on the API in all (a deadline), and one request at most.
DEFAULT_DEADLINE = 60.0
DEFAULT_REQUEST_TIMEOUT = 10.0

ReadyStatus = Literal["True", "False", "Unknown"]


class K8sError(DriverError):
    """The cluster could not be reached or read (exit 2 where nothing was changed: bad input or no answer).

    ``status``: the API's HTTP status when it answered one (404: no such object, 409: changed since read, 429: a
    budget), None when it did not answer.
    """

    def __init__(self, message: str, *, exit_code: int | None = None, status: int | None = None) -> None:
        super().__init__(message, exit_code=exit_code)
        self.status = status


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ClusterRef:
    """How to reach one cluster, as the site file declares it: a reference, never a secret.

    Attributes:
        name: the cluster's name in the site file.
        kubeconfig: the kubeconfig file's path (``~`` expanded by the driver); None with ``in_cluster``.
        context: the kubeconfig context; None: the file's current context.
        in_cluster: the service account Kubernetes mounts into a pod fleetctl runs in.
        driver: the ``fleetctl.k8s`` entry point that talks to it.
    """

    name: str
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    driver: str = "lightkube"

    def describe(self) -> str:
        """For messages: the cluster and where its credentials are referenced (no secret)."""
        if self.in_cluster:
            return f"cluster {self.name} (in-cluster service account)"
        ctx = f", context {self.context}" if self.context else ""
        return f"cluster {self.name} ({self.kubeconfig}{ctx})"


class Taint(_Model):
    key: str
    value: str | None = None
    effect: str


class Condition(_Model):
    type: str
    status: ReadyStatus
    reason: str | None = None
    message: str | None = None


class Node(_Model):
    """A node as fleetctl needs it: readiness, schedulability, taints, what its device plugins advertise."""

    name: str
    ready: ReadyStatus = "Unknown"  # the Ready condition's status; Unknown when it has none
    ready_reason: str | None = None
    unschedulable: bool = False  # cordoned
    taints: tuple[Taint, ...] = ()
    allocatable: dict[str, str] = Field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    hostname: str | None = None  # the kubernetes.io/hostname label
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    #: The object's version when read: a write naming it is refused (409) if the node changed since.
    resource_version: str = ""

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, None when the node has none."""
        return next((c for c in self.conditions if c.type == type_), None)

    def advertised(self, resource: str) -> int:
        """How many of an extended resource the node can allocate (0 when absent or not a count)."""
        raw = self.allocatable.get(resource, "0")
        return int(raw) if raw.isdigit() else 0


class Budget(_Model):
    """A PodDisruptionBudget: which pods it covers and how many may go now."""

    namespace: str
    name: str
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[dict[str, Any], ...] = ()
    disruptions_allowed: int = 0
    min_available: str | None = None
    max_unavailable: str | None = None

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Does the budget cover a pod of this namespace with these labels (the API's LabelSelector rules)?"""
        if namespace != self.namespace:
            return False
        if not self.match_labels and not self.match_expressions:
            return False  # policy/v1: an empty selector selects nothing ... a null one too
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(_expression(e, labels) for e in self.match_expressions)


def _expression(e: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = e.get("key", ""), e.get("operator", ""), e.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # an operator the API would have refused: select nothing rather than everything


class Pod(_Model):
    namespace: str
    name: str
    node: str | None = None
    phase: str | None = None
    priority: int = 0
    priority_class: str | None = None
    owner_kind: str | None = None  # DaemonSet, ReplicaSet, Job ... (the controller's kind)
    labels: dict[str, str] = Field(default_factory=dict)
    budgets: tuple[str, ...] = ()  # namespace/name of the budgets covering it
    uid: str = ""
    local_data: bool = False  # an emptyDir volume: its data is lost with the pod (kubectl drain's --delete-emptydir-data)
    mirror: bool = False  # a static pod's mirror (the kubelet's own; the API cannot evict it, kubectl drain skips it)
    terminating: bool = False  # has a deletionTimestamp: on its way out


@dataclass(frozen=True)
class NodePatch:
    """A change to one node (a JSON merge patch): only what is not None is sent.

    ``taints`` replaces the node's whole list (the API merges no taint by key), so a caller changing one taint reads the
    node, edits its list and names the ``resource_version`` it read: a node changed in between is refused (409), and the
    caller reads again (:func:`fleetctl.k8s.writes.update_node` does that, bounded). A ``None`` value in ``labels`` or
    ``annotations`` removes that key.
    """

    unschedulable: bool | None = None
    taints: tuple[Taint, ...] | None = None
    labels: Mapping[str, str | None] | None = None
    annotations: Mapping[str, str | None] | None = None
    resource_version: str | None = None

    def body(self) -> dict[str, Any]:
        """The merge patch's body."""
        meta: dict[str, Any] = {}
        if self.labels is not None:
            meta["labels"] = dict(self.labels)
        if self.annotations is not None:
            meta["annotations"] = dict(self.annotations)
        if self.resource_version is not None:
            meta["resourceVersion"] = self.resource_version
        spec: dict[str, Any] = {}
        if self.unschedulable is not None:
            # The API's own cordon sets true and an uncordon removes the field (kubectl sends null).
            spec["unschedulable"] = True if self.unschedulable else None
        if self.taints is not None:
            spec["taints"] = [t.model_dump(exclude_none=True) for t in self.taints] or None
        out: dict[str, Any] = {}
        if meta:
            out["metadata"] = meta
        if spec:
            out["spec"] = spec
        return out


EvictOutcome = Literal["evicted", "blocked", "gone"]


@dataclass(frozen=True)
class Eviction:
    """What the Eviction API answered for one pod.

    ``evicted``: accepted (201; the pod is now terminating); ``blocked``: a PodDisruptionBudget forbids it now (429: try
    again later), ``message`` names the budget; ``gone``: no such pod any more (404), or another pod of that name (409 on
    the uid precondition): either way the pod that was asked for has left.
    """

    outcome: EvictOutcome
    message: str = ""


class ClusterClient(abc.ABC):
    """One open cluster. A driver's class opens it from a reference; ``with`` closes it.

    Raises (every method): :class:`K8sError` when the cluster does not answer
    or answers an error, with the cluster named and no secret in the message;
    the deadline reached is one too.
    """

    ref: ClusterRef

    @classmethod
    @abc.abstractmethod
    def open(cls, ref: ClusterRef, *, deadline: float = DEFAULT_DEADLINE, request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> Self:
        """Read the reference (a kubeconfig without the context is an error, exit 2); no request yet."""

    @abc.abstractmethod
    def node(self, name: str) -> Node | None:
        """One node, None when the cluster has none of that name."""

    @abc.abstractmethod
    def nodes(self) -> list[Node]:
        """Every node (paged, bounded)."""

    @abc.abstractmethod
    def pods(self, node: str | None = None) -> list[Pod]:
        """The pods on one node (a field selector), or every pod; ``budgets`` left empty (see :func:`with_budgets`)."""

    @abc.abstractmethod
    def budgets(self) -> list[Budget]:
        """Every PodDisruptionBudget (paged, bounded)."""

    # -- writes (each one request; the caller decides on retries) ---------------

    @abc.abstractmethod
    def patch_node(self, name: str, patch: NodePatch) -> Node:
        """Apply a :class:`NodePatch` (a JSON merge patch); the node as it is after. 404 and 409 raise K8sError with ``status``."""

    @abc.abstractmethod
    def set_condition(self, name: str, condition: Condition) -> Node:
        """Set one condition of the node's status (the ``status`` subresource, merged by type), as Node Problem Detector does.

        ``lastHeartbeatTime`` is now; ``lastTransitionTime`` changes only when the status does.
        """

    @abc.abstractmethod
    def evict(self, namespace: str, name: str, *, uid: str | None = None, grace_s: int | None = None) -> Eviction:
        """Ask the Eviction API to evict one pod (``uid``: only that incarnation of the name). Any other error raises K8sError."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_budgets(pods: Sequence[Pod], budgets: Sequence[Budget]) -> list[Pod]:
    """The pods with the budgets covering each, sorted by priority (highest first), then namespace and name."""
    by_ns: dict[str, list[Budget]] = {}
    for b in budgets:
        by_ns.setdefault(b.namespace, []).append(b)
    out = []
    for p in pods:
        covering = tuple(f"{b.namespace}/{b.name}" for b in by_ns.get(p.namespace, ()) if b.selects(p.namespace, p.labels))
        out.append(p.model_copy(update={"budgets": covering}))
    out.sort(key=lambda p: (-p.priority, p.namespace, p.name))
    return out
