"""The MAC address table over SNMP (the poll part ``fdb``): Q-BRIDGE-MIB with its VLAN, BRIDGE-MIB where an
agent has only that, bridge ports named through dot1dBasePortIfIndex and ifName, and the row cap.

The agent is scripted (fleetctl's BER codec on 127.0.0.1): it answers GETBULK from a dict of OIDs in
lexicographic order, as a real agent walks. The tables are hand-made (no public walk of a switch's FDB
was found to copy): the OIDs and value types are RFC 4188 / RFC 4363's.
"""

from __future__ import annotations

import asyncio
import bisect
from typing import Any

from fleetctl_drivers.snmp import SnmpPoller
from fleetctl_drivers.snmp import ber as B
from fleetctl_drivers.snmp import parse as P

from fleetctl.discovery.mactable import sightings_from_snmp
from fleetctl.interfaces.snmp import PollResult, SnmpTarget

Oid = tuple[int, ...]


class _DictAgent(asyncio.DatagramProtocol):
    def __init__(self, data: dict[Oid, object]) -> None:
        self.keys = sorted(data)
        self.data = data
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def _next(self, o: Oid) -> tuple[Oid, object]:
        i = bisect.bisect_right(self.keys, o)
        return (self.keys[i], self.data[self.keys[i]]) if i < len(self.keys) else (o, B.END_OF_MIB_VIEW)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        req = B.decode_message(data)
        if req.pdu_type == B.GET_BULK_REQUEST:
            cursors = [o for o, _ in req.varbinds]
            vbs: list[tuple[Oid, object]] = []
            for _ in range(min(req.error_index, 30)):
                for k, c in enumerate(cursors):
                    o, v = self._next(c)
                    cursors[k] = o
                    vbs.append((o, v))
        else:
            vbs = [(o, self.data.get(o, B.NO_SUCH_OBJECT)) for o, _ in req.varbinds]
        self.transport.sendto(B.encode_message(req.community, B.RESPONSE, req.request_id, vbs), addr)


def _mac_index(mac: str) -> Oid:
    return tuple(int(x, 16) for x in mac.split(":"))


def _switch(q_bridge: bool = True, macs: int = 0) -> dict[Oid, object]:
    """Ports 1-3 (ifIndex 1001-1003, Ethernet1-3) and a LAG (ifIndex 2001, Port-Channel1, bridge port 4)."""
    d: dict[Oid, object] = {P.SYS_UPTIME: B.Typed(B.TIMETICKS, 100), P.SYS_NAME: b"mgmt-1"}
    for port, ifindex, name, iftype in ((1, 1001, b"Ethernet1", 6), (2, 1002, b"Ethernet2", 6), (3, 1003, b"Ethernet3", 6),
                                        (4, 2001, b"Port-Channel1", 161)):  # fmt: skip
        d[(*P.DOT1D_BASE_PORT_IFINDEX, port)] = ifindex
        d[(*P.IF_NAME, ifindex)] = name
        d[(*P.IF_DESCR, ifindex)] = name
        d[(*P.IF_TYPE, ifindex)] = iftype
    rows = [("02:00:00:00:00:01", 10, 1, 3), ("02:00:00:00:00:02", 10, 2, 3), ("02:00:00:00:00:99", 10, 4, 3),
            ("02:aa:aa:aa:aa:aa", 10, 0, 4),  # the switch's own MAC: status self, port 0
            ("02:00:00:00:00:03", 20, 3, 5)]  # fmt: skip
    rows += [(f"02:00:00:00:{k // 256:02x}:{k % 256:02x}", 30, 4, 3) for k in range(256, 256 + macs)]
    for mac, vlan, port, status in rows:
        if q_bridge:
            d[(*P.DOT1Q_TP_FDB_PORT, vlan, *_mac_index(mac))] = port
            d[(*P.DOT1Q_TP_FDB_STATUS, vlan, *_mac_index(mac))] = status
        else:
            d[(*P.DOT1D_TP_FDB_PORT, *_mac_index(mac))] = port
            d[(*P.DOT1D_TP_FDB_STATUS, *_mac_index(mac))] = status
    return d


def _poll(data: dict[Oid, object], **target: Any) -> PollResult:
    async def run() -> PollResult:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _DictAgent(data), local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        t = SnmpTarget(name="mgmt-1", host="127.0.0.1", port=port, community="c0mm", timeout=2.0, retries=0, **target)
        try:
            async with SnmpPoller() as poller:
                return await poller.poll(t, what=["fdb"])
        finally:
            transport.close()

    return asyncio.run(run())


def test_q_bridge_rows_carry_their_vlan_and_port_name() -> None:
    r = _poll(_switch())
    assert r.error is None, r.error
    got = {(e.mac, e.vlan, e.port, e.status) for e in r.fdb}
    assert got == {("02:00:00:00:00:01", 10, "Ethernet1", "learned"), ("02:00:00:00:00:02", 10, "Ethernet2", "learned"),
                   ("02:00:00:00:00:99", 10, "Port-Channel1", "learned"), ("02:00:00:00:00:03", 20, "Ethernet3", "mgmt")}  # fmt: skip
    # The switch's own MAC (status self) is no entry; a LAG's row is, but is no sighting.
    seen = {(s.port, s.mac) for s in sightings_from_snmp(r)}
    assert ("Port-Channel1", "02:00:00:00:00:99") not in seen
    assert ("Ethernet1", "02:00:00:00:00:01") in seen and all(s.source == "snmp" for s in sightings_from_snmp(r))


def test_bridge_mib_alone_is_read_without_vlans() -> None:
    r = _poll(_switch(q_bridge=False))
    assert r.error is None, r.error
    assert {(e.mac, e.vlan, e.port) for e in r.fdb} >= {("02:00:00:00:00:01", None, "Ethernet1"), ("02:00:00:00:00:03", None, "Ethernet3")}
    assert not any(w.startswith("BRIDGE-MIB") for w in r.warnings)


def test_an_agent_without_a_mac_table_says_so() -> None:
    data = {P.SYS_UPTIME: B.Typed(B.TIMETICKS, 100), P.SYS_NAME: b"x", (*P.IF_NAME, 1): b"Ethernet1"}
    r = _poll(data)
    assert r.error is None and r.fdb == []
    assert "BRIDGE-MIB/Q-BRIDGE-MIB: no MAC address table" in r.warnings


def test_the_row_cap_keeps_the_first_rows_and_warns() -> None:
    r = _poll(_switch(macs=300), max_fdb_rows=50)
    assert r.error is None, r.error
    assert len(r.fdb) <= 50
    assert any("Q-BRIDGE-MIB::dot1qTpFdbPort has more than 50 rows" in w for w in r.warnings)
    full = _poll(_switch(macs=300))
    assert len(full.fdb) == 304 and not any("more than" in w for w in full.warnings)
