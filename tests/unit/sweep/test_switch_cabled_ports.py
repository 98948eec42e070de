"""The switch checks judge counters on the ports the cabling plan cables; the sweep reads no others.

A port the plan does not cable is not judged by its counters (port.errors),
whether or not a poller read them: the sweep asks for the cabled ports'
counters only (``SnmpTarget.ports``), and a poller that reads every port
(another driver, or a switch the plan cables nothing on) gives the same
verdicts. A switch the plan cables nothing on keeps every port judged.
"""

from __future__ import annotations

import datetime as dt

from fleetctl_drivers.snmp.rates import rates

from fleetctl.interfaces.snmp import InterfaceCounters, PollResult, SnmpTarget
from fleetctl.sweep.collect import SwitchExpect, SwitchReading, cabled_targets
from fleetctl.sweep.engine import _evaluate
from fleetctl.workflows.network import Expected

T0 = dt.datetime(2026, 12, 1, 6, 0, tzinfo=dt.UTC)
DAY = 86_400


def poll(at: dt.datetime, errors: dict[str, int | None]) -> PollResult:
    """Every port up; ``errors``: each port's ifInErrors (None: not read)."""
    ifs = [InterfaceCounters(index=k, name=name, oper_up=True, last_change_ticks=100, in_errors=e, out_errors=None if e is None else 0,
                             in_discards=None if e is None else 0, out_discards=None if e is None else 0)
           for k, (name, e) in enumerate(sorted(errors.items()), 1)]  # fmt: skip
    up = 500_000 + int((at - T0).total_seconds()) * 100
    return PollResult(target="sw", host="127.0.0.1", port=161, polled_at=at, sys_uptime_ticks=up, interfaces=ifs, what=["if"])


def found(cabled: dict[str, Expected], before: PollResult, now: PollResult) -> set[tuple[str, str, str]]:
    e = SwitchExpect("sw", "s", "r", cabled=cabled)
    reading = SwitchReading(now, before, rates(before, now))
    return {(f.check, f.subject, f.status.value) for f in _evaluate("switch", "sw", reading, e, "bmc") if f.check == "port.errors"}


PLAN = {"Ethernet1": Expected("h1", {"eth0"}, "eth0")}


def test_errors_on_a_port_the_plan_does_not_cable_are_not_judged() -> None:
    # A poller that read every port: Ethernet9 (not in the plan) has errors, Ethernet1 (cabled) has none.
    before = poll(T0, {"Ethernet1": 0, "Ethernet9": 0})
    now = poll(T0 + dt.timedelta(days=1), {"Ethernet1": 0, "Ethernet9": 5 * DAY})
    assert found(PLAN, before, now) == set()
    # the cabled port's errors still are
    now = poll(T0 + dt.timedelta(days=1), {"Ethernet1": 5 * DAY, "Ethernet9": 5 * DAY})
    assert found(PLAN, before, now) == {("port.errors", "Ethernet1", "critical")}


def test_a_poll_of_the_cabled_ports_gives_the_verdicts_of_a_poll_of_every_port() -> None:
    every = [poll(T0 + dt.timedelta(days=d), {"Ethernet1": d * 9000, "Ethernet9": d * 5 * DAY}) for d in (0, 1)]
    cabled = [poll(T0 + dt.timedelta(days=d), {"Ethernet1": d * 9000, "Ethernet9": None}) for d in (0, 1)]
    assert found(PLAN, *every) == found(PLAN, *cabled) == {("port.errors", "Ethernet1", "warning")}


def test_a_switch_the_plan_cables_nothing_on_has_every_port_judged() -> None:
    before = poll(T0, {"Ethernet1": 0, "Ethernet9": 0})
    now = poll(T0 + dt.timedelta(days=1), {"Ethernet1": 0, "Ethernet9": 5 * DAY})
    assert found({}, before, now) == {("port.errors", "Ethernet9", "critical")}


def test_the_sweep_asks_for_the_cabled_ports_of_each_switch() -> None:
    targets = [SnmpTarget(name=n, host=f"192.0.2.{k}") for k, n in enumerate(("leaf1", "leaf2", "spine"), 1)]
    expect = {
        "leaf1": SwitchExpect("leaf1", "s", "r", cabled={"Ethernet9": PLAN["Ethernet1"], "Ethernet1": PLAN["Ethernet1"]}),
        "leaf2": SwitchExpect("leaf2", "s", "r", cabled={}),
    }
    got = {t.name: t.ports for t in cabled_targets(targets, expect)}
    assert got == {"leaf1": ("Ethernet1", "Ethernet9"), "leaf2": None, "spine": None}
