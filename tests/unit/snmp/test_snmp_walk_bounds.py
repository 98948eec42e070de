"""A walk an agent never ends stops at a bound on rows and on time, naming the agent and the table.

Scripted agents on 127.0.0.1 (fleetctl's own BER codec): one whose table
never ends, one with 100x the rows of a large chassis, one that loops back
to OIDs already walked, one that answers slowly for ever. Each poll ends
with an error (or, for the loop, a warning) that names the switch and the
column; none reads without end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fleetctl_drivers.snmp import SnmpPoller
from fleetctl_drivers.snmp import ber as B
from fleetctl_drivers.snmp import parse as P
from fleetctl_drivers.snmp.poller import MAX_ROWS_PER_COLUMN

from fleetctl.interfaces.snmp import PollResult, SnmpTarget

# Column OID + row index -> the value an agent answers (an Integer is enough for every column here).
Table = Callable[[B.Oid, int], "int | None"]  # None: past the table's end


class _Agent(asyncio.DatagramProtocol):
    """Answers GET with sysUpTime/sysName/ifNumber and GETBULK from ``next_row``.

    ``next_row(column, index)`` is the row index that follows ``index`` in
    ``column`` (None: the column ends); ``delay`` holds every answer back.
    """

    def __init__(self, next_row: Callable[[B.Oid, int], int | None], delay: float = 0.0) -> None:
        self.next_row, self.delay = next_row, delay
        self.requests = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.requests += 1
        req = B.decode_message(data)
        if req.pdu_type == B.GET_BULK_REQUEST:
            vbs = self._bulk(req)
        else:
            known: dict[B.Oid, object] = {
                P.SYS_UPTIME: B.Typed(B.TIMETICKS, 500),
                P.SYS_NAME: b"leaf42",
                P.IF_NUMBER: 64,
            }
            vbs = [(o, known.get(o, B.NO_SUCH_OBJECT)) for o, _ in req.varbinds]
        out = B.encode_message(req.community, B.RESPONSE, req.request_id, vbs)
        if self.delay:
            asyncio.get_running_loop().call_later(self.delay, self.transport.sendto, out, addr)
        else:
            self.transport.sendto(out, addr)

    def _bulk(self, req: B.Message) -> list[tuple[B.Oid, object]]:
        reps = min(req.error_index, 50)  # max-repetitions, as agents cap it
        columns = [_column_of(o) for o, _ in req.varbinds]
        cursors = [o[len(c)] if len(o) > len(c) else 0 for (o, _), c in zip(req.varbinds, columns, strict=True)]
        out: list[tuple[B.Oid, object]] = []
        for _ in range(reps):
            for k, c in enumerate(columns):
                nxt = self.next_row(c, cursors[k])
                if nxt is None:
                    out.append(((*c[:-1], c[-1] + 1, 1), 0))  # the next column: this one has ended
                    continue
                cursors[k] = nxt
                out.append(((*c, nxt), nxt))
        return out


def _column_of(o: B.Oid) -> B.Oid:
    for c in P.COLUMNS["counters"] + P.IF_32BIT_OCTETS + (P.IF_DESCR,):
        if o[: len(c)] == c:
            return c
    raise AssertionError(f"unexpected OID {o}")


def _poll(agent: _Agent, poller: SnmpPoller) -> PollResult:
    async def run() -> PollResult:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: agent, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        target = SnmpTarget(
            name="leaf42", host="127.0.0.1", port=port, community="c0mm", timeout=2.0, retries=0, bulk_varbinds=400
        )
        try:
            async with poller:
                return await poller.poll(target, what=["counters"])
        finally:
            transport.close()

    return asyncio.run(run())


def test_a_table_that_never_ends_stops_at_the_row_bound() -> None:
    agent = _Agent(lambda c, i: i + 1)  # always one more row
    result = _poll(agent, SnmpPoller())
    assert result.error_kind == "protocol", result.error
    assert result.error is not None
    assert result.error.startswith("leaf42 (127.0.0.1:")
    assert f"did not end after {MAX_ROWS_PER_COLUMN} rows" in result.error
    assert "IF-MIB::" in result.error  # the column, by name
    assert result.interfaces == []
    # stopped at the bound: about max_rows / rows per answer requests, not the 10,000-request guard
    assert agent.requests < 2 * MAX_ROWS_PER_COLUMN // 50 + 10


def test_an_agent_answering_100x_the_rows_of_a_large_chassis_is_refused() -> None:
    rows = 100 * 2_000  # a chassis with subinterfaces has a few thousand rows
    agent = _Agent(lambda c, i: i + 1 if i < rows else None)
    result = _poll(agent, SnmpPoller())
    assert result.error is not None and "IF-MIB::" in result.error and "rows" in result.error
    assert agent.requests < rows // 50


def test_the_row_bound_is_data() -> None:
    agent = _Agent(lambda c, i: i + 1 if i < 300 else None)
    assert _poll(agent, SnmpPoller(max_rows=299)).error is not None
    ok = _poll(_Agent(lambda c, i: i + 1 if i < 300 else None), SnmpPoller(max_rows=300))
    assert ok.error is None and len(ok.interfaces) == 300


def test_an_agent_that_loops_back_ends_the_walk_with_a_warning() -> None:
    # After row 70 the agent starts over at row 1: a non-increasing OID.
    agent = _Agent(lambda c, i: i + 1 if i < 70 else 1)
    result = _poll(agent, SnmpPoller())
    assert result.error is None, result.error
    assert len(result.interfaces) == 70  # what it said before the loop is kept
    loops = [w for w in result.warnings if "non-increasing OID" in w]
    assert loops and all(w.startswith("leaf42 (127.0.0.1:") for w in loops)
    assert any("IF-MIB::ifName" in w for w in loops)
    assert agent.requests < 20


def test_an_agent_that_repeats_the_same_row_ends_the_walk() -> None:
    agent = _Agent(lambda c, i: max(i, 1))  # row 1, then row 1 again and again
    result = _poll(agent, SnmpPoller())
    assert result.error is None and len(result.interfaces) == 1
    assert any("non-increasing OID" in w for w in result.warnings)
    assert agent.requests < 10


def test_a_slow_endless_walk_stops_at_the_deadline() -> None:
    # Slow answers, rows without end, a row bound out of reach: the time bound ends it.
    agent = _Agent(lambda c, i: i + 1, delay=0.02)
    result = _poll(agent, SnmpPoller(max_rows=10**9, walk_deadline_s=0.3))
    assert result.error is not None
    assert result.error.startswith("leaf42 (127.0.0.1:")
    assert "did not end within 0.3 s" in result.error and "IF-MIB::" in result.error
