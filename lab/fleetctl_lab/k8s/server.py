"""The lab's Kubernetes API server stand-in: aiohttp over the lab cluster's ``Store``.

Serves the REST paths of the resources in ``store.RESOURCES`` (get, list
with label and field selectors and limit/continue, watch, create, update,
patch in the three content types, delete, the ``status`` and ``eviction``
subresources), legacy discovery (``/api``, ``/apis``, each group version),
``/version`` and server-side Table printing (what ``kubectl get`` asks for).
Bearer-token auth on every path but the health checks. A control app on a
port of its own injects faults under ``/lab/v1``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from fleetctl.errors import FleetError, InputError
from fleetctl_lab.k8s.objects import NodeSeed, seed_cluster
from fleetctl_lab.k8s.patch import APPLY, PatchError, apply_patch
from fleetctl_lab.k8s.selectors import SelectorError, parse_fields, parse_labels
from fleetctl_lab.k8s.store import BY_KIND, RESOURCES, ApiError, ResourceType, Store, StoreConfig, Watcher
from fleetctl_lab.threads import LoopProxy, serve_in_thread

log = logging.getLogger("fleetctl_lab.k8s")

#: The Kubernetes version the stand-in reports (the kubectl on these machines is v1.32).
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.4-fleetctl-lab", "gitCommit": "0000000000000000000000000000000000000000",
           "gitTreeState": "clean", "buildDate": "2025-04-22T00:00:00Z", "goVersion": "go1.23.6", "compiler": "gc",
           "platform": "linux/amd64"}  # fmt: skip
_OPEN = {"/healthz", "/livez", "/readyz"}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_SUB_VERBS = {"status": ["get", "patch", "update"], "eviction": ["create"]}
MAX_BODY = 1024 * 1024  # the real API server takes 3 MiB; fleetctl's writes are small
MAX_WATCH_S = 1800.0
_PATCH_TYPES = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"


@dataclass
class K8sLabConfig:
    """How the stand-in serves."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: the kernel picks
    control_port: int = 0
    tls: bool = True
    state_dir: Path | None = None  # the kubeconfig and certificate go here; None: a temporary folder
    pods_per_node: int = 1
    gang_size: int = 4
    store: StoreConfig = field(default_factory=StoreConfig)
    #: A folder the lab's hosts' ``kubeadm join`` writes a file into, named as the host; None: every node is there from
    #: the start. Given, a node (its DaemonSet and training pods) appears when its host joins, as a kubelet registers.
    joins_dir: Path | None = None
    join_poll_s: float = 0.5


def _bound_to(field_selector: str) -> str | None:
    """The node a pods' field selector requires (``spec.nodeName=N`` or ``==``, among other terms), else None: the
    store then looks at that node's pods only (the predicate still decides)."""
    for part in field_selector.split(","):
        name, op, value = part.partition("==") if "==" in part else part.partition("=")
        if op and not name.endswith("!") and name.strip() == "spec.nodeName":
            return value.strip()
    return None


def _joined(joins: Path) -> set[str]:
    """The hosts that joined: the files in ``joins`` (at most 100,000 read: a lab's own folder, bounded all the same)."""
    try:
        with os.scandir(joins) as it:
            return {e.name for _, e in zip(range(100_000), it, strict=False) if e.is_file()}
    except OSError:
        return set()


def _status(err: ApiError) -> web.Response:
    return web.json_response(err.status(), status=err.code)


def _age(ts: str | None) -> str:
    """An age as kubectl prints it: 12s, 5m, 3h, 2d."""
    if not ts:
        return "<unknown>"
    try:
        secs = int((dt.datetime.now(dt.UTC) - dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)).total_seconds())
    except ValueError:
        return "<unknown>"
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= 2 * n or (unit == "m" and secs >= n):
            return f"{secs // n}{unit}"
    return f"{max(secs, 0)}s"


def _col(name: str, kind: str = "string", fmt: str = "", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


def _node_row(o: dict[str, Any]) -> list[Any]:
    ready = next((c["status"] for c in o["status"].get("conditions") or [] if c.get("type") == "Ready"), "Unknown")
    status = "Ready" if ready == "True" else "NotReady"
    if o["spec"].get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = (
        ",".join(sorted(k.split("/", 1)[1] for k in o["metadata"].get("labels") or {} if k.startswith("node-role.kubernetes.io/")))
        or "<none>"
    )
    ip = next((a["address"] for a in o["status"].get("addresses") or [] if a.get("type") == "InternalIP"), "<none>")
    info = o["status"].get("nodeInfo") or {}
    return [o["metadata"]["name"], status, roles, _age(o["metadata"].get("creationTimestamp")), info.get("kubeletVersion", ""), ip,
            info.get("osImage", ""), info.get("kernelVersion", ""), info.get("containerRuntimeVersion", "")]  # fmt: skip


def _pod_row(o: dict[str, Any]) -> list[Any]:
    st = o.get("status") or {}
    cs = st.get("containerStatuses") or []
    phase = "Terminating" if o["metadata"].get("deletionTimestamp") else st.get("phase", "Unknown")
    return [o["metadata"]["name"], f"{sum(1 for c in cs if c.get('ready'))}/{len(o['spec'].get('containers') or [])}", phase,
            sum(c.get("restartCount", 0) for c in cs), _age(o["metadata"].get("creationTimestamp")), st.get("podIP", "<none>"),
            o["spec"].get("nodeName", "<none>")]  # fmt: skip


def _pdb_row(o: dict[str, Any]) -> list[Any]:
    s = o["spec"]
    return [o["metadata"]["name"], str(s.get("minAvailable", "N/A")), str(s.get("maxUnavailable", "N/A")),
            (o.get("status") or {}).get("disruptionsAllowed", 0), _age(o["metadata"].get("creationTimestamp"))]  # fmt: skip


#: Server-side printing (pkg/printers/internalversion's columns for these kinds).
TABLES: dict[str, tuple[list[dict[str, Any]], Any]] = {
    "nodes": ([_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version"), _col("Internal-IP", priority=1),
               _col("OS-Image", priority=1), _col("Kernel-Version", priority=1), _col("Container-Runtime", priority=1)], _node_row),
    "pods": ([_col("Name", fmt="name"), _col("Ready"), _col("Status"), _col("Restarts", "string"), _col("Age"), _col("IP", priority=1),
              _col("Node", priority=1)], _pod_row),
    "poddisruptionbudgets": ([_col("Name", fmt="name"), _col("Min Available"), _col("Max Unavailable"),
                              _col("Allowed Disruptions", "integer"), _col("Age")], _pdb_row),
}  # fmt: skip


def _table(rt: ResourceType, items: list[dict[str, Any]], md: dict[str, Any], include: str) -> dict[str, Any]:
    cols, row_of = TABLES.get(rt.plural, ([_col("Name", fmt="name"), _col("Created At", "date")],
                                          lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]))  # fmt: skip
    rows = []
    for o in items:
        if include == "Object":
            obj = o
        elif include == "None":
            obj = None
        else:
            obj = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
        rows.append({"cells": row_of(o), "object": obj})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": cols, "rows": rows}


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept


class K8sLab:
    """The stand-in: an API server over a lab cluster, and its control port.

    Usage::

        lab = K8sLab([NodeSeed("lab-gpu-00001", boards=(("gpu", 8),))])
        await lab.start()
        lab.kubeconfig     # a kubeconfig file (0600) with the URL and the token
        await lab.stop()
    """

    def __init__(self, nodes: list[NodeSeed], config: K8sLabConfig | None = None) -> None:
        self.config = config or K8sLabConfig()
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise InputError("duplicate node names in the lab cluster")
        self.nodes = nodes
        self.store = Store(self.config.store)
        self.token = secrets.token_urlsafe(32)
        self.url = ""
        self.control_url = ""
        self.kubeconfig: Path | None = None
        self.state_dir: Path | None = None
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self._control: web.AppRunner | None = None
        self._tmp: Any = None
        self._ca_pem = b""
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._unjoined: dict[str, list[dict[str, Any]]] = {}  # node -> its objects, loaded when its host joins
        self._join_task: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        import tempfile

        cfg = self.config
        if cfg.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fleetctl-k8s-lab-")
            self.state_dir = Path(self._tmp.name)
        else:
            self.state_dir = Path(cfg.state_dir)
            self.state_dir.mkdir(parents=True, exist_ok=True)
        objs = seed_cluster(self.nodes, pods_per_node=cfg.pods_per_node, gang_size=cfg.gang_size)
        if cfg.joins_dir is not None:
            objs = self._hold_unjoined(objs, Path(cfg.joins_dir))
        self.store.load(objs)
        ssl_ctx = None
        if cfg.tls:
            from fleetctl_lab.bmc.certs import ensure_cert, server_context

            pem, _fp = await asyncio.get_running_loop().run_in_executor(None, ensure_cert, self.state_dir, "kube-apiserver", cfg.host)
            ssl_ctx = server_context(pem)
            text = pem.read_bytes()
            self._ca_pem = text[text.index(b"-----BEGIN CERTIFICATE-----") :]
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, cfg.host, cfg.port, ssl_context=ssl_ctx)
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            raise FleetError(f"lab k8s: cannot bind {cfg.host}:{cfg.port} ({e})") from e
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{'https' if cfg.tls else 'http'}://{cfg.host}:{port}"
        capp = web.Application(client_max_size=64 * 1024)
        capp.router.add_get("/lab/v1/status", self._ctl_status)
        capp.router.add_post("/lab/v1/faults", self._ctl_faults)
        self._control = web.AppRunner(capp, handle_signals=False, access_log=None)
        await self._control.setup()
        csite = web.TCPSite(self._control, cfg.host, cfg.control_port)
        await csite.start()
        self.control_url = f"http://{cfg.host}:{csite._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        self.kubeconfig = self.write_kubeconfig(self.state_dir / "kubeconfig")
        log.info("lab k8s: %d nodes at %s", len(self.nodes) - len(self._unjoined), self.url)
        if cfg.joins_dir is not None:
            self._join_task = asyncio.get_running_loop().create_task(self._watch_joins(Path(cfg.joins_dir)))

    # --- nodes joining --------------------------------------------------------

    def _hold_unjoined(self, objs: list[dict[str, Any]], joins: Path) -> list[dict[str, Any]]:
        """The cluster-wide objects and those of the nodes joined already; the rest kept aside until their host joins."""
        joined = _joined(joins)
        names = {n.name for n in self.nodes}
        now_in: list[dict[str, Any]] = []
        for obj in objs:
            node = None
            if obj["kind"] == "Node":
                node = obj["metadata"]["name"]
            elif obj["kind"] == "Pod":
                node = (obj.get("spec") or {}).get("nodeName")
            if node in names and node not in joined:
                self._unjoined.setdefault(node, []).append(obj)
            else:
                now_in.append(obj)
        return now_in

    async def _watch_joins(self, joins: Path) -> None:
        """Each host that joined since (a file in ``joins``): its node and pods registered, as its kubelet would."""
        while self._unjoined:
            await asyncio.sleep(self.config.join_poll_s)
            for name in sorted(_joined(joins) & set(self._unjoined)):
                self.store.load(self._unjoined.pop(name))
                log.info("lab k8s: node %s joined", name)

    async def stop(self) -> None:
        if self._join_task is not None:
            self._join_task.cancel()
        self.store.close()
        for t in list(self._watch_tasks):
            t.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._control is not None:
            await self._control.cleanup()
            self._control = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig naming this server and its token, written 0600 (the token is never printed)."""
        cluster: dict[str, Any] = {"server": self.url}
        if self._ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(self._ca_pem).decode()
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fleetctl-lab", "cluster": cluster}],
            "users": [{"name": "fleetctl-lab-admin", "user": {"token": self.token}}],
            "contexts": [
                {"name": "fleetctl-lab", "context": {"cluster": "fleetctl-lab", "user": "fleetctl-lab-admin", "namespace": "default"}}
            ],
            "current-context": "fleetctl-lab",
            "preferences": {},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2)  # JSON is YAML: kubectl reads it
        os.replace(tmp, path)
        return path

    def status(self) -> dict[str, Any]:
        """What k8s.json holds: no token."""
        objs = self.store.objects
        return {"url": self.url, "control_url": self.control_url, "kubeconfig": str(self.kubeconfig), "nodes": len(objs["nodes"]),
                "pods": len(objs["pods"]), "requests": self.requests, "counters": dict(self.store.counters)}  # fmt: skip

    # --- faults (on the loop) -------------------------------------------------

    def set_fault(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``{"pdb": "NS/NAME", "refuse": N, "seconds": T}``, ``{"pdb": ..., "clear": true}``,
        ``{"node": NAME, "ready": false}``. Raises InputError."""
        try:
            if "pdb" in spec:
                ns, _, name = str(spec["pdb"]).rpartition("/")
                ns = ns or "training"
                if spec.get("clear"):
                    self.store.unblock_pdb(ns, name)
                else:
                    refuse = spec.get("refuse")
                    seconds = spec.get("seconds")
                    if refuse is None and seconds is None:
                        raise InputError("a pdb fault needs refuse=N or seconds=T")
                    self.store.block_pdb(ns, name, refuse=None if refuse is None else int(refuse),
                                         seconds=None if seconds is None else float(seconds))  # fmt: skip
                return {"pdb": f"{ns}/{name}", "status": self.store.pdb_status(self.store.find(BY_KIND["PodDisruptionBudget"], ns, name))}
            if "node" in spec and spec.get("unhealthy") is not None:
                self.store.set_unhealthy(str(spec["node"]), int(spec["unhealthy"]))
                return {"node": spec["node"], "unhealthy": int(spec["unhealthy"])}
            if "node" in spec:
                self.store.set_node_ready(str(spec["node"]), bool(spec.get("ready", False)))
                return {"node": spec["node"], "ready": bool(spec.get("ready", False))}
        except ApiError as e:
            raise InputError(e.message) from e
        except (TypeError, ValueError) as e:
            raise InputError(f"bad fault {spec!r}: {e}") from e
        raise InputError(f"unknown fault {spec!r}: give pdb=NS/NAME or node=NAME")

    async def _ctl_status(self, request: web.Request) -> web.Response:
        return web.json_response(self.status())

    async def _ctl_faults(self, request: web.Request) -> web.Response:
        try:
            spec = await request.json()
            if not isinstance(spec, dict):
                raise InputError("a fault is a JSON object")
            return web.json_response(self.set_fault(spec))
        except (ValueError, InputError) as e:
            return web.json_response({"error": str(e)}, status=400)

    # --- the API --------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        path = request.path.rstrip("/") or "/"
        if path in _OPEN:
            return web.Response(text="ok")
        auth = request.headers.get("Authorization", "")
        if not hmac.compare_digest(auth.encode(), f"Bearer {self.token}".encode()):
            return _status(ApiError(401, "Unauthorized", "Unauthorized"))
        try:
            return await self._route(request, path)
        except ApiError as e:
            return _status(e)
        except SelectorError as e:
            return _status(ApiError(400, "BadRequest", f"unable to parse requirement: {e}"))
        except web.HTTPRequestEntityTooLarge:
            return _status(ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 1048576"))

    async def _route(self, request: web.Request, path: str) -> web.StreamResponse:
        if path == "/version":
            return web.json_response(VERSION)
        parts = path.strip("/").split("/")
        if parts == ["api"]:
            host = request.host
            return web.json_response({"kind": "APIVersions", "versions": ["v1"],
                                      "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})  # fmt: skip
        if parts == ["apis"]:
            return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in self._groups()]})
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                if parts[1] not in self._groups():
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1])})
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        types = [r for r in RESOURCES if r.group == group and r.version == version]
        if not types:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return web.json_response(self._resource_list(group, version, types))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and any(r.plural == rest[2] and r.namespaced for r in types):
            namespace, rest = rest[1], rest[2:]
        rt = next((r for r in types if r.plural == rest[0]), None)
        if rt is None or len(rest) > 3 or (namespace is not None and not rt.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else ""
        if sub and sub not in rt.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and name is not None and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return await self._serve(request, rt, namespace, name, sub)

    def _groups(self) -> list[str]:
        return sorted({r.group for r in RESOURCES if r.group})

    def _group(self, group: str) -> dict[str, Any]:
        versions = sorted({r.version for r in RESOURCES if r.group == group})
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def _resource_list(self, group: str, version: str, types: list[ResourceType]) -> dict[str, Any]:
        res: list[dict[str, Any]] = []
        for r in types:
            entry: dict[str, Any] = {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced, "kind": r.kind,
                                     "verbs": _VERBS}  # fmt: skip
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            res.append(entry)
            for sub in r.subresources:
                s: dict[str, Any] = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                                     "verbs": _SUB_VERBS[sub]}  # fmt: skip
                if sub == "eviction":
                    # kubectl drain looks for exactly this entry to use the Eviction API (drain.CheckEvictionSupport).
                    s.update(group="policy", version="v1", kind="Eviction")
                res.append(s)
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"the body of the request was in an unknown format - accepted media types include: "
                           f"application/json, application/yaml ({e})") from e  # fmt: skip

    async def _serve(self, request: web.Request, rt: ResourceType, namespace: str | None, name: str | None, sub: str) -> web.StreamResponse:
        store, q, method = self.store, request.query, request.method
        ns = namespace or ""
        dry = q.get("dryRun") == "All"
        if name is None:
            if method == "GET":
                if q.get("watch") in ("1", "true", "True"):
                    return await self._watch(request, rt, namespace)
                return self._list(request, rt, namespace)
            if method == "POST" and (not rt.namespaced or namespace is not None):
                body = await self._body(request)
                if not isinstance(body, dict):
                    raise ApiError(400, "BadRequest", "the body is not an object")
                if dry:
                    return web.json_response(body, status=201)
                return web.json_response(store.create(rt, ns, body), status=201)
            raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})")
        if sub == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = await self._body(request)
            if not isinstance(body, dict) or (body.get("metadata") or {}).get("name", name) != name:
                raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
            return web.json_response(store.evict(ns, name, body, dry_run=dry), status=201)
        if method == "GET":
            obj = store.get(rt, ns, name)
            if _wants_table(request):
                return web.json_response(
                    _table(rt, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, q.get("includeObject", ""))
                )
            return web.json_response(obj)
        if method == "PUT":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body is not an object")
            if dry:
                return web.json_response(body)
            return web.json_response(store.replace(rt, ns, name, body, sub))
        if method == "PATCH":
            ctype = request.headers.get("Content-Type", "")
            if ctype.split(";")[0].strip() == APPLY:
                raise ApiError(415, "UnsupportedMediaType", "the lab stand-in does not serve server-side apply")
            body = await self._body(request)

            def patched(cur: dict[str, Any]) -> dict[str, Any]:
                try:
                    return apply_patch(ctype, cur, body)
                except PatchError as e:
                    raise ApiError(422, "Invalid", str(e)) from e
                except ValueError as e:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format - accepted media types include: {_PATCH_TYPES} ({e})",
                    ) from e

            if dry:
                return web.json_response(patched(store.get(rt, ns, name)))
            return web.json_response(store.patch(rt, ns, name, patched, sub))
        if method == "DELETE" and not sub:
            body = await self._body(request)
            grace = q.get("gracePeriodSeconds", (body or {}).get("gracePeriodSeconds") if isinstance(body, dict) else None)
            try:
                g = None if grace is None else float(grace)
            except ValueError as e:
                raise ApiError(400, "BadRequest", f"gracePeriodSeconds: {e}") from e
            return web.json_response(store.delete(rt, ns, name, g, dry_run=dry))
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})")

    def _predicate(self, request: web.Request, rt: ResourceType) -> Any:
        labels = parse_labels(request.query.get("labelSelector", ""))
        fields = parse_fields(request.query.get("fieldSelector", ""), rt.plural)
        return lambda o: labels(o["metadata"].get("labels") or {}) and fields(o)

    def _list(self, request: web.Request, rt: ResourceType, namespace: str | None) -> web.Response:
        q = request.query
        try:
            limit = int(q["limit"]) if q.get("limit") else None
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"limit: {e}") from e
        pred = self._predicate(request, rt)
        node = _bound_to(q.get("fieldSelector", ""))
        items, rv, token, remaining = self.store.select(
            rt, namespace, pred, limit=limit if limit and limit > 0 else None, cont=q.get("continue"), node=node
        )
        md: dict[str, Any] = {"resourceVersion": rv}
        if token:
            md["continue"] = token
            md["remainingItemCount"] = remaining
        if _wants_table(request):
            return web.json_response(_table(rt, items, md, q.get("includeObject", "")))
        return web.json_response({"kind": f"{rt.kind}List", "apiVersion": rt.group_version, "metadata": md, "items": items})

    async def _watch(self, request: web.Request, rt: ResourceType, namespace: str | None) -> web.StreamResponse:
        store = self.store
        if len(store.watchers) >= store.config.max_watchers:
            raise ApiError(
                429, "TooManyRequests", "too many watches on the lab API server, please try again later", {"retryAfterSeconds": 1}
            )
        pred = self._predicate(request, rt)
        table = _wants_table(request)
        include = request.query.get("includeObject", "")
        try:
            timeout = min(float(request.query.get("timeoutSeconds") or MAX_WATCH_S), MAX_WATCH_S)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"timeoutSeconds: {e}") from e
        rv_q = request.query.get("resourceVersion", "")
        # Registered first, so nothing falls between the catch-up and the live events.
        w = Watcher(rt.plural, namespace, pred)
        store.watchers.add(w)
        try:
            if rv_q in ("", "0"):
                items, _rv, _t, _r = store.select(rt, namespace, pred, limit=store.config.max_list)
                initial = [("ADDED", o) for o in items]
            else:
                try:
                    since = int(rv_q)
                except ValueError as e:
                    raise ApiError(400, "BadRequest", f"resourceVersion: {e}") from e
                initial = [(ev, o) for ev, o in store.events_since(rt.plural, since)
                           if (namespace is None or o["metadata"].get("namespace") == namespace) and pred(o)]  # fmt: skip
            resp = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)

            def line(ev: str, obj: dict[str, Any]) -> bytes:
                if table:
                    obj = _table(rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, include)
                return json.dumps({"type": ev, "object": obj}, separators=(",", ":")).encode() + b"\n"

            for ev, obj in initial:
                await resp.write(line(ev, obj))
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(w.queue.get(), left)
                except TimeoutError:
                    break
                if item is None:
                    if w.overflowed:
                        await resp.write(
                            json.dumps(
                                {"type": "ERROR", "object": ApiError(410, "Expired", "the watch fell behind; list again").status()}
                            ).encode()
                            + b"\n"
                        )
                    break
                await resp.write(line(item["type"], item["object"]))
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
            return resp
        except ApiError as e:
            if e.code == 410:
                # A watch from a resourceVersion too old: the API answers 200 and one ERROR event.
                resp = web.StreamResponse(headers={"Content-Type": "application/json"})
                await resp.prepare(request)
                await resp.write(json.dumps({"type": "ERROR", "object": e.status()}).encode() + b"\n")
                await resp.write_eof()
                return resp
            raise
        finally:
            store.watchers.discard(w)


# --- in-process use (tests) ------------------------------------------------------


class K8sLabHandle(LoopProxy):
    """A running stand-in, for a thread other than its loop's."""

    lab: K8sLab

    @property
    def url(self) -> str:
        return self.lab.url

    @property
    def kubeconfig(self) -> Path:
        assert self.lab.kubeconfig is not None
        return self.lab.kubeconfig

    def set_fault(self, **spec: Any) -> dict[str, Any]:
        return self.call(self.lab.set_fault, spec)

    def obj(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """An object as the store holds it now (None if absent)."""

        def get() -> dict[str, Any] | None:
            try:
                return self.lab.store.get(BY_KIND[kind], namespace, name)
            except ApiError:
                return None

        return self.call(get)

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return self.call(lambda: [p for p in self.lab.store.objects["pods"].values() if p["spec"].get("nodeName") == node])

    def counters(self) -> dict[str, int]:
        return self.call(lambda: dict(self.lab.store.counters))


@contextlib.contextmanager
def serve_k8s(nodes: list[NodeSeed], config: K8sLabConfig | None = None) -> Iterator[K8sLabHandle]:
    """Run a stand-in on a thread of its own: ``with serve_k8s(seeds) as k8s: k8s.url, k8s.kubeconfig``."""
    lab = K8sLab(nodes, config)
    with serve_in_thread(lab, name="fleetctl-k8s-lab") as loop:
        yield K8sLabHandle(lab, loop)


def seeds_from_specs(specs: list[Any]) -> list[NodeSeed]:
    """NodeSeeds from the lab's LabServerSpecs: each server a node, its boards counted by kind."""
    out = []
    for i, s in enumerate(specs):
        counts: dict[str, int] = {}
        for b in s.boards:
            counts[b.kind] = counts.get(b.kind, 0) + 1
        out.append(
            NodeSeed(name=s.name, address=f"127.70.{i // 250 % 256}.{i % 250 + 1}", boards=tuple(sorted(counts.items())), model=s.model)
        )
    return out
