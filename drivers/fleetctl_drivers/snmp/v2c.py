"""SNMPv2c and SNMPv3 requests on fleetctl's own BER codec (:mod:`.ber`), over asyncio UDP.

One UDP socket per address family is shared by every agent a poller talks
to; responses are matched to their request by request-id, and must come from
the address the request went to, carry our community and be a Response PDU
(anything else is dropped, as an agent's stray or late datagram is). Each
request has its target's timeout and retries; a retry resends the same
message (same request-id), so a late answer to an earlier try still counts.

SNMPv3 (authPriv with HMAC-SHA-96 and AES-128, :mod:`.usm`) goes over the
same sockets, matched by msgID: the first request to an agent discovers its
engine ID, boots and time; each try is a new message (the agent's time moves
and every encryption takes a fresh salt) with the same msgID. An authentic
"not in time window" report resets the agent's clock, an "unknown engine ID"
one starts discovery again, and the other usmStats reports (unknown user,
wrong digest, decryption error) are ``auth`` errors, as is an answer whose
HMAC does not check.

Errors are :class:`SnmpPollError` with the same kinds and messages as the
pysnmp path: ``timeout`` (no answer), ``unreachable`` (the name does not
resolve), ``protocol`` (an error-status, or a response our strict decoder
rejects: ``codec`` is then True so the poller can retry with pysnmp).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import socket
import time
from collections.abc import Callable
from typing import Any

from fleetctl.interfaces.snmp import ErrorKind, SnmpTarget

from . import ber, usm
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
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUFFORCE, _RCVBUF)  # type: ignore[attr-defined]  # Linux-only, absent from typeshed
        sock.bind(("0.0.0.0", 0) if family == socket.AF_INET else ("::", 0))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class SnmpPollError(Exception):
    """Internal: one agent's poll failed (becomes PollResult.error)."""

    def __init__(self, kind: ErrorKind, message: str, *, codec: bool = False, too_big: bool = False) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.codec = codec  # our BER decoder rejected the agent's answer
        self.too_big = too_big  # the agent answered tooBig: the same request in smaller parts may pass


class _Slot:
    __slots__ = ("addr", "bad", "community", "future")

    def __init__(self, addr: tuple[Any, ...], community: bytes | None) -> None:
        self.addr = addr
        self.community = community  # None: an SNMPv3 request (its answer is a usm.V3Message)
        self.future: asyncio.Future[Any] | None = None
        self.bad: str | None = None  # why the agent's answer could not be decoded


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, pending: dict[int, _Slot], client: V2cClient) -> None:
        self.pending = pending
        self.client = client

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        try:
            msg = ber.decode_message(data)
        except ber.BerError as e:
            rid = ber.peek_request_id(data)  # a v3 message's msgID
            slot = self.pending.get(rid) if rid is not None else None
            if slot is None or slot.addr != addr[:2] or slot.future is None or slot.future.done():
                self.client.stray += 1
                return
            if slot.community is None:  # SNMPv3: authenticated and decrypted by the request
                try:
                    slot.future.set_result(usm.decode(data))
                except ber.BerError as e3:
                    slot.bad = str(e3)
                    slot.future.set_result(None)
                return
            slot.bad = str(e)
            slot.future.set_result(None)
            return
        slot = self.pending.get(msg.request_id)
        if (
            slot is None
            or slot.community is None
            or slot.addr != addr[:2]
            or msg.pdu_type != ber.RESPONSE
            or msg.version != ber.VERSION_2C
            or msg.community != slot.community
            or slot.future is None
            or slot.future.done()
        ):
            self.client.stray += 1
            return  # not ours, late, or a duplicate
        slot.future.set_result(msg)

    def error_received(self, exc: Exception) -> None:  # ICMP errors on an unconnected socket: a timeout will tell
        pass


class V2cClient:
    """SNMPv2c (and SNMPv3 authPriv, :mod:`.usm`) GET/GETBULK for many agents over shared UDP sockets."""

    def __init__(self) -> None:
        self._pending: dict[int, _Slot] = {}
        self._transports: dict[int, tuple[asyncio.DatagramTransport, socket.socket]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._addrs: dict[tuple[str, int], tuple[int, tuple[Any, ...]]] = {}
        self._next_id = random.randrange(1, 2**31 - 1)
        self._engines: dict[tuple[str, int], usm.Engine] = {}  # SNMPv3 agents discovered
        self.requests = 0  # sent messages, retries included (for the benchmark)
        self.stray = 0  # datagrams dropped: not an answer to a pending request (late, duplicate, foreign)
        self.varbinds = 0  # varbinds answered (for the benchmark)

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
        tr, _ = await loop.create_datagram_endpoint(lambda: _Protocol(self._pending, self), sock=sock)
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
        if target.version == "3":
            msg = await self._request_v3(target, tr, sockaddr, kind, oids, max_repetitions)
        else:
            community = target.community_text().encode()
            rid = self._request_id()
            packet = ber.community_message(community, ber.request_pdu(kind, rid, oids, max_repetitions))
            msg = await self._exchange(target, tr, sockaddr, rid, _Slot(tuple(sockaddr[:2]), community), lambda: packet)
        if msg.error_status != 0:
            raise SnmpPollError("protocol", f"{target.host}:{target.port} answered {msg.error_name} at varbind {msg.error_index}",
                                too_big=msg.error_status == ber.TOO_BIG)  # fmt: skip
        self.varbinds += len(msg.varbinds)
        return msg.varbinds

    async def _exchange(
        self,
        target: SnmpTarget,
        tr: asyncio.DatagramTransport,
        sockaddr: tuple[Any, ...],
        rid: int,
        slot: _Slot,
        build: Callable[[], bytes],
    ) -> Any:
        """Send ``build()`` and wait for the answer to ``rid``, with the target's timeout and retries.

        ``build`` is called for every try: a v3 message carries the agent's
        time and a fresh salt.
        """
        loop = asyncio.get_running_loop()
        self._pending[rid] = slot
        try:
            got = None
            for _ in range(target.retries + 1):
                fut: asyncio.Future[Any] = loop.create_future()
                slot.future = fut
                tr.sendto(build(), sockaddr)
                self.requests += 1
                timer = loop.call_later(target.timeout, _expire, fut)
                try:
                    got = await fut
                finally:
                    timer.cancel()
                if got is not None or slot.bad is not None:
                    break
        finally:
            del self._pending[rid]
        if slot.bad is not None:
            raise SnmpPollError("protocol", f"{target.host}:{target.port}: malformed response: {slot.bad}", codec=True)
        if got is None:
            raise SnmpPollError("timeout", f"no answer from {target.host}:{target.port} in {target.timeout}s x {target.retries + 1} tries")
        return got

    # ------------------------------------------------------------- SNMPv3

    async def _discover(self, target: SnmpTarget, tr: asyncio.DatagramTransport, sockaddr: tuple[Any, ...]) -> usm.Engine:
        """RFC 3414 4: an unauthenticated, empty GET; the agent's Report names its engine ID, boots and time."""
        rid = self._request_id()
        scoped = usm.scoped_pdu(ber.encode_pdu(ber.GET_REQUEST, rid, []))
        packet = usm.encode(rid, scoped, flags=usm.FLAG_REPORTABLE)
        got: usm.V3Message = await self._exchange(target, tr, sockaddr, rid, _Slot(tuple(sockaddr[:2]), None), lambda: packet)
        if not got.engine_id:
            raise SnmpPollError("protocol", f"{target.host}:{target.port}: engine discovery answered without an engine ID")
        engine = usm.Engine(got.engine_id, got.boots, got.time, time.monotonic())
        self._engines[(target.host, target.port)] = engine
        return engine

    async def _request_v3(
        self, target: SnmpTarget, tr: asyncio.DatagramTransport, sockaddr: tuple[Any, ...], kind: str, oids: list[Oid], max_repetitions: int
    ) -> ber.Message:
        """One authPriv (HMAC-SHA-96, AES-128) request; discovers the engine first when it is not known."""
        where, key = f"{target.host}:{target.port}", (target.host, target.port)
        user = (target.user or "").encode()
        for _ in range(3):  # discovery, then at most one resynchronisation of time or engine
            engine = self._engines.get(key) or await self._discover(target, tr, sockaddr)
            auth_key = usm.localized_key(target.auth_text(), engine.engine_id)
            priv_key = usm.localized_key(target.priv_text(), engine.engine_id)
            rid = self._request_id()
            pdu = ber.request_pdu(kind, rid, oids, max_repetitions)
            scoped = usm.scoped_pdu(pdu, context_engine_id=engine.engine_id, context_name=target.context_name.encode())
            # every try is encoded anew: the agent's time moves and each encryption takes a fresh salt
            build = functools.partial(usm.encode, rid, scoped, flags=usm.FLAG_AUTH | usm.FLAG_PRIV | usm.FLAG_REPORTABLE,
                                      engine=engine, user=user, auth_key=auth_key, priv_key=priv_key)  # fmt: skip
            got: usm.V3Message = await self._exchange(target, tr, sockaddr, rid, _Slot(tuple(sockaddr[:2]), None), build)
            authentic = bool(got.flags & usm.FLAG_AUTH) and got.authentic(auth_key)
            report = got.report() if got.scoped is not None else None
            if report is not None:
                n, what = report
                if n == usm.NOT_IN_TIME_WINDOW and authentic:  # only an authentic report may set our clock
                    self._engines[key] = usm.Engine(got.engine_id, got.boots, got.time, time.monotonic())
                    continue
                if n == usm.UNKNOWN_ENGINE_ID:  # the agent restarted with a new engine ID
                    self._engines.pop(key, None)
                    continue
                raise SnmpPollError("auth", f"{where} refused the credentials: {what}")
            if not authentic:
                raise SnmpPollError("auth", f"{where}: the answer failed authentication (HMAC-SHA-96): wrong key, or not this agent")
            if not got.flags & usm.FLAG_PRIV:
                raise SnmpPollError("protocol", f"{where}: the answer to an encrypted request came unencrypted")
            try:
                msg = got.pdu(priv_key)
            except ber.BerError as e:  # authentic but undecryptable: our AES, or the agent's
                raise SnmpPollError("protocol", f"{where}: malformed response: {e}", codec=True) from e
            if msg.pdu_type != ber.RESPONSE or msg.request_id != rid:
                raise SnmpPollError(
                    "protocol",
                    f"{where}: answered PDU 0x{msg.pdu_type:02x} for request {msg.request_id}, not a response to {rid}",
                )
            return msg
        raise SnmpPollError("protocol", f"{where}: the agent's engine time or ID kept changing (reports every try)")


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(None)
