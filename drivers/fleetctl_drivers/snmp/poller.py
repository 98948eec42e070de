"""The SNMP poller: many agents at once, asyncio; SNMPv2c and SNMPv3
(authPriv, SHA and AES) on fleetctl's own BER codec, other SNMPv3 protocols
on pysnmp 7.

How a poll of one agent goes:

1. GET sysUpTime.0 and sysName.0 (a reboot since the previous poll shows as
   sysUpTime going down), and ifNumber.0 when IF-MIB is polled: the number of
   rows sizes the last GETBULK of the walk (no repetitions asked beyond the
   row that ends the table).
2. Walk every column the poll needs *in parallel*: one GETBULK carries one
   varbind per column still being walked, with max-repetitions chosen so a
   response holds about ``bulk_varbinds`` varbinds (agents cap responses:
   snmpsim and many switches at 64). A 64-port IF-MIB poll of 13 columns is
   ~14 round trips instead of 13 separate walks.
3. If the agent has no 64-bit octet counters, walk the 32-bit ones (and, for
   a ``counters`` poll, ifDescr when the agent has no ifName).

A target with ``ports`` (the sweep gives the ports its cabling plan cables)
walks only ifName and ifOperStatus of every port (every port is listed, the
ports-up figure stays whole), then GETs the other IF-MIB columns for the
ifIndexes of those ports alone: a leaf with 8 of 64 ports cabled reads 8
rows of counters, not 64. A GET of the rows wanted never costs more
varbinds than a GETBULK from the row before the first (which reads every
row in between), so it is always a GET.

How many varbinds one request carries is learned per agent for the
poller's life (a sweep's run): it starts at the target's ``bulk_varbinds``,
doubles after every whole answer up to ``max_bulk_varbinds`` (256), and stops at
what the agent returns when it cuts a GETBULK short (snmpsim cuts at 64,
net-snmp's snmpd at 100: its ``maxGetbulkResponses``). A ``tooBig`` answer
halves it and the request is sent again smaller; a timeout of an ask grown
beyond ``bulk_varbinds`` (an agent that drops what it cannot answer) goes
back to ``bulk_varbinds`` and tries once more.

SNMPv2c requests go through :mod:`.v2c`: a strict BER codec of our own
(:mod:`.ber`) on one asyncio UDP socket shared by every agent, request-id
demultiplexed, per-agent timeout and retries. pysnmp/pyasn1 spend ~0.16 ms
of CPU per varbind encoding and decoding; the codec a few microseconds. An
agent whose answer the strict decoder rejects is polled again with pysnmp
(a warning says so); ``SnmpPoller(v2c="pysnmp")`` uses pysnmp for every v2c
agent.

SNMPv3 with HMAC-SHA-96 and AES-128, both keys given (what the inventory's
``snmp: {version: "3"}`` means), goes through the same client (:mod:`.usm`
builds and checks the messages); ``SnmpPoller(v3="pysnmp")`` sends it
through pysnmp instead, and an agent whose v3 answer our decoder rejects is
polled again with pysnmp, as for v2c.

Other SNMPv3 protocols (MD5, SHA-2, DES, AES-192/256, authNoPriv) go through
pysnmp's command generators with numeric OIDs and raw varbinds: the hlapi helpers (``bulk_cmd``/``bulk_walk_cmd``) resolve every
varbind through the MIB view on the way out, which costs more CPU than the
request itself at this scale.

Agents are polled concurrently under one bound (``concurrency``); each agent
has its own timeout and retries. A dead or refusing
agent becomes a :class:`PollResult` with ``error`` and ``error_kind`` set; it
never aborts the poll of the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleetctl.interfaces.snmp import Poller, PollResult, PreviousPolls, Rates, SnmpTarget
from fleetctl.interfaces.sweep import SweepProgress

from . import ber, parse, usm
from .parse import Columns, Oid
from .rates import rates as _rates
from .rates import rebooted
from .v2c import SnmpPollError, V2cClient, client_socket

# pysnmp is imported lazily (in SnmpPoller) so importing this module is cheap.

# errorIndication classes (pysnmp.proto.errind) that mean "the agent refused our credentials"
_AUTH_ERRORS = {
    "UnknownUserName",
    "UnknownSecurityName",
    "WrongDigest",
    "DecryptionError",
    "UnsupportedSecLevel",
    "UnknownCommunityName",
    "NotInTimeWindow",
    "AuthenticationError",
    "AuthenticationFailure",
}

_MAX_ROUNDS = 10_000  # GETBULKs per walk: a guard against agents that loop

# Bounds on one walk (what an agent says cannot grow a poll without end). The
# largest real tables fleetctl reads are IF-MIB on a chassis with its
# subinterfaces and VLANs: a few thousand rows; a 64-port switch has ~70.
#: Rows one column may return before the walk is stopped as endless.
MAX_ROWS_PER_COLUMN = 20_000
#: Seconds one walk (all its GETBULKs) may take: a 64-port IF-MIB poll needs ~14
#: round trips, well under a second on a LAN; an agent that keeps answering
#: slowly with new rows is stopped here even below the row bound.
WALK_DEADLINE_S = 120.0
#: Varbinds one request may grow to (learned per agent, see the module's docstring):
#: 256 varbinds of IF-MIB are about 10 kB, a datagram every agent fleetctl met returns whole.
MAX_BULK_VARBINDS = 256

# What a poll with ``ports`` walks for every port: the names (to find the
# ports' ifIndexes) and the oper status (the ports-up figure counts every port).
_IF_MAP = (parse.IF_NAME, parse.IF_OPER_STATUS)


__all__ = ["SnmpPollError", "SnmpPoller", "poll_many", "poll_many_sync"]


class SnmpPoller(Poller):
    """Polls SNMP agents: v2c and v3 SHA/AES on the BER codec, the rest through pysnmp.

    The :class:`fleetctl.interfaces.snmp.Poller` registered as ``pysnmp`` in
    the ``fleetctl.snmp`` entry-point group.

    Reuse one poller for repeated polls (the rates case): SNMPv3 engine
    discovery is cached (in the client on the BER path, in pysnmp's engine
    otherwise). Call :meth:`close` (or use ``async with``) to release the UDP
    sockets.

    ``v2c`` / ``v3``: ``"ber"`` (default) or ``"pysnmp"``, the path for that
    version (tests and the benchmark compare them).

    On the pysnmp path, SNMPv3 users are configured per engine by user name;
    targets that use the same user name with different keys get an engine of
    their own (pysnmp would otherwise reconfigure the user on every request).
    """

    def __init__(
        self,
        *,
        v2c: str = "ber",
        v3: str = "ber",
        max_rows: int = MAX_ROWS_PER_COLUMN,
        walk_deadline_s: float = WALK_DEADLINE_S,
        max_bulk_varbinds: int = MAX_BULK_VARBINDS,
    ) -> None:
        for name, value in (("v2c", v2c), ("v3", v3)):
            if value not in ("ber", "pysnmp"):
                raise ValueError(f"{name} must be 'ber' or 'pysnmp', not {value!r}")
        self.v2c = v2c
        self.v3 = v3
        self.max_rows = max_rows
        self.walk_deadline_s = walk_deadline_s
        self.max_bulk_varbinds = max_bulk_varbinds
        # per (host, port, "bulk"|"get"): the varbinds one request carries, learned (see the module's docstring)
        self._ask: dict[tuple[str, int, str], int] = {}
        self._settled: set[tuple[str, int, str]] = set()  # the agent showed its limit: no more growing
        self._v2c_client = V2cClient()
        self._fallback: set[tuple[str, int]] = set()  # agents our decoder rejected: pysnmp from then on
        self._engines: list[tuple[Any, dict[str, tuple[str, str, str, str, str]]]] = []
        self._SnmpEngine: Any = None
        self._auth_cache: dict[SnmpTarget, Any] = {}
        self._transport_cache: dict[tuple[str, int, float, int], Any] = {}

    def _init_pysnmp(self) -> None:
        if self._SnmpEngine is None:
            from pysnmp.entity.rfc3413 import cmdgen
            from pysnmp.hlapi.v3arch.asyncio import SnmpEngine

            self._get = cmdgen.GetCommandGenerator()
            self._bulk = cmdgen.BulkCommandGenerator()
            self._SnmpEngine = SnmpEngine

    def _uses_ber(self, target: SnmpTarget) -> bool:
        if (target.host, target.port) in self._fallback:
            return False
        if target.version == "2c":
            return self.v2c == "ber"
        return self.v3 == "ber" and usm.supports(
            target.auth_protocol, target.priv_protocol, target.auth_key is not None, target.priv_key is not None
        )

    @property
    def requests(self) -> int:
        """Messages the BER path sent so far (retries included)."""
        return self._v2c_client.requests

    @property
    def varbinds(self) -> int:
        """Varbinds the BER path received in answers so far."""
        return self._v2c_client.varbinds

    @property
    def stray(self) -> int:
        """Datagrams the BER path dropped as answering no pending request (late, duplicate, foreign)."""
        return self._v2c_client.stray

    # ---------------------------------------------------------------- engines

    def _new_engine(self) -> Any:
        """An SnmpEngine whose UDP transport is our socket, not pysnmp's.

        pysnmp opens its client socket with the kernel's default receive
        buffer. Polling hundreds of fast agents at once overflowed it (the
        kernel's UdpRcvbufErrors grew, and agents timed out after every
        retry); :func:`.v2c.client_socket` has a large one. hlapi's LCD reuses
        a transport already registered for the UDP domain.
        """
        from pysnmp.carrier.asyncio.dgram import udp
        from pysnmp.entity import config

        engine = self._SnmpEngine()
        config.add_transport(engine, udp.DOMAIN_NAME, udp.UdpAsyncioTransport().open_server_mode(sock=client_socket()))
        return engine

    def _engine_for(self, target: SnmpTarget) -> Any:
        self._init_pysnmp()
        if target.version != "3":
            if not self._engines:
                self._engines.append((self._new_engine(), {}))
            return self._engines[0][0]
        creds = (target.auth_text(), target.priv_text(), target.auth_protocol, target.priv_protocol, target.context_name)
        for engine, users in self._engines:
            have = users.get(target.user or "")
            if have is None or have == creds:
                users[target.user or ""] = creds
                return engine
        engine = self._new_engine()
        self._engines.append((engine, {target.user or "": creds}))
        return engine

    @property
    def engines(self) -> int:
        """How many SnmpEngines this poller made (1 unless v3 user names clash)."""
        return len(self._engines)

    def close(self) -> None:
        self._v2c_client.close()
        for engine, _ in self._engines:
            with contextlib.suppress(Exception):  # closing what may never have opened
                engine.close_dispatcher()
        self._engines.clear()

    async def __aenter__(self) -> SnmpPoller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ auth/target

    def _auth(self, target: SnmpTarget) -> Any:
        auth = self._auth_cache.get(target)
        if auth is not None:
            return auth
        from pysnmp.hlapi.v3arch.asyncio import CommunityData, UsmUserData
        from pysnmp.hlapi.v3arch.asyncio import auth as A

        if target.version == "2c":
            auth = CommunityData(target.community_text(), mpModel=1)
        else:
            auth_protos = {
                "MD5": A.USM_AUTH_HMAC96_MD5,
                "SHA": A.USM_AUTH_HMAC96_SHA,
                "SHA224": A.USM_AUTH_HMAC128_SHA224,
                "SHA256": A.USM_AUTH_HMAC192_SHA256,
                "SHA384": A.USM_AUTH_HMAC256_SHA384,
                "SHA512": A.USM_AUTH_HMAC384_SHA512,
            }
            priv_protos = {
                "DES": A.USM_PRIV_CBC56_DES,
                "3DES": A.USM_PRIV_CBC168_3DES,
                "AES": A.USM_PRIV_CFB128_AES,
                "AES192": A.USM_PRIV_CFB192_AES,
                "AES256": A.USM_PRIV_CFB256_AES,
            }
            kwargs: dict[str, Any] = {}
            if target.auth_key is not None:
                kwargs["authKey"] = target.auth_text()
                kwargs["authProtocol"] = auth_protos[target.auth_protocol]
            if target.priv_key is not None:
                kwargs["privKey"] = target.priv_text()
                kwargs["privProtocol"] = priv_protos[target.priv_protocol]
            auth = UsmUserData(target.user, **kwargs)
        self._auth_cache[target] = auth
        return auth

    async def _transport(self, target: SnmpTarget) -> Any:
        key = (target.host, target.port, target.timeout, target.retries)
        tr = self._transport_cache.get(key)
        if tr is None:
            from pysnmp.hlapi.v3arch.asyncio import UdpTransportTarget

            try:
                tr = await UdpTransportTarget.create((target.host, target.port), timeout=target.timeout, retries=target.retries)
            except Exception as e:  # pysnmp wraps resolver errors in its own
                raise SnmpPollError("unreachable", f"cannot resolve {target.host}: {e}") from e
            self._transport_cache[key] = tr
        return tr

    # --------------------------------------------------------------- requests

    async def _request(self, target: SnmpTarget, kind: str, varbinds: list[Oid], max_repetitions: int = 0) -> list[tuple[Oid, Any]]:
        """One GET or GETBULK; returns (oid tuple, value) pairs: plain values
        (and :mod:`.ber` exception singletons) on the BER path, pyasn1 values
        on the pysnmp path (:func:`_plain` turns both into plain ones)."""
        if self._uses_ber(target):
            return await self._v2c_client.request(target, kind, varbinds, max_repetitions)
        from pysnmp.hlapi.v3arch.asyncio.cmdgen import LCD
        from pysnmp.proto.rfc1902 import Null, ObjectName

        engine = self._engine_for(target)
        auth = self._auth(target)
        transport = await self._transport(target)
        context = target.context_name.encode() if target.version == "3" else b""
        addr_name, _ = LCD.configure(engine, auth, transport, context)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def done(_engine: Any, _handle: Any, error_indication: Any, error_status: Any, error_index: Any, vbs: Any, _ctx: Any) -> None:
            if not future.done():
                future.set_result((error_indication, error_status, error_index, vbs))

        raw = [(ObjectName(o), Null("")) for o in varbinds]
        if kind == "get":
            self._get.send_varbinds(engine, addr_name, None, context, raw, done)
        else:
            self._bulk.send_varbinds(engine, addr_name, None, context, 0, max_repetitions, raw, done)
        error_indication, error_status, error_index, vbs = await future
        if error_indication:
            name = type(error_indication).__name__
            if name == "RequestTimedOut":
                raise SnmpPollError(
                    "timeout", f"no answer from {target.host}:{target.port} in {target.timeout}s x {target.retries + 1} tries"
                )
            if name in _AUTH_ERRORS:
                raise SnmpPollError("auth", f"{target.host}:{target.port} refused the credentials: {error_indication}")
            raise SnmpPollError("protocol", f"{target.host}:{target.port}: {error_indication}")
        if error_status and int(error_status) != 0:
            status = error_status.prettyPrint() if hasattr(error_status, "prettyPrint") else str(error_status)
            raise SnmpPollError("protocol", f"{target.host}:{target.port} answered {status} at varbind {int(error_index)}",
                                too_big=int(error_status) == ber.TOO_BIG)  # fmt: skip
        return [(tuple(o), v) for o, v in vbs]

    # ------------------------------------------------- request sizes (learned)

    def varbinds_per_request(self, target: SnmpTarget, kind: str = "bulk") -> int:
        """The varbinds the next ``kind`` request to this agent asks for (learned, see the module's docstring).

        A GET starts where the agent's GETBULKs settled (the walk comes first).
        """
        key = (target.host, target.port, kind)
        ask = self._ask.get(key)
        if ask is None and kind == "get":
            ask = self._ask.get((target.host, target.port, "bulk"))
        return ask if ask is not None else target.bulk_varbinds

    def _learn(self, target: SnmpTarget, kind: str, asked: int, got: int, *, full: bool) -> None:
        """After an answer of ``got`` varbinds to ``asked``; ``full``: the request was as large as allowed."""
        key = (target.host, target.port, kind)
        now = self.varbinds_per_request(target, kind)
        if got < asked:  # the agent cut the answer short: that is its limit
            self._ask[key] = max(1, got)
            self._settled.add(key)
        elif key not in self._settled and full:
            # a larger bulk_varbinds than the ceiling is the inventory's word: it is kept, not grown
            self._ask[key] = max(now, min(self.max_bulk_varbinds, asked * 2))

    def _shrink(self, target: SnmpTarget, kind: str, asked: int, e: SnmpPollError) -> bool:
        """After a failed request of ``asked`` varbinds: True if a smaller one is worth sending."""
        key = (target.host, target.port, kind)
        if e.too_big and asked > 1:
            self._ask[key] = max(1, asked // 2)
            self._settled.add(key)
            return True
        base = target.bulk_varbinds
        if e.kind == "timeout" and asked > base and key not in self._settled:
            # NOTE: an agent that drops a request it cannot answer (instead of
            # cutting it or saying tooBig) looks dead; the configured size is tried once.
            self._ask[key] = base
            self._settled.add(key)
            return True
        return False

    async def _getbulk(self, target: SnmpTarget, cursors: list[Oid], reps_limit: int | None) -> list[tuple[Oid, Any]]:
        """One GETBULK of ``cursors`` as large as the agent allows (at most ``reps_limit`` repetitions)."""
        width = len(cursors)
        while True:
            most = max(1, self.varbinds_per_request(target, "bulk") // width)
            reps = most if reps_limit is None else min(most, reps_limit)
            try:
                vbs = await self._request(target, "bulk", cursors, reps)
            except SnmpPollError as e:
                if reps > 1 and self._shrink(target, "bulk", width * reps, e):
                    continue
                raise
            self._learn(target, "bulk", width * reps, len(vbs), full=reps == most)
            return vbs

    async def get_many(self, target: SnmpTarget, oids: Sequence[Oid]) -> list[tuple[Oid, Any]]:
        """GET every OID of ``oids`` in as few requests as the agent allows; (oid, value) pairs in order."""
        out: list[tuple[Oid, Any]] = []
        pos = 0
        while pos < len(oids):
            n = self.varbinds_per_request(target, "get")
            chunk = list(oids[pos : pos + n])
            try:
                vbs = await self._request(target, "get", chunk)
            except SnmpPollError as e:
                if len(chunk) > 1 and self._shrink(target, "get", len(chunk), e):
                    continue
                raise
            # a GET is answered whole or not at all: a full chunk may grow, a short last one says nothing
            self._learn(target, "get", len(chunk), len(chunk), full=len(chunk) == n)
            out += vbs
            pos += len(chunk)
        return out

    async def walk_columns(
        self,
        target: SnmpTarget,
        columns: Sequence[Oid],
        *,
        rows_hint: int | None = None,
        warnings: list[str] | None = None,
        row_cap: int | None = None,
        capped: Sequence[Oid] = (),
    ) -> Columns:
        """Walk several table columns at once with GETBULK.

        Returns ``{column: {index: value}}`` with plain python values. A
        column the agent lacks comes back empty.

        ``rows_hint`` (the rows the table should have, e.g. ifNumber) only
        sizes max-repetitions: no more repetitions are asked than the rows
        left plus the one that ends the column. The walk itself still goes on
        until every column leaves its subtree, whatever the hint says.

        An OID that does not increase (an agent walking in a loop) ends its
        column there, with a line in ``warnings`` naming the agent and the
        column. A column past ``max_rows`` rows, or a walk past
        ``walk_deadline_s`` seconds, is endless: the walk stops.

        ``row_cap``: the columns in ``capped`` (a MAC table: its size is the
        network's, not the switch's) stop after that many rows, keeping them,
        with a line in ``warnings``; a cut is not an error.

        Raises:
            SnmpPollError: the walk did not end within the bounds (kind ``protocol``).
        """
        columns = list(dict.fromkeys(columns))
        result: Columns = {c: {} for c in columns}
        cursor = {c: c for c in columns}
        seen = {c: 0 for c in columns}
        active = list(columns)
        rounds = 0
        where = f"{target.name} ({target.host}:{target.port})"
        deadline = time.monotonic() + self.walk_deadline_s
        while active:
            rounds += 1
            if rounds > _MAX_ROUNDS:
                raise SnmpPollError("protocol", f"{where}: walk did not end after {_MAX_ROUNDS} requests")
            if time.monotonic() > deadline:
                names = ", ".join(parse.column_name(c) for c in active)
                raise SnmpPollError(
                    "protocol",
                    f"{where}: the walk of {names} did not end within {self.walk_deadline_s:g} s "
                    f"({max(seen.values())} rows read; the bound is SnmpPoller.walk_deadline_s)",
                )
            limit = None
            if rows_hint is not None and rows_hint >= 0:
                left = rows_hint + 1 - min(seen[c] for c in active)
                if left >= 1:
                    limit = left
            vbs = await self._getbulk(target, [cursor[c] for c in active], limit)
            width = len(active)
            if not vbs:
                break
            finished: set[Oid] = set()
            for pos, (o, v) in enumerate(vbs):
                col = active[pos % width]
                if col in finished:
                    continue
                n = len(col)
                plain = type(v) in _PLAIN_TYPES  # the BER path's values (no call per varbind)
                if o[:n] != col or len(o) == n or (not plain and _is_exception(v)):
                    finished.add(col)
                    continue
                if o <= cursor[col]:  # not increasing: the agent walks in a loop; what it gave is kept
                    finished.add(col)
                    if warnings is not None:
                        warnings.append(
                            f"{where}: {parse.column_name(col)} returned a non-increasing OID "
                            f"({'.'.join(map(str, o))} after {'.'.join(map(str, cursor[col]))}); "
                            f"its walk ended there with {seen[col]} rows"
                        )
                    continue
                if row_cap is not None and seen[col] >= row_cap and col in capped:
                    finished.add(col)
                    if warnings is not None:
                        warnings.append(f"{where}: {parse.column_name(col)} has more than {row_cap} rows; the first {row_cap} are kept")
                    continue
                cursor[col] = o
                seen[col] += 1
                if seen[col] > self.max_rows:
                    raise SnmpPollError(
                        "protocol",
                        f"{where}: {parse.column_name(col)} did not end after {self.max_rows} rows "
                        "(an endless table; the bound is SnmpPoller.max_rows)",
                    )
                result[col][o[n:]] = v if plain else _plain(v)
            # a column whose rows were all consumed without leaving it stays active
            rows = len(vbs) // width
            if rows == 0:
                break
            active = [c for c in active if c not in finished]
        return result

    # ------------------------------------------------------------------- poll

    async def poll(
        self,
        target: SnmpTarget,
        *,
        what: Iterable[str] = parse.WHAT,
        previous: PollResult | None = None,
    ) -> PollResult:
        """Poll one agent; never raises for the agent's failures (see ``error``)."""
        what = list(dict.fromkeys(what))
        unknown = [w for w in what if w not in parse.COLUMNS]
        started = time.monotonic()
        result = PollResult(
            target=target.name, host=target.host, port=target.port, polled_at=dt.datetime.now(dt.UTC), what=what
        )
        try:
            if unknown:
                raise SnmpPollError("config", f"unknown poll parts {unknown}; known: {list(parse.COLUMNS)}")
            problem = target.problem()
            if problem:
                raise SnmpPollError("config", problem)
            try:
                await self._poll_into(target, what, result)
            except SnmpPollError as e:
                if not e.codec:
                    raise
                # our strict decoder refused this agent's answer: poll it again the pysnmp way
                self._fallback.add((target.host, target.port))
                result = PollResult(
                    target=target.name, host=target.host, port=target.port, polled_at=dt.datetime.now(dt.UTC), what=what
                )
                result.warnings.append(f"polled with pysnmp: fleetctl's BER decoder refused the answer ({e.message})")
                await self._poll_into(target, what, result)
        except SnmpPollError as e:
            result.error, result.error_kind = e.message, e.kind
        except Exception as e:  # noqa: BLE001 (a bug or a pysnmp surprise must not abort the others)
            result.error, result.error_kind = f"{type(e).__name__}: {e}", "protocol"
        result.duration_s = round(time.monotonic() - started, 4)
        if previous is not None and result.ok and previous.ok:
            result.rebooted_since_last = rebooted(previous, result)
        return result

    async def _poll_into(self, target: SnmpTarget, what: list[str], result: PollResult) -> None:
        """The requests of one poll; fills ``result``, raises SnmpPollError."""
        if_mib = "if" in what or "counters" in what
        first = [parse.SYS_UPTIME, parse.SYS_NAME] + ([parse.IF_NUMBER] if if_mib else [])
        got = dict(await self._request(target, "get", first))
        result.polled_at = dt.datetime.now(dt.UTC)  # the agent's answer time, for rates
        up = got.get(parse.SYS_UPTIME)
        result.sys_uptime_ticks = None if up is None or _is_exception(up) else int(up)
        name = got.get(parse.SYS_NAME)
        result.sys_name = None if name is None or _is_exception(name) else parse.text(_plain(name))
        only = target.ports if if_mib else None  # the ports whose per-port columns are read (None: all)
        columns = list(dict.fromkeys(c for w in what if w != "fdb"
                                     for c in (_IF_MAP if only is not None and w in ("if", "counters") else parse.COLUMNS[w])))  # fmt: skip
        rows_hint = None
        if if_mib and all(w in ("if", "counters") for w in what):  # every column is indexed by ifIndex
            n = got.get(parse.IF_NUMBER)
            n = None if n is None or _is_exception(n) else _plain(n)
            rows_hint = n if isinstance(n, int) and 0 <= n <= 100_000 else None
        cols = await self.walk_columns(target, columns, rows_hint=rows_hint, warnings=result.warnings) if columns else {}
        if if_mib and only is not None:
            cols.update(await self._port_columns(target, cols, "if" if "if" in what else "counters", only, result.warnings))
            result.interfaces = parse.interfaces(cols)
            if not result.interfaces:
                result.warnings.append("IF-MIB: no interfaces")
        elif if_mib:
            more: list[Oid] = []
            if not cols.get(parse.IF_HC_IN_OCTETS) and not cols.get(parse.IF_HC_OUT_OCTETS):
                more += parse.IF_32BIT_OCTETS if "if" in what else parse.IF_32BIT_COUNTERS
            if "if" not in what and not cols.get(parse.IF_NAME):
                more.append(parse.IF_DESCR)  # a counters poll names interfaces by ifName, else ifDescr
            if more:
                cols.update(await self.walk_columns(target, more, rows_hint=rows_hint, warnings=result.warnings))
            result.interfaces = parse.interfaces(cols)
            if not result.interfaces:
                result.warnings.append("IF-MIB: no interfaces")
        if "lldp" in what:
            names = {i.index: i.name for i in result.interfaces if i.name}
            result.lldp = parse.lldp(cols, names)
            if not cols.get(parse.LLDP_LOC_PORT_ID) and not result.lldp:
                result.warnings.append("LLDP-MIB: not supported by this agent")
        if "sensors" in what:
            result.sensors = parse.sensors(cols)
            if not result.sensors:
                result.warnings.append("ENTITY-SENSOR-MIB: no sensors")
        if "fdb" in what:
            # A walk of its own: its row cap must not cut the other parts' columns.
            fdb_cols = await self.walk_columns(target, parse.COLUMNS["fdb"], warnings=result.warnings,
                                               row_cap=target.max_fdb_rows, capped=parse.FDB_ROWS)  # fmt: skip
            result.fdb = parse.fdb(fdb_cols)
            if not fdb_cols.get(parse.DOT1Q_TP_FDB_PORT) and not fdb_cols.get(parse.DOT1D_TP_FDB_PORT):
                result.warnings.append("BRIDGE-MIB/Q-BRIDGE-MIB: no MAC address table")

    async def _port_columns(self, target: SnmpTarget, cols: Columns, part: str, ports: Sequence[str], warnings: list[str]) -> Columns:
        """The per-port IF-MIB columns of ``part`` for the rows of ``ports`` alone (GETs), given the walked names.

        A port is found by the name the checks know it by (ifName, else
        ifDescr, else its ifIndex: :attr:`InterfaceCounters.label`); ifDescr
        is walked only when a row has no ifName. Columns an agent lacks for a
        row (noSuchObject/noSuchInstance) stay absent, as in a walk.
        """
        names = cols.get(parse.IF_NAME, {})
        rows = {k for c in _IF_MAP for k in cols.get(c, {}) if len(k) == 1}
        got: Columns = {}
        if not rows or any(not parse.text(names.get(k)) for k in rows):
            got.update(await self.walk_columns(target, [parse.IF_DESCR], warnings=warnings))
        descrs = got.get(parse.IF_DESCR, {})
        wanted = set(ports)

        def label(k: Oid) -> str:
            return parse.text(names.get(k)) or parse.text(descrs.get(k)) or str(k[0])

        chosen = sorted(k for k in rows | set(descrs) if label(k) in wanted)
        per_port = [c for c in parse.COLUMNS[part] if c not in _IF_MAP and c not in got]

        async def fetch(columns: Sequence[Oid]) -> None:
            for c in columns:
                got.setdefault(c, {})
            # OID -> (column, row): an answer is placed by the OID it names, in whatever order it came
            where = {(*c, *k): (c, k) for k in chosen for c in columns}
            for o, v in await self.get_many(target, list(where)):
                if o in where and not _is_exception(v):
                    c, k = where[o]
                    got[c][k] = _plain(v)

        if chosen:
            await fetch(per_port)
            if not got.get(parse.IF_HC_IN_OCTETS) and not got.get(parse.IF_HC_OUT_OCTETS):
                await fetch(parse.IF_32BIT_OCTETS if part == "if" else parse.IF_32BIT_COUNTERS)
        return got

    async def poll_many(
        self,
        targets: Iterable[SnmpTarget],
        *,
        what: Iterable[str] = parse.WHAT,
        concurrency: int = 100,
        previous: PreviousPolls | None = None,
        progress: SweepProgress[PollResult] | None = None,
    ) -> list[PollResult]:
        """Poll every target, at most ``concurrency`` at once; results in target order.

        ``progress(done, total, result)`` is called after each agent.
        """
        targets = list(targets)
        what = tuple(what)
        prev = _by_target(previous)
        gate = asyncio.Semaphore(max(1, concurrency))
        total = len(targets)
        done = 0

        async def one(t: SnmpTarget) -> PollResult:
            nonlocal done
            async with gate:
                result = await self.poll(t, what=what, previous=prev.get(t.name))
            if progress is not None:
                done += 1
                progress(done, total, result)
            return result

        return list(await asyncio.gather(*(one(t) for t in targets)))

    @classmethod
    async def sweep(
        cls,
        targets: Iterable[SnmpTarget],
        *,
        what: Iterable[str] = parse.WHAT,
        concurrency: int = 100,
        previous: PreviousPolls | None = None,
        progress: SweepProgress[PollResult] | None = None,
    ) -> list[PollResult]:
        """:meth:`poll_many` with a poller of its own, closed at the end (see :func:`poll_many`)."""
        poller = cls()
        try:
            return await poller.poll_many(targets, what=what, concurrency=concurrency, previous=previous, progress=progress)
        finally:
            poller.close()

    @staticmethod
    def rates(previous: PollResult, current: PollResult) -> Rates:
        """See :func:`.rates.rates`."""
        return _rates(previous, current)


def _by_target(previous: PreviousPolls | None) -> dict[str, PollResult]:
    if previous is None:
        return {}
    if isinstance(previous, Mapping):
        return dict(previous)
    return {p.target: p for p in previous}


_types: dict[str, Any] = {}


def _t() -> dict[str, Any]:
    """pyasn1/pysnmp value classes, imported on first use (keeps this module's import cheap)."""
    if not _types:
        from pyasn1.type import univ
        from pysnmp.proto import rfc1905

        _types.update(
            exc=(rfc1905.NoSuchObject, rfc1905.NoSuchInstance, rfc1905.EndOfMibView),
            univ=univ,
        )
    return _types


def _is_exception(value: Any) -> bool:
    """noSuchObject, noSuchInstance, endOfMibView (SNMPv2 exception values)."""
    if isinstance(value, _PLAIN):
        return False
    if isinstance(value, ber.SnmpException):
        return True
    return isinstance(value, _t()["exc"])


_PLAIN = (int, bytes, str, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)


def _plain(value: Any) -> object:
    """A pyasn1 value as int, bytes or an OID tuple (str of dots); plain values as they are."""
    if isinstance(value, (*_PLAIN, ber.SnmpException)):
        return value
    univ = _t()["univ"]
    if isinstance(value, univ.Integer):
        return int(value)
    if isinstance(value, univ.OctetString):
        return value.asOctets()
    if isinstance(value, univ.ObjectIdentifier):
        return ".".join(str(x) for x in value)
    if isinstance(value, univ.Null):
        return None
    # Anything else pysnmp hands back: its own text if it has one, never a crash.
    return value.prettyPrint() if hasattr(value, "prettyPrint") else str(value)


async def poll_many(
    targets: Iterable[SnmpTarget],
    *,
    what: Iterable[str] = ("if", "lldp", "sensors"),
    concurrency: int = 100,
    previous: Mapping[str, PollResult] | Iterable[PollResult] | None = None,
    poller: SnmpPoller | None = None,
) -> list[PollResult]:
    """Poll many SNMP agents concurrently; one result per target, in order.

    Args:
        targets: the agents.
        what: parts to read: ``if`` (IF-MIB), ``counters`` (the IF-MIB
            columns a traffic/error poll needs: names, oper status, octets,
            errors, discards), ``lldp`` (LLDP-MIB), ``sensors``
            (ENTITY-SENSOR-MIB). sysUpTime and sysName are always read.
        concurrency: agents polled at once (the overall bound).
        previous: earlier results (by target name) to set ``rebooted_since_last``.
        poller: reuse a poller (its engine, discovery and caches) across
            calls; when None a poller is made and closed here.

    Returns:
        A :class:`PollResult` per target; failures have ``error`` set.
    """
    own = poller is None
    p = poller or SnmpPoller()
    try:
        return await p.poll_many(targets, what=what, concurrency=concurrency, previous=previous)
    finally:
        if own:
            p.close()


def poll_many_sync(
    targets: Iterable[SnmpTarget],
    *,
    what: Iterable[str] = ("if", "lldp", "sensors"),
    concurrency: int = 100,
    previous: Mapping[str, PollResult] | Iterable[PollResult] | None = None,
) -> list[PollResult]:
    """:func:`poll_many` for callers without an event loop (the CLI)."""
    return asyncio.run(poll_many(targets, what=what, concurrency=concurrency, previous=previous))
