"""Helpers for ``test_sweep_peers.py``: the sweep's own path to a peer, and a recording read by hand.

- :func:`sweep_bmcs` runs ``collect.bmc_operation`` through the registry's BMC
  driver exactly as ``engine.sweep_targets`` does (``sweep_async("bmc", ..., fleets=,
  read_once=True)``) and turns each result into the ``ServerReading`` the
  engine judges (a target that could not be opened gets ``session_error``).
- :func:`sweep_switches` polls through ``sweep_async("snmp", ...)`` and builds
  the ``SwitchReading`` the engine builds: the previous poll rebuilt from a
  cursor that went through JSON (as it does through the database), rates from
  the poller class the registry hands out.
- :class:`Recorded` reads a recorded BMC's JSON files directly (no driver, no
  HTTP): the system, its chassis, PSUs, fans and temperatures as the
  recording holds them, and the parts it lacks.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetctl.sweep.collect import ServerReading, SwitchReading, bmc_operation, previous_poll, switch_cursor

# --------------------------------------------------------------------------
# The engine's path
# --------------------------------------------------------------------------


def sweep_bmcs(targets: list[Any], cursors: dict[str, str | None] | None = None, *, timeout: float = 60.0) -> dict[str, ServerReading]:
    """{target name: ServerReading}, read the way ``engine.sweep_targets`` reads BMCs."""
    from fleetctl.plugins import FleetSessions, sweep_async

    async def run() -> list[Any]:
        async with FleetSessions() as fleets:
            return await sweep_async("bmc", targets, bmc_operation(cursors or {}), concurrency=10, per_target_timeout=timeout,
                                     fleets=fleets, read_once=True)  # fmt: skip

    out: dict[str, ServerReading] = {}
    for r in asyncio.run(run()):
        if r.ok:
            reading = r.value
            reading.elapsed = r.elapsed
        else:
            reading = ServerReading(session_error=r.error, session_error_type=r.error_type, elapsed=r.elapsed)
        out[r.target] = reading
    return out


def poll_switches(targets: list[Any]) -> list[Any]:
    """One poll of each target through ``sweep_async("snmp", ...)`` (the engine's ``what``)."""
    from fleetctl.plugins import sweep_async

    async def run() -> list[Any]:
        return await sweep_async("snmp", targets, what=("if", "lldp", "sensors"), concurrency=10)

    return asyncio.run(run())


def switch_reading(target: Any, poll: Any, cursor: dict[str, Any] | None) -> SwitchReading:
    """The engine's ``switch_verdict``: previous poll from the cursor, rates from the poller class."""
    from fleetctl.plugins import drivers_for

    (cls,) = drivers_for("snmp", [target])
    prev = previous_poll(target.name, cursor)
    rates = cls.rates(prev, poll) if (prev is not None and poll.ok) else None
    return SwitchReading(poll, prev, rates)


def stored_cursor(poll: Any) -> dict[str, Any]:
    """``switch_cursor(poll)`` after a round trip through JSON (the sweep_cursor column)."""
    return json.loads(json.dumps(switch_cursor(poll), default=str))


# --------------------------------------------------------------------------
# A recording read by hand
# --------------------------------------------------------------------------

_NOTHING = ("", "N/A", "NA", "None", "nil", "Not Available", "Not Specified", "Unknown", "null")
BAD = ("Warning", "Critical")


def word(v: Any) -> str | None:
    """A health/state word as a BMC means it (the vendors' 'nothing' is None)."""
    if v is None:
        return None
    s = str(v).strip()
    return None if s in _NOTHING else s


def number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass
class Item:
    name: str | None
    health: str | None
    state: str | None
    reading: float | None = None
    upper_critical: float | None = None
    upper_fatal: float | None = None

    @property
    def bad(self) -> bool:
        return self.state != "Absent" and self.health in BAD


@dataclass
class Recorded:
    """What a recording holds, read from its files (folder path = URI)."""

    root: Path
    system: dict[str, Any] | None = None
    chassis: dict[str, Any] | None = None
    manager: dict[str, Any] | None = None
    psus: list[Item] = field(default_factory=list)
    fans: list[Item] = field(default_factory=list)
    temperatures: list[Item] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    log_services: list[str] = field(default_factory=list)
    has_firmware_inventory: bool = False

    def doc(self, uri: str | None) -> dict[str, Any] | None:
        """The recorded resource at ``uri`` (case-insensitive, trailing slash ignored), None when not recorded."""
        if not uri:
            return None
        rel = uri.split("#")[0].rstrip("/")
        rel = rel[len("/redfish/v1"):] if rel.lower().startswith("/redfish/v1") else rel
        here = self.root
        for part in [p for p in rel.split("/") if p]:
            nxt = here / part
            if not nxt.is_dir():
                found = [c for c in here.iterdir() if c.is_dir() and c.name.lower() == part.lower()] if here.is_dir() else []
                if not found:
                    return None
                nxt = found[0]
            here = nxt
        f = here / "index.json"
        if not f.is_file():
            return None
        d = json.loads(f.read_text())
        return None if "error" in d and len(d) == 1 else d

    def collection(self, uri: str) -> list[Any]:
        return list((self.doc(uri) or {}).get("Members") or [])

    def members(self, uri: str | None) -> list[dict[str, Any]]:
        coll = self.doc(uri) or {}
        return [d for d in (self.doc(link(m)) for m in coll.get("Members") or []) if d is not None]

    @classmethod
    def read(cls, root: Path) -> Recorded:
        r = cls(root)
        systems = (r.doc("/redfish/v1/Systems") or {}).get("Members") or []
        r.system = r.doc(link(systems[0])) if systems else None
        if r.system is None:
            return r
        links = r.system.get("Links") or {}
        chassis = [link(c) for c in links.get("Chassis") or []] or [link(c) for c in r.collection("/redfish/v1/Chassis")]
        managers = [link(m) for m in links.get("ManagedBy") or []] or [link(m) for m in r.collection("/redfish/v1/Managers")]
        r.chassis = r.doc(chassis[0]) if chassis else None
        r.manager = r.doc(managers[0]) if managers else None
        for owner in (r.system, r.manager):
            if owner and link(owner.get("LogServices")):
                r.log_services += [e for s in r.members(link(owner["LogServices"])) if (e := link(s.get("Entries")))]
        update = r.doc(link((r.doc("/redfish/v1") or {}).get("UpdateService")))
        r.has_firmware_inventory = bool(update and r.doc(link(update.get("FirmwareInventory"))) is not None)
        if r.chassis is not None:
            r._health_items()
        return r

    def _health_items(self) -> None:
        """New schema (PowerSubsystem, ThermalSubsystem, Sensors) where it says something, the old one (Power, Thermal) otherwise.

        Except on a service that cannot expand collections: there the old Thermal and Power come first
        (two answers instead of one per member), when they hold fans, temperatures and PSUs.
        """
        ch = self.chassis or {}
        eq = ((self.doc("/redfish/v1") or {}).get("ProtocolFeaturesSupported") or {}).get("ExpandQuery") or {}
        if link(ch.get("Thermal")) and link(ch.get("Power")) and not (eq.get("NoLinks") or eq.get("ExpandAll")):
            thermal, power = self.doc(link(ch.get("Thermal"))) or {}, self.doc(link(ch.get("Power"))) or {}
            fans = [status_item(f) for f in thermal.get("Fans") or [] if isinstance(f, dict)]
            temps = [Item(word(t.get("Name")), *health_state(t), number(t.get("ReadingCelsius")),
                          number(t.get("UpperThresholdCritical")), number(t.get("UpperThresholdFatal")))
                     for t in thermal.get("Temperatures") or [] if isinstance(t, dict)]  # fmt: skip
            psus_old = [status_item(p) for p in power.get("PowerSupplies") or [] if isinstance(p, dict)]
            if fans and temps and psus_old:
                self.fans, self.temperatures, self.psus = fans, temps, psus_old
                self.sources += ["Thermal", "Power"]
                return
        psus = self.members(link((self.doc(link(ch.get("PowerSubsystem"))) or {}).get("PowerSupplies")))
        fans = self.members(link((self.doc(link(ch.get("ThermalSubsystem"))) or {}).get("Fans")))
        sensors = [s for s in self.members(link(ch.get("Sensors")))
                   if s.get("ReadingType") == "Temperature" or s.get("ReadingUnits") in ("Cel", "C")]  # fmt: skip
        self.psus = [status_item(p) for p in psus]
        self.fans = [status_item(f) for f in fans]
        for s in sensors:
            th = s.get("Thresholds") or {}
            self.temperatures.append(Item(word(s.get("Name")) or str(s.get("Id")), *health_state(s), number(s.get("Reading")),
                                          number((th.get("UpperCritical") or {}).get("Reading")),
                                          number((th.get("UpperFatal") or {}).get("Reading"))))  # fmt: skip
        if psus or fans or sensors:
            self.sources.append("Subsystems")
        if not fans or not sensors:
            thermal = self.doc(link(ch.get("Thermal")))
            if thermal:
                if not fans:
                    self.fans = [status_item(f) for f in thermal.get("Fans") or [] if isinstance(f, dict)]
                if not sensors:
                    self.temperatures = [Item(word(t.get("Name")), *health_state(t), number(t.get("ReadingCelsius")),
                                              number(t.get("UpperThresholdCritical")), number(t.get("UpperThresholdFatal")))
                                         for t in thermal.get("Temperatures") or [] if isinstance(t, dict)]  # fmt: skip
                self.sources.append("Thermal")
        if not psus:
            power = self.doc(link(ch.get("Power")))
            if power:
                self.psus = [status_item(p) for p in power.get("PowerSupplies") or [] if isinstance(p, dict)]
                self.sources.append("Power")

    # What the checks must find, worked out from the recording alone.

    def expected_findings(self, now: dt.datetime, max_skew_s: float, margin_c: float = 5.0) -> set[tuple[str, str, str]]:
        """{(check, subject or '', status)}; PSU and fan subjects are '*' (the driver names them by bay)."""
        out: set[tuple[str, str, str]] = set()
        parts: list[tuple[str, str]] = []
        # A BMC that reports none of a kind leaves that kind unknown (never healthy); unknown explains no roll-up.
        if not self.psus:
            out.add(("psu", "*", "unknown"))
        if not self.fans:
            out.add(("fan", "*", "unknown"))
        if not self.temperatures:
            out.add(("temperature", "none", "unknown"))
        for p in self.psus:
            if p.bad:
                out.add(("psu", "*", "critical" if p.health == "Critical" else "warning"))
                parts.append(("psu", "critical" if p.health == "Critical" else "warning"))
        if len(self.psus) >= 2:
            working = [p for p in self.psus if p.state != "Absent" and p.health in (None, "OK")]
            if len(working) < 2:
                out.add(("psu.redundancy", "", "critical"))
                parts.append(("psu.redundancy", "critical"))
        for f in self.fans:
            if f.bad:
                out.add(("fan", "*", "critical" if f.health == "Critical" else "warning"))
                parts.append(("fan", "critical" if f.health == "Critical" else "warning"))
        for t in self.temperatures:
            limit = t.upper_critical if t.upper_critical is not None else t.upper_fatal
            status: str | None = None
            if t.reading is not None and limit is not None and t.reading >= limit:
                status = "critical"
            elif t.health is not None and t.health in BAD:
                status = t.health.lower()
            elif t.reading is not None and limit is not None and t.reading >= limit - margin_c:
                status = "warning"
            if status:
                out.add(("temperature", t.name or "", status))
                parts.append(("temperature", status))
        rank = {"warning": 1, "unknown": 2, "critical": 3}
        explains = {"psu", "fan", "temperature", "psu.redundancy"}  # the parts that explain a roll-up (server_checks.ROLLUPS)
        for check, health in (
            ("system.health", word(((self.system or {}).get("Status") or {}).get("Health"))),
            ("chassis.health", word(((self.chassis or {}).get("Status") or {}).get("Health"))),
        ):
            if health is not None and health in BAD:
                rollup = health.lower()
                worst_part = max((rank[s] for c, s in parts if c in explains), default=0)
                if worst_part < rank[rollup]:
                    out.add((check, "", rollup))
        when = (self.manager or {}).get("DateTime")
        if when:
            bmc_time = dt.datetime.fromisoformat(str(when).replace("Z", "+00:00"))
            skew = (bmc_time - now).total_seconds()
            if abs(skew) > max_skew_s:
                out.add(("bmc.clock", "", "critical" if abs(skew) > 600 else "warning"))
        return out

    def lacking(self) -> set[str]:
        """The sweep's parts (collect.SERVER_PARTS) this recording cannot give."""
        out = set()
        if self.manager is None:
            out.add("manager")
        if not self.has_firmware_inventory:
            out.add("firmware")
        if not self.log_services:
            out.add("logs")
        return out


def link(v: Any) -> str | None:
    return v.get("@odata.id") if isinstance(v, dict) else None


def health_state(d: dict[str, Any]) -> tuple[str | None, str | None]:
    st = d.get("Status")
    if not isinstance(st, dict):
        return None, None
    return word(st.get("Health")), word(st.get("State"))


def status_item(d: dict[str, Any]) -> Item:
    return Item(word(d.get("Name")), *health_state(d))
