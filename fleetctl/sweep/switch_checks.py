"""The built-in switch checks: one SNMP poll, the previous sweep's, and the cabling plan.

Rates are counter deltas since the previous sweep's poll of the same switch
(kept as a cursor), so a daily sweep judges a day of errors, not a
five-second sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from fleetctl.sweep.collect import SwitchExpect, SwitchReading
from fleetctl.sweep.model import Problem, Status, problem
from fleetctl.sweep.registry import check
from fleetctl.workflows.network import compare_lldp

C, W, U = Status.CRITICAL, Status.WARNING, Status.UNKNOWN


@check("switch.reachable", kind="switch", severity=C, reads=("SNMP sysUpTime",), cost="1 request")
def reachable(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """The switch's SNMP agent answers (and accepts our credentials)."""
    p = r.poll
    if not p.ok:
        status = U if p.error_kind == "config" else C
        yield problem(status, p.error or "no answer", error_kind=p.error_kind)


@check("switch.rebooted", kind="switch", severity=W, reads=("SNMP sysUpTime",))
def rebooted(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """The switch has not rebooted since the last sweep (sysUpTime went down)."""
    if r.poll.ok and r.rates is not None and r.rates.rebooted:
        up = (r.poll.sys_uptime_ticks or 0) / 100
        yield problem(W, f"rebooted since the last sweep (up {up:.0f} s)", uptime_s=up,
                      previous_uptime_s=(r.previous.sys_uptime_ticks or 0) / 100 if r.previous else None)  # fmt: skip


def _by_name(poll: Any) -> dict[str, Any]:
    return {i.label: i for i in poll.interfaces}


@check("port.status", kind="switch", severity=C, reads=("IF-MIB ifOperStatus",), cost="part of one IF-MIB walk")
def port_status(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """Every port the cabling plan says is cabled is up."""
    if not r.poll.ok or not r.poll.interfaces:
        return
    ports = _by_name(r.poll)
    for name, want in sorted(e.cabled.items()):
        i = ports.get(name)
        if i is None:
            yield problem(W, f"{name}: cabled to {want} in the plan, no such interface", name, expected=str(want))
        elif not i.oper_up:
            yield problem(C, f"{name}: {i.oper_status}, cabled to {want} in the plan", name, oper_status=str(i.oper_status),
                          admin_up=i.admin_up, expected=str(want))  # fmt: skip


@check("port.flaps", kind="switch", severity=W, reads=("IF-MIB ifLastChange",))
def port_flaps(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """A cabled port's link has not changed state since the last sweep (ifLastChange moved)."""
    if not r.poll.ok or r.previous is None or (r.rates is not None and r.rates.rebooted):
        return
    before = _by_name(r.previous)
    for name, i in sorted(_by_name(r.poll).items()):
        if name not in e.cabled or name not in before:
            continue
        was, now = before[name].last_change_ticks, i.last_change_ticks
        if was is not None and now is not None and now != was:
            state = "up" if i.oper_up else str(i.oper_status)
            yield problem(W, f"{name}: link changed state since the last sweep, now {state} (last change at {now / 100:.0f} s of uptime)",
                          name, last_change_s=now / 100, previous_last_change_s=was / 100)  # fmt: skip


@check("port.errors", kind="switch", severity=W, reads=("IF-MIB ifInErrors, ifOutErrors, ifInDiscards, ifOutDiscards",),
       cost="GETs of the cabled ports' rows")  # fmt: skip
def port_errors(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """Error (CRC included: ifInErrors) and discard rates since the last sweep stay below the thresholds, on
    the ports the cabling plan cables (every port of a switch the plan cables nothing on)."""
    if r.rates is None or not r.rates.interfaces:
        return
    for i in r.rates.interfaces:
        # A port the plan does not cable is not judged by its counters (the sweep does not read them:
        # SnmpTarget.ports); a poller that read them anyway gives the same verdict.
        if e.cabled and (i.name or str(i.index)) not in e.cabled:
            continue
        errs = (i.in_errors_ps or 0.0) + (i.out_errors_ps or 0.0)
        disc = (i.in_discards_ps or 0.0) + (i.out_discards_ps or 0.0)
        name = i.name or str(i.index)
        ev = {"in_errors_ps": i.in_errors_ps, "out_errors_ps": i.out_errors_ps, "in_discards_ps": i.in_discards_ps,
              "out_discards_ps": i.out_discards_ps, "interval_s": r.rates.interval_s}  # fmt: skip
        if errs >= e.error_rate_critical:
            yield problem(C, f"{name}: {errs:.2f} errors/s since the last sweep", name, **ev)
        elif errs >= e.error_rate_warning:
            yield problem(W, f"{name}: {errs:.3f} errors/s since the last sweep", name, **ev)
        elif disc >= e.discard_rate_warning:
            yield problem(W, f"{name}: {disc:.0f} discards/s since the last sweep", name, **ev)


@check("lldp", kind="switch", severity=C, reads=("LLDP-MIB lldpRemTable",), cost="one LLDP-MIB walk")
def lldp(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """LLDP neighbours match the cabling plan (a swapped cable is critical; a silent neighbour on an up port a warning)."""
    if not r.poll.ok or "lldp" not in (r.poll.what or ["lldp"]):
        return

    neighbours = [SimpleNamespace(local_port=n.local_port, remote_system=n.remote_sysname, remote_port=n.remote_port_id)
                  for n in r.poll.lldp]  # fmt: skip
    rep = compare_lldp(e.name, e.cabled, neighbours)
    ports = _by_name(r.poll)
    for it in rep.miscabled:
        yield problem(C, f"{it['port']}: LLDP sees {it['found']}, the plan says {it['expected']}", it["port"],
                      expected=it["expected"], found=it["found"])  # fmt: skip
    for it in rep.missing:
        i = ports.get(it["port"])
        if i is not None and i.oper_up:  # a down port is port.status's finding
            yield problem(W, f"{it['port']}: up, but no LLDP neighbour (the plan says {it['expected']})", it["port"],
                          expected=it["expected"], found=None)  # fmt: skip
    for it in rep.unexpected:
        yield problem(W, f"{it['port']}: LLDP sees {it['found']}, not in the cabling plan", it["port"], expected=None, found=it["found"])


@check("switch.environment", kind="switch", severity=C, reads=("ENTITY-SENSOR-MIB entPhySensorValue, OperStatus",))
def environment(r: SwitchReading, e: SwitchExpect) -> Iterator[Problem]:
    """Sensors are operational and temperatures below 85 C (75 C: a warning)."""
    if not r.poll.ok:
        return
    for s in r.poll.sensors:
        name = s.name or f"sensor {s.index}"
        if str(s.oper_status) == "nonoperational":
            yield problem(C, f"{name}: nonoperational", name, oper_status=str(s.oper_status), value=s.value)
        elif s.type == "celsius" and s.value is not None and s.value >= e.max_temp_c:
            yield problem(C, f"{name}: {s.value:.0f} C (limit {e.max_temp_c:g} C)", name, value=s.value, limit=e.max_temp_c)
        elif s.type == "celsius" and s.value is not None and s.value >= e.warn_temp_c:
            yield problem(W, f"{name}: {s.value:.0f} C (warning at {e.warn_temp_c:g} C)", name, value=s.value, limit=e.warn_temp_c)


def metrics(r: SwitchReading) -> dict[str, Any]:
    """What is kept per switch per run: uptime, ports up, temperatures, each port's error rates."""
    p = r.poll
    if not p.ok:
        return {}
    out: dict[str, Any] = {
        "uptime_s": (p.sys_uptime_ticks or 0) // 100,
        "ports_up": sum(1 for i in p.interfaces if i.oper_up),
        "ports": len(p.interfaces),
        "temperatures": {s.name or str(s.index): s.value for s in p.sensors if s.type == "celsius" and s.value is not None},
    }
    if r.rates is not None and r.rates.interfaces:
        out["port_rates"] = {
            (i.name or str(i.index)): {"in_errors_ps": i.in_errors_ps, "out_errors_ps": i.out_errors_ps,
                                       "in_discards_ps": i.in_discards_ps, "out_discards_ps": i.out_discards_ps}
            for i in r.rates.interfaces
            if any(v for v in (i.in_errors_ps, i.out_errors_ps, i.in_discards_ps, i.out_discards_ps))
        }  # fmt: skip
        out["interval_s"] = r.rates.interval_s
    return out
