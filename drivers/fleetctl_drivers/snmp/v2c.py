"""SNMPv2c requests on fleetctl's own BER codec (:mod:`.ber`), over asyncio UDP.

One UDP socket per address family is shared by every agent a poller talks
to; responses are matched to their request by request-id, and must come from
the address the request went to, carry our community and be a Response PDU
(anything else is dropped, as an agent's stray or late datagram is). Each
request has its target's timeout and retries; a retry resends the same
message (same request-id), so a late answer to an earlier try still counts.

Errors are :class:`SnmpPollError` with the same kinds and messages as the
pysnmp path: ``timeout`` (no answer), ``unreachable`` (the name does not
resolve), ``protocol`` (an error-status, or a response our strict decoder
rejects: ``codec`` is then True so the poller can retry with pysnmp).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from typing import Any

from fleetctl.interfaces.snmp import ErrorKind, SnmpTarget

from . import ber
from .ber import Oid

_RCVBUF = 4 * 1024 * 1024  # many agents answer at once (see client_socket)


def client_socket(family: int = socket.AF_INET) -> socket.socket:
    """A bound, non-blocking UDP socket with a large receive buffer.

    A poll of many agents has up to ``concurrency`` answers arriving at
    once; with the kernel's default buffer (about 200 KB) a burst of 1.5 KB
    answers overflows it while the client is busy decoding, and the dropped
    answers come back as timeouts.
    """
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF)
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < _RCVBUF:
            # capped at net.core.rmem_max (about 200 KB on a stock kernel);
            # with CAP_NET_ADMIN the cap does not apply
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUFFORCE, _RCVBUF)
        sock.bind(("0.0.0.0", 0) if family == socket.AF_INET else ("::", 0))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class SnmpPollError(Exception):
    """Internal: one agent's poll failed (becomes PollResult.error)."""

    def __init__(self, kind: ErrorKind, message: str, *, codec: bool = False) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.codec = codec  # our BER decoder rejected the agent's answer


class _Slot:
    __slots__ = ("addr", "bad", "community", "future")

    def __init__(self, addr: tuple[Any, ...], community: bytes) -> None:
        self.addr = addr
        self.community = community
        self.future: asyncio.Future[ber.Message | None] | None = None
        self.bad: str | None = None  # why the agent's answer could not be decoded


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, pending: dict[int, _Slot]) -> None:
        self.pending = pending

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        try:
            msg = ber.decode_message(data)
        except ber.BerError as e:
            rid = ber.peek_request_id(data)
            slot = self.pending.get(rid) if rid is not None else None
            if slot is not None and slot.addr == addr[:2] and slot.future is not None and not slot.future.done():
                slot.bad = str(e)
                slot.future.set_result(None)
            return
        slot = self.pending.get(msg.request_id)
        if (
            slot is None
            or slot.addr != addr[:2]
            or msg.pdu_type != ber.RESPONSE
            or msg.version != ber.VERSION_2C
            or msg.community != slot.community
            or slot.future is None
            or slot.future.done()
        ):
            return  # not ours, late, or a duplicate
        slot.future.set_result(msg)

    def error_received(self, exc: Exception) -> None:  # ICMP errors on an unconnected socket: a timeout will tell
        pass


class V2cClient:
    """SNMPv2c GET/GETBULK for many agents over shared UDP sockets."""

    def __init__(self) -> None:
        self._pending: dict[int, _Slot] = {}
        self._transports: dict[int, tuple[asyncio.DatagramTransport, socket.socket]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._addrs: dict[tuple[str, int], tuple[int, tuple[Any, ...]]] = {}
        self._next_id = random.randrange(1, 2**31 - 1)
        self.requests = 0  # sent messages, retries included (for the benchmark)

    def close(self) -> None:
        """Close the sockets (also after their event loop has closed)."""
        loop_closed = self._loop is None or self._loop.is_closed()
        for tr, sock in self._transports.values():
            if loop_closed:
                sock.close()
            else:
                tr.close()
        self._transports.clear()
        self._loop = None

    async def _transport(self, family: int) -> asyncio.DatagramTransport:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (asyncio.run again): the old sockets belong to the old one
            self.close()
            self._loop = loop
        got = self._transports.get(family)
        if got is not None:
            return got[0]
        sock = client_socket(family)
        tr, _ = await loop.create_datagram_endpoint(lambda: _Protocol(self._pending), sock=sock)
        self._transports[family] = (tr, sock)
        return tr

    async def _resolve(self, host: str, port: int) -> tuple[int, tuple[Any, ...]]:
        key = (host, port)
        got = self._addrs.get(key)
        if got is None:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
            except OSError as e:
                raise SnmpPollError("unreachable", f"cannot resolve {host}: {e}") from e
            infos = [i for i in infos if i[0] in (socket.AF_INET, socket.AF_INET6)]
            if not infos:
                raise SnmpPollError("unreachable", f"cannot resolve {host}: no IPv4/IPv6 address")
            family, _, _, _, sockaddr = infos[0]
            got = (family, sockaddr)
            self._addrs[key] = got
        return got

    def _request_id(self) -> int:
        while True:
            rid = self._next_id
            self._next_id = rid + 1 if rid < 2**31 - 1 else 1
            if rid not in self._pending:
                return rid

    async def request(self, target: SnmpTarget, kind: str, oids: list[Oid], max_repetitions: int = 0) -> list[tuple[Oid, object]]:
        """One GET (``kind="get"``) or GETBULK; returns (oid, plain value) pairs."""
        family, sockaddr = await self._resolve(target.host, target.port)
        try:
            tr = await self._transport(family)
        except OSError as e:
            raise SnmpPollError("unreachable", f"no UDP socket for {target.host}:{target.port}: {e}") from e
        community = target.community_text().encode()
        rid = self._request_id()
        if kind == "get":
            packet = ber.get_request(community, rid, oids)
        else:
            packet = ber.get_bulk(community, rid, oids, max_repetitions)
        loop = asyncio.get_running_loop()
        slot = _Slot(tuple(sockaddr[:2]), community)
        self._pending[rid] = slot
        try:
            msg = None
            for _ in range(target.retries + 1):
                fut: asyncio.Future[ber.Message | None] = loop.create_future()
                slot.future = fut
                tr.sendto(packet, sockaddr)
                self.requests += 1
                timer = loop.call_later(target.timeout, _expire, fut)
                try:
                    msg = await fut
                finally:
                    timer.cancel()
                if msg is not None or slot.bad is not None:
                    break
        finally:
            del self._pending[rid]
        if slot.bad is not None:
            raise SnmpPollError("protocol", f"{target.host}:{target.port}: malformed response: {slot.bad}", codec=True)
        if msg is None:
            raise SnmpPollError("timeout", f"no answer from {target.host}:{target.port} in {target.timeout}s x {target.retries + 1} tries")
        if msg.error_status != 0:
            raise SnmpPollError("protocol", f"{target.host}:{target.port} answered {msg.error_name} at varbind {msg.error_index}")
        return msg.varbinds


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(None)
