"""A poll with ``SnmpTarget.ports`` reads the per-port counters of those ports only, in requests the agent allows.

A scripted agent on 127.0.0.1 (fleetctl's own BER codec) serves a MIB from a
sorted table: GET, and GETBULK with the agent's own limits (a cap on the
varbinds of one answer, as snmpsim's 64 and net-snmp's ``maxGetbulkResponses``
100; or ``tooBig`` past a size, as an agent with a small message size). The
table is hand-made (no public recording with a whole IF-MIB was found): 64
ports numbered as Arista EOS numbers them (Ethernet1..48 at ifIndex 1..48,
breakout ports Ethernet49/1.. at 49001.., Management1 at 999001), so the
ifIndexes of the cabled ports are neither contiguous nor small.
"""

from __future__ import annotations

import asyncio
import bisect
from typing import Any

import pytest
from fleetctl_drivers.snmp import SnmpPoller
from fleetctl_drivers.snmp import ber as B
from fleetctl_drivers.snmp import parse as P

from fleetctl.interfaces.snmp import PollResult, SnmpTarget

NAMES = {i: f"Ethernet{i}" for i in range(1, 49)} | {49000 + k: f"Ethernet{49 + (k - 1) // 4}/{(k - 1) % 4 + 1}" for k in range(1, 16)}
NAMES[999001] = "Management1"
CABLED = ("Ethernet1", "Ethernet2", "Ethernet17", "Ethernet48", "Ethernet49/1", "Ethernet50/3", "Management1")


def mib(names: dict[int, str] = NAMES) -> dict[B.Oid, object]:
    """IF-MIB of a switch whose port ``i`` has ``i`` input errors (so a value names its row)."""
    t: dict[B.Oid, object] = {P.SYS_UPTIME: B.Typed(B.TIMETICKS, 500_000), P.SYS_NAME: b"leaf42", P.IF_NUMBER: len(names)}
    for i, name in names.items():
        t |= {
            (*P.IF_DESCR, i): name.encode(), (*P.IF_ADMIN_STATUS, i): 1, (*P.IF_OPER_STATUS, i): 1 if i % 2 else 2,
            (*P.IF_LAST_CHANGE, i): B.Typed(B.TIMETICKS, 100 + i), (*P.IF_IN_DISCARDS, i): B.Typed(B.COUNTER32, 0),
            (*P.IF_IN_ERRORS, i): B.Typed(B.COUNTER32, i), (*P.IF_OUT_DISCARDS, i): B.Typed(B.COUNTER32, 0),
            (*P.IF_OUT_ERRORS, i): B.Typed(B.COUNTER32, 0), (*P.IF_NAME, i): name.encode(),
            (*P.IF_HC_IN_OCTETS, i): B.Typed(B.COUNTER64, 10**12 + i), (*P.IF_HC_OUT_OCTETS, i): B.Typed(B.COUNTER64, 2 * 10**12 + i),
            (*P.IF_HIGH_SPEED, i): B.Typed(B.GAUGE32, 25_000), (*P.IF_ALIAS, i): b"",
        }  # fmt: skip
    return t


class MibAgent(asyncio.DatagramProtocol):
    """GET and GETBULK over a sorted table; ``cap``: varbinds one GETBULK answer holds at most;
    ``too_big``: an answer of more varbinds than this is refused with tooBig instead."""

    def __init__(self, table: dict[B.Oid, object], *, cap: int = 10_000, too_big: int | None = None) -> None:
        self.table, self.cap, self.too_big = table, cap, too_big
        self.oids = sorted(table)
        self.log: list[tuple[str, list[B.Oid], int, int]] = []  # kind, OIDs asked, max-repetitions, varbinds answered
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def _next(self, o: B.Oid) -> tuple[B.Oid, object]:
        k = bisect.bisect_right(self.oids, o)
        return (self.oids[k], self.table[self.oids[k]]) if k < len(self.oids) else (o, B.END_OF_MIB_VIEW)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        req = B.decode_message(data)
        asked = [o for o, _ in req.varbinds]
        vbs: list[tuple[B.Oid, object]] = []
        if req.pdu_type == B.GET_BULK_REQUEST:
            kind, reps = "bulk", req.error_index
            cursors = list(asked)
            for _ in range(reps):
                for k, c in enumerate(cursors):
                    o, v = self._next(c)
                    cursors[k] = o
                    vbs.append((o, v))
            vbs = vbs[: self.cap]
        else:
            kind, reps = "get", 0
            vbs = [(o, self.table.get(o, B.NO_SUCH_INSTANCE)) for o in asked]
        if self.too_big is not None and len(vbs) > self.too_big:
            out = B.encode_message(req.community, B.RESPONSE, req.request_id, req.varbinds, error_status=B.TOO_BIG)
            self.log.append((kind, asked, reps, 0))
        else:
            out = B.encode_message(req.community, B.RESPONSE, req.request_id, vbs)
            self.log.append((kind, asked, reps, len(vbs)))
        self.transport.sendto(out, addr)


def poll(agent: MibAgent, ports: tuple[str, ...] | None, *, what: tuple[str, ...] = ("if",), times: int = 1,
         poller: SnmpPoller | None = None) -> list[PollResult]:  # fmt: skip
    async def run() -> list[PollResult]:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: agent, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        target = SnmpTarget(name="leaf42", host="127.0.0.1", port=port, community="c", timeout=2.0, retries=0, ports=ports)
        try:
            async with poller or SnmpPoller() as p:
                return [await p.poll(target, what=what) for _ in range(times)]
        finally:
            transport.close()

    return asyncio.run(run())


def rows_read(agent: MibAgent, column: B.Oid) -> set[int]:
    """The rows of ``column`` the agent answered (GET asked, or GETBULK walked past)."""
    got: set[int] = set()
    for kind, asked, _reps, _ in agent.log:
        if kind == "get":
            got |= {o[len(column)] for o in asked if o[: len(column)] == column and len(o) == len(column) + 1}
        else:
            got |= {i for i in NAMES if any(o[: len(column)] == column for o in asked)}  # a walk reads every row
    return got


@pytest.mark.parametrize("path", ["ber", "pysnmp"])
def test_only_the_cabled_ports_counters_are_read_and_every_port_is_listed(path: str) -> None:
    agent = MibAgent(mib())
    (r,) = poll(agent, CABLED, poller=SnmpPoller(v2c=path))
    assert r.ok, r.error
    assert [i.index for i in r.interfaces] == sorted(NAMES)  # every port, named, with its oper status
    assert all(i.name == NAMES[i.index] and i.oper_up == bool(i.index % 2) for i in r.interfaces)
    by_name = {i.name: i for i in r.interfaces}
    for name in CABLED:
        i = by_name[name]
        assert (i.in_errors, i.in_octets, i.speed_mbps, i.last_change_ticks) == (i.index, 10**12 + i.index, 25_000, 100 + i.index)
        assert i.octets_bits == 64 and i.admin_up is True and i.descr == name
    uncabled = [i for i in r.interfaces if i.name not in CABLED]
    assert uncabled and all(i.in_errors is None and i.in_octets is None and i.last_change_ticks is None for i in uncabled)
    wanted = {i for i, n in NAMES.items() if n in CABLED}
    assert rows_read(agent, P.IF_IN_ERRORS) == wanted
    assert rows_read(agent, P.IF_HC_IN_OCTETS) == wanted


def test_the_same_ports_read_as_a_poll_of_every_port_in_fewer_requests_and_varbinds() -> None:
    every_agent, cabled_agent = MibAgent(mib(), cap=64), MibAgent(mib(), cap=64)
    (every,) = poll(every_agent, None)
    (cabled,) = poll(cabled_agent, CABLED)
    same = {i.name: i for i in every.interfaces if i.name in CABLED}
    assert {i.name: i for i in cabled.interfaces if i.name in CABLED} == same
    assert len(cabled_agent.log) < len(every_agent.log) / 2, (len(cabled_agent.log), len(every_agent.log))
    assert sum(n for *_, n in cabled_agent.log) < sum(n for *_, n in every_agent.log) / 3


def test_a_switch_without_ifname_is_matched_by_ifdescr() -> None:
    table = {o: v for o, v in mib().items() if o[: len(P.IF_NAME)] != P.IF_NAME}
    agent = MibAgent(table)
    (r,) = poll(agent, ("Ethernet17",))
    assert r.ok, r.error
    (i,) = [i for i in r.interfaces if i.in_errors is not None]
    assert (i.label, i.in_errors) == ("Ethernet17", 17)


def test_a_cabled_port_the_switch_lacks_reads_nothing_and_breaks_nothing() -> None:
    agent = MibAgent(mib())
    (r,) = poll(agent, ("Ethernet99",))
    assert r.ok and len(r.interfaces) == len(NAMES)
    assert all(i.in_errors is None for i in r.interfaces)
    assert not any(kind == "get" and any(o[: len(P.IF_IN_ERRORS)] == P.IF_IN_ERRORS for o in asked) for kind, asked, *_ in agent.log)


def test_32bit_octets_are_read_for_the_cabled_ports_of_an_agent_without_64bit_ones() -> None:
    table = {o: v for o, v in mib().items() if o[: len(P.IF_HC_IN_OCTETS) - 1] != P.IFX_ENTRY or o[: len(P.IF_NAME)] == P.IF_NAME}
    for i in NAMES:
        table[(*P.IF_IN_OCTETS, i)] = B.Typed(B.COUNTER32, 1000 + i)
        table[(*P.IF_OUT_OCTETS, i)] = B.Typed(B.COUNTER32, 2000 + i)
    agent = MibAgent(table)
    (r,) = poll(agent, ("Ethernet2",))
    (i,) = [i for i in r.interfaces if i.in_octets is not None]
    assert (i.name, i.in_octets, i.octets_bits) == ("Ethernet2", 1002, 32)


# ------------------------------------------------------------ request sizes


def test_a_getbulk_the_agent_cuts_short_sets_the_size_for_the_run() -> None:
    agent = MibAgent(mib(), cap=100)  # net-snmp's maxGetbulkResponses
    poller = SnmpPoller()
    first, second = poll(agent, None, times=2, poller=poller)
    assert first.ok and second.ok and len(second.interfaces) == len(NAMES)
    bulks = [(len(asked) * reps, n) for kind, asked, reps, n in agent.log if kind == "bulk"]
    assert 64 - 13 < bulks[0][0] <= 64  # the target's bulk_varbinds first (whole rows of the 13 columns)
    assert any(asked > 100 and n == 100 for asked, n in bulks)  # grown, then cut at the agent's limit
    # every later GETBULK of the walk asks at most what the agent gives
    later = bulks[next(k for k, (asked, n) in enumerate(bulks) if n < asked) + 1 :]
    assert later and all(asked <= 100 for asked, _ in later)


def test_grows_to_the_ceiling_on_an_agent_without_limits() -> None:
    agent = MibAgent(mib())
    poller = SnmpPoller(max_bulk_varbinds=256)
    poll(agent, None, times=2, poller=poller)
    bulks = [len(asked) * reps for kind, asked, reps, _ in agent.log if kind == "bulk"]
    assert max(bulks) > 200 and all(b <= 256 for b in bulks)


def test_too_big_halves_the_request_and_the_poll_completes() -> None:
    agent = MibAgent(mib(), too_big=40)
    (r,) = poll(agent, CABLED)
    assert r.ok, r.error
    assert [i.in_errors for i in r.interfaces if i.name in CABLED] == [i for i, n in sorted(NAMES.items()) if n in CABLED]
    refused = [e for e in agent.log if e[3] == 0]
    assert refused  # some were too big, and were sent again smaller
    assert all(n <= 40 for *_, n in agent.log)
    # once halved, the size stays down: no request after the first refusal of each kind is refused again
    assert len(refused) <= 2 + 2  # at most two halvings per kind (64 -> 32), GET and GETBULK


def test_get_many_returns_every_oid_across_chunks() -> None:
    agent = MibAgent(mib(), too_big=30)

    async def run() -> list[tuple[B.Oid, object]]:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: agent, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        target = SnmpTarget(name="leaf42", host="127.0.0.1", port=port, community="c", timeout=2.0, retries=0)
        try:
            async with SnmpPoller() as p:
                return await p.get_many(target, [(*P.IF_IN_ERRORS, i) for i in sorted(NAMES)])
        finally:
            transport.close()

    got = asyncio.run(run())
    assert [v for _, v in got] == sorted(NAMES)
