"""The built-in server checks: pure functions of a reading and the inventory's expectations.

Each yields :class:`~fleetctl.sweep.model.Problem` for what is wrong and
nothing when all is well; a part that could not be read is judged once, by
``bmc.read``, never silently as healthy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from fleetctl.inventory.boards import board_slot, is_placeholder_board_serial
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.model import Problem, Status, problem
from fleetctl.sweep.registry import check
from fleetctl.workflows.firmware import baseline_key

C, W, U = Status.CRITICAL, Status.WARNING, Status.UNKNOWN

# Redfish health values -> a status (None and OK are fine).
_HEALTH = {"Warning": W, "Critical": C}

# A temperature this close to its critical threshold (degrees C) is a warning.
TEMP_MARGIN_C = 5.0
# A clock off by this much is critical (certificates, logs and Kerberos go wrong).
SKEW_CRITICAL_S = 600.0
# On a server's first sweep (no log cursor yet), older entries are history, not news.
FIRST_SWEEP_LOG_WINDOW = dt.timedelta(days=1)
# Connection-level failures: the BMC did not answer as a BMC should.
_UNREACHABLE = {"Timeout", "BMCError", "ClientConnectorError", "ServerDisconnectedError", "OSError", "TimeoutError"}


def _health(value: str | None) -> Status | None:
    return _HEALTH.get(value or "")


# ----------------------------------------------------------------- the session


@check("bmc.reachable", kind="server", needs=(), severity=C, reads=("HTTPS to the BMC", "ServiceRoot"), cost="1 request")
def reachable(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The BMC answers over HTTPS within its timeout."""
    if r.session_error and r.session_error_type not in ("AuthError", "TLSMismatch"):
        status = C if (r.session_error_type or "") in _UNREACHABLE else U
        yield problem(status, r.session_error, error_type=r.session_error_type)


@check("bmc.login", kind="server", needs=(), severity=C, reads=("SessionService",), cost="2 requests (login, logout)")
def login(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The credential of the inventory logs in."""
    if r.session_error and r.session_error_type == "AuthError":
        yield problem(C, r.session_error)


@check("bmc.certificate", kind="server", needs=(), severity=C, reads=("TLS handshake",))
def certificate(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The BMC's certificate matches the pin in the inventory."""
    if r.session_error and r.session_error_type == "TLSMismatch":
        yield problem(C, r.session_error)


@check("bmc.read", kind="server", needs=(), severity=U, reads=("every resource below",))
def readable(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Every part of the sweep could be read (a part that could not is unknown, not healthy)."""
    for part, why in sorted(r.errors.items()):
        yield problem(U, f"{part} could not be read: {why}", part)


# ------------------------------------------------------------------- health


@check("system.health", kind="server", needs=("health",), severity=W, reads=("Systems/{id} Status",))
def system_health(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The system's own health (Status.Health) is OK."""
    if r.health and (s := _health(r.health.system_health)):
        yield problem(s, f"system health {r.health.system_health} (rollup {r.health.system_health_rollup})",
                      health=r.health.system_health, rollup=r.health.system_health_rollup)  # fmt: skip


@check("chassis.health", kind="server", needs=("health",), severity=W, reads=("Chassis/{id} Status",), cost="1 request")
def chassis_health(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The chassis's health is OK."""
    if r.health and (s := _health(r.health.chassis_health)):
        yield problem(s, f"chassis health {r.health.chassis_health}", health=r.health.chassis_health)


@check("psu", kind="server", needs=("health.psus",), severity=C, reads=("Chassis Power or PowerSubsystem/PowerSupplies",),
       cost="1-3 requests")  # fmt: skip
def psus(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each power supply present is healthy."""
    if not r.health:
        return
    if not r.health.psus:
        yield problem(U, "the BMC reports no power supplies (neither PowerSubsystem nor Power)", "none")
    for p in r.health.psus:
        if not p.ok:
            yield problem(_health(p.health) or W, f"PSU {p.name}: {p.health} ({p.state})", p.name, health=p.health, state=p.state)


@check("psu.redundancy", kind="server", needs=("health.psus",), severity=C, reads=("Chassis Power or PowerSubsystem/PowerSupplies",))
def psu_redundancy(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """A server with several PSUs keeps at least two working (N+1)."""
    if not r.health or len(r.health.psus) < 2:
        return
    present = [p for p in r.health.psus if p.state != "Absent"]
    working = [p for p in present if p.ok]
    if len(working) < 2:
        absent = len(r.health.psus) - len(present)
        yield problem(C, f"no PSU redundancy: {len(working)} healthy of {len(present)} present"
                      + (f" ({absent} bay{'s' if absent > 1 else ''} empty)" if absent else ""),
                      healthy=[p.name for p in working], present=len(present), bays=len(r.health.psus))  # fmt: skip


@check("fan", kind="server", needs=("health.fans",), severity=W, reads=("Chassis Thermal or ThermalSubsystem/Fans",), cost="1-2 requests")
def fans(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each fan present is healthy."""
    if not r.health:
        return
    if not r.health.fans:
        yield problem(U, "the BMC reports no fans (neither ThermalSubsystem nor Thermal)", "none")
    for f in r.health.fans:
        if not f.ok:
            yield problem(_health(f.health) or W, f"fan {f.name}: {f.health}" + (f" at {f.reading:g} {f.units or ''}".rstrip()
                          if f.reads and f.reading is not None else ""), f.name, health=f.health, reading=f.reading)  # fmt: skip


@check("temperature", kind="server", needs=("health.temperatures",), severity=C, reads=("Chassis Thermal or Sensors",))
def temperatures(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each temperature is below its thresholds (critical at or above them, a warning within 5 C).

    A sensor that is Absent is not judged; one offline or disabled (a powered-off
    server's) has no reading to judge, only the health its BMC gives it. A
    threshold at or below 0 C is no threshold (``Temperature.limit``).
    """
    if not r.health:
        return
    if not r.health.temperatures:
        yield problem(U, "the BMC reports no temperatures (neither Sensors nor Thermal)", "none")
    for t in r.health.temperatures:
        if t.absent:
            continue
        limit = t.limit
        reading = t.reading if t.reads else None
        ev = {"reading_c": t.reading, "upper_critical": t.upper_critical, "upper_fatal": t.upper_fatal, "health": t.health,
              "state": t.state}  # fmt: skip
        if reading is not None and limit is not None and reading >= limit:
            yield problem(C, f"{t.name} {reading:g} C, at or above its limit {limit:g} C", t.name, **ev)
        elif (s := _health(t.health)) is not None:
            yield problem(s, f"{t.name} {t.health}" + (f" at {reading:g} C" if reading is not None else f" ({t.state})"
                          if t.state else ""), t.name, **ev)  # fmt: skip
        elif reading is not None and limit is not None and reading >= limit - TEMP_MARGIN_C:
            yield problem(W, f"{t.name} {reading:g} C, within {TEMP_MARGIN_C:g} C of its limit {limit:g} C", t.name, **ev)


@check("bmc.log", kind="server", needs=("logs",), severity=W, reads=("Systems and Managers LogServices/*/Entries",), cost="2-6 requests")
def log_entries(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """No Warning or Critical BMC log entry since the last sweep."""
    if not r.logs:
        return
    bad = [x for x in r.logs if (x.severity or "") in ("Warning", "Critical")]
    if e.log_cursor is None:  # the first sweep of this server: only the last day's entries are news
        since = e.now - FIRST_SWEEP_LOG_WINDOW
        bad = [x for x in bad if x.created is not None and x.created >= since]
    if not bad:
        return
    status = C if any(x.severity == "Critical" for x in bad) else W
    newest = bad[-1]
    yield problem(status, f"{len(bad)} new log entr{'y' if len(bad) == 1 else 'ies'} since the last sweep, newest: "
                  f"{newest.severity} {newest.message or newest.message_id or ''}".rstrip(),
                  entries=[x.model_dump(mode="json") for x in bad[-20:]], count=len(bad))  # fmt: skip


@check("bmc.clock", kind="server", needs=("manager",), severity=W, reads=("Managers/{id} DateTime",), cost="1 request")
def clock(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The BMC's clock is within 30 s of ours (600 s: critical)."""
    skew = r.manager.clock_skew_seconds if r.manager else None
    if skew is not None and abs(skew) > e.max_skew_s:
        yield problem(C if abs(skew) > SKEW_CRITICAL_S else W, f"BMC clock off by {skew:+.0f} s", skew_s=round(skew, 1))


# ----------------------------------------------------------------- firmware


@check("firmware.baseline", kind="server", needs=("firmware",), severity=W, reads=("UpdateService/FirmwareInventory",),
       cost="1 + N requests")  # fmt: skip
def firmware(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each component of the model's firmware baseline runs the baseline's version."""
    if r.firmware is None or not e.baseline:
        return

    seen: dict[str, list[str | None]] = {}
    for comp in r.firmware:
        k = baseline_key(e.baseline, comp)
        if k is not None:
            seen.setdefault(k, []).append(comp.version)
    for comp_name, want in sorted(e.baseline.items()):
        have = seen.get(comp_name)
        if have is None:
            yield problem(W, f"{comp_name}: not reported by the BMC (baseline {want})", comp_name, baseline=want, running=None)
            continue
        off = sorted({str(v) for v in have if v != want})
        if off:
            yield problem(W, f"{comp_name}: {', '.join(off)}, baseline {want}", comp_name, baseline=want, running=off)


# ------------------------------------------------------------ accelerators


def _board_label(b: Any) -> str:
    return f"slot {b.slot}" if b.slot is not None else (b.serial or b.pci_address or "board")


def _norm(serial: str | None) -> str:
    return (serial or "").strip().upper()


def match_boards(r: ServerReading, e: ServerExpect) -> tuple[list[Any], dict[int, Any]]:
    """The inventory's boards the BMC does not show, and {index of a BMC board: the inventory board it is}.

    A board is found by its serial (and its position among boards sharing
    one: NVIDIA GB200/GB300 modules); a board recorded without a serial (the
    placeholder ``server inspect`` gives it) by its slot, as inspection
    recorded it, among the BMC's boards that report none.
    """
    bmc = list(r.facts.boards) if r.facts else []
    free = set(range(len(bmc)))
    matched: dict[int, Any] = {}
    rest = []
    for d in e.boards:  # first by serial, the board of the same position first where the BMC numbered them
        cands = [] if is_placeholder_board_serial(e.name, d.serial) else sorted(
            (i for i in free if _norm(bmc[i].serial) == _norm(d.serial) and (d.position is None or bmc[i].position in (None, d.position))),
            key=lambda i: (bmc[i].position != d.position, i))  # fmt: skip
        if cands:
            free.discard(cands[0])
            matched[cands[0]] = d
        else:
            rest.append(d)
    missing = []
    for d in rest:  # then by slot, among the boards reporting no serial (the BMC may stop reporting one it did)
        cands = [i for i in sorted(free) if not _norm(bmc[i].serial) and board_slot(bmc[i], i) == d.slot]
        if not cands and is_placeholder_board_serial(e.name, d.serial):
            # recorded without a serial, it reports one now: the same board (inspection records it)
            cands = [i for i in sorted(free) if board_slot(bmc[i], i) == d.slot]
        if cands:
            free.discard(cands[0])
            matched[cands[0]] = d
        else:
            missing.append(d)
    return missing, matched


@check("accel.present", kind="server", needs=("facts.devices",), severity=C,
       reads=("Chassis PCIeDevices/PCIeFunctions", "Systems Processors"),
       cost="1 + 2 per device")  # fmt: skip
def accel_present(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Every accelerator board of the inventory is seen by the BMC.

    Boards are matched by serial (and position, where boards share a serial),
    a board without a serial by its slot: a board the BMC reports without a
    serial is no finding (the metrics count it: ``boards_no_serial``).
    """
    if r.facts is None or not (e.boards or e.board_count):
        return

    missing, _ = match_boards(r, e)
    for b in missing:
        if is_placeholder_board_serial(e.name, b.serial):
            yield problem(C, f"board in slot {b.slot} ({b.kind}, recorded without a serial) not seen by the BMC", f"slot {b.slot}",
                          serial=None, kind=b.kind)  # fmt: skip
            continue
        label = b.serial if b.position is None else f"{b.serial} #{b.position}"
        yield problem(C, f"board {label} ({b.kind}, slot {b.slot}) not seen by the BMC", f"slot {b.slot}",
                      serial=b.serial, position=b.position, kind=b.kind)  # fmt: skip
    if not e.boards and e.board_count and len(r.facts.boards) < e.board_count:
        yield problem(C, f"{len(r.facts.boards)} of {e.board_count} {e.board_kind} boards seen", "count",
                      seen=len(r.facts.boards), expected=e.board_count)  # fmt: skip


def _link(d: Any) -> str:
    return f"Gen{d.link_gen or '?'} x{d.link_width or '?'}"


@check("accel.pcie", kind="server", needs=("facts.devices",), severity=W, reads=("PCIeDevices PCIeInterface",))
def accel_pcie(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each accelerator's PCIe link trained at the generation and width it supports."""
    if r.facts is None:
        return
    devices = {d.id: d for d in r.facts.pcie_devices}
    for b in r.facts.boards:
        d = devices.get(b.pcie_device_id or "")
        if d is not None and d.link_degraded:
            yield problem(W, f"board {b.serial or ''} PCIe link {_link(d)}, capable of Gen{d.max_link_gen or '?'} "
                          f"x{d.max_link_width or '?'}", _board_label(b), serial=b.serial, link_gen=d.link_gen,
                          link_width=d.link_width, max_link_gen=d.max_link_gen, max_link_width=d.max_link_width)  # fmt: skip


@check("accel.health", kind="server", needs=("facts.devices",), severity=C, reads=("PCIeDevices Status",))
def accel_health(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """Each accelerator board reports itself healthy."""
    if r.facts is None:
        return
    for b in r.facts.boards:
        if (s := _health(b.health)) is not None:
            yield problem(s, f"board {b.serial or _board_label(b)} health {b.health}", _board_label(b), serial=b.serial, health=b.health)


# ----------------------------------------------------------------- inventory


@check("inventory.drift", kind="server", needs=("facts", "facts.devices"), severity=W, reads=("Systems/{id} SerialNumber", "PCIeDevices"))
def drift(r: ServerReading, e: ServerExpect) -> Iterator[Problem]:
    """The BMC describes the server the inventory holds (serial, boards)."""
    if r.facts is None:
        return
    if r.facts.serial and e.serial and r.facts.serial.strip() != e.serial:
        yield problem(W, f"serial: inventory {e.serial}, BMC {r.facts.serial.strip()}", "serial",
                      inventory=e.serial, bmc=r.facts.serial.strip())  # fmt: skip
    declared = {b.serial for b in e.boards}
    for b in r.facts.boards:
        if b.serial and declared and b.serial not in declared:
            yield problem(W, f"board {b.serial} seen by the BMC, not in the inventory", f"board {b.serial}", serial=b.serial)


#: Roll-up checks, and the part checks that explain them: a rollup no worse than
#: what a part finding already says is dropped (a failed PSU is one finding,
#: not three).
ROLLUPS = {"system.health": ("psu", "fan", "temperature", "accel.health", "psu.redundancy"),
           "chassis.health": ("psu", "fan", "temperature", "psu.redundancy")}  # fmt: skip


def explained(findings: list[Any]) -> list[Any]:
    """The findings without the roll-ups their parts explain."""
    out = []
    for f in findings:
        parts = ROLLUPS.get(f.check)
        if parts:
            # a part that could not be read explains nothing
            worst_part = max((g.status.rank for g in findings if g.check in parts and g.status != U), default=-1)
            if worst_part >= f.status.rank:
                continue
        out.append(f)
    return out


def metrics(r: ServerReading) -> dict[str, Any]:
    """The small readings kept per server per run, for metrics and reports."""
    out: dict[str, Any] = {}
    if r.health:
        # an absent or offline sensor's 0 is no temperature
        temps = {t.name: t.reading for t in r.health.temperatures if t.reads and t.reading is not None}
        if temps:
            out["temperatures"] = temps
            out["max_temp_c"] = max(temps.values())
        out["psus_ok"] = sum(1 for p in r.health.psus if p.ok)
        out["psus"] = len(r.health.psus)
        out["fans_ok"] = sum(1 for f in r.health.fans if f.ok)
    if r.manager and r.manager.clock_skew_seconds is not None:
        out["clock_skew_s"] = round(r.manager.clock_skew_seconds, 1)
    if r.firmware is not None:
        out["firmware"] = {c.id: c.version for c in r.firmware}
    if r.facts is not None:
        out["boards"] = len(r.facts.boards)
        # boards the BMC reports without a serial: known by their slot, said here rather than as a finding
        if no_serial := sum(1 for b in r.facts.boards if not _norm(b.serial)):
            out["boards_no_serial"] = no_serial
    return out
