"""What a sweep reads, and what the inventory says it should find.

A BMC is read through the driver's capabilities (one session, at most two
requests in flight, every resource asked for once: ``read_once``). Each part
is read on its own, so a part the BMC cannot give (a 500 on the log service)
is that part's ``unknown``, and the other parts are still judged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

#: The parts of a server reading, in the order checks read them.
SERVER_PARTS = ("facts", "health", "manager", "logs", "firmware")

#: What a server check may say it ``needs`` (``@check(..., needs=...)``): a part of the reading, or a piece of
#: one. A sweep reads the union of its enabled checks' needs and nothing else (:class:`ReadPlan`); the Redfish
#: driver maps each key to the resources that hold it (``RedfishDriver.wants``).
READ_KEYS: dict[str, str] = {
    "facts": "the system's identity (Systems/{id}: serial, model, power state)",
    "facts.devices": "the accelerator boards: PCIeDevices and their PCIeFunctions, Processors",
    "facts.nics": "the network interfaces (EthernetInterfaces)",
    "health": "the system's and the chassis's own Status",
    "health.psus": "the power supplies (Power, or PowerSubsystem/PowerSupplies)",
    "health.fans": "the fans (Thermal, or ThermalSubsystem/Fans)",
    "health.temperatures": "the temperatures (Thermal, or Sensors)",
    "manager": "the manager (Managers/{id}: DateTime, firmware)",
    "logs": "the system's and the manager's log entries",
    "firmware": "the firmware inventory (UpdateService/FirmwareInventory)",
}


@dataclass(frozen=True)
class ReadPlan:
    """What a sweep reads of each BMC: the union of its enabled checks' ``needs`` (:data:`READ_KEYS`).

    A check that declares no ``needs`` (a plugin's) makes the plan :meth:`full`: it may judge anything.
    """

    needs: frozenset[str]

    @classmethod
    def full(cls) -> ReadPlan:
        """Every part, every piece: what a sweep read before plans (the verdicts compare against it)."""
        return cls(frozenset(READ_KEYS))

    @classmethod
    def for_checks(cls, specs: Any) -> ReadPlan:
        """The plan for these checks (:class:`~fleetctl.sweep.model.CheckSpec` of servers)."""
        from fleetctl.errors import FleetError

        needs: set[str] = set()
        for spec in specs:
            if spec.kind != "server" or spec.level != "bmc":
                continue  # host and k8s checks read their own sources, not the BMC
            if spec.needs is None:
                return cls.full()
            unknown = set(spec.needs) - READ_KEYS.keys()
            if unknown:
                raise FleetError(f"check {spec.name} needs {', '.join(sorted(unknown))}: not one of {', '.join(READ_KEYS)}")
            needs.update(spec.needs)
        return cls(frozenset(needs))

    def part(self, name: str) -> bool:
        """Whether the reading's part ``name`` (:data:`SERVER_PARTS`) is read at all."""
        return any(k == name or k.startswith(name + ".") for k in self.needs)


@dataclass
class ServerReading:
    """What one BMC said in one sweep; a part is None when it could not be read (see ``errors``)."""

    facts: Any = None  # SystemFacts
    health: Any = None  # HealthReport
    manager: Any = None  # ManagerFacts
    logs: list[Any] | None = None  # LogEntry, new since the cursor
    log_cursor: str | None = None
    firmware: list[Any] | None = None  # FirmwareComponent
    errors: dict[str, str] = field(default_factory=dict)  # part -> why it could not be read
    fingerprint: str | None = None
    # Set when the BMC could not be opened at all (no part was read).
    session_error: str | None = None
    session_error_type: str | None = None  # Timeout, AuthError, TLSMismatch, BMCError, ...
    elapsed: float = 0.0
    host: Any = None  # HostReading, with --level host for a server whose OS should answer
    k8s: Any = None  # fleetctl.k8s.status.NodeStatus, with --level k8s for a server in a cluster


@dataclass
class BoardExpect:
    slot: int | None
    kind: str
    serial: str
    position: int | None = None  # 1.. among boards sharing a serial (NVIDIA GB200/GB300 modules)


@dataclass
class ServerExpect:
    """What the inventory says of one server, for the checks."""

    name: str
    serial: str
    model: str
    site: str
    rack: str
    position: int
    board_kind: str | None = None
    board_count: int = 0
    boards: list[BoardExpect] = field(default_factory=list)
    baseline: dict[str, str] = field(default_factory=dict)
    log_cursor: str | None = None
    psus_expected: int | None = None
    max_skew_s: float = 30.0
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    # The criteria its boards are judged by (burn-in's, for its board kind and model); None: those in force
    # (fleetctl.burnin.criteria.current(): $FLEETCTL_BURNIN_CRITERIA or the bundled file), read by the host checks.
    criteria: Any = None


def bmc_operation(cursors: dict[str, str | None], *, plan: ReadPlan | None = None, checks: Any = None,
                  cache: Any = None) -> Any:  # fmt: skip
    """The sweep's operation on one opened BMC: the parts its checks need, each on its own.

    Args:
        cursors: {server: log cursor} (the position of the last sweep that finished).
        plan: what to read; None: :meth:`ReadPlan.for_checks` of ``checks``.
        checks: the enabled checks (CheckSpec); None: every registered server check of ``--level bmc``.
        cache: documents by ETag, for a driver that can ask ``If-None-Match`` (the Redfish one: a file path, or its
            ``ReadingCache``): a 304 is judged on the kept document (the same verdicts). None: none, unless
            ``$FLEETCTL_SWEEP_CACHE`` names a file (``default``: ``redfish-cache.sqlite`` in the user's data folder).
    """
    if plan is None:
        from fleetctl.sweep.registry import checks as registered

        plan = ReadPlan.for_checks(registered("server", "bmc") if checks is None else checks)
    if cache is None:
        cache = _default_cache()

    async def op(bmc: Any) -> ServerReading:
        r = ServerReading()
        name = bmc.target.name
        if hasattr(bmc, "wants"):  # a driver that can read less (the Redfish one): tell it what the checks need
            bmc.wants = plan.needs
        if cache is not None and hasattr(bmc, "use_cache"):
            await bmc.use_cache(cache)

        # Facts and health share System and Chassis (read once); manager, logs and firmware are apart.
        # A part no enabled check judges is not read: it stays None, with no error (nothing judges it).
        jobs = [job for job in (
            ("facts", bmc.inventory.facts, _NO_ARGS),
            ("health", bmc.health.report, _NO_ARGS),
            ("manager", bmc.manager.facts, _NO_ARGS),
            ("logs", bmc.health.log_entries, {"since": cursors.get(name)}),
            ("firmware", bmc.firmware.inventory, _NO_ARGS),
        ) if plan.part(job[0])]  # fmt: skip
        got = await read_parts(jobs, r, name)
        r.facts, r.health, r.manager, r.firmware = (got.get(k) for k in ("facts", "health", "manager", "firmware"))
        logs = got.get("logs")
        if logs is not None:
            r.logs, r.log_cursor = logs
        else:
            r.log_cursor = cursors.get(name)
        r.fingerprint = bmc.fingerprint
        return r

    return op


#: How many parts of one BMC's reading are read at once (:func:`read_parts`). The BMC's own bound (``max_in_flight``,
#: 2) is what limits its requests; a third reader keeps two requests ready where two parts wait on one shared
#: document (facts and health both start with System, read once). A task per part (5) bought nothing more and
#: cost a suspended task, a closure and a gather per part (issue 24).
PART_READERS = 3

_NO_ARGS: dict[str, Any] = {}


async def read_parts(jobs: list[tuple[str, Any, dict[str, Any]]], r: ServerReading, name: str) -> dict[str, Any]:
    """{label: what ``read(**kwargs)`` gave} for each job, at most :data:`PART_READERS` at once, in the jobs' order.

    A part that fails is that part's error in ``r.errors`` (prefixed with the BMC's name), and the others are
    still read. Cancelled (the BMC's deadline, the command stopped), the readers still running are cancelled with
    it and waited for: none outlives the BMC's read, whose end logs out and may close the connections.
    """
    got: dict[str, Any] = {}
    queue = iter(jobs)
    n = min(PART_READERS, len(jobs))
    others = [asyncio.ensure_future(_read_parts(queue, got, r, name)) for _ in range(n - 1)]
    try:
        await _read_parts(queue, got, r, name)
        for t in others:
            await t
    except BaseException:
        for t in others:
            t.cancel()
        if others:
            await asyncio.wait(others)
            for t in others:
                if not t.cancelled():
                    t.exception()  # retrieved: what the cancelled reader raised is not logged as never retrieved
        raise
    return got


async def _read_parts(queue: Any, got: dict[str, Any], r: ServerReading, name: str) -> None:
    """One reader: the next part from the shared ``queue`` until none is left (a loop over at most 5 parts, each
    awaiting its requests, so the deadline lands as it did)."""
    for label, read, kwargs in queue:
        try:
            got[label] = await read(**kwargs)
        except Exception as e:  # noqa: BLE001 - a part the BMC cannot give is that part's verdict
            msg = str(e) if str(e) else type(e).__name__
            r.errors[label] = msg if msg.startswith(name) else f"{name}: {msg}"


def _default_cache() -> str | None:
    """The document cache file ``$FLEETCTL_SWEEP_CACHE`` names (``default``: the user's data folder), or None.

    A path: the driver opens it (one per process); the core never imports a driver's cache.
    """
    import os

    where = os.environ.get("FLEETCTL_SWEEP_CACHE", "")
    if not where or where.lower() in ("0", "off", "no"):
        return None
    if where == "default":
        from fleetctl.config import data_dir

        return str(data_dir() / "redfish-cache.sqlite")
    return where


def server_expectations(conn: Any, names: list[str], cursors: dict[str, dict[str, Any]], *, max_skew_s: float,
                        criteria: Any = None) -> dict[str, ServerExpect]:  # fmt: skip
    """{server: ServerExpect} for the named servers, from the inventory.

    ``criteria`` (a ``CriteriaFile``, as burn-in is given with ``--criteria``) sets each server's criteria for its
    board kind and model; without it the host checks judge by the criteria in force.
    """
    from fleetctl.store import tables as T

    out: dict[str, ServerExpect] = {}
    q = (
        select(T.server.c.id, T.server.c.name, T.server.c.serial, T.server.c.position, T.server.c.model_id,
               T.rack.c.name.label("rack"), T.site.c.name.label("site"), T.hardware_model.c.name.label("model"),
               T.hardware_model.c.board_kind, T.hardware_model.c.board_count)  # fmt: skip
        .join(T.rack, T.rack.c.id == T.server.c.rack_id)
        .join(T.site, T.site.c.id == T.rack.c.site_id)
        .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
    )
    boards = select(T.accelerator_board.c.server_id, T.accelerator_board.c.slot, T.accelerator_board.c.kind,
                    T.accelerator_board.c.serial, T.accelerator_board.c.position)  # fmt: skip
    by_id: dict[int, ServerExpect] = {}
    model_of: dict[int, int] = {}
    # The named servers and their boards only, a chunk at a time: a shard of a 10,000-server fleet (a worker process's)
    # reads its own, not the fleet's 10,000 servers and 40,000 boards to keep a few.
    for chunk in _chunks(sorted(set(names))):
        ids: list[int] = []
        for r in conn.execute(q.where(T.server.c.name.in_(chunk))):
            e = ServerExpect(r.name, r.serial, r.model, r.site, r.rack, r.position, r.board_kind, r.board_count or 0,
                             log_cursor=(cursors.get(r.name) or {}).get("log_cursor"), max_skew_s=max_skew_s,
                             criteria=criteria.for_board(r.board_kind or "", r.model) if criteria is not None else None)  # fmt: skip
            out[r.name] = by_id[r.id] = e
            model_of[r.id] = r.model_id
            ids.append(r.id)
        for b in conn.execute(boards.where(T.accelerator_board.c.server_id.in_(ids)).order_by(T.accelerator_board.c.id)):
            by_id[b.server_id].boards.append(BoardExpect(b.slot, b.kind, b.serial, b.position))
    baselines: dict[int, dict[str, str]] = {}
    for fb in conn.execute(select(T.firmware_baseline.c.model_id, T.firmware_baseline.c.component, T.firmware_baseline.c.version)):
        baselines.setdefault(fb.model_id, {})[fb.component] = fb.version
    for sid, e in by_id.items():
        e.baseline = baselines.get(model_of[sid], {})
    return out


def _chunks(items: list[str], n: int = 500) -> list[list[str]]:
    """``items`` in lists of ``n``: an IN list SQLite and PostgreSQL both take."""
    return [items[i : i + n] for i in range(0, len(items), n)]


@dataclass
class SwitchReading:
    """One SNMP poll of a switch, and the previous sweep's poll (rebuilt from the cursor)."""

    poll: Any  # PollResult
    previous: Any = None  # PollResult or None
    rates: Any = None  # Rates or None


@dataclass
class SwitchExpect:
    name: str
    site: str
    rack: str
    cabled: dict[str, Any] = field(default_factory=dict)  # port -> Expected (LLDP neighbour)
    max_temp_c: float = 85.0
    warn_temp_c: float = 75.0
    error_rate_warning: float = 0.01  # errors per second on a port
    error_rate_critical: float = 1.0
    discard_rate_warning: float = 100.0


def switch_cursor(poll: Any) -> dict[str, Any]:
    """What the next sweep needs of this poll: uptime, time, and each port's counters."""
    keep = ("index", "name", "oper_up", "last_change_ticks", "in_octets", "out_octets", "octets_bits",
            "in_errors", "out_errors", "in_discards", "out_discards")  # fmt: skip
    return {
        "polled_at": poll.polled_at.isoformat(), "sys_uptime_ticks": poll.sys_uptime_ticks,
        "host": poll.host, "port": poll.port,
        "interfaces": [{k: getattr(i, k) for k in keep} for i in poll.interfaces],
    }  # fmt: skip


def previous_poll(name: str, cursor: dict[str, Any] | None) -> Any:
    """The PollResult a cursor stands for (None without one)."""
    from fleetctl.interfaces.snmp import InterfaceCounters, PollResult

    if not cursor or "polled_at" not in cursor:
        return None
    return PollResult(target=name, host=cursor.get("host") or "", port=cursor.get("port") or 161,
                      polled_at=dt.datetime.fromisoformat(cursor["polled_at"]), sys_uptime_ticks=cursor.get("sys_uptime_ticks"),
                      interfaces=[InterfaceCounters(**i) for i in cursor.get("interfaces") or []])  # fmt: skip


def switch_expectations(conn: Any, switches: list[Any]) -> dict[str, SwitchExpect]:
    from fleetctl.store import tables as T
    from fleetctl.workflows.network import expected_neighbours

    sites = dict(conn.execute(select(T.rack.c.name, T.site.c.name).join(T.site, T.site.c.id == T.rack.c.site_id)).all())
    plan = expected_neighbours(conn, {s.name for s in switches})
    return {s.name: SwitchExpect(s.name, sites.get(s.rack, ""), s.rack, cabled=plan.get(s.name, {})) for s in switches}


def cabled_targets(targets: list[Any], expect: dict[str, SwitchExpect]) -> list[Any]:
    """The SNMP targets, each with the ports whose counters the switch checks judge: those the plan cables.

    Every port is still listed (name, oper status); only the cabled ones' counters are read
    (``SnmpTarget.ports``). A switch the plan cables nothing on keeps ``ports=None``, every
    port's counters: without a plan for it, no port is known to matter less than another.
    """
    out = []
    for t in targets:
        e = expect.get(t.name)
        out.append(t.model_copy(update={"ports": tuple(sorted(e.cabled))}) if e is not None and e.cabled else t)
    return out
