"""The SNMPv2c client on fleetctl's BER codec (v2c.py), against scripted UDP agents.

Retries, timeouts, demultiplexing (stray, late, foreign and duplicate
datagrams are dropped), error-status, and the poller's fall back to pysnmp
when the strict decoder refuses an agent's answer. The scripted agents run
in the test's event loop on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest
from fleetctl_drivers.snmp import SnmpPoller
from fleetctl_drivers.snmp import ber as B
from fleetctl_drivers.snmp import parse as P
from fleetctl_drivers.snmp.v2c import SnmpPollError, V2cClient

from fleetctl.interfaces.snmp import SnmpTarget

Handler = Callable[[B.Message, int, Any], "list[bytes] | bytes | None"]


class Agent(asyncio.DatagramProtocol):
    """Answers each request with what ``handler(request, nth, agent)`` returns."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.seen += 1
        req = B.decode_message(data)  # pysnmp's requests decode too
        out = self.handler(req, self.seen, addr)
        for d in [out] if isinstance(out, bytes) else out or []:
            self.transport.sendto(d, addr)


def answer(req: B.Message, varbinds: list[tuple[B.Oid, object]], **kw: Any) -> bytes:
    community = kw.pop("community", req.community)
    pdu_type = kw.pop("pdu_type", B.RESPONSE)
    request_id = kw.pop("request_id", req.request_id)
    return B.encode_message(community, pdu_type, request_id, varbinds, **kw)


def target(port: int, **kw: Any) -> SnmpTarget:
    base: dict[str, Any] = {"name": "t", "host": "127.0.0.1", "port": port, "community": "c0mm", "timeout": 0.3, "retries": 1}
    base.update(kw)
    return SnmpTarget(**base)


async def with_agent(handler: Handler, body: Callable[[int], Any]) -> Any:
    loop = asyncio.get_running_loop()
    transport, agent = await loop.create_datagram_endpoint(lambda: Agent(handler), local_addr=("127.0.0.1", 0))
    try:
        return await body(transport.get_extra_info("sockname")[1]), agent
    finally:
        transport.close()


UPTIME = [(P.SYS_UPTIME, B.Typed(B.TIMETICKS, 500))]


def test_get_answered_after_one_retry() -> None:
    client = V2cClient()

    def h(req: B.Message, nth: int, _: Any) -> bytes | None:
        return None if nth == 1 else answer(req, UPTIME)

    async def body(port: int) -> Any:
        return await client.request(target(port, timeout=0.2, retries=1), "get", [P.SYS_UPTIME])

    vbs, agent = asyncio.run(with_agent(h, body))
    client.close()
    assert vbs == [(P.SYS_UPTIME, 500)] and agent.seen == 2 and client.requests == 2


def test_timeout_after_all_tries() -> None:
    client = V2cClient()

    async def body(port: int) -> Any:
        with pytest.raises(SnmpPollError) as e:
            await client.request(target(port, timeout=0.1, retries=2), "get", [P.SYS_UPTIME])
        return e.value

    err, agent = asyncio.run(with_agent(lambda *_: None, body))
    client.close()
    assert err.kind == "timeout" and err.message.endswith("in 0.1s x 3 tries") and agent.seen == 3


def test_stray_and_foreign_datagrams_are_dropped() -> None:
    client = V2cClient()
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other.bind(("127.0.0.1", 0))

    def h(req: B.Message, nth: int, addr: Any) -> list[bytes]:
        good = answer(req, UPTIME)
        other.sendto(good, addr)  # the right answer from the wrong address
        return [
            answer(req, [(P.SYS_UPTIME, 1)], request_id=req.request_id + 1),  # someone else's request id
            answer(req, [(P.SYS_UPTIME, 2)], community=b"other"),
            answer(req, [(P.SYS_UPTIME, 3)], pdu_type=B.GET_REQUEST),
            answer(req, [(P.SYS_UPTIME, 4)], version=B.VERSION_1),
            b"\x00garbage",
            good,
            answer(req, [(P.SYS_UPTIME, 5)]),  # a duplicate after the answer
        ]

    async def body(port: int) -> Any:
        got = await client.request(target(port), "get", [P.SYS_UPTIME])
        await asyncio.sleep(0.05)  # the duplicate arrives with no one waiting: dropped
        return got

    vbs, agent = asyncio.run(with_agent(h, body))
    client.close()
    other.close()
    assert vbs == [(P.SYS_UPTIME, 500)] and agent.seen == 1
    assert client.stray == 7  # every datagram but the answer is counted as dropped


def test_many_requests_in_flight_are_demultiplexed() -> None:
    client = V2cClient()

    def h(req: B.Message, nth: int, _: Any) -> bytes:
        return answer(req, [((*o, req.request_id % 1000), B.Typed(B.COUNTER64, 2**64 - 1 - req.request_id)) for o, _ in req.varbinds])

    async def body(port: int) -> Any:
        return await asyncio.gather(*(client.request(target(port), "bulk", [P.IF_HC_IN_OCTETS], 1) for _ in range(300)))

    results, _ = asyncio.run(with_agent(h, body))
    client.close()
    for ((o, v),) in results:
        rid = 2**64 - 1 - v
        assert o == (*P.IF_HC_IN_OCTETS, rid % 1000)
    assert len({v for ((_, v),) in results}) == 300


def test_error_status_is_a_protocol_error() -> None:
    client = V2cClient()

    async def body(port: int) -> Any:
        with pytest.raises(SnmpPollError) as e:
            await client.request(target(port), "get", [P.SYS_UPTIME])
        return e.value

    err, _ = asyncio.run(with_agent(lambda req, *_: answer(req, UPTIME, error_status=5, error_index=1), body))
    client.close()
    assert err.kind == "protocol" and "answered genErr at varbind 1" in err.message and not err.codec


def test_an_answer_our_decoder_refuses_is_polled_again_with_pysnmp() -> None:
    pytest.importorskip("pysnmp")

    def h(req: B.Message, nth: int, _: Any) -> bytes:
        if nth == 1:  # a NULL with content: BER says no; the poller must not give up on the agent
            good = answer(req, [(P.SYS_UPTIME, b"Z")])
            assert good.endswith(b"\x04\x01Z")
            return good[:-3] + b"\x05\x01\x00"  # same length, so every enclosing length still fits
        if req.pdu_type == B.GET_REQUEST:
            vbs: list[tuple[B.Oid, object]] = [(P.SYS_UPTIME, B.Typed(B.TIMETICKS, 77)), (P.SYS_NAME, b"sw"), (P.IF_NUMBER, 1)]
            return answer(req, [vb for vb in vbs if vb[0] in {o for o, _ in req.varbinds}])
        # GETBULK: one row (ifIndex 1) per column, then the end of the MIB
        vbs = [
            ((*o, 1), 7 if o != P.IF_NAME else b"Ethernet1") if o in P.COLUMNS["counters"] else (o, B.END_OF_MIB_VIEW)
            for o, _ in req.varbinds
        ]
        return answer(req, vbs)

    async def body(port: int) -> Any:
        async with SnmpPoller() as p:
            return await p.poll(target(port, timeout=1), what=("counters",))

    r, _ = asyncio.run(with_agent(h, body))
    assert r.ok, r.error
    assert r.warnings and "polled with pysnmp" in r.warnings[0] and "NULL with content" in r.warnings[0]
    assert (r.sys_name, r.sys_uptime_ticks) == ("sw", 77)
    (i,) = r.interfaces
    assert (i.index, i.name, i.in_octets, i.out_errors) == (1, "Ethernet1", 7, 7)


def test_new_event_loop_gets_new_sockets() -> None:
    client = V2cClient()

    async def body(port: int) -> Any:
        return await client.request(target(port), "get", [P.SYS_UPTIME])

    for _ in range(2):  # asyncio.run twice with one client (the CLI's poll_many_sync does this)
        vbs, _ = asyncio.run(with_agent(lambda req, *_: answer(req, UPTIME), body))
        assert vbs == [(P.SYS_UPTIME, 500)]
    client.close()
