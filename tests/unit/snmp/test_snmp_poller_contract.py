"""The pysnmp/BER poller as the fleetctl.snmp entry point: a Poller class whose sweep
gives one PollResult per target, in order, with progress."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket

from fleetctl import plugins
from fleetctl.interfaces.snmp import Poller, PollResult, SnmpTarget


def _dead_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_entry_point_is_the_poller_class() -> None:
    cls = plugins.load_driver("snmp", "pysnmp")
    assert issubclass(cls, Poller) and not cls.__abstractmethods__


def test_sweep_gives_a_result_per_target_in_order_with_progress() -> None:
    port = _dead_port()
    targets = [SnmpTarget(name=f"sw{i}", host="127.0.0.1", port=port, timeout=0.2, retries=0) for i in range(3)] + [
        SnmpTarget(name="bad", host="127.0.0.1", port=port, version="3")
    ]  # no user: a config error
    seen: list[tuple[int, int]] = []
    results = plugins.sweep("snmp", targets, what=("if",), progress=lambda d, n, r: seen.append((d, n)))
    assert [r.target for r in results] == ["sw0", "sw1", "sw2", "bad"]
    assert all(isinstance(r, PollResult) and not r.ok for r in results)
    assert results[3].error_kind == "config"
    assert sorted(seen) == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_rates_through_the_class() -> None:
    cls = plugins.load_driver("snmp", "pysnmp")
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    a = PollResult(target="sw", host="h", port=161, polled_at=t0, sys_uptime_ticks=100)
    b = PollResult(target="sw", host="h", port=161, polled_at=t0 + dt.timedelta(seconds=10), sys_uptime_ticks=50)
    assert cls.rates(a, b).rebooted is True


def test_poller_instance_as_context_manager() -> None:
    async def body() -> None:
        cls = plugins.load_driver("snmp", "pysnmp")
        async with cls() as p:
            (r,) = await p.poll_many([SnmpTarget(name="x", host="127.0.0.1", community="")])
            assert r.error_kind == "config"

    asyncio.run(body())
