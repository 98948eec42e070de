"""A cluster through lightkube (docs/kubernetes.md says why lightkube).

Only this module imports lightkube (and httpx under it); fleetctl loads it
through the ``fleetctl.k8s`` entry point when a command talks to a cluster, so
``fleetctl --help`` never pays for it. The API's objects become
:mod:`fleetctl.interfaces.k8s` models here, at the edge.

The token: lightkube reads it from the kubeconfig (or the service account's
file) into its own ``SingleConfig`` and puts it on each request; nothing here
copies it, and every error message is built from the status code and the
API's own ``message`` (which never holds a credential), never from the request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

from fleetctl.interfaces.k8s import (
    DEFAULT_DEADLINE,
    DEFAULT_REQUEST_TIMEOUT,
    MAX_ITEMS,
    PAGE,
    Budget,
    ClusterClient,
    ClusterRef,
    Condition,
    Eviction,
    K8sError,
    Node,
    NodePatch,
    Pod,
    Taint,
)

_READY = {"True": "True", "False": "False"}  # any other status (Unknown, absent) is Unknown


class LightkubeCluster(ClusterClient):
    """One cluster opened through lightkube's synchronous client."""

    def __init__(self, ref: ClusterRef, client: Any, deadline: float) -> None:
        self.ref = ref
        self._client = client
        self._until = time.monotonic() + deadline
        self._deadline = deadline

    @classmethod
    def open(cls, ref: ClusterRef, *, deadline: float = DEFAULT_DEADLINE, request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> Self:
        import httpx
        from lightkube import Client, KubeConfig
        from lightkube.core.exceptions import ConfigError

        try:
            if ref.in_cluster:
                config = KubeConfig.from_service_account().get()
            else:
                path = Path(ref.kubeconfig or "").expanduser()
                if not path.is_file():
                    raise K8sError(f"{ref.describe()}: no kubeconfig file at {path}", exit_code=2)
                kc = KubeConfig.from_file(path)
                if ref.context is not None and ref.context not in kc.contexts:
                    known = ", ".join(sorted(kc.contexts)) or "none"
                    raise K8sError(f"{ref.describe()}: the kubeconfig has no context {ref.context!r} (it has: {known})", exit_code=2)
                config = kc.get(ref.context)
                if config is None:
                    raise K8sError(f"{ref.describe()}: the kubeconfig names no current context; give context:", exit_code=2)
        except (ConfigError, OSError, ValueError, KeyError) as e:
            # lightkube's messages name files and contexts, never a token; the type is kept for --debug.
            raise K8sError(f"{ref.describe()}: cannot read its credentials: {type(e).__name__}: {e}", exit_code=2) from e
        # trust_env=False: no proxy or .netrc from the environment between fleetctl and the API server
        # (a kubeconfig's own proxy-url is still honoured by lightkube).
        client = Client(config, timeout=httpx.Timeout(request_timeout), field_manager="fleetctl", trust_env=False)
        return cls(ref, client, deadline)

    # -- reads --------------------------------------------------------------

    def node(self, name: str) -> Node | None:
        from lightkube.resources.core_v1 import Node as KNode

        try:
            obj = self._call(lambda: self._client.get(KNode, name=name))
        except K8sError as e:
            if e.status == 404:
                return None
            raise
        return _node(obj)

    def nodes(self) -> list[Node]:
        from lightkube.resources.core_v1 import Node as KNode

        return [_node(o) for o in self._list(KNode)]

    def pods(self, node: str | None = None) -> list[Pod]:
        from lightkube.resources.core_v1 import Pod as KPod

        fields = {"spec.nodeName": node} if node is not None else None
        return [_pod(o) for o in self._list(KPod, namespace="*", fields=fields)]

    def budgets(self) -> list[Budget]:
        from lightkube.resources.policy_v1 import PodDisruptionBudget

        return [_budget(o) for o in self._list(PodDisruptionBudget, namespace="*")]

    # -- writes ---------------------------------------------------------------

    def patch_node(self, name: str, patch: NodePatch) -> Node:
        from lightkube.resources.core_v1 import Node as KNode
        from lightkube.types import PatchType

        return _node(self._call(lambda: self._client.patch(KNode, name, patch.body(), patch_type=PatchType.MERGE)))

    def set_condition(self, name: str, condition: Condition) -> Node:
        from lightkube.resources.core_v1 import Node as KNode
        from lightkube.types import PatchType

        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        current = self.node(name)
        if current is None:
            raise K8sError(f"{self.ref.describe()}: no node {name!r}", exit_code=2, status=404)
        before = current.condition(condition.type)
        entry: dict[str, Any] = {"type": condition.type, "status": condition.status, "reason": condition.reason,
                                 "message": condition.message, "lastHeartbeatTime": stamp}  # fmt: skip
        if before is None or before.status != condition.status:
            entry["lastTransitionTime"] = stamp  # kept as it was while the status stays (the API's convention)
        # A strategic merge patch of the status subresource merges conditions by type: the kubelet's own stay.
        body = {"status": {"conditions": [entry]}}
        return _node(self._call(lambda: self._client.patch(KNode.Status, name, body, patch_type=PatchType.STRATEGIC)))

    def evict(self, namespace: str, name: str, *, uid: str | None = None, grace_s: int | None = None) -> Eviction:
        from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Preconditions
        from lightkube.resources.core_v1 import Pod as KPod

        options = DeleteOptions(gracePeriodSeconds=grace_s, preconditions=Preconditions(uid=uid) if uid else None)
        body = KPod.Eviction(metadata=ObjectMeta(name=name, namespace=namespace), deleteOptions=options)
        try:
            self._call(lambda: self._client.create(body, name=name, namespace=namespace))
        except K8sError as e:
            if e.status == 429:
                return Eviction("blocked", e.message.partition(": the API answered ")[2] or e.message)
            if e.status in (404, 409):
                return Eviction("gone", "no such pod" if e.status == 404 else "another pod of that name")
            raise
        return Eviction("evicted")

    def close(self) -> None:
        self._client.close()

    # -- bounds and errors ----------------------------------------------------

    def _check_deadline(self) -> None:
        if time.monotonic() > self._until:
            raise K8sError(f"{self.ref.describe()}: no complete answer within {self._deadline:g} s", exit_code=2)

    def _call(self, fn: Any) -> Any:
        self._check_deadline()
        return _wrapped(self.ref, fn)

    def _list(self, res: Any, **kwargs: Any) -> Iterator[Any]:
        """Every item, in pages of PAGE (limit/continue), at most MAX_ITEMS, stopping at the deadline."""
        self._check_deadline()
        it = _wrapped(self.ref, lambda: iter(self._client.list(res, chunk_size=PAGE, **kwargs)))
        count = 0
        while True:
            self._check_deadline()
            item = _wrapped(self.ref, lambda: next(it, None))
            if item is None:
                return
            count += 1
            if count > MAX_ITEMS:
                raise K8sError(f"{self.ref.describe()}: more than {MAX_ITEMS} {res.__name__} objects; refusing to read on", exit_code=1)
            yield item


def _wrapped(ref: ClusterRef, fn: Any) -> Any:
    """``fn()`` with lightkube's and httpx's errors as K8sError (exit 2: nothing was changed)."""
    import httpx
    from lightkube import ApiError

    try:
        return fn()
    except ApiError as e:
        causes = [c.message or "" for c in (e.status.details.causes or [])] if e.status.details else []
        raise _status_error(ref, e.status.code, e.status.reason, _with_causes(e.status.message, causes)) from e
    except httpx.HTTPStatusError as e:
        # NOTE: lightkube 0.22 makes an ApiError only of a Content-Type exactly "application/json" (what
        # kube-apiserver sends); a server adding "; charset=utf-8" (the lab's stand-in, aiohttp) gets here.
        try:
            body = e.response.json()
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) and body.get("kind") == "Status" else {}
        details = body.get("details")
        raw = details.get("causes") if isinstance(details, dict) else None
        causes = [str(c.get("message", "")) for c in raw or [] if isinstance(c, dict)][:4]
        message = _with_causes(body.get("message") or e.response.reason_phrase, causes)
        raise _status_error(ref, e.response.status_code, body.get("reason"), message) from e
    except httpx.HTTPError as e:
        # The request's URL is the API server's (no credential in it); the headers are never shown.
        raise K8sError(f"{ref.describe()} does not answer: {type(e).__name__}: {e}", exit_code=2) from e


def _with_causes(message: str | None, causes: list[str]) -> str | None:
    """The API's message with its causes (an eviction's 429 names the budget only there), each cut to one short line."""
    extra = "; ".join(" ".join(c.split())[:200] for c in causes[:4] if c)
    return f"{message} ({extra})" if extra else message


def _status_error(ref: ClusterRef, code: int | None, reason: str | None, message: str | None) -> K8sError:
    """An API error answer (a Status) as one line: the code, the API's reason and message, never a header."""
    return K8sError(f"{ref.describe()}: the API answered {code}{f' {reason}' if reason else ''}: {message}", exit_code=2, status=code)


# -- the API's objects as fleetctl's models ----------------------------------


def _node(o: Any) -> Node:
    spec, status, meta = o.spec, o.status, o.metadata
    conditions = tuple(
        Condition(type=c.type, status=_READY.get(c.status, "Unknown"), reason=c.reason, message=c.message)
        for c in (status.conditions if status and status.conditions else [])
    )
    ready = next((c for c in conditions if c.type == "Ready"), None)
    return Node(
        name=meta.name,
        ready=ready.status if ready else "Unknown",
        ready_reason=ready.reason if ready else None,
        unschedulable=bool(spec and spec.unschedulable),
        taints=tuple(Taint(key=t.key, value=t.value, effect=t.effect) for t in (spec.taints or [] if spec else [])),
        allocatable=dict(status.allocatable or {}) if status else {},
        conditions=conditions,
        hostname=(meta.labels or {}).get("kubernetes.io/hostname"),
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        resource_version=meta.resourceVersion or "",
    )


def _pod(o: Any) -> Pod:
    meta, spec, status = o.metadata, o.spec, o.status
    owner = next((r.kind for r in meta.ownerReferences or [] if r.controller), None)
    return Pod(
        namespace=meta.namespace or "",
        name=meta.name,
        node=spec.nodeName if spec else None,
        phase=status.phase if status else None,
        priority=(spec.priority or 0) if spec else 0,
        priority_class=spec.priorityClassName if spec else None,
        owner_kind=owner,
        labels=dict(meta.labels or {}),
        uid=meta.uid or "",
        local_data=any(v.emptyDir is not None for v in (spec.volumes or [] if spec else [])),
        mirror="kubernetes.io/config.mirror" in (meta.annotations or {}),
        terminating=meta.deletionTimestamp is not None,
    )


def _budget(o: Any) -> Budget:
    meta, spec, status = o.metadata, o.spec, o.status
    sel = spec.selector if spec else None
    raw = (sel.matchExpressions or []) if sel else []
    exprs = tuple({"key": e.key, "operator": e.operator, "values": list(e.values or [])} for e in raw)
    return Budget(
        namespace=meta.namespace or "",
        name=meta.name,
        match_labels=dict(sel.matchLabels or {}) if sel else {},
        match_expressions=exprs,
        disruptions_allowed=status.disruptionsAllowed if status else 0,
        min_available=None if spec is None or spec.minAvailable is None else str(spec.minAvailable),
        max_unavailable=None if spec is None or spec.maxUnavailable is None else str(spec.maxUnavailable),
    )
