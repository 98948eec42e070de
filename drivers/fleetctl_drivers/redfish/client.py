"""Redfish transport: one BMC, one login session, a few requests in flight.

Why aiohttp and not the DMTF ``redfish`` library (or ``requests``): a sweep
reads thousands of BMCs, each answering in tens of milliseconds; a
synchronous client spends that time blocked, and a thread per BMC costs more
than the work itself. With asyncio one process keeps every BMC busy at once.
The DMTF ``redfish`` library stays the reference baseline for the benchmark
(and a second opinion when a BMC behaves oddly), not the transport. Measured
on this 2-core machine (1,000 BMCs served by an aiohttp process, 13 requests
each): the driver spends ~1.06x the CPU per request of bare aiohttp doing the
same requests (orjson for parsing, no per-host limiter, no cookie jar).

Design points:
- one ``aiohttp.ClientSession`` per fleet operation (:class:`FleetSession`),
  shared by every BMC; aiohttp's own per-host limiter is switched off
  (``limit=0``) because at thousands of hosts it costs more than it saves;
  each BMC gets its own ``asyncio.Semaphore(max_in_flight)`` instead;
- login through SessionService (X-Auth-Token), one session per BMC reused for
  every request, DELETE of the session at close (retried once); a session
  whose logout still failed is parked (:data:`_PARKED`): the next client of
  that BMC in this process reuses it rather than opening another, and
  :meth:`FleetSession.close` tries its logout once more, so a flaky run does
  not leave sessions open on BMCs that have only a few; HTTP basic auth only when the
  BMC offers no sessions (no SessionService, or the login POST answers
  401/404/405/501, as sushy-tools does);
- TLS verified by default; a pinned certificate (SHA-256) replaces CA
  verification (``aiohttp.Fingerprint``); with trust-on-first-use a
  self-signed certificate is pinned on first contact and exposed as
  :attr:`RedfishClient.fingerprint` for the caller to record; a mismatch is
  :class:`~fleetctl.errors.TLSMismatch` naming both fingerprints;
- a timeout on every request, bounded retries with exponential backoff on
  5xx and dropped connections (actions, which are not idempotent, are retried
  only on 503 and on failures to connect, where the BMC did not act);
- 202 + task monitor followed to the end with a progress callback;
- Redfish error bodies (``@Message.ExtendedInfo``) decoded into the message
  the operator sees;
- bounds on what a BMC can make us read (:class:`~.quirks.Quirks`
  ``max_body_bytes``, ``max_collection_pages``, ``max_collection_members``,
  ``max_bytes_per_bmc``): a body is read in chunks and dropped past its bound,
  a collection whose next link comes back to a page already read ends there,
  and every read yields to the event loop, answers remembered by ``read_once``
  included, so a deadline or a Ctrl-C always lands (:class:`AnswerOutOfBounds`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import random
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from fleetctl.config import BMC_AUTH_MODES, bmc_auth
from fleetctl.errors import AuthError, BMCError, DriverError, InputError, Timeout, TLSMismatch
from fleetctl.interfaces.bmc import BMCTarget, ProgressCallback, TaskProgress, TaskResult

from .quirks import Quirks
from .session_log import session_log

try:  # orjson parses BMC JSON ~3x faster than json; optional
    import orjson as _json

    def _loads(data: bytes) -> Any:
        return _json.loads(data)

    def _dumps(obj: Any) -> bytes:
        return _json.dumps(obj)

except ImportError:  # pragma: no cover - orjson is optional
    import json as _stdjson

    def _loads(data: bytes) -> Any:
        return _stdjson.loads(data)

    def _dumps(obj: Any) -> bytes:
        return _stdjson.dumps(obj).encode()


log = logging.getLogger(__name__)

ROOT = "/redfish/v1"
RETRY_STATUSES = frozenset({500, 502, 503, 504})
# A login POST answering one of these means "no sessions here": use basic auth.
NO_SESSION_STATUSES = frozenset({401, 404, 405, 501})
TASK_DONE_STATES = frozenset({"Completed", "Exception", "Killed", "Cancelled", "Interrupted", "Suspended"})
TASK_OK_STATES = frozenset({"Completed"})


class RedfishError(BMCError):
    """A BMC answered a request with an HTTP error (or an error body).

    Attributes:
        status: the HTTP status (0 when the body said error on a 2xx).
        method, uri: the request.
        message_ids: the ``MessageId`` of each ``@Message.ExtendedInfo`` entry.
    """

    def __init__(self, message: str, *, status: int, method: str, uri: str, message_ids: list[str]) -> None:
        super().__init__(message)
        self.status = status
        self.method = method
        self.uri = uri
        self.message_ids = message_ids


class AnswerOutOfBounds(BMCError):
    """A BMC's answer went past a bound fleetctl keeps on what one BMC may make it read.

    A collection whose next link loops back to a page already read, more pages or
    members than the bounds allow, a body too large, or more bytes in all than one
    BMC may send (the bounds are :class:`~.quirks.Quirks` fields). The message names
    the BMC, the URI and the bound; the read ends there, nothing is retried.

    Attributes:
        uri: the collection (or the request) that went past the bound.
        bound: the Quirks field that bounds it, or ``"page loop"``.
    """

    def __init__(self, message: str, *, uri: str, bound: str) -> None:
        super().__init__(message)
        self.uri = uri
        self.bound = bound


#: How a client authenticates (``RedfishClient(auth=...)``, ``$FLEETCTL_BMC_AUTH``): the core checks the variable
#: against the same modes before any BMC is contacted (``fleetctl.config.bmc_auth``).
AUTH_MODES = BMC_AUTH_MODES


def auth_choice(auth: str | None) -> str:
    """``auth``, else ``$FLEETCTL_BMC_AUTH`` (read as the core reads it), else ``"session"``; anything else is a
    :class:`DriverError`."""
    if auth is None:
        try:
            return bmc_auth() or "session"
        except InputError as e:
            raise DriverError(str(e)) from e
    choice = auth.strip().lower()
    if choice not in AUTH_MODES:
        raise DriverError(f"BMC authentication {choice!r}: not one of {', '.join(AUTH_MODES)} (FLEETCTL_BMC_AUTH)")
    return choice


def normalise_fingerprint(fp: str) -> str:
    """``AB:CD:...``, ``abcd...`` or ``sha256:abcd...`` -> ``abcd...`` (lower-case hex, no separators)."""
    fp = fp.strip()
    if fp.lower().startswith("sha256:"):
        fp = fp[7:]
    return fp.replace(":", "").replace(" ", "").lower()


def format_fingerprint(fp: str) -> str:
    """Colon-separated upper-case hex, as openssl prints it."""
    h = normalise_fingerprint(fp).upper()
    return ":".join(h[i : i + 2] for i in range(0, len(h), 2))


def decode_error(body: Any) -> tuple[str | None, list[str]]:
    """The operator's message and the message ids from a Redfish error body.

    ``{"error": {"code": ..., "message": ..., "@Message.ExtendedInfo": [...]}}``;
    some BMCs (HPE iLO 5) put only ``MessageId`` and ``MessageArgs`` in the
    extended info, others a ``Message`` and a ``Resolution``.
    """
    if not isinstance(body, dict):
        return None, []
    err = body.get("error")
    if not isinstance(err, dict):
        # some BMCs answer an action with a bare @Message.ExtendedInfo
        if "@Message.ExtendedInfo" in body:
            err = body
        else:
            return None, []
    parts: list[str] = []
    ids: list[str] = []
    infos = err.get("@Message.ExtendedInfo") or []
    if isinstance(infos, dict):
        infos = [infos]
    for info in infos:
        if not isinstance(info, dict):
            continue
        mid = info.get("MessageId")
        if mid:
            ids.append(str(mid))
        text = info.get("Message")
        if not text:
            args = info.get("MessageArgs") or []
            text = f"{mid}" + (f" ({', '.join(map(str, args))})" if args else "")
        elif mid:
            text = f"{text} [{mid}]"
        resolution = info.get("Resolution")
        if resolution and resolution.lower() not in ("none", "none."):
            text = f"{text}; resolution: {resolution}"
        parts.append(text)
    if not parts:
        msg = err.get("message") or err.get("code")
        if msg:
            parts.append(str(msg))
    return ("; ".join(parts) or None), ids


def is_error_body(body: Any) -> bool:
    """True for ``{"error": {...}}``: what some BMCs answer in place of a member."""
    return isinstance(body, dict) and isinstance(body.get("error"), dict) and "@odata.id" not in body


@dataclass
class _Parked:
    """A session whose logout failed: reused by the next client of its BMC, or logged out later."""

    url: str  # the session's full URL
    token: str
    ssl: Any  # the ssl argument of the requests that opened it (pin, CA verification, or none)
    fingerprint: str | None


# Sessions whose logout failed, by (BMC base URL, user), in this process. Real BMCs have a handful of session
# slots (often 4 to 16): a flaky run that left one or two per BMC open ran them out. The next client of the
# BMC takes one back (RedfishClient.open), and FleetSession.close tries their logout once more.
_PARKED: dict[tuple[str, str], list[_Parked]] = {}


def parked_sessions() -> int:
    """How many sessions of this process wait for a logout or a reuse (for tests and diagnostics)."""
    return sum(len(v) for v in _PARKED.values())


# The CA-verifying contexts made so far, by CA file and what is on disk: {(cafile, stamps): context}.
_CONTEXTS: dict[tuple[str | None, tuple[int, ...]], ssl.SSLContext] = {}


def default_ssl_context(cafile: str | None = None) -> ssl.SSLContext:
    """``ssl.create_default_context(cafile=cafile)``, made once per process while the CA files stay as they are.

    Loading the system's CA store is 20-30 ms of CPU, and a sweep opens a :class:`FleetSession` per shard of
    1,000 servers (0.07-0.1 ms per BMC at 300 BMCs, where the bare aiohttp floor loads its contexts at import;
    issue 24). A CA file (or the system's store) changed on disk is loaded again: its modification time is part
    of the key. The context is never changed after it is made (requests pin with ``aiohttp.Fingerprint``).
    """
    if cafile:
        paths: list[str] = [cafile]
    else:
        dv = ssl.get_default_verify_paths()
        paths = [p for p in (dv.cafile, dv.capath) if p]
    stamps: list[int] = []
    for path in paths:
        try:
            stamps.append(os.stat(path).st_mtime_ns)
        except OSError:
            stamps.append(-1)
    key = (cafile, tuple(stamps))
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = ssl.create_default_context(cafile=cafile)
        if len(_CONTEXTS) >= 8:  # CA files rewritten again and again: keep the newest few
            _CONTEXTS.pop(next(iter(_CONTEXTS)))
        _CONTEXTS[key] = ctx
    return ctx


class FleetSession:
    """The HTTP machinery shared by every BMC of one fleet operation.

    ``async with FleetSession() as fs: RedfishDriver(target, fleet=fs)``. It holds
    one ``aiohttp.ClientSession`` with no per-host limit (each BMC client has its
    own semaphore) and a cap on open sockets overall.
    """

    def __init__(self, *, max_connections: int = 0, cafile: str | None = None) -> None:
        self._max_connections = max_connections
        self._cafile = cafile
        self.http: aiohttp.ClientSession | None = None
        self.ssl_context: ssl.SSLContext | None = None

    async def __aenter__(self) -> FleetSession:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self.http is not None:
            return
        self.ssl_context = default_ssl_context(self._cafile)
        connector = aiohttp.TCPConnector(
            limit=self._max_connections,  # 0 = no limit: our own per-BMC semaphores bound the load
            limit_per_host=0,
            ttl_dns_cache=300,
            ssl=self.ssl_context,
            enable_cleanup_closed=False,
            # A sweep never returns to a BMC it finished, and Python's TLS
            # transport holds a 256 KiB buffer per connection: idle ones are
            # closed quickly (bench/bmc.py, 1,000 BMCs: peak RSS 683 MB -> 294 MB).
            keepalive_timeout=2,
        )
        # json_serialize is unused (we send bytes); skip aiohttp's cookie jar work
        self.http = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=True,
        )

    async def close(self) -> None:
        if self.http is not None:
            try:
                await self.logout_parked()
            finally:
                await self.http.close()
                self.http = None

    async def logout_parked(self, timeout: float = 5.0) -> int:
        """Try once more to log out every parked session (:data:`_PARKED`); those that fail again stay parked.

        Returns how many were logged out.
        """
        if self.http is None or not _PARKED:
            return 0
        http = self.http
        todo = [(k, p) for k, ps in _PARKED.items() for p in ps]
        _PARKED.clear()

        async def one(key: tuple[str, str], p: _Parked) -> bool:
            try:
                async with http.delete(p.url, headers={"X-Auth-Token": p.token, "Connection": "close"}, ssl=p.ssl,
                                       timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False) as resp:  # fmt: skip
                    await resp.read()
                    if resp.status < 300 or resp.status in (401, 404):  # logged out, or already gone
                        session_log().closed(p.url)
                        return True
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                log.debug("%s: logout of a parked session failed again: %s", p.url, e)
            _PARKED.setdefault(key, []).append(p)
            return False

        return sum(await asyncio.gather(*(one(k, p) for k, p in todo)))


@dataclass
class Response:
    status: int
    headers: Any
    body: Any  # parsed JSON, or None


class RedfishClient:
    """The transport for one BMC. Use through :class:`RedfishDriver`.

    Args:
        target: the BMC.
        fleet: a shared :class:`FleetSession`; None makes a private one (closed
            with the client).
        backoff: base delay (s) of the exponential backoff between retries.
        task_poll_interval: seconds between task monitor polls when the BMC
            sends no Retry-After.
        read_once: remember every GET's answer for the life of this client, so
            that a health sweep, whose capabilities read the same System and
            Chassis, asks the BMC once per resource. Only for read-only work.
        expand: read collections with their members in the same answer
            (``$expand=.``) where the service root says it can
            (``ProtocolFeaturesSupported.ExpandQuery``): one request for a
            collection of 12 sensors instead of 13.
        auth: ``"session"`` (the default: log in through SessionService, log
            out at close) or ``"basic"``: HTTP Basic on every request, no
            session (2 requests fewer per BMC: the login POST and the logout
            DELETE), which the Redfish specification requires every service
            to accept. Chosen by the operator (``$FLEETCTL_BMC_AUTH``), never
            as a fallback: a BMC that refuses Basic (401, Basic switched off)
            is logged in to with a session as usual. None: ``$FLEETCTL_BMC_AUTH``,
            else ``"session"``.
    """

    def __init__(
        self,
        target: BMCTarget,
        *,
        fleet: FleetSession | None = None,
        backoff: float = 0.5,
        task_poll_interval: float = 2.0,
        read_once: bool = False,
        expand: bool = False,
        auth: str | None = None,
    ) -> None:
        self.target = target
        self.expand_collections = expand
        self.auth = auth_choice(auth)
        self._expand_query: str | None = None
        self._memo: dict[str, asyncio.Future[Any]] | None = {} if read_once else None
        parts = urlsplit(target.url if "://" in target.url else f"https://{target.url}")
        if parts.scheme not in ("http", "https"):
            raise DriverError(f"{target.name}: BMC URL {target.url!r} must be http:// or https://")
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self._fleet = fleet
        self._own_fleet = fleet is None
        self._sem = asyncio.Semaphore(max(1, target.max_in_flight))
        self._timeout = aiohttp.ClientTimeout(total=target.timeout, connect=min(10.0, target.timeout))
        self.backoff = backoff
        self.task_poll_interval = task_poll_interval
        self.fingerprint: str | None = normalise_fingerprint(target.fingerprint) if target.fingerprint else None
        self.fingerprint_first_seen = False  # True when pinned by trust-on-first-use now
        self._ssl: Any = None  # per-request ssl argument
        self._token: str | None = None
        self._session_uri: str | None = None
        self._basic: str | None = None
        self._auth_mode: str | None = None  # "session" | "basic"
        self._login_lock = asyncio.Lock()
        self._root: dict | None = None
        self.bounds = Quirks()  # the generic bounds until the vendor is known (set_bounds)
        self.bytes_read = 0  # of every answer to a GET, against bounds.max_bytes_per_bmc
        self.requests_sent = 0
        self.max_seen_in_flight = 0
        self._in_flight = 0
        # Conditional GETs (use_cache): the ReadingCache, what it kept for this BMC {path: (etag, JSON)}, the
        # documents answered with a new ETag {path: (etag, doc)} and the paths answered 304, saved at close.
        self._cache: Any = None
        self._kept: dict[str, tuple[str, bytes]] = {}
        self._fresh: dict[str, tuple[str, Any]] = {}
        self._not_modified: list[str] = []
        self.conditional_sent = 0  # GETs sent with If-None-Match
        self.not_modified = 0  # of which the BMC answered 304

    # ------------------------------------------------------------------ setup

    async def use_cache(self, cache: Any) -> None:
        """Ask ``If-None-Match`` for the documents ``cache`` (:class:`.cache.ReadingCache`) kept of this BMC.

        Loaded once (in a thread); what the BMC answers with an ETag is kept at :meth:`close`.
        """
        self._cache = cache
        self._kept = await cache.load(self._cache_key)

    @property
    def _cache_key(self) -> str:
        # The BMC and the system it was asked for: two systems behind one address are two entries.
        return f"{self.base}|{self.target.username}|{self.target.system_id or ''}"

    async def _get_body(self, uri: str) -> Any:
        """A GET's parsed body; conditional (``If-None-Match``) where the cache kept the document with an ETag."""
        if self._cache is None:
            return (await self._request("GET", uri)).body
        path = self._path(uri)
        kept = None if "?" in path else self._kept.get(path)  # a query ($expand) is never conditional
        if kept is None:
            resp = await self._request("GET", uri)
        else:
            self.conditional_sent += 1
            resp = await self._request("GET", uri, headers={"If-None-Match": kept[0]})
            if resp.status == 304:
                self.not_modified += 1
                self._not_modified.append(path)
                from .cache import parse_kept

                return parse_kept(kept[1])
        etag = resp.headers.get("ETag") if resp.headers is not None else None
        if etag and "?" not in path and resp.status == 200 and isinstance(resp.body, dict) and not is_error_body(resp.body):
            self._fresh[path] = (etag, resp.body)
        return resp.body

    async def _save_cache(self) -> None:
        if self._cache is None:
            return
        fresh, used = self._fresh, self._not_modified
        self._fresh, self._not_modified, self._kept = {}, [], {}
        try:
            await self._cache.save(self._cache_key, fresh, used)
        except Exception as e:  # noqa: BLE001 - a cache that cannot be written costs the next sweep a full read, no more
            log.warning("%s: the Redfish document cache %s was not written: %s", self.target.name, self._cache.path, e)

    def set_bounds(self, quirks: Quirks) -> None:
        """Take the bounds on what this BMC may make us read from its vendor's quirks."""
        self.bounds = quirks

    def limit_in_flight(self, n: int) -> None:
        """Lower the requests in flight (a vendor quirk); call before requests are queued."""
        self._sem = asyncio.Semaphore(max(1, n))

    @property
    def auth_mode(self) -> str | None:
        return self._auth_mode

    async def open(self) -> None:
        """Prepare TLS (pin or verify), read the service root and log in."""
        if self._fleet is None:
            self._fleet = FleetSession()
        await self._fleet.open()
        if self.scheme == "https":
            if self.fingerprint:
                self._ssl = aiohttp.Fingerprint(bytes.fromhex(self.fingerprint))
            else:
                self._ssl = None  # the connector's default context: CA verification
        else:
            self._ssl = False
        await self.service_root()
        await self._close_stale()
        if self.auth == "basic" and await self._basic_accepted():
            return
        if not await self._reuse_parked():
            await self._login()

    async def _basic_accepted(self) -> bool:
        """Use HTTP Basic (``auth="basic"``) if the BMC takes it; False (nothing kept) when it answers 401.

        The credentials are proven on the Systems collection, read through :meth:`get` (with ``read_once`` the
        driver's own read of it is this answer: no extra request).
        """
        root = await self.service_root()
        self._basic = self._basic_header()
        self._auth_mode = "basic"
        probe = (root.get("Systems") or {}).get("@odata.id") or f"{ROOT}/Systems"
        try:
            await self.get(probe)
        except AuthError as e:
            # NOTE: OpenBMC's bmcweb can switch Basic off (AccountService Oem.OpenBMC.AuthMethods.BasicAuth):
            # it answers 401, and a session login is the way in.
            log.debug("%s: HTTP Basic refused (%s); logging in with a session", self.target.name, e)
            self._basic = None
            self._auth_mode = None
            return False
        return True

    async def _close_stale(self) -> None:
        """Delete the sessions a killed fleetctl process left open on this BMC (:mod:`.session_log`).

        With HTTP Basic, so that a BMC out of session slots because of them is freed without needing one.
        A session the BMC no longer has (404) is settled too; any other answer leaves it for a later run
        (the BMC times it out meanwhile). A BMC's answer never fails the open: this is housekeeping before
        the real work (only the credential, which the login needs anyway, can raise here).
        """
        log_ = session_log()
        stale = log_.stale(self.base)
        if not stale:
            return
        basic = {"Authorization": self._basic_header()}
        for file, url in stale:
            try:
                await self._request("DELETE", url[len(self.base):], auth=False, relogin=False, retries=0, headers=basic)
            except RedfishError as e:
                if e.status != 404:
                    log.debug("%s: stale session %s not closed: %s", self.target.name, url, e)
                    continue
            except DriverError as e:
                log.debug("%s: stale session %s not closed: %s", self.target.name, url, e)
                continue
            log.info("%s: closed session %s left open by a killed fleetctl process", self.target.name, url)
            log_.settled(file, url)

    @property
    def _parked_key(self) -> tuple[str, str]:
        return (self.base, self.target.username)

    async def _reuse_parked(self) -> bool:
        """Take back a session of this BMC whose logout failed earlier in this process, if it is still valid."""
        while True:
            left = _PARKED.get(self._parked_key)
            if not left:
                return False
            p = left.pop()
            if not left:
                _PARKED.pop(self._parked_key, None)
            if p.fingerprint != self.fingerprint or not p.url.startswith(self.base + "/"):
                _PARKED.setdefault(self._parked_key, []).insert(0, p)
                return False
            path = p.url[len(self.base):]
            self._token, self._session_uri, self._auth_mode = p.token, path, "session"
            try:
                await self._request("GET", path, relogin=False)
            except DriverError as e:
                self._token = self._session_uri = self._auth_mode = None
                if isinstance(e, AuthError) or (isinstance(e, RedfishError) and e.status in (401, 404)):
                    log.debug("%s: parked session no longer valid: %s", self.target.name, e)
                    session_log().closed(p.url)
                    continue  # expired or dropped by the BMC: nothing left to log out
                # The BMC did not answer well: keep it parked, log in anew
                _PARKED.setdefault(self._parked_key, []).append(p)
                return False
            return True

    async def close(self) -> None:
        """Log out (DELETE the session, retried once) and release a private HTTP session.

        A logout that still fails parks the session (:data:`_PARKED`): reused by the
        next client of this BMC, or logged out when the fleet session closes.
        """
        try:
            if self._session_uri and self._token:
                url = self.base + self._session_uri
                try:
                    # The last request to this BMC: let the connection go with it.
                    await self._request("DELETE", self._session_uri, retries=1, relogin=False, headers={"Connection": "close"})
                except (AuthError, RedfishError) as e:
                    if not (isinstance(e, AuthError) or e.status == 404):  # 401/404: the session is gone already
                        self._park(e)
                    else:
                        session_log().closed(url)
                except DriverError as e:
                    self._park(e)
                else:
                    session_log().closed(url)
                    await self._logout_parked_here()
        finally:
            self._token = None
            self._session_uri = None
            await self._save_cache()
            if self._memo is not None:
                self._memo.clear()  # a sweep of 10,000 BMCs must not keep every answer it read
            if self._own_fleet and self._fleet is not None:
                await self._fleet.close()

    async def _logout_parked_here(self) -> None:
        """The BMC answers again: log out its other parked sessions (one attempt each; those failing stay parked)."""
        left = _PARKED.pop(self._parked_key, [])
        for p in left:
            if p.fingerprint != self.fingerprint or not p.url.startswith(self.base + "/"):
                _PARKED.setdefault(self._parked_key, []).append(p)
                continue
            try:
                await self._request("DELETE", p.url[len(self.base):], auth=False, retries=0, relogin=False,
                                    headers={"X-Auth-Token": p.token})  # fmt: skip
            except (AuthError, RedfishError) as e:
                if not (isinstance(e, AuthError) or e.status in (401, 404)):
                    _PARKED.setdefault(self._parked_key, []).append(p)
                    continue
            except DriverError:
                _PARKED.setdefault(self._parked_key, []).append(p)
                continue
            session_log().closed(p.url)

    def _park(self, error: Exception) -> None:
        log.debug("%s: logout failed, session parked for reuse: %s", self.target.name, error)
        assert self._session_uri is not None and self._token is not None
        ssl_arg = self._ssl if self._ssl is not None else True
        _PARKED.setdefault(self._parked_key, []).append(_Parked(self.base + self._session_uri, self._token, ssl_arg, self.fingerprint))

    async def service_root(self) -> dict:
        if self._root is None:
            try:
                self._root = (await self._request("GET", ROOT, auth=False, relogin=False)).body or {}
            except RedfishError as e:
                if e.status != 401:
                    raise
                # NOTE: some BMCs (sushy-tools with an auth file) want credentials even for
                # the service root, which the spec leaves open; use basic auth for it.
                self._basic = self._basic_header()
                self._root = (await self._request("GET", ROOT, auth=True, relogin=False, basic=True)).body or {}
        return self._root

    def _basic_header(self) -> str:
        raw = f"{self.target.username}:{self.target.secret()}".encode()
        return "Basic " + base64.b64encode(raw).decode()

    async def _login(self) -> None:
        async with self._login_lock:
            root = await self.service_root()
            sessions = (root.get("Links") or {}).get("Sessions", {}).get("@odata.id")
            if not sessions and "SessionService" in root:
                sessions = f"{ROOT}/SessionService/Sessions"
            if sessions:
                body = {"UserName": self.target.username, "Password": self.target.secret()}
                try:
                    # Not an action for the retry rule: a login lost with its connection is worth one more
                    # attempt (an orphan session at worst, which the BMC times out), where giving up would
                    # call a flaky BMC unreachable one sweep and fine the next.
                    resp = await self._request("POST", sessions, json=body, auth=False, relogin=False, action=False)
                except RedfishError as e:
                    if e.status in NO_SESSION_STATUSES:
                        log.debug("%s: no usable SessionService (%s), using basic auth", self.target.name, e.status)
                    else:
                        raise
                else:
                    token = resp.headers.get("X-Auth-Token")
                    if token:
                        self._token = token
                        loc = resp.headers.get("Location") or (resp.body or {}).get("@odata.id")
                        self._session_uri = self._path(loc) if loc else None
                        self._auth_mode = "session"
                        if self._session_uri:
                            session_log().opened(self.base + self._session_uri)
                        return
            self._basic = self._basic_header()
            self._auth_mode = "basic"
            # prove the credentials now rather than on the first real request
            probe = (root.get("Systems") or {}).get("@odata.id") or f"{ROOT}/Systems"
            await self._request("GET", probe, relogin=False)

    # -------------------------------------------------------------- requests

    def _path(self, uri: str) -> str:
        if uri.startswith("http://") or uri.startswith("https://"):
            p = urlsplit(uri)
            return p.path + (f"?{p.query}" if p.query else "")
        return uri

    async def get(self, uri: str) -> Any:
        if self._memo is None:
            return await self._get_body(uri)
        # read_once: concurrent readers of one URI share one request; a failure is not remembered
        fut = self._memo.get(uri)
        if fut is not None:
            # A remembered answer still yields to the event loop: a loop reading remembered answers
            # (a next link that comes back) would otherwise never let a deadline or Ctrl-C land.
            await asyncio.sleep(0)
        else:
            fut = self._memo[uri] = asyncio.get_running_loop().create_future()
            try:
                fut.set_result(await self._get_body(uri))
            except BaseException as e:
                del self._memo[uri]
                fut.set_exception(e)
                fut.exception()  # retrieved here: the waiters (if any) get it too
                raise
        return await asyncio.shield(fut)

    def remember(self, uri: str, body: Any) -> bool:
        """With ``read_once``, answer later GETs of ``uri`` with ``body`` (a document another request brought: the
        member a collection's ``?only`` answered); False, nothing kept, without ``read_once`` or when ``uri`` was
        asked already (that answer stands)."""
        if self._memo is None or uri in self._memo:
            return False
        fut = self._memo[uri] = asyncio.get_running_loop().create_future()
        fut.set_result(body)
        return True

    def remembered(self, uri: str) -> bool:
        """Whether a GET of ``uri`` would be answered from what ``read_once`` holds (asked already, or in flight)."""
        return self._memo is not None and uri in self._memo

    async def get_optional(self, uri: str | None) -> Any | None:
        """GET that answers None for a missing optional section (404) or an error body."""
        if not uri:
            return None
        try:
            body = await self.get(uri)
        except RedfishError as e:
            if e.status in (404, 400, 410, 501):
                return None
            raise
        return None if is_error_body(body) else body

    async def patch(self, uri: str, body: dict, *, etag: str | None = None) -> Response:
        headers = {"If-Match": etag} if etag else None
        return await self._request("PATCH", uri, json=body, headers=headers)

    async def post(self, uri: str, body: dict | None = None) -> Response:
        return await self._request("POST", uri, json=body if body is not None else {}, action=True)

    async def delete(self, uri: str) -> Response:
        return await self._request("DELETE", uri, action=True)

    async def _request(
        self,
        method: str,
        uri: str,
        *,
        json: Any = None,
        headers: dict | None = None,
        auth: bool = True,
        relogin: bool = True,
        retries: int | None = None,
        action: bool = False,
        basic: bool = False,
    ) -> Response:
        path = self._path(uri)
        url = self.base + path
        hdrs = {"Accept": "application/json", "OData-Version": "4.0"}
        data = None
        if json is not None:
            data = _dumps(json)
            hdrs["Content-Type"] = "application/json"
        if headers:
            hdrs.update(headers)
        attempts = 1 + (self.target.retries if retries is None else retries)
        relogged = False
        attempt = 0
        while True:
            attempt += 1
            if auth:
                if self._token and not basic:
                    hdrs["X-Auth-Token"] = self._token
                    hdrs.pop("Authorization", None)
                elif self._basic:
                    hdrs["Authorization"] = self._basic
                    hdrs.pop("X-Auth-Token", None)
            try:
                status, rhdrs, raw = await self._send(method, url, hdrs, data)
            except _RetryNow:
                continue  # the certificate was pinned just now (trust on first use)
            except _Retryable as e:
                # connection refused/reset, or a timeout: retry GETs; an action only when we
                # know it never reached the BMC (could not connect)
                if attempt < attempts and (not action or e.connect_failed):
                    await self._sleep_backoff(attempt)
                    continue
                raise e.error from e.__cause__
            body = None
            if raw:
                try:
                    body = _loads(raw)
                except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth limit
                    body = None
            if status in RETRY_STATUSES and attempt < attempts and (not action or status == 503):
                await self._sleep_backoff(attempt, rhdrs.get("Retry-After"))
                continue
            if status == 401 and auth and relogin and not relogged and self._auth_mode == "session":
                # the session expired or was dropped by the BMC: log in again, once
                relogged = True
                await self._relogin(hdrs.get("X-Auth-Token"))
                continue
            if status >= 400:
                raise self._http_error(method, path, status, body, authenticated=auth)
            return Response(status, rhdrs, body)

    async def _sleep_backoff(self, attempt: int, retry_after: str | None = None) -> None:
        delay = self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random())
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), 30.0))
        await asyncio.sleep(delay)

    async def _send(self, method: str, url: str, headers: dict, data: bytes | None) -> tuple[int, Any, bytes]:
        assert self._fleet is not None and self._fleet.http is not None, "client not opened"
        if method == "GET" and self.bytes_read >= self.bounds.max_bytes_per_bmc:
            # Past its budget, a BMC is not asked again (the rest of a walk that went past it ends fast).
            raise self._over_budget(method, self._path(url))
        async with self._sem:
            self._in_flight += 1
            if self._in_flight > self.max_seen_in_flight:
                self.max_seen_in_flight = self._in_flight
            self.requests_sent += 1
            try:
                async with self._fleet.http.request(
                    method,
                    url,
                    data=data,
                    headers=headers,
                    timeout=self._timeout,
                    ssl=self._ssl if self._ssl is not None else True,
                    allow_redirects=False,
                ) as resp:
                    raw = await self._read_body(resp, method, url)
                    return resp.status, resp.headers, raw
            except aiohttp.ServerFingerprintMismatch as e:
                raise TLSMismatch(
                    f"{self.target.name}: TLS certificate of {self.host}:{self.port} does not match the pin: "
                    f"expected {format_fingerprint(e.expected.hex())}, got {format_fingerprint(e.got.hex())}"
                ) from e
            except aiohttp.ClientConnectorCertificateError as e:
                raise await self._certificate_failure(e) from e
            except aiohttp.ClientSSLError as e:
                raise DriverError(f"{self.target.name}: TLS handshake with {self.host}:{self.port} failed: {e}") from e
            except aiohttp.ClientConnectorError as e:
                raise _Retryable(
                    BMCError(f"{self.target.name}: cannot connect to {self.host}:{self.port}: {e.os_error or e}"),
                    connect_failed=True,
                ) from e
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientPayloadError) as e:
                raise _Retryable(BMCError(f"{self.target.name}: connection dropped ({method} {url}): {e}")) from e
            except (TimeoutError, aiohttp.ServerTimeoutError) as e:
                raise _Retryable(
                    Timeout(f"{self.target.name}: no answer to {method} {url} within {self.target.timeout:g} s")
                ) from e
            except aiohttp.ClientConnectionError as e:
                # What is left of the connection errors: the fleet's connector closed under the request (the command
                # stopped while this BMC was still being read or logged out of). A BMC error, never retried: a
                # logout that meets it parks the session as any failed logout does, and the stop goes on.
                raise BMCError(f"{self.target.name}: {method} {url}: {e}") from e
            finally:
                self._in_flight -= 1

    async def _read_body(self, resp: aiohttp.ClientResponse, method: str, url: str) -> bytes:
        """The body, read in chunks and dropped past ``max_body_bytes`` (or the BMC's budget, for a GET).

        A body announced (Content-Length) or found larger than the bound is not read
        further: the connection is closed and :class:`AnswerOutOfBounds` names the
        BMC, the URI and the bound. Decompressed bytes are counted (a gzip bomb is
        bounded too).
        """
        limit = self.bounds.max_body_bytes
        budget = self.bounds.max_bytes_per_bmc - self.bytes_read if method == "GET" else None
        # The URL is this BMC's base + the path (_request): cut, not parsed again (urlsplit on every answer was
        # 0.3-0.6 ms of CPU per BMC in a sweep, issue 24).
        path = url[len(self.base):] if url.startswith(self.base + "/") else self._path(url)

        def too_large(size: str) -> AnswerOutOfBounds:
            resp.close()  # drop the connection rather than drain what is left
            return AnswerOutOfBounds(
                f"{self.target.name}: {method} {path}: the answer is larger than {limit:,} bytes ({size}), "
                f"past the bound max_body_bytes; not read further", uri=path, bound="max_body_bytes")  # fmt: skip

        def over_budget() -> AnswerOutOfBounds:
            resp.close()
            return self._over_budget(method, path)

        if resp.content_length is not None and resp.content_length > limit:
            raise too_large(f"Content-Length {resp.content_length:,}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_chunked(256 * 1024):
            size += len(chunk)
            if size > limit:
                raise too_large(f"{size:,} bytes read so far")
            if budget is not None and size > budget:
                self.bytes_read += size
                raise over_budget()
            chunks.append(chunk)
        if budget is not None:
            self.bytes_read += size
        return b"".join(chunks)

    def _over_budget(self, method: str, path: str) -> AnswerOutOfBounds:
        return AnswerOutOfBounds(
            f"{self.target.name}: {method} {path}: the BMC's answers passed {self.bounds.max_bytes_per_bmc:,} bytes "
            "in all, past the bound max_bytes_per_bmc; nothing more is read from it", uri=path, bound="max_bytes_per_bmc")  # fmt: skip

    async def _certificate_failure(self, e: Exception) -> Exception:
        """CA verification failed: pin on first use if allowed, else explain."""
        seen = await self.peer_fingerprint()
        if self.target.trust_on_first_use and not self.fingerprint:
            self.fingerprint = seen
            self.fingerprint_first_seen = True
            self._ssl = aiohttp.Fingerprint(bytes.fromhex(seen))
            log.info("%s: pinned certificate %s on first use", self.target.name, format_fingerprint(seen))
            return _RetryNow()
        return DriverError(
            f"{self.target.name}: TLS certificate of {self.host}:{self.port} is not trusted ({e}); "
            f"its SHA-256 fingerprint is {format_fingerprint(seen)}: pin it in the inventory "
            f"or allow trust on first use"
        )

    async def peer_fingerprint(self) -> str:
        """SHA-256 (hex) of the certificate the BMC presents, without verifying it."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=ctx), timeout=self._timeout.connect
            )
        except (TimeoutError, OSError) as e:
            raise BMCError(f"{self.target.name}: cannot connect to {self.host}:{self.port}: {e}") from e
        try:
            der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        finally:
            writer.close()
        return hashlib.sha256(der).hexdigest()

    async def _relogin(self, stale_token: str | None) -> None:
        async with self._login_lock:
            if self._token and self._token != stale_token:
                return  # another request logged in again meanwhile
            if self._session_uri:
                session_log().closed(self.base + self._session_uri)  # the BMC dropped it (401)
            self._token = None
            self._session_uri = None
        await self._login()

    def _http_error(
        self, method: str, path: str, status: int, body: Any, *, authenticated: bool = True
    ) -> RedfishError | AuthError:
        msg, ids = decode_error(body)
        reason = msg or {
            400: "bad request",
            401: "unauthorized",
            403: "forbidden",
            404: "not found",
            405: "method not allowed",
            409: "conflict",
            412: "precondition failed (ETag)",
            501: "not implemented",
        }.get(status, "error")
        text = f"{self.target.name}: {method} {path}: HTTP {status}: {reason}"
        if status == 401 and authenticated:
            return AuthError(f"{self.target.name}: login refused for user {self.target.username!r}: {reason}")
        return RedfishError(text, status=status, method=method, uri=path, message_ids=ids)

    # ----------------------------------------------------------- collections

    async def offers_expand(self) -> bool:
        """True when the service root says collections can be read with their members ($expand)."""
        eq = ((await self.service_root()).get("ProtocolFeaturesSupported") or {}).get("ExpandQuery") or {}
        return isinstance(eq, dict) and bool(eq.get("NoLinks") or eq.get("ExpandAll"))

    async def offers_only(self) -> bool:
        """True when the service root says a one-member collection answers ``?only`` with its member (DSP0266)."""
        return ((await self.service_root()).get("ProtocolFeaturesSupported") or {}).get("OnlyMemberQuery") is True

    async def expand_query(self) -> str:
        """The query that expands a collection's members on this service ("" when not asked or not offered)."""
        if not self.expand_collections:
            return ""
        if self._expand_query is None:
            root = await self.service_root()
            eq = (root.get("ProtocolFeaturesSupported") or {}).get("ExpandQuery") or {}
            if not isinstance(eq, dict):
                eq = {}
            # "." expands what is not under Links (a collection's Members are not); "*" expands links too.
            kind = "." if eq.get("NoLinks") else "*" if eq.get("ExpandAll") else ""
            self._expand_query = f"?$expand={kind}($levels=1)" if kind and eq.get("Levels") else f"?$expand={kind}" if kind else ""
        return self._expand_query

    async def collection(self, uri: str | None) -> dict | None:
        """A collection (None when missing), its members expanded in the same answer where the service can.

        A service that ignores the query answers the plain collection, whose
        links :meth:`expand` then follows.
        """
        if not uri:
            return None
        query = await self.expand_query()
        if query and "?" not in uri:
            try:
                body = await self.get_optional(uri + query)
            except RedfishError:
                body = None  # a service that offers $expand and then fails it: read it plainly
            if body is not None:
                return body
        return await self.get_optional(uri)

    async def members(self, uri: str, *, errors: list[str] | None = None) -> list[dict]:
        """Every member of a collection, fetched concurrently (bounded by the semaphore).

        Expanded members are used as they are; members that answer with an
        error (status or body) are skipped and noted in ``errors``; paging
        through ``Members@odata.nextLink`` is followed, within bounds.

        Raises:
            AnswerOutOfBounds: a next link came back to a page already read (the
                BMC repeats a link, or ignores ``$skip``), or the collection has more
                pages or members than ``max_collection_pages`` /
                ``max_collection_members``. Partial data is not returned: a collection
                read in part would be judged as if whole (boards "missing").
        """
        coll = await self.collection(uri)
        if coll is None:
            if errors is not None:
                errors.append(f"{uri}: missing")
            return []
        b = self.bounds
        items: list[Any] = _member_list(coll)
        pages = 1
        # The pages read so far, as the BMC named them: the collection itself (with or without $expand) and
        # every next link followed. A link back to one of them would repeat the walk forever.
        seen = {_page_key(self._path(uri)), _page_key(self._path(odata_id(coll) or uri))}
        next_link = coll.get("Members@odata.nextLink")
        while isinstance(next_link, str) and next_link:
            self._check_members(uri, len(items))
            key = _page_key(self._path(next_link))
            if key in seen:
                raise AnswerOutOfBounds(
                    f"{self.target.name}: collection {uri}: its next link {next_link} comes back to a page already "
                    f"read (after {pages} page{'s' if pages > 1 else ''}, {len(items)} members); the walk ends here",
                    uri=uri, bound="page loop")  # fmt: skip
            if pages >= b.max_collection_pages:
                raise AnswerOutOfBounds(
                    f"{self.target.name}: collection {uri}: more than {b.max_collection_pages:,} pages "
                    f"({len(items):,} members so far), past the bound max_collection_pages; the walk ends here",
                    uri=uri, bound="max_collection_pages")  # fmt: skip
            seen.add(key)
            page = await self.get(next_link)
            pages += 1
            items.extend(_member_list(page))
            next_link = page.get("Members@odata.nextLink") if isinstance(page, dict) else None
        self._check_members(uri, len(items))
        return await self.expand(items, errors=errors)

    def _check_members(self, uri: str, count: int) -> None:
        limit = self.bounds.max_collection_members
        if count > limit:
            raise AnswerOutOfBounds(
                f"{self.target.name}: collection {uri}: more than {limit:,} members ({count:,} read), "
                "past the bound max_collection_members; the walk ends here", uri=uri, bound="max_collection_members")  # fmt: skip

    async def expand(self, refs: Iterable[Any], *, errors: list[str] | None = None) -> list[dict]:
        """Resolve ``{"@odata.id": ...}`` links (leaving expanded ones), skipping failures.

        Raises:
            AnswerOutOfBounds: more links than ``max_collection_members`` (a collection of
                millions of members in one body is not read a request each).
        """
        refs = list(refs)
        if len(refs) > self.bounds.max_collection_members:
            first = odata_id(refs[0]) or "?"
            where = first.rsplit("/", 1)[0] if "/" in first else first
            self._check_members(where, len(refs))

        async def fetch(link: Any) -> dict | None:
            try:
                body = await self.get(link)
            except RedfishError as e:
                if errors is not None:
                    errors.append(str(e))
                return None
            if is_error_body(body):
                if errors is not None:
                    msg, _ = decode_error(body)
                    errors.append(f"{link}: answered an error body: {msg}")
                return None
            return body

        # Members already in the answer ($expand) are taken as they are, without a task each: a task per inline
        # member was 41 of the 61 tasks per BMC of an AMI sweep (3 event-loop callbacks each; issue 24). The
        # loop is bounded by max_collection_members (above) and the read that brought them yielded already.
        out: list[dict | None] = [None] * len(refs)
        links: list[tuple[int, Any]] = []
        for i, ref in enumerate(refs):
            if not isinstance(ref, dict):
                continue
            link = ref.get("@odata.id")
            if (len(ref) > 1 and not (len(ref) == 2 and "@odata.type" in ref)) or not link:
                if not is_error_body(ref):
                    out[i] = ref
                continue
            links.append((i, link))
        if len(links) == 1:  # one link: awaited here, no task
            out[links[0][0]] = await fetch(links[0][1])
        elif links:  # concurrently, bounded by the semaphore
            for (i, _), body in zip(links, await asyncio.gather(*(fetch(link) for _, link in links)), strict=True):
                out[i] = body
        return [r for r in out if r is not None]

    # ----------------------------------------------------------------- tasks

    async def follow_task(
        self,
        resp: Response,
        *,
        progress: ProgressCallback | None = None,
        timeout: float = 3600.0,
    ) -> TaskResult:
        """Follow a 202's task monitor (Location header) until the task ends.

        Raises:
            BMCError: the task ended in Exception/Killed/Cancelled.
            Timeout: the task did not end within ``timeout`` seconds.
        """
        monitor = resp.headers.get("Location") if resp.headers is not None else None
        body = resp.body or {}
        if not monitor:
            monitor = body.get("@odata.id") if body.get("TaskState") else None
        if resp.status != 202 and not monitor:
            return TaskResult(state="Completed", messages=[])
        if not monitor:
            raise BMCError(f"{self.target.name}: BMC accepted the request (202) but named no task monitor")
        monitor = self._path(monitor)
        deadline = time.monotonic() + timeout
        last: TaskProgress | None = None
        task_uri = monitor
        while True:
            r = await self._request("GET", monitor)
            b = r.body or {}
            state = b.get("TaskState")
            if b.get("@odata.id") and state:
                task_uri = b["@odata.id"]
            percent = b.get("PercentComplete")
            msgs = [m.get("Message") or m.get("MessageId", "") for m in b.get("Messages") or [] if isinstance(m, dict)]
            p = TaskProgress(percent=percent, state=state or ("Running" if r.status == 202 else None), messages=msgs)
            if progress is not None and p != last:
                res = progress(p)
                if asyncio.iscoroutine(res):
                    await res
                last = p
            if r.status != 202 and (state is None or state in TASK_DONE_STATES):
                final = state or "Completed"
                result = TaskResult(state=final, percent=percent, messages=msgs, task_uri=task_uri)
                if final not in TASK_OK_STATES:
                    detail = "; ".join(m for m in msgs if m) or "no message"
                    raise BMCError(f"{self.target.name}: task {task_uri} ended {final}: {detail}")
                return result
            if time.monotonic() > deadline:
                raise Timeout(f"{self.target.name}: task {task_uri} still {state or 'running'} after {timeout:g} s")
            delay = self.task_poll_interval
            ra = r.headers.get("Retry-After")
            if ra:
                with contextlib.suppress(ValueError):
                    delay = min(float(ra), 60.0)
            await asyncio.sleep(delay)


class _Retryable(Exception):
    def __init__(self, error: DriverError, *, connect_failed: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.connect_failed = connect_failed


class _RetryNow(_Retryable):
    """The certificate was just pinned (trust on first use): send the request again."""

    def __init__(self) -> None:
        super().__init__(DriverError("retry with the pinned certificate"), connect_failed=True)


def _member_list(page: Any) -> list[Any]:
    """A page's ``Members`` (a list, else nothing: a BMC's odd answer is not iterated as if it were one)."""
    members = page.get("Members") if isinstance(page, dict) else None
    return list(members) if isinstance(members, list) else []


def _page_key(path: str) -> str:
    """A page's path as compared for a loop: ``/Entries/`` and ``/Entries`` are one page."""
    base, sep, query = path.partition("?")
    return base.rstrip("/") + sep + query


def odata_id(obj: Any) -> str | None:
    if isinstance(obj, dict):
        v = obj.get("@odata.id")
        return v if isinstance(v, str) else None
    return None


Progress = Callable[[TaskProgress], Any]
