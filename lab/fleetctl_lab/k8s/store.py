"""The lab cluster's state: objects, resourceVersions, watch events, and the controllers' part.

One ``Store`` per lab cluster, used only on its event loop (the aiohttp
handlers and the timers it schedules), so it needs no lock. It plays the
parts of etcd and the API server's registry (resourceVersion on every write,
409 on a stale one, the eviction subresource's PodDisruptionBudget check as
pkg/registry/core/pod/storage/eviction.go does it), and of the few
controllers whose effects a drain waits on: the disruption controller (a
budget's status computed from the pods it selects), the Job and DaemonSet
controllers (an evicted pod's replacement, scheduled on a node that takes
pods and ready after ``reschedule_s``) and the node lifecycle controller
(a NotReady node's taints, its pods not ready).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import copy
import json
import math
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fleetctl_lab.k8s.objects import RESOURCE_OF_KIND, make_pod, new_uid, node_condition, now
from fleetctl_lab.k8s.selectors import match_label_selector


@dataclass(frozen=True)
class ResourceType:
    """One served resource: where it lives in the API and what it allows."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # An update (PUT) must name a resourceVersion: the registry strategy's
    # AllowUnconditionalUpdate() is false (leases; nodes and pods allow it).
    conditional_update: bool = False

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods`` or ``leases.coordination.k8s.io``, as the API's error messages name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


#: What the stand-in serves: the subset fleetctl and kubectl drain use.
RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
    ResourceType("", "v1", "nodes", "Node", False, ("no",), ("status",)),
    ResourceType("", "v1", "pods", "Pod", True, ("po",), ("status", "eviction")),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",)),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ("status",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, conditional_update=True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
)
BY_KIND = {r.kind: r for r in RESOURCES}


class ApiError(Exception):
    """An answer other than success, as a metav1.Status."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                                "reason": self.reason}  # fmt: skip
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _invalid(kind: str, name: str, reason: str, message: str, field_path: str) -> dict[str, Any]:
    """The details of a 422 Invalid."""
    return {"name": name, "kind": kind, "causes": [{"reason": reason, "message": message, "field": field_path}]}


def not_found(rt: ResourceType, name: str) -> ApiError:
    details = {"name": name, "kind": rt.plural} | ({"group": rt.group} if rt.group else {})
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', details)


def conflict(rt: ResourceType, name: str) -> ApiError:
    details = {"name": name, "kind": rt.plural} | ({"group": rt.group} if rt.group else {})
    msg = (
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", msg, details)


#: The eviction subresource's answers (pkg/registry/core/pod/storage/eviction.go).
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
EVICTION_CAUSE = "The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
EVICTION_MANY_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


@dataclass
class StoreConfig:
    """How the lab cluster behaves."""

    pod_termination_s: float = 0.0  # a deleted pod's grace period when the request names none
    reschedule_s: float = 0.5  # a controller's replacement pod: scheduled, then ready this much later
    replace_pods: bool = True  # Jobs and DaemonSets replace their deleted pods
    history: int = 4096  # watch events kept for a watch from a resourceVersion
    max_watchers: int = 256
    watch_queue: int = 2048  # events buffered per watch before it is closed (the client re-lists)
    max_list: int = 10_000  # a list without ?limit= is cut here (with a continue token)


@dataclass
class PdbBlock:
    """Fault: a budget that refuses evictions until ``refuse`` were refused or ``until`` passed."""

    refuse: int | None
    until: float | None
    refused: int = 0

    def active(self) -> bool:
        if self.refuse is not None and self.refused >= self.refuse:
            return False
        return not (self.until is not None and time.monotonic() >= self.until)


@dataclass(eq=False)  # each watch is itself: hashed by identity
class Watcher:
    plural: str
    namespace: str | None
    predicate: Callable[[dict[str, Any]], bool]
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=lambda: asyncio.Queue())
    overflowed: bool = False


Key = tuple[str, str]  # (namespace or "", name)


def key_of(obj: dict[str, Any]) -> Key:
    md = obj["metadata"]
    return md.get("namespace", "") or "", md["name"]


def pod_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp") or pod.get("status", {}).get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions") or [])


def _resolve(value: int | str, total: int) -> int:
    """An IntOrString of a budget: a count, or a percentage of ``total`` rounded up (as the disruption controller does)."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


class Store:
    """Every object of the lab cluster. Use only on the lab's event loop."""

    def __init__(self, config: StoreConfig | None = None) -> None:
        self.config = config or StoreConfig()
        self.objects: dict[str, dict[Key, dict[str, Any]]] = {r.plural: {} for r in RESOURCES}
        self.rv = 1
        self.history: collections.deque[tuple[int, str, str, dict[str, Any]]] = collections.deque(maxlen=self.config.history)
        self.watchers: set[Watcher] = set()
        self.pdb_blocks: dict[Key, PdbBlock] = {}
        self.counters: collections.Counter[str] = collections.Counter()
        self._timers: set[asyncio.TimerHandle] = set()
        self._serial = 0
        # Indexes, so a pod write costs the budgets of its namespace, not every pod:
        # budget -> the pods it selects; namespace -> its budgets; unscheduled pods.
        self._members: dict[Key, set[Key]] = {}
        self._selector_of: dict[Key, Any] = {}
        self._pdbs_of_pod: dict[Key, set[Key]] = {}
        self._pdb_hooks: dict[tuple[str, str, str], set[Key]] = collections.defaultdict(set)  # by their first matchLabels pair
        self._pdb_any: dict[str, set[Key]] = collections.defaultdict(set)  # budgets without matchLabels, by namespace
        self._labels_of: dict[Key, dict[str, str]] = {}
        self._pods_by_label: dict[tuple[str, str, str], set[Key]] = collections.defaultdict(set)
        self._pending: set[Key] = set()
        # node -> the pods bound to it, and pod -> its node: the scheduler's load and a node's pods (a drain's
        # `fieldSelector=spec.nodeName=` listing) without a pass over every pod.
        self._pods_on: dict[str, set[Key]] = collections.defaultdict(set)
        self._node_of: dict[Key, str] = {}
        self._loading = False

    # --- low level ----------------------------------------------------------

    def _commit(self, plural: str, obj: dict[str, Any], event: str) -> dict[str, Any]:
        """Write ``obj`` (or remove it, for DELETED) at a new resourceVersion; tell the watchers."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        k = key_of(obj)
        if event == "DELETED":
            self.objects[plural].pop(k, None)
        else:
            self.objects[plural][k] = obj
        if not self._loading:  # seeds: no watcher yet, and a watch from before them is 410 anyway
            snapshot = copy.deepcopy(obj)
            self.history.append((self.rv, plural, event, snapshot))
            self._notify(plural, event, snapshot)
        if plural == "pods":
            self._index_pod(k, None if event == "DELETED" else obj)
        elif plural == "poddisruptionbudgets":
            self._index_pdb(k, None if event == "DELETED" else obj)
        return obj

    def _notify(self, plural: str, event: str, obj: dict[str, Any]) -> None:
        for w in list(self.watchers):
            if w.plural != plural or w.overflowed:
                continue
            if w.namespace and obj["metadata"].get("namespace") != w.namespace:
                continue
            if not w.predicate(obj):
                continue
            if w.queue.qsize() >= self.config.watch_queue:
                # A watcher that cannot keep up is cut off, as the API server's
                # cacher does; its client lists again.
                w.overflowed = True
                w.queue.put_nowait(None)
                continue
            w.queue.put_nowait({"type": event, "object": obj})

    def _later(self, delay: float, fn: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def run() -> None:
            self._timers.discard(handle)
            fn()

        handle = loop.call_later(max(delay, 0.0), run)
        self._timers.add(handle)

    def close(self) -> None:
        """Cancel the controllers' timers and end every watch."""
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        for w in self.watchers:
            w.queue.put_nowait(None)

    def load(self, objs: Iterable[dict[str, Any]]) -> None:
        """Add seed objects (no checks): each gets a resourceVersion; the budgets' status is computed once at the end."""
        self._loading = True
        try:
            for obj in objs:
                rt = BY_KIND.get(obj["kind"])
                if rt is not None:
                    self._commit(rt.plural, obj, "ADDED")
        finally:
            self._loading = False
        for k in list(self._members):
            self._refresh_pdb(k)
        self._sync_daemonsets()

    # --- reads --------------------------------------------------------------

    def find(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects[rt.plural].get((namespace if rt.namespaced else "", name))
        if obj is None:
            raise not_found(rt, name)
        return obj

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.find(rt, namespace, name))

    def select(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        limit: int | None = None,
        cont: str | None = None,
        node: str | None = None,
    ) -> tuple[list[dict[str, Any]], str, str | None, int | None]:
        """(items, list resourceVersion, continue token, remaining count) in (namespace, name) order.

        A continue token carries the list's resourceVersion and the last key
        served; pages after the first are served from the current state (the
        stand-in keeps no snapshots, a documented difference from etcd). ``node``: only pods bound to that node can
        match (the caller's field selector says so), and only they are looked at.
        """
        start: Key | None = None
        list_rv = str(self.rv)
        if cont:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont.encode()))
                start, list_rv = (tok["ns"], tok["name"]), str(tok["rv"])
            except (ValueError, KeyError, TypeError) as e:
                raise ApiError(400, "BadRequest", "continue key is not valid: illegal base64 data") from e
        cap = min(limit or self.config.max_list, self.config.max_list)
        pool = self._pods_on.get(node, set()) if node is not None and rt.plural == "pods" else self.objects[rt.plural]
        keys = sorted(k for k in pool if (namespace is None or k[0] == namespace) and (start is None or k > start))
        items: list[dict[str, Any]] = []
        token: str | None = None
        remaining: int | None = None
        for i, k in enumerate(keys):
            obj = self.objects[rt.plural][k]
            if not predicate(obj):
                continue
            if len(items) == cap:
                last = key_of(items[-1])
                token = base64.urlsafe_b64encode(json.dumps({"rv": list_rv, "ns": last[0], "name": last[1]}).encode()).decode()
                remaining = len(keys) - i
                break
            items.append(copy.deepcopy(obj))
        return items, list_rv, token, remaining

    # --- writes -------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
        if not md.get("name"):
            why = "Required value: name or generateName is required"
            raise ApiError(
                422,
                "Invalid",
                f'{rt.kind} "" is invalid: metadata.name: {why}',
                _invalid(rt.kind, "", "FieldValueRequired", why, "metadata.name"),
            )
        if rt.namespaced:
            if md.get("namespace") and md["namespace"] != namespace:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = namespace
            if ("", namespace) not in self.objects["namespaces"]:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})
        else:
            md.pop("namespace", None)
        k = (namespace if rt.namespaced else "", md["name"])
        if k in self.objects[rt.plural]:
            details = {"name": md["name"], "kind": rt.plural} | ({"group": rt.group} if rt.group else {})
            raise ApiError(409, "AlreadyExists", f'{rt.qualified} "{md["name"]}" already exists', details)
        obj["kind"], obj["apiVersion"] = rt.kind, rt.group_version
        md["uid"] = new_uid()
        md["creationTimestamp"] = now()
        md.pop("resourceVersion", None)
        if "status" in rt.subresources:
            obj["status"] = {} if rt.plural != "namespaces" else {"phase": "Active"}
        if rt.plural == "poddisruptionbudgets":
            md["generation"] = 1
        self._commit(rt.plural, obj, "ADDED")
        if rt.plural == "pods":
            self._schedule_pending()
        return copy.deepcopy(obj)

    def replace(self, rt: ResourceType, namespace: str, name: str, body: dict[str, Any], subresource: str = "") -> dict[str, Any]:
        """PUT: a full object, its resourceVersion a precondition when given."""
        cur = self.find(rt, namespace, name)
        md = body.get("metadata") or {}
        if md.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if not md.get("resourceVersion") and rt.conditional_update:
            # A lease update without a resourceVersion would be a blind overwrite: refused, so a lost update shows as 409.
            why = "Invalid value: 0x0: must be specified for an update"
            raise ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: metadata.resourceVersion: {why}',
                           _invalid(rt.kind, name, "FieldValueInvalid", why, "metadata.resourceVersion"))  # fmt: skip
        return self._write(rt, cur, body, subresource)

    def patch(self, rt: ResourceType, namespace: str, name: str, patched: Callable[[dict[str, Any]], dict[str, Any]],
              subresource: str = "") -> dict[str, Any]:  # fmt: skip
        cur = self.find(rt, namespace, name)
        new = patched(copy.deepcopy(cur))
        # A patch that names a resourceVersion makes it a precondition (as the API does).
        return self._write(rt, cur, new, subresource)

    def _write(self, rt: ResourceType, cur: dict[str, Any], body: dict[str, Any], subresource: str) -> dict[str, Any]:
        name = cur["metadata"]["name"]
        want_rv = (body.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != cur["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        new = copy.deepcopy(body)
        new["kind"], new["apiVersion"] = rt.kind, rt.group_version
        md = new.setdefault("metadata", {})
        # What a client may not change: identity and bookkeeping.
        for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if k in cur["metadata"]:
                md[k] = cur["metadata"][k]
            else:
                md.pop(k, None)
        if "status" in rt.subresources:
            if subresource == "status":
                # The status subresource changes status only (and labels/annotations stay as they were).
                new = {**copy.deepcopy(cur), "status": new.get("status", {})}
            else:
                new["status"] = copy.deepcopy(cur.get("status", {}))
        if rt.plural == "poddisruptionbudgets" and new.get("spec") != cur.get("spec"):
            new["metadata"]["generation"] = cur["metadata"].get("generation", 1) + 1
        if new == cur:
            return copy.deepcopy(cur)  # a no-op write keeps its resourceVersion, as the API does
        self._commit(rt.plural, new, "MODIFIED")
        if rt.plural == "nodes":
            self._schedule_pending()
        if rt.plural == "poddisruptionbudgets" and subresource != "status":
            self._refresh_pdb(key_of(new))
        return copy.deepcopy(new)

    def delete(self, rt: ResourceType, namespace: str, name: str, grace: float | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """Delete an object; a pod with a grace period first shows a deletionTimestamp."""
        cur = self.find(rt, namespace, name)
        if dry_run:
            return copy.deepcopy(cur)
        if rt.plural != "pods":
            gone = copy.deepcopy(cur)
            self._commit(rt.plural, cur, "DELETED")
            return gone
        g = self.config.pod_termination_s if grace is None else grace
        if cur["metadata"].get("deletionTimestamp"):
            return copy.deepcopy(cur)  # already terminating: the first grace period stands
        if g > 0 and cur["spec"].get("nodeName"):
            cur = copy.deepcopy(cur)
            cur["metadata"]["deletionTimestamp"] = now()
            cur["metadata"]["deletionGracePeriodSeconds"] = math.ceil(g)
            self._commit("pods", cur, "MODIFIED")
            uid = cur["metadata"]["uid"]
            self._later(g, lambda: self._finish_pod(namespace, name, uid))
            return copy.deepcopy(cur)
        gone = copy.deepcopy(cur)
        self._finish_pod(namespace, name, cur["metadata"]["uid"])
        return gone

    def _finish_pod(self, namespace: str, name: str, uid: str) -> None:
        cur = self.objects["pods"].get((namespace, name))
        if cur is None or cur["metadata"]["uid"] != uid:
            return
        self._commit("pods", cur, "DELETED")
        self.counters["pods_deleted"] += 1
        self._replace_pod(cur)

    # --- eviction -----------------------------------------------------------

    def evict(self, namespace: str, name: str, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """POST pods/NAME/eviction: 201 and the pod deleted, or 429 when a budget forbids."""
        rt = BY_KIND["Pod"]
        pod = self.find(rt, namespace, name)
        opts = body.get("deleteOptions") or {}
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != pod["metadata"]["uid"]:
            why = f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {pod['metadata']['uid']}"
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on Pod "{name}": {why}',
                           {"name": name, "kind": "Pod"})  # fmt: skip
        grace = opts.get("gracePeriodSeconds")
        dry = dry_run or bool(opts.get("dryRun"))
        phase = pod.get("status", {}).get("phase")
        # Terminal, pending or terminating pods bypass the budgets (canIgnorePDB).
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            if not dry:
                self.delete(rt, namespace, name, grace)
            self.counters["evictions"] += 1
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        pk = (namespace, name)
        pdbs = [self.objects["poddisruptionbudgets"][b] for b in sorted(self._pdbs_of_pod.get(pk, ()))]
        if len(pdbs) > 1:
            self.counters["evictions_refused"] += 1
            raise ApiError(500, "InternalError", EVICTION_MANY_PDBS)
        if pdbs:
            pdb = pdbs[0]
            st = self.pdb_status(pdb)
            block = self.pdb_blocks.get(key_of(pdb))
            blocked = block is not None and block.active()
            healthy_enough = st["currentHealthy"] >= st["desiredHealthy"] and not blocked
            # An unready pod goes when the budget is otherwise met (IfHealthyBudget).
            if (pod_ready(pod) or not healthy_enough) and (blocked or st["disruptionsAllowed"] <= 0):
                if blocked and block is not None:
                    block.refused += 1
                self.counters["evictions_refused"] += 1
                cause = EVICTION_CAUSE.format(name=pdb["metadata"]["name"], desired=st["desiredHealthy"], healthy=st["currentHealthy"])
                raise ApiError(429, "TooManyRequests", EVICTION_REFUSED, {"causes": [{"reason": "DisruptionBudget", "message": cause}]})
        if not dry:
            self.delete(rt, namespace, name, grace)
        self.counters["evictions"] += 1
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # --- the disruption controller ---------------------------------------------

    def pdb_status(self, pdb: dict[str, Any]) -> dict[str, Any]:
        """A budget's status from the pods it selects now (the disruption controller's arithmetic)."""
        members = self._members.get(key_of(pdb))
        if members is None:  # not indexed (a budget not in the store)
            ns, sel = pdb["metadata"]["namespace"], pdb["spec"].get("selector")
            members = {
                k for k, p in self.objects["pods"].items() if k[0] == ns and match_label_selector(sel, p["metadata"].get("labels") or {})
            }
        pods = [p for k in members if (p := self.objects["pods"].get(k)) is not None
                and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]  # fmt: skip
        expected = len(pods)
        healthy = sum(1 for p in pods if pod_ready(p))
        spec = pdb["spec"]
        if spec.get("minAvailable") is not None:
            desired = _resolve(spec["minAvailable"], expected)
        elif spec.get("maxUnavailable") is not None:
            desired = max(expected - _resolve(spec["maxUnavailable"], expected), 0)
        else:
            desired = expected
        allowed = max(healthy - desired, 0)
        block = self.pdb_blocks.get(key_of(pdb))
        if block is not None and block.active():
            # The fault: as if a pod of the budget were down elsewhere, so none may go.
            allowed, desired = 0, max(desired, healthy + 1) if healthy else desired
        gen = pdb["metadata"].get("generation", 1)
        prev = {c.get("type"): c for c in (pdb.get("status") or {}).get("conditions") or []}.get("DisruptionAllowed", {})
        cond_status = "True" if allowed > 0 else "False"
        cond = {"type": "DisruptionAllowed", "status": cond_status, "observedGeneration": gen,
                "lastTransitionTime": prev.get("lastTransitionTime") if prev.get("status") == cond_status else now(),
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": ""}  # fmt: skip
        return {"observedGeneration": gen, "disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired,
                "expectedPods": expected, "conditions": [cond]}  # fmt: skip

    def _refresh_pdb(self, k: Key) -> None:
        pdb = self.objects["poddisruptionbudgets"].get(k)
        if pdb is None:
            return
        st = self.pdb_status(pdb)
        old = dict(pdb.get("status") or {})
        # lastTransitionTime alone does not make a new status.
        if {**old, "conditions": None} != {**st, "conditions": None} or [c.get("status") for c in old.get("conditions") or []] != [
            "True" if st["disruptionsAllowed"] > 0 else "False"
        ]:
            self._commit("poddisruptionbudgets", {**copy.deepcopy(pdb), "status": st}, "MODIFIED")

    def _index_pod(self, k: Key, pod: dict[str, Any] | None) -> None:
        """A pod was written (None: deleted): the budgets that select it, or did, are brought up to date."""
        ns = k[0]
        was = self._node_of.pop(k, None)
        if was is not None:
            self._pods_on[was].discard(k)
        bound = pod["spec"].get("nodeName") if pod is not None else None
        if bound:
            self._node_of[k] = bound
            self._pods_on[bound].add(k)
        if pod is None or pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            self._pending.discard(k)
        else:
            self._pending.add(k)
        for kv in self._labels_of.pop(k, {}).items():
            self._pods_by_label[(ns, *kv)].discard(k)
        labels: dict[str, str] = dict((pod["metadata"].get("labels") or {}) if pod is not None else {})
        if pod is not None:
            self._labels_of[k] = labels
            for kv in labels.items():
                self._pods_by_label[(ns, *kv)].add(k)
        # The budgets that may select it: those hooked on one of its labels, those without
        # matchLabels, and those that selected it before.
        candidates = set(self._pdbs_of_pod.get(k, ())) | self._pdb_any.get(ns, set())
        for kv in labels.items():
            candidates |= self._pdb_hooks.get((ns, *kv), set())
        now = set()
        for b in candidates:
            if pod is not None and match_label_selector(self._selector_of.get(b), labels):
                now.add(b)
                self._members[b].add(k)
            else:
                self._members[b].discard(k)
        if now:
            self._pdbs_of_pod[k] = now
        else:
            self._pdbs_of_pod.pop(k, None)
        if not self._loading:
            for b in sorted(candidates):
                self._refresh_pdb(b)

    def _unhook(self, k: Key) -> None:
        sel = self._selector_of.pop(k, None)
        for pk in self._members.pop(k, set()):
            self._pdbs_of_pod.get(pk, set()).discard(k)
        self._pdb_any.get(k[0], set()).discard(k)
        if sel and sel.get("matchLabels"):
            self._pdb_hooks.get((k[0], *min(sel["matchLabels"].items())), set()).discard(k)

    def _index_pdb(self, k: Key, pdb: dict[str, Any] | None) -> None:
        """A budget was written (None: deleted): the pods it selects are found again when its selector changed."""
        sel = (pdb or {}).get("spec", {}).get("selector")
        if pdb is not None and k in self._members and self._selector_of.get(k) == sel:
            return  # a status write, or a spec change that selects the same pods
        self._unhook(k)
        if pdb is None:
            return
        ns = k[0]
        if sel is not None and sel.get("matchLabels"):
            hook = (ns, *min(sel["matchLabels"].items()))
            self._pdb_hooks[hook].add(k)
            candidates: Iterable[Key] = list(self._pods_by_label.get(hook, ()))
        else:
            self._pdb_any[ns].add(k)
            candidates = [pk for pk in self._labels_of if pk[0] == ns]
        members = {pk for pk in candidates if match_label_selector(sel, self._labels_of[pk])}
        self._members[k] = members
        self._selector_of[k] = copy.deepcopy(sel)
        for pk in members:
            self._pdbs_of_pod.setdefault(pk, set()).add(k)
        if not self._loading:
            self._refresh_pdb(k)

    # --- the Job, DaemonSet and scheduler parts ---------------------------------

    def _replace_pod(self, gone: dict[str, Any]) -> None:
        if not self.config.replace_pods:
            return
        owner = next((o for o in gone["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
        if owner is None:
            return
        if owner["kind"] == "DaemonSet":
            node = gone["spec"].get("nodeName", "")
            if ("", node) not in self.objects["nodes"] or (
                (gone["metadata"]["namespace"], owner["name"]) not in self.objects["daemonsets"]
            ):
                return
        else:
            node = ""  # the scheduler places it
        self._serial += 1
        base = owner["name"]
        name = f"{base}-{uuid.uuid5(uuid.NAMESPACE_OID, f'{base}/{self._serial}/{time.time_ns()}').hex[:5]}"
        res = (gone["spec"]["containers"][0].get("resources") or {}).get("requests") or {}
        prio = (gone["spec"]["priorityClassName"], gone["spec"]["priority"]) if "priority" in gone["spec"] else None
        pod = make_pod(name=name, namespace=gone["metadata"]["namespace"], node="", labels=gone["metadata"].get("labels") or {},
                       owner=copy.deepcopy(owner), host_ip="", pod_ip="", resources=res,
                       scratch=any("emptyDir" in v for v in gone["spec"].get("volumes") or []),
                       priority=None if owner["kind"] == "DaemonSet" else prio, daemon=owner["kind"] == "DaemonSet")  # fmt: skip
        if owner["kind"] == "DaemonSet":
            pod["spec"]["nodeName"] = node
        self._commit("pods", pod, "ADDED")
        self.counters["pods_replaced"] += 1
        if node:
            self._start_pod(pod["metadata"]["namespace"], name, node)
        else:
            self._schedule_pending()

    def _node_takes_pods(self, node: dict[str, Any]) -> bool:
        if node["spec"].get("unschedulable"):
            return False
        if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in node["spec"].get("taints") or []):
            return False
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"].get("conditions") or [])

    def _schedule_pending(self) -> None:
        """Place unscheduled pods on the nodes that take pods, the least loaded first."""
        pending = [p for k in self._pending if (p := self.objects["pods"].get(k)) is not None]
        if not pending:
            return
        # (the index: a pass over every pod for each pod placed made a 1,000-node drain quadratic)
        load = collections.Counter({n: len(ks) for n, ks in self._pods_on.items()})
        nodes = [n["metadata"]["name"] for n in self.objects["nodes"].values() if self._node_takes_pods(n)]
        for pod in sorted(pending, key=key_of):
            if not nodes:
                return
            target = min(nodes, key=lambda n: (load[n], n))
            load[target] += 1
            new = copy.deepcopy(pod)
            new["spec"]["nodeName"] = target
            new["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now()}]
            self._commit("pods", new, "MODIFIED")
            self._start_pod(new["metadata"]["namespace"], new["metadata"]["name"], target)

    def _start_pod(self, namespace: str, name: str, node: str) -> None:
        def run() -> None:
            pod = self.objects["pods"].get((namespace, name))
            n = self.objects["nodes"].get(("", node))
            if pod is None or n is None or pod["metadata"].get("deletionTimestamp") or pod["spec"].get("nodeName") != node:
                return
            addr = next((a["address"] for a in n["status"].get("addresses") or [] if a.get("type") == "InternalIP"), "127.0.0.1")
            fresh = make_pod(name=name, namespace=namespace, node=node, labels=pod["metadata"].get("labels") or {},
                             owner=pod["metadata"]["ownerReferences"][0], host_ip=addr, pod_ip=addr,
                             resources=(pod["spec"]["containers"][0].get("resources") or {}).get("requests"))  # fmt: skip
            new = copy.deepcopy(pod)
            new["status"] = fresh["status"]
            self._commit("pods", new, "MODIFIED")

        self._later(self.config.reschedule_s, run)

    def _sync_daemonsets(self) -> None:
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for p in self.objects["pods"].values():
            for o in p["metadata"].get("ownerReferences") or []:
                if o.get("kind") == "DaemonSet":
                    counts[(p["metadata"]["namespace"], o["name"])] += 1
        for k, ds in list(self.objects["daemonsets"].items()):
            n = counts[k]
            st = {**ds["status"], "currentNumberScheduled": n, "desiredNumberScheduled": n, "numberReady": n, "numberAvailable": n,
                  "updatedNumberScheduled": n}  # fmt: skip
            if st != ds["status"]:
                self._commit("daemonsets", {**copy.deepcopy(ds), "status": st}, "MODIFIED")

    # --- faults -------------------------------------------------------------

    def block_pdb(self, namespace: str, name: str, *, refuse: int | None = None, seconds: float | None = None) -> None:
        """A budget refuses evictions until ``refuse`` evictions were refused, or for ``seconds``."""
        self.find(BY_KIND["PodDisruptionBudget"], namespace, name)
        self.pdb_blocks[(namespace, name)] = PdbBlock(refuse, time.monotonic() + seconds if seconds is not None else None)
        self._refresh_pdb((namespace, name))

    def unblock_pdb(self, namespace: str, name: str) -> None:
        self.pdb_blocks.pop((namespace, name), None)
        self._refresh_pdb((namespace, name))

    def set_unhealthy(self, name: str, count: int) -> None:
        """``count`` devices of each accelerator resource of the node reported unhealthy by its device plugin: its
        allocatable drops by as many (at least 0) below its capacity, as a device plugin's ListAndWatch makes it."""
        node = copy.deepcopy(self.find(BY_KIND["Node"], "", name))
        status = node["status"]
        for res in set(RESOURCE_OF_KIND.values()) & set(status.get("capacity") or {}):
            status["allocatable"][res] = str(max(0, int(status["capacity"][res]) - max(0, count)))
        self._commit("nodes", node, "MODIFIED")

    def set_node_ready(self, name: str, ready: bool) -> None:
        """A node's kubelet stops (or resumes) posting status: the node lifecycle controller's conditions and taints."""
        node = copy.deepcopy(self.find(BY_KIND["Node"], "", name))
        at = now()
        conds = [c for c in node["status"].get("conditions") or [] if c.get("type") != "Ready"]
        if ready:
            conds.append(node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", at))
        else:
            conds.append(node_condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", at))
        node["status"]["conditions"] = conds
        ours = ("node.kubernetes.io/unreachable",)
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") not in ours]
        if not ready:
            taints += [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": at},
                       {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": at}]  # fmt: skip
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        self._commit("nodes", node, "MODIFIED")
        for pod in [p for p in self.objects["pods"].values() if p["spec"].get("nodeName") == name]:
            new = copy.deepcopy(pod)
            for c in new.get("status", {}).get("conditions") or []:
                if c.get("type") in ("Ready", "ContainersReady"):
                    c["status"], c["lastTransitionTime"] = ("True" if ready else "False"), at
            if new != pod:
                self._commit("pods", new, "MODIFIED")
        if ready:
            self._schedule_pending()

    # --- watch ----------------------------------------------------------------

    def events_since(self, plural: str, rv: int) -> list[tuple[str, dict[str, Any]]]:
        """The events of ``plural`` after ``rv``; ApiError 410 when the history no longer reaches back that far."""
        if self.history and rv < self.history[0][0] - 1:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.history[0][0] - 1})")
        return [(ev, obj) for r, p, ev, obj in self.history if r > rv and p == plural]
