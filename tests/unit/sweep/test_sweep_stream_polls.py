"""A switch's poll is judged and recorded as it ends, while the BMCs are still read, then let go (issue 24).

Before, the 500 switches' polls (every port's counters, LLDP neighbours, sensors) were held until the last BMC
was read, then judged: memory that grew with the switches for the whole sweep. The poller runs in a thread of its
own; its progress hands each poll to the sweep's loop, which records the verdict (the recorder is that thread's).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

from fleetctl.interfaces.snmp import InterfaceCounters, PollResult, SnmpTarget
from fleetctl.store import get_engine
from fleetctl.sweep import engine as E


def _poll(target: str, k: int) -> PollResult:
    ifs = [InterfaceCounters(index=i, name=f"Ethernet{i}", oper_up=True, last_change_ticks=100) for i in range(1, 65)]
    return PollResult(target=target, host="127.0.0.1", port=161, polled_at=dt.datetime.now(dt.UTC), sys_uptime_ticks=10_000 + k,
                      interfaces=ifs, what=["if"])  # fmt: skip


def test_switch_polls_are_recorded_before_the_bmcs_end_and_let_go(example_loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl.cli.sweep import resolve_both

    eng = get_engine()
    with eng.connect() as c:
        servers, switches = resolve_both(c, ["all"])
    polled: list[PollResult] = []
    expected: set[str] = set()  # the switches the poller was given

    def sweep_sync(kind: str, targets: list[Any], *, progress: Any = None, **_kw: Any) -> list[PollResult]:
        assert kind == "snmp" and progress is not None
        expected.update(t.name for t in targets)
        for k, t in enumerate(targets):
            polled.append(_poll(t.name, k))
            progress(k + 1, len(targets), polled[-1])
        return list(polled)

    seen_while_reading: list[set[str]] = []

    async def sweep_streams(kind: str, streams: list[Any], *_a: Any, progress: Any = None, **_kw: Any) -> None:
        # The BMC part: wait (bounded) for the switches' verdicts, as a long BMC read would.
        # Every switch, not those polled so far: the poller's thread may be midway (a CI run broke out after the
        # first 2 of 11). Bounded and generous; a sweep that records the polls only after the BMCs end never gets
        # them here, however long it waits.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = {v.name for v, _cur in rec.buffer if v.kind == "switch"}
            if expected and got >= expected:
                break
            await asyncio.sleep(0.01)
        seen_while_reading.append(got)

    # The example site's switches carry no SNMP settings: every one of them is polled here all the same.
    monkeypatch.setattr(E, "snmp_targets", lambda sws, **_kw: ([SnmpTarget(name=w.name, host="127.0.0.1") for w in sws], {}))
    monkeypatch.setattr(E, "sweep_sync", sweep_sync)
    monkeypatch.setattr(E, "sweep_streams", sweep_streams)
    rec = E.Recorder(eng, 1, dt.datetime.now(dt.UTC))
    monkeypatch.setattr(rec, "flush", lambda: None)  # no run is opened: the verdicts stay in the buffer, looked at here
    asyncio.run(E.sweep_targets(eng, rec, servers, switches, E.SweepOptions(), None))

    assert polled, "the example site has switches the sweep polls"
    assert seen_while_reading == [{p.target for p in polled}]  # every poll recorded while the BMCs were read
    assert all(p.interfaces == [] for p in polled)  # and let go once judged
    assert sorted(v.name for v, _ in rec.buffer if v.kind == "switch") == sorted(w.name for w in switches)  # once each
