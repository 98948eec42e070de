"""RedfishDriver: the capabilities of one Redfish BMC, composed.

    async with RedfishDriver(target) as bmc:
        state = await bmc.power.state()
        facts = await bmc.inventory.facts()

Opening costs three requests (service root, session login, Systems: with ``?only`` the system itself); the
vendor profile is detected from the service root, and only when the root
does not tell (OpenBMC, DMTF reference services) from the manager's model,
on first need.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fleetctl.errors import BMCError, DriverError
from fleetctl.interfaces.bmc import BMC, BMCTarget
from fleetctl.interfaces.sweep import BMCSweepResult, SweepProgress

from .cache import ReadingCache
from .capabilities import (
    RedfishBios,
    RedfishBoot,
    RedfishFirmware,
    RedfishHealth,
    RedfishInventory,
    RedfishManager,
    RedfishMedia,
    RedfishPower,
)
from .client import RETRY_STATUSES, FleetSession, RedfishClient, RedfishError, is_error_body, odata_id
from .quirks import GENERIC, Quirks, VendorProfile, detect_vendor, quirks_for

# What a BMC answers a login with when every session slot is taken. The DMTF Base registry's
# SessionLimitExceeded fixes no HTTP status: OpenBMC's bmcweb sends it with 503
# (redfish-core/src/error_messages.cpp, sessionLimitExceeded), which the client already retries
# with backoff. NOTE(dell): iDRAC 9 answers 400 with its own IDRAC.2.x.RAC0218 ("The maximum
# number of user sessions is reached"), which nothing retries: the driver asks once more.
SESSION_LIMIT_IDS = ("SessionLimitExceeded", "RAC0218")

log = logging.getLogger(__name__)


class SessionLimitReached(BMCError):
    """The BMC refused a new session because its session slots are all taken, again after a retry."""


def is_session_limit(e: RedfishError) -> bool:
    """True when a login was refused because the BMC has no session slot left."""
    return any(mid.rsplit(".", 1)[-1] in SESSION_LIMIT_IDS for mid in e.message_ids)


class RedfishDriver(BMC):
    """A Redfish BMC.

    Args:
        target: the BMC (URL, credentials, pin, limits).
        fleet: the :class:`FleetSession` of a sweep (shared connections); None
            opens a private one.
        accelerators_file: PCI id rules for accelerator boards (YAML); None uses
            ``$FLEETCTL_ACCELERATORS_FILE`` or the bundled ``accelerators.yaml``.
        backoff, task_poll_interval, read_once, expand, auth: see :class:`RedfishClient`.
    """

    name = "redfish"

    def __init__(
        self,
        target: BMCTarget,
        *,
        fleet: FleetSession | None = None,
        accelerators_file: str | None = None,
        backoff: float = 0.5,
        task_poll_interval: float = 2.0,
        read_once: bool = False,
        expand: bool = False,
        auth: str | None = None,
    ) -> None:
        self.target = target
        self.client = RedfishClient(target, fleet=fleet, backoff=backoff, task_poll_interval=task_poll_interval,
                                    read_once=read_once, expand=expand, auth=auth)
        self.accelerators_file = accelerators_file
        self.system_uri: str = ""
        self.manager_uri: str | None = None
        self.chassis_uri: str | None = None
        self._profile: VendorProfile | None = None
        self._quirks: Quirks | None = None
        self._opened = False
        # What the caller will judge (fleetctl.sweep.collect.READ_KEYS: "health.psus", "facts.nics" ...): the
        # capabilities skip resources no key names. None: everything, as any caller but a sweep wants.
        self.wants: frozenset[str] | None = None
        self.power = RedfishPower(self)
        self.boot = RedfishBoot(self)
        self.media = RedfishMedia(self)
        self.bios = RedfishBios(self)
        self.firmware = RedfishFirmware(self)
        self.inventory = RedfishInventory(self)
        self.health = RedfishHealth(self)
        self.manager = RedfishManager(self)

    # --------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> RedfishDriver:
        await self.open()
        return self

    async def open(self) -> None:
        if self._opened:
            return
        try:
            await self._open_client()
            root = await self.client.service_root()
            profile = detect_vendor(root, hint=self.target.vendor_hint)
            if profile is not GENERIC:
                self._set_profile(profile)
            await self._find_system(root)
        except BaseException:
            await self.client.close()
            raise
        self._opened = True

    async def _open_client(self) -> None:
        """Log in; a BMC with no session slot left is asked once more after a backoff, then named as such.

        A 503 was already retried with backoff by the client (``target.retries``); any other
        status (iDRAC's 400) gets one more attempt here. Never falls back to basic auth: a BMC
        that is out of sessions is one to report, not to work around.
        """
        attempts = 1
        try:
            await self.client.open()
            return
        except RedfishError as e:
            if not is_session_limit(e):
                raise
            error = e
            if e.status in RETRY_STATUSES:
                attempts += self.target.retries
            else:
                await asyncio.sleep(self.client.backoff * (0.5 + random.random()))
                attempts += 1
                try:
                    await self.client.open()
                    return
                except RedfishError as e2:
                    if not is_session_limit(e2):
                        raise
                    error = e2
        mid = next((m for m in error.message_ids if m.rsplit(".", 1)[-1] in SESSION_LIMIT_IDS), "")
        raise SessionLimitReached(
            f"{self.target.name}: session limit reached on the BMC: it refused a new session "
            f"{attempts} time{'s' if attempts > 1 else ''} (HTTP {error.status} {mid}); "
            "log out other sessions on the BMC or wait for them to time out"
        ) from error

    async def close(self) -> None:
        self._opened = False
        await self.client.close()

    def wanted(self, key: str) -> bool:
        """Whether the caller judges ``key`` (a :data:`fleetctl.sweep.collect.READ_KEYS` key); True without a plan."""
        return self.wants is None or key in self.wants

    async def use_cache(self, cache: Any) -> None:
        """Ask ``If-None-Match`` for the documents ``cache`` (a :class:`.cache.ReadingCache`, or its file) holds."""
        if not isinstance(cache, ReadingCache):
            cache = ReadingCache.shared(cache)
        await self.client.use_cache(cache)

    # ------------------------------------------------------------------ fleet

    @classmethod
    async def sweep(
        cls,
        targets: Iterable[BMCTarget],
        operation: Callable[[BMC], Awaitable[Any]],
        *,
        concurrency: int = 200,
        progress: SweepProgress[BMCSweepResult] | None = None,
        per_target_timeout: float | None = None,
        fleet: FleetSession | None = None,
        **options: Any,
    ) -> list[BMCSweepResult]:
        """See :meth:`BMC.sweep`; all BMCs share one :class:`FleetSession` (:func:`.sweep.run_many`)."""
        from .sweep import run_many  # it imports this module

        return await run_many(
            targets,
            operation,
            concurrency=concurrency,
            progress=progress,
            per_target_timeout=per_target_timeout,
            fleet=fleet,
            driver_cls=cls,
            **options,
        )

    @classmethod
    def fleet_session(cls) -> FleetSession:
        """One :class:`FleetSession` (one aiohttp connection pool) for a batch of BMCs."""
        return FleetSession()

    @property
    def fingerprint(self) -> str | None:
        """The certificate pin in use (pinned now when ``fingerprint_first_seen``)."""
        return self.client.fingerprint

    @property
    def fingerprint_first_seen(self) -> bool:
        return self.client.fingerprint_first_seen

    async def _find_system(self, root: dict) -> None:
        systems = odata_id(root.get("Systems"))
        if not systems:
            raise DriverError(f"{self.target.name}: this Redfish service has no Systems (a PDU or a switch?)")
        if self.target.system_id and await self._known_system(systems, self.target.system_id):
            return
        coll: Any = {}
        # With HTTP Basic the collection was read already (the credentials' proof): nothing to save then.
        if not self.target.system_id and not self.client.remembered(systems) and await self.client.offers_only():
            coll = await self._only_system(systems)
            if coll is None:
                return
        if not isinstance(coll.get("Members"), list):
            coll = await self.client.get(systems)
        members = [odata_id(m) for m in coll.get("Members") or [] if odata_id(m)]
        if not members:
            raise DriverError(f"{self.target.name}: the BMC lists no ComputerSystem")
        if self.target.system_id:
            want = self.target.system_id.strip("/").lower()
            match = [m for m in members if m.rstrip("/").rsplit("/", 1)[-1].lower() == want]  # type: ignore[union-attr]
            if not match:
                ids = ", ".join(m.rstrip("/").rsplit("/", 1)[-1] for m in members)  # type: ignore[union-attr]
                raise DriverError(f"{self.target.name}: no system {self.target.system_id!r} (the BMC has: {ids})")
            self.system_uri = match[0]  # type: ignore[assignment]
        else:
            self.system_uri = members[0]  # type: ignore[assignment]
        self._links_known = False

    async def _only_system(self, systems: str) -> dict | None:
        """Read ``{Systems}?only`` (DSP0266 ``OnlyMemberQuery``): the system itself where the BMC has exactly one.

        A ComputerSystem answered (no ``Members``, its ``@odata.id`` a member of ``systems``, its type, if named,
        a ComputerSystem) is taken: ``system_uri`` is set, and with ``read_once`` the capabilities' reads of that
        URI are this answer, so the collection and the member cost one request, not two. Returns None then.
        Otherwise returns the answer to go on with as the collection: the collection itself (several systems, or
        a BMC that ignores ``only``: the walk goes on with it, no request more), or {} for anything else (a
        refused query, 400/501, or an odd answer), which makes the caller read the plain collection as before.
        A query is never conditional (``If-None-Match``): see :meth:`RedfishClient._get_body`.
        """
        try:
            doc = await self.client.get(f"{systems}?only")
        except RedfishError as e:
            log.debug("%s: %s?only refused (%s); reading the collection", self.target.name, systems, e.status)
            return {}
        if not isinstance(doc, dict) or is_error_body(doc):
            return {}
        if isinstance(doc.get("Members"), list):
            return doc
        uri = odata_id(doc)
        kind = doc.get("@odata.type")
        if (not uri or uri.rstrip("/").rsplit("/", 1)[0] != systems.rstrip("/")
                or (isinstance(kind, str) and not kind.startswith("#ComputerSystem."))):  # fmt: skip
            return {}
        self.system_uri = uri
        self.client.remember(uri, doc)
        self._links_known = False
        return None

    async def _known_system(self, systems: str, system_id: str) -> bool:
        """Take the system the inventory names at ``{Systems}/{id}`` without reading the Systems collection.

        The member URI a Redfish service gives (DSP0266 1.6 on: ``/redfish/v1/Systems/{ComputerSystemId}``); its
        document is read anyway (read once: the capabilities' reads of it are this answer). True when it is there
        and is that system (its ``@odata.id`` exactly the URI asked, its ``Id`` the inventory's); False, nothing
        taken, otherwise (a 404, an error, another case, a trailing slash): the collection is walked as before, which names the
        ids the BMC has when none matches. Saves the collection's request where the inventory knows the id.
        """
        uri = f"{systems.rstrip('/')}/{system_id.strip('/')}"
        try:
            doc = await self.client.get_optional(uri)
        except RedfishError:
            return False
        if not isinstance(doc, dict) or odata_id(doc) != uri or str(doc.get("Id")) != system_id.strip("/"):
            return False
        self.system_uri = uri
        self._links_known = False
        return True

    async def ensure_links(self) -> None:
        """Manager and chassis of the system, read on first need."""
        if getattr(self, "_links_known", False):
            return
        system = await self.client.get(self.system_uri)
        links = system.get("Links") or {}
        managed = [odata_id(m) for m in links.get("ManagedBy") or [] if odata_id(m)]
        chassis = [odata_id(c) for c in links.get("Chassis") or [] if odata_id(c)]
        root = await self.client.service_root()
        if not managed and odata_id(root.get("Managers")):
            coll = await self.client.get_optional(odata_id(root.get("Managers")))
            managed = [odata_id(m) for m in (coll or {}).get("Members") or [] if odata_id(m)]
        if not chassis and odata_id(root.get("Chassis")):
            coll = await self.client.get_optional(odata_id(root.get("Chassis")))
            chassis = [odata_id(m) for m in (coll or {}).get("Members") or [] if odata_id(m)]
        self.manager_uri = managed[0] if managed else None
        self.chassis_uri = chassis[0] if chassis else None
        self._links_known = True

    # ----------------------------------------------------------------- quirks

    def _set_profile(self, profile: VendorProfile, model: str | None = None) -> None:
        self._profile = profile
        self._quirks = quirks_for(profile, model)
        self.client.set_bounds(self._quirks)
        cap = self._quirks.max_in_flight_cap
        if cap and cap < self.target.max_in_flight:
            self.client.limit_in_flight(cap)

    async def quirks(self) -> Quirks:
        """The vendor quirks, detected on first need."""
        if self._quirks is None:
            await self.ensure_links()
            model = None
            if self.manager_uri:
                manager = await self.client.get_optional(self.manager_uri)
                model = (manager or {}).get("Model")
            root = await self.client.service_root()
            self._set_profile(detect_vendor(root, model, hint=self.target.vendor_hint), model)
        return self._quirks  # type: ignore[return-value]

    async def quirks_at_no_cost(self) -> Quirks:
        """The vendor quirks where learning them costs no request of its own, else the generic ones.

        Known already (the service root named the vendor, or a read asked before), or a sweep whose plan reads
        the manager anyway (its model tells the vendor, and :meth:`quirks` reads it through the same read-once
        request). For the shortcuts that save a request (:class:`Quirks` ``log_entries_suffix``,
        ``firmware_inventory_suffix``): spending one to learn the vendor would undo the saving.
        """
        if self._quirks is None and self.wants is not None and "manager" in self.wants:
            return await self.quirks()
        return self._quirks if self._quirks is not None else Quirks()

    @property
    def vendor(self) -> str | None:
        return self._profile.name if self._profile else None

    # --------------------------------------------------------------- helpers

    async def patch_resource(self, uri: str, body: dict, *, current: dict | None = None) -> Any:
        """PATCH, with If-Match where the BMC wants it (quirk, or after a 412)."""
        q = await self.quirks()
        etag = None
        if q.patch_needs_etag:
            doc = current if current is not None else await self.client.get(uri)
            etag = (doc or {}).get("@odata.etag")
        try:
            resp = await self.client.patch(uri, body, etag=etag)
        except RedfishError as e:
            if e.status != 412 or etag:
                raise
            doc = await self.client.get(uri)
            resp = await self.client.patch(uri, body, etag=(doc or {}).get("@odata.etag") or "*")
        if resp.status == 202:
            await self.client.follow_task(resp, timeout=600)
        return resp
