"""The lab: many simulated BMCs served by one aiohttp server in one process.

One aiohttp application serves every BMC; each BMC has its own listening
socket (its own port, or its own 127.x.y.z address) and, over HTTPS, its own
certificate. A request finds its BMC by the local address of the socket it
arrived on. A control application on a separate port exposes counters and
fault injection under ``/lab/v1``. With ``LabConfig.hosts`` the lab also
serves the host behind each BMC over SSH (``fleetctl_lab.hosts.HostLab``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import random
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import BodyPartReader, HttpVersion11, web

from fleetctl.errors import FleetError, InputError
from fleetctl_lab.bmc.certs import ensure_cert, server_context, wrong_context
from fleetctl_lab.bmc.expand import expanded
from fleetctl_lab.bmc.resources import dispatch, error_body, session_doc
from fleetctl_lab.bmc.spec import LabConfig, LabServerSpec
from fleetctl_lab.bmc.state import FAULTS, PER_REQUEST_FAULTS, SESSIONS_SHOWN_UNDER, LabActionError, SimBMC
from fleetctl_lab.threads import LoopProxy, serve_in_thread

log = logging.getLogger("fleetctl_lab")

_OPEN_PATHS = {"/redfish", "/redfish/v1", "/redfish/v1/odata", "/redfish/v1/$metadata"}
_SESSIONS = "/redfish/v1/SessionService/Sessions"
_HDRS = {"OData-Version": "4.0", "Cache-Control": "no-cache"}


def _dumps(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


@dataclass(slots=True)
class Rendered:
    """A GET answer of one BMC, as it went out: served again while the BMC is at ``version`` and until ``until``."""

    version: int
    until: float
    body: bytes
    etag: str
    headers: dict[str, str]  # every header the handler sets, ETag and Content-Type included

    def response(self, if_none_match: str) -> web.Response:
        # An ETag on every document, and 304 to an If-None-Match that names it, as iLO 5, iDRAC and bmcweb do
        # (the sweep's conditional GETs, issue 24).
        if self.etag in if_none_match:
            return web.Response(status=304, headers={k: v for k, v in self.headers.items() if k != "Content-Type"})
        return web.Response(status=200, body=self.body, headers=self.headers)


class BMCLab:
    """Every lab BMC in one process.

    Usage::

        lab = BMCLab(specs, LabConfig(power_transition_s=0.2))
        await lab.start()
        url = lab.url_of("lab-mncore-00000")
        lab.set_fault("lab-mncore-00000", latency_ms=50)
        lab.counters("lab-mncore-00000")["power_on"]
        await lab.stop()

    ``set_fault``/``counters`` must be called on the lab's event loop thread
    (use ``run_lab_in_thread`` from other threads).
    """

    def __init__(self, specs: Iterable[LabServerSpec], config: LabConfig | None = None) -> None:
        self.config = config or LabConfig()
        self.bmcs: dict[str, SimBMC] = {}
        for i, spec in enumerate(specs):
            if spec.name in self.bmcs:
                raise InputError(f"duplicate lab server name {spec.name!r}")
            self.bmcs[spec.name] = SimBMC(spec, self.config, index=i)
        self._by_addr: dict[tuple[str, int], SimBMC] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._runner: web.ServerRunner | None = None
        self._control_runner: web.AppRunner | None = None
        self.control_url = ""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.state_dir: Path | None = None
        self._rng = random.Random(7)
        self._stopping = False
        self.started_at: float | None = None
        self.start_seconds: float | None = None
        self.hosts: Any = None  # fleetctl_lab.hosts.HostLab with config.hosts
        # Redfish requests served by every BMC together (GET /lab/v1 "requests"): the bench divides the
        # daemon's CPU by it, without reading 10,000 per-BMC counters
        self.requests = 0
        # Pre-rendered GET answers by (BMC index, path and query); their bodies' bytes against the budget
        self._rendered: dict[tuple[int, str], Rendered] = {}
        self._rendered_bytes = 0
        self._render_budget = int(self.config.render_cache_mb * 1024 * 1024)
        self.render_hits = 0

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        """Bind every BMC and the control port. Raises FleetError if a bind fails."""
        t0 = time.perf_counter()
        cfg = self.config
        if cfg.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fleetctl-lab-")
            self.state_dir = Path(self._tmp.name)
        else:
            self.state_dir = Path(cfg.state_dir)
            self.state_dir.mkdir(parents=True, exist_ok=True)
        plan = self._address_plan()
        contexts: dict[str, Any] = {}
        if cfg.tls:
            loop = asyncio.get_running_loop()
            # Key generation and context loading are CPU work; keep them off
            # the loop in one worker so a threaded caller's loop stays responsive.
            contexts = await loop.run_in_executor(None, self._make_contexts, plan)
        loop = asyncio.get_running_loop()

        def make_request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
            # Firmware images come as multipart uploads: 8 MB, not the 1 MB default.
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=8 * 1024 * 1024)

        # aiohttp's low-level server: every request goes to one handler, without an Application's
        # router (a regex match per request for a single catch-all route) and middleware chain.
        server = web.Server(self._serve, request_factory=make_request, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False)
        await self._runner.setup()
        scheme = "https" if cfg.tls else "http"
        try:
            for name, (host, port) in plan.items():
                srv = await loop.create_server(
                    self._runner.server,  # type: ignore[arg-type]
                    host,
                    port,
                    ssl=contexts.get(name),
                    backlog=cfg.backlog,
                    reuse_address=True,
                )
                self._servers.append(srv)
                real_port = srv.sockets[0].getsockname()[1]
                bmc = self.bmcs[name]
                bmc.url = f"{scheme}://{host}:{real_port}"
                self._by_addr[(host, real_port)] = bmc
        except OSError as e:
            await self.stop()
            raise FleetError(f"lab: cannot bind a BMC socket ({e}); is another lab running on these addresses?") from e
        if cfg.hosts:
            from fleetctl_lab.hosts import HostLab

            self.hosts = HostLab(self)
            try:
                await self.hosts.start()
            except BaseException:
                await self.stop()
                raise
        capp = web.Application()
        capp.add_routes(self._control_routes())
        self._control_runner = web.AppRunner(capp, handle_signals=False, access_log=None)
        await self._control_runner.setup()
        site = web.TCPSite(self._control_runner, cfg.control_host, cfg.control_port)
        await site.start()
        cport = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.control_url = f"http://{cfg.control_host}:{cport}"
        self.started_at = time.time()
        self.start_seconds = time.perf_counter() - t0
        log.info("lab: %d BMCs up in %.2fs, control %s", len(self.bmcs), self.start_seconds, self.control_url)

    async def stop(self) -> None:
        self._stopping = True
        if self.hosts is not None:
            await self.hosts.stop()
        for srv in self._servers:
            srv.close()
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 0.5)
        self._servers.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._control_runner is not None:
            await self._control_runner.cleanup()
            self._control_runner = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def __aenter__(self) -> BMCLab:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _address_plan(self) -> dict[str, tuple[str, int]]:
        cfg = self.config
        plan: dict[str, tuple[str, int]] = {}
        base = ipaddress.IPv4Address(cfg.base_address)
        for i, (name, bmc) in enumerate(self.bmcs.items()):
            if bmc.spec.address:
                host, _, p = bmc.spec.address.partition(":")
                port = int(p) if p else (cfg.port if cfg.address_mode == "address" else 0)
            elif cfg.address_mode == "address":
                host, port = str(base + i), cfg.port
            else:
                host, port = cfg.host, (cfg.base_port + i if cfg.base_port else 0)
            if not ipaddress.ip_address(host).is_loopback:
                raise InputError(f"lab BMC {name}: address {host} is not in 127.0.0.0/8")
            plan[name] = (host, port)
        return plan

    def _make_contexts(self, plan: dict[str, tuple[str, int]]) -> dict[str, Any]:
        assert self.state_dir is not None
        out = {}
        for name, (host, _port) in plan.items():
            pem, fp = ensure_cert(self.state_dir, name, host)
            self.bmcs[name].fingerprint = fp
            ctx = server_context(pem)
            ctx.sni_callback = self._cert_switch(self.bmcs[name], host)
            out[name] = ctx
        return out

    @staticmethod
    def _cert_switch(bmc: SimBMC, host: str) -> Any:
        """The ``wrong_cert`` fault: a TLS callback that, while the fault is on, hands the
        handshake a context with another certificate. Python calls it for every
        ClientHello, with server_name None when the client sent no SNI (an IP address).
        """

        def switch(sslobj: Any, _server_name: str | None, _ctx: Any) -> None:
            if not bmc.faults.get("wrong_cert"):
                return None
            try:
                if bmc.wrong_cert is None:
                    bmc.wrong_cert = wrong_context(bmc.spec.name, host)
                    log.info("lab: %s serves a wrong certificate %s", bmc.spec.name, bmc.wrong_cert[1])
                sslobj.context = bmc.wrong_cert[0]
                bmc.counters.faults_served += 1
            except Exception:  # an exception here would only abort the handshake, unexplained
                log.exception("lab: %s: cannot serve the wrong certificate", bmc.spec.name)
            return None

        return switch

    # --- public API --------------------------------------------------------------

    def names(self) -> list[str]:
        return list(self.bmcs)

    def bmc(self, name: str) -> SimBMC:
        try:
            return self.bmcs[name]
        except KeyError:
            raise InputError(f"no lab BMC named {name!r}") from None

    def url_of(self, name: str) -> str:
        """Base URL of a BMC (``https://127.0.0.1:40123``), no trailing slash."""
        return self.bmc(name).url

    def fingerprint_of(self, name: str) -> str:
        """``sha256:<hex>`` of the BMC certificate's DER ('' without TLS)."""
        return self.bmc(name).fingerprint

    def set_fault(self, name: str, **faults: Any) -> dict[str, Any]:
        """Merge faults into a BMC (see ``FAULTS``); None/False clears one."""
        try:
            return self.bmc(name).set_fault(**faults)
        except ValueError as e:
            raise InputError(str(e)) from e

    def clear_faults(self, name: str) -> None:
        self.bmc(name).clear_faults()

    def counters(self, name: str) -> dict[str, Any]:
        """Counters and timeline of one BMC (see ``SimBMC.counters_dict``)."""
        return self.bmc(name).counters_dict()

    def host(self, name: str) -> dict[str, Any]:
        """The host behind a BMC: its phase (off / installing / booting / up / no-os /
        firmware), ``up_since``, install and boot ids (see ``fleetctl_lab.hosts``);
        with SSH served, its address and login figures, and its files brought up to date.
        """
        info = self.bmc(name).host_info()
        return self.hosts.observe(name, info) if self.hosts is not None else info

    def status(self) -> dict[str, Any]:
        """What lab.json holds: no credentials."""
        out = {
            "control_url": self.control_url,
            "tls": self.config.tls,
            "started_at": self.started_at,
            "start_seconds": self.start_seconds,
            "count": len(self.bmcs),
            "servers": {
                n: {"url": b.url, "fingerprint": b.fingerprint, "flavour": b.spec.flavour, "system_id": b.sys_id}
                for n, b in self.bmcs.items()
            },
        }
        if self.hosts is not None:
            out["hosts"] = self.hosts.status()
        return out

    # --- the Redfish side -----------------------------------------------------------

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        expect = request.headers.get("Expect")
        if expect is not None and request.version == HttpVersion11:
            # What an Application's default expect handler does, before it reads a body.
            if expect.lower() != "100-continue":
                raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0
        return await self._handle(request)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        tr = request.transport
        sock = tr.get_extra_info("sockname") if tr is not None else None
        bmc = self._by_addr.get((sock[0], sock[1])) if sock else None
        if bmc is None:
            return web.Response(status=421, text="unknown lab address")
        bmc.counters.requests += 1
        self.requests += 1
        faults = bmc.faults
        if faults:
            early = await self._apply_faults(bmc, request, faults)
            if early is not None:
                return early
        path = request.path
        if len(path) > 1 and path.endswith("/"):
            path = path.rstrip("/")
        method = request.method
        now = time.time()
        if method == "POST" and path == _SESSIONS:
            return await self._login(bmc, request, now)
        if path not in _OPEN_PATHS:
            token = request.headers.get("X-Auth-Token")
            if token is not None:
                if bmc.session_for(token, now) is None:
                    return self._unauthorized(bmc)
            else:
                auth = request.headers.get("Authorization", "")
                if not hmac.compare_digest(auth.encode(), bmc.basic_ok.encode()):
                    return self._unauthorized(bmc)
        elif path == "/redfish":
            return self._json(200, {"v1": "/redfish/v1/"}, {})
        cacheable = (method == "GET" and self._render_budget > 0 and not path.startswith(SESSIONS_SHOWN_UNDER)
                     and not (faults and not PER_REQUEST_FAULTS.isdisjoint(faults)))  # fmt: skip
        if cacheable:
            key = (bmc.index, request.path_qs)
            kept = self._rendered.get(key)
            if kept is not None and kept.version == bmc.version and now < kept.until:
                self.render_hits += 1
                return kept.response(request.headers.get("If-None-Match", ""))
            bmc.rendered_until = math.inf
        body: Any = None
        if method == "POST" and request.content_type == "multipart/form-data":
            # A firmware push (MultipartHttpPushUri): the parts by name, as (file name, bytes).
            parts: dict[str, tuple[str | None, bytes]] = {}
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if isinstance(part, BodyPartReader) and part.name:
                    parts[part.name] = (part.filename, bytes(await part.read()))
            body = {"multipart": parts}
        elif method in ("POST", "PATCH", "PUT"):
            raw = await request.read()
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._json(400, error_body(bmc.flavour.error_code, 400, "Base.1.18.MalformedJSON",
                                                      "The request body submitted was malformed JSON and could not be parsed."), {})
        status, doc, hdrs = dispatch(bmc, "GET" if method == "HEAD" else method, path, body)
        if method == "GET" and status == 200 and "only" in request.query and bmc.flavour.only_query:
            status, doc, hdrs = _only(bmc, request, doc, hdrs)
        if method == "GET" and status == 200 and bmc.flavour.expand and isinstance(doc, dict) and "$expand" in request.query:
            doc = expanded(bmc, doc, request.query.get("$expand"))
        if method == "GET" and status == 200 and faults and isinstance(doc, dict) and "Members" in doc:
            doc = _paged(bmc, doc, path, request.query.get("$skip"))
        if method == "HEAD":
            return web.Response(status=status, headers=_HDRS)
        if method == "GET" and status == 200 and doc is not None:
            raw = _dumps(doc).encode()
            etag = f'"{hashlib.blake2b(raw, digest_size=8).hexdigest()}"'
            headers = {**_HDRS, **hdrs, "ETag": etag, "Content-Type": "application/json; charset=utf-8"}
            # Rendering settled the BMC (a power phase that ended bumps its version): kept at the version it shows.
            answer = Rendered(bmc.version, min(bmc.stable_until(now), bmc.rendered_until), raw, etag, headers)
            if cacheable:
                self._keep(key, answer)
            return answer.response(request.headers.get("If-None-Match", ""))
        return self._json(status, doc, hdrs)

    def _keep(self, key: tuple[int, str], answer: Rendered) -> None:
        """Keep a rendered answer within the budget: past it, answers not kept yet are rendered every time
        (a fleet read in the same order every sweep would evict each answer before its next read)."""
        old = self._rendered.get(key)
        grow = len(answer.body) - (len(old.body) if old is not None else 0)
        if self._rendered_bytes + grow > self._render_budget:
            return
        self._rendered[key] = answer
        self._rendered_bytes += grow

    def render_cache(self) -> dict[str, int]:
        """The pre-rendered answers: how many are kept, their bodies' bytes, and the GETs they answered."""
        return {"entries": len(self._rendered), "bytes": self._rendered_bytes, "hits": self.render_hits}

    async def _apply_faults(self, bmc: SimBMC, request: web.BaseRequest, faults: dict[str, Any]) -> web.StreamResponse | None:
        lat = faults.get("latency_ms")
        if lat:
            await asyncio.sleep(float(lat) / 1000.0)
        if faults.get("hang"):
            bmc.counters.faults_served += 1
            # Until the fault is cleared, or the client gave up (aiohttp does not cancel a handler whose
            # client left): a run over many hung BMCs must not leave a poller per abandoned request.
            while bmc.faults.get("hang") and not self._stopping:
                tr = request.transport
                if tr is None or tr.is_closing():
                    raise asyncio.CancelledError
                await asyncio.sleep(0.05)
        drop = faults.get("drop")
        if drop and (drop is True or self._rng.random() < float(drop)):
            bmc.counters.faults_served += 1
            tr = request.transport
            if tr is not None:
                tr.abort()
            raise asyncio.CancelledError  # aiohttp drops the request without writing
        rate = faults.get("error_rate")
        if rate and self._rng.random() < float(rate):
            bmc.counters.faults_served += 1
            status = self._rng.choice((500, 503))
            mid = "Base.1.18.InternalError" if status == 500 else "Base.1.18.ServiceTemporarilyUnavailable"
            fault_doc = error_body(bmc.flavour.error_code, status, mid, "The request failed due to an internal service error (injected).")
            return self._json(status, fault_doc, {"Retry-After": "1"} if status == 503 else {})
        return None

    async def _login(self, bmc: SimBMC, request: web.BaseRequest, now: float) -> web.StreamResponse:
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or "UserName" not in body or "Password" not in body:
            return self._json(400, error_body(bmc.flavour.error_code, 400, "Base.1.18.PropertyMissing",
                                              "The properties UserName and Password are required to create a session.", ["UserName"]), {})
        if not bmc.check_credentials(str(body["UserName"]), str(body["Password"])):
            bmc.counters.auth_failures += 1
            return self._unauthorized(bmc)
        try:
            s = bmc.open_session(str(body["UserName"]), now)
        except LabActionError as e:
            return self._json(e.status, error_body(bmc.flavour.error_code, e.status, e.message_id, e.message), {})
        return self._json(201, session_doc(s), {"X-Auth-Token": s.token, "Location": f"{_SESSIONS}/{s.id}"})

    def _unauthorized(self, bmc: SimBMC) -> web.Response:
        bmc.counters.auth_failures += 1
        doc = error_body(bmc.flavour.error_code, 401, "Base.1.18.NoValidSession",
                         "There is no valid session established with the implementation.")
        return self._json(401, doc, {"WWW-Authenticate": 'Basic realm="lab"'})

    @staticmethod
    def _json(status: int, doc: Any, hdrs: dict[str, str]) -> web.Response:
        headers = {**_HDRS, **hdrs}
        if doc is None:
            return web.Response(status=status, headers=headers)
        return web.Response(status=status, text=_dumps(doc), content_type="application/json", headers=headers)

    # --- the control side ----------------------------------------------------------

    def _control_routes(self) -> list[web.RouteDef]:
        def bmc_or_404(request: web.Request) -> SimBMC:
            name = request.match_info["name"]
            if name not in self.bmcs:
                raise web.HTTPNotFound(text=_dumps({"error": f"no lab BMC named {name}"}), content_type="application/json")
            return self.bmcs[name]

        async def root(_: web.Request) -> web.Response:
            return web.json_response({"count": len(self.bmcs), "control_url": self.control_url, "faults": FAULTS,
                                      "started_at": self.started_at, "start_seconds": self.start_seconds,
                                      "requests": self.requests, "render_cache": self.render_cache()})  # fmt: skip

        async def bmcs(_: web.Request) -> web.Response:
            return web.json_response(self.status()["servers"])

        async def one(request: web.Request) -> web.Response:
            b = bmc_or_404(request)
            return web.json_response({"url": b.url, "fingerprint": b.fingerprint, **b.counters_dict(),
                                      "host": self.host(b.spec.name)})  # fmt: skip

        async def hosts(_: web.Request) -> web.Response:
            return web.json_response({n: self.host(n) for n in self.bmcs})

        async def host_one(request: web.Request) -> web.Response:
            return web.json_response(self.host(bmc_or_404(request).spec.name))

        async def faults_get(request: web.Request) -> web.Response:
            return web.json_response(bmc_or_404(request).faults)

        async def faults_patch(request: web.Request) -> web.Response:
            b = bmc_or_404(request)
            try:
                body = await request.json()
                return web.json_response(b.set_fault(**body))
            except (ValueError, TypeError) as e:
                return web.json_response({"error": str(e)}, status=400)

        async def faults_delete(request: web.Request) -> web.Response:
            bmc_or_404(request).clear_faults()
            return web.Response(status=204)

        async def faults_bulk(request: web.Request) -> web.Response:
            # {"names": [...] | "*", "faults": {...}}; {"faults": null} clears.
            try:
                body = await request.json()
                names = list(self.bmcs) if body.get("names", "*") == "*" else list(body["names"])
                unknown = [n for n in names if n not in self.bmcs]
                if unknown:
                    return web.json_response({"error": f"unknown BMCs: {unknown[:5]}"}, status=404)
                for n in names:
                    if body.get("faults") is None:
                        self.bmcs[n].clear_faults()
                    else:
                        self.bmcs[n].set_fault(**body["faults"])
                return web.json_response({"count": len(names)})
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                return web.json_response({"error": str(e)}, status=400)

        return [
            web.get("/lab/v1", root),
            web.get("/lab/v1/bmcs", bmcs),
            web.get("/lab/v1/bmcs/{name}", one),
            web.get("/lab/v1/bmcs/{name}/counters", one),
            web.get("/lab/v1/bmcs/{name}/faults", faults_get),
            web.patch("/lab/v1/bmcs/{name}/faults", faults_patch),
            web.put("/lab/v1/bmcs/{name}/faults", faults_patch),
            web.delete("/lab/v1/bmcs/{name}/faults", faults_delete),
            web.post("/lab/v1/faults", faults_bulk),
            web.get("/lab/v1/hosts", hosts),
            web.get("/lab/v1/hosts/{name}", host_one),
        ]


# --- running in a thread (tests) ---------------------------------------------------------


class ThreadedLab(LoopProxy):
    """A lab running in its own thread and event loop; thread-safe proxies."""

    @property
    def state_dir(self) -> Path | None:
        return self.lab.state_dir

    def names(self) -> list[str]:
        return self.lab.names()

    def url_of(self, name: str) -> str:
        return self.lab.url_of(name)

    def fingerprint_of(self, name: str) -> str:
        return self.lab.fingerprint_of(name)

    def set_fault(self, name: str, **faults: Any) -> dict[str, Any]:
        return self.call(self.lab.set_fault, name, **faults)

    def clear_faults(self, name: str) -> None:
        self.call(self.lab.clear_faults, name)

    def counters(self, name: str) -> dict[str, Any]:
        return self.call(self.lab.counters, name)

    def host(self, name: str) -> dict[str, Any]:
        return self.call(self.lab.host, name)


@contextlib.contextmanager
def run_lab_in_thread(specs: Iterable[LabServerSpec], config: LabConfig | None = None, *, timeout: float = 120.0) -> Iterator[ThreadedLab]:
    """Start a lab in a background thread; stop it when the block ends.

    ``with run_lab_in_thread(specs, LabConfig(power_transition_s=0.1)) as lab:``
    """
    lab = BMCLab(specs, config)
    with serve_in_thread(lab, name="fleetctl-lab", timeout=timeout) as loop:
        yield ThreadedLab(lab, loop)


PAGE = 2  # members per page while a paging fault is set


def _pages_here(fault: Any, path: str) -> bool:
    """Whether a paging fault (True, or a collection's name such as 'Processors') applies to this collection."""
    if fault is True:
        return True
    return isinstance(fault, str) and bool(fault) and path.rstrip("/").rsplit("/", 1)[-1] == fault


def _paged(bmc: SimBMC, doc: dict[str, Any], path: str, skip_arg: str | None) -> dict[str, Any]:
    """The ``nextlink_loop`` and ``nextlink_forever`` faults: a collection served a page at a time.

    Loop: pages of ``PAGE`` members follow ``$skip``, and the last page's ``Members@odata.nextLink``
    points back to the first page a client followed (``?$skip=PAGE``), so a client that follows
    links without remembering them never ends. Forever: every page links a new, larger ``$skip``
    and repeats the members cyclically, as a BMC that ignores ``$skip`` but counts it does.
    """
    loop, forever = bmc.faults.get("nextlink_loop"), bmc.faults.get("nextlink_forever")
    mode = "forever" if _pages_here(forever, path) else "loop" if _pages_here(loop, path) else None
    if mode is None:
        return doc
    try:
        skip = max(0, int(skip_arg or 0))
    except ValueError:
        skip = 0
    members = list(doc.get("Members") or [])
    n = len(members)
    if mode == "forever":
        page = [members[(skip + i) % n] for i in range(PAGE)] if n else []
        nxt = skip + PAGE
    else:
        page = members[skip : skip + PAGE]
        nxt = skip + PAGE if skip + PAGE < n else PAGE  # the end links back to the first page followed
    bmc.counters.faults_served += 1
    return {**doc, "Members": page, "Members@odata.count": n, "Members@odata.nextLink": f"{path}?$skip={nxt}"}


def _only(bmc: SimBMC, request: web.BaseRequest, doc: Any, hdrs: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
    """``GET {collection}?only`` (DSP0266, ``ProtocolFeaturesSupported.OnlyMemberQuery``), where the dialect offers it.

    A collection of exactly one member answers that member's document (the member's own answer: the same bytes,
    so the same ETag); of none or several, the collection as usual. As the specification asks: 400
    QueryNotSupportedOnResource on a resource that is not a collection, 400 QueryCombinationInvalid with another
    query parameter. ``Flavour.only_query`` "ignored" answers as if no query were asked, "refused" 501.
    """
    mode = bmc.flavour.only_query
    if mode == "ignored":
        return 200, doc, hdrs
    code = bmc.flavour.error_code
    if mode == "refused":
        return 501, error_body(code, 501, "Base.1.18.QueryNotSupported", "Querying is not supported by the implementation."), {}
    if len(request.query) > 1:
        return 400, error_body(code, 400, "Base.1.18.QueryCombinationInvalid",
                               "Two or more query parameters in the request cannot be used together."), {}  # fmt: skip
    if not isinstance(doc, dict) or not isinstance(doc.get("Members"), list):
        return 400, error_body(code, 400, "Base.1.18.QueryNotSupportedOnResource",
                               "Querying is not supported on the requested resource."), {}  # fmt: skip
    members = doc["Members"]
    link = members[0].get("@odata.id") if len(members) == 1 and isinstance(members[0], dict) else None
    if not isinstance(link, str):
        return 200, doc, hdrs
    status, member, mhdrs = dispatch(bmc, "GET", link.rstrip("/"), None)
    return (status, member, mhdrs) if status == 200 else (200, doc, hdrs)
