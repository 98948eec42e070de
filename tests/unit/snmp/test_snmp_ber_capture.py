"""A counters poll captured from snmpsim, replayed to both SNMPv2c paths.

The bytes below are what went over the wire when fleetctl polled
snmpsim-command-responder (``what=("counters",)``, community ``cap``) serving
a 4-port switch from ``snmp_agents.switch_records(SwitchSpec(name="cap01",
ports=4), what=("if",))`` with every moving value pinned at its initial one
(``:numeric`` records made static), so a replay is exact. snmpsim encodes
with pysnmp/pyasn1; the request ids were 0x1f2e3d00 and 0x1f2e3d01.

A fake agent answers the replayed requests: to the BER path with the
captured bytes verbatim (its requests must equal the captured ones byte for
byte), to the pysnmp path with the captured response re-stamped with
pysnmp's request id by pyasn1. Both PollResults must be equal field by field
(but the poll's time) and match the switch's spec.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.snmp import SnmpPoller
from fleetctl_drivers.snmp import ber as B

from fleetctl.interfaces.snmp import OperStatus, PollResult, SnmpTarget

pytest.importorskip("pysnmp")

_AGENTS = Path(__file__).resolve().parent / "snmp_agents.py"
if "snmp_agents" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("snmp_agents", _AGENTS)
    assert _spec and _spec.loader
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["snmp_agents"] = _mod
    _spec.loader.exec_module(_mod)
A = sys.modules["snmp_agents"]

SPEC = A.SwitchSpec(name="cap01", ports=4)
FIRST_REQUEST_ID = 0x1F2E3D00

CAPTURED: list[tuple[str, bytes]] = [
    ("req", bytes.fromhex(
        "30420201010403636170a03802041f2e3d00020100020100302a300c06082b060102010103000500300c06082b060102"
        "010105000500300c06082b060102010201000500"
    )),
    ("rsp", bytes.fromhex(
        "304c0201010403636170a24202041f2e3d000201000201003034301006082b06010201010300430400bc610030110608"
        "2b0601020101050004056361703031300d06082b06010201020100020104"
    )),
    ("req", bytes.fromhex(
        "3081940201010403636170a5818902041f2e3d01020100020105307b300e060a2b060102011f010101010500300d0609"
        "2b06010201020201080500300e060a2b060102011f010101060500300e060a2b060102011f0101010a0500300d06092b"
        "060102010202010e0500300d06092b06010201020201140500300d06092b060102010202010d0500300d06092b060102"
        "01020201130500"
    )),
    ("rsp", bytes.fromhex(
        "308203350201010403636170a282032902041f2e3d01020100020100308203193018060b2b060102011f010101010104"
        "0945746865726e657431300f060a2b0601020102020108010201013015060b2b060102011f0101010601460600e8d4a5"
        "10013015060b2b060102011f0101010a01460601d1a94a2001300f060a2b060102010202010e01410100300f060a2b06"
        "0102010202011401410101300f060a2b060102010202010d0141010a300f060a2b06010201020201130141010b301806"
        "0b2b060102011f0101010102040945746865726e657432300f060a2b0601020102020108020201013015060b2b060102"
        "011f0101010602460600e8d4a510023015060b2b060102011f0101010a02460601d1a94a2002300f060a2b0601020102"
        "02010e02410100300f060a2b060102010202011402410102300f060a2b060102010202010d02410114300f060a2b0601"
        "020102020113024101163018060b2b060102011f0101010103040945746865726e657433300f060a2b06010201020201"
        "08030201013015060b2b060102011f0101010603460600e8d4a510033015060b2b060102011f0101010a03460601d1a9"
        "4a2003300f060a2b060102010202010e03410100300f060a2b060102010202011403410103300f060a2b060102010202"
        "010d0341011e300f060a2b0601020102020113034101213018060b2b060102011f0101010104040945746865726e6574"
        "34300f060a2b0601020102020108040201013015060b2b060102011f0101010604460600e8d4a510043015060b2b0601"
        "02011f0101010a04460601d1a94a2004300f060a2b060102010202010e04410100300f060a2b06010201020201140441"
        "0104300f060a2b060102010202010d04410128300f060a2b06010201020201130441012c3015060b2b060102011f0101"
        "010601460600e8d4a510013010060a2b060102010202010901430203e93015060b2b060102011f0101010a01460601d1"
        "a94a20013012060b2b060102011f0101010f0142030186a03013060a2b060102010202011001410500a94a2001301806"
        "0b2b060102011f0101010101040945746865726e657431300f060a2b060102010202010e01410100300f060a2b060102"
        "010202011401410101"
    )),
]


def _pyasn1() -> tuple[Any, Any, Any]:
    from pyasn1.codec.ber import decoder, encoder
    from pysnmp.proto import api

    return decoder, encoder, api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]


def _key(data: bytes) -> tuple[Any, ...]:
    """What a request asks (pyasn1's reading): community, PDU type, OIDs, max-repetitions."""
    decoder, _, mod = _pyasn1()
    msg, _ = decoder.decode(data, asn1Spec=mod.Message())
    pdu = mod.apiMessage.get_pdu(msg)
    oids = tuple(tuple(o) for o, _ in mod.apiPDU.get_varbinds(pdu))
    bulk = pdu.tagSet == mod.GetBulkRequestPDU.tagSet
    reps = int(mod.apiBulkPDU.get_max_repetitions(pdu)) if bulk else None
    return bytes(mod.apiMessage.get_community(msg)), bulk, oids, reps


def _request_id(data: bytes) -> int:
    decoder, _, mod = _pyasn1()
    msg, _ = decoder.decode(data, asn1Spec=mod.Message())
    return int(mod.apiPDU.get_request_id(mod.apiMessage.get_pdu(msg)))


def _restamp(response: bytes, request_id: int) -> bytes:
    decoder, encoder, mod = _pyasn1()
    msg, _ = decoder.decode(response, asn1Spec=mod.Message())
    mod.apiPDU.set_request_id(mod.apiMessage.get_pdu(msg), request_id)
    return encoder.encode(msg)


class ReplayAgent(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        pairs = list(zip(CAPTURED[::2], CAPTURED[1::2], strict=True))
        assert all(a[0] == "req" and b[0] == "rsp" for a, b in pairs)
        self.answers = {_key(req): (req, rsp) for (_, req), (_, rsp) in pairs}
        self.verbatim = 0
        self.unknown: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        got = self.answers.get(_key(data))
        if got is None:
            self.unknown.append(data)
            return
        req, rsp = got
        if data == req:  # the BER path, same request id: the captured answer as it is
            self.verbatim += 1
            self.transport.sendto(rsp, addr)
        else:
            self.transport.sendto(_restamp(rsp, _request_id(data)), addr)


def test_captured_requests_are_what_our_encoder_makes() -> None:
    (_, get), _, (_, bulk), _ = CAPTURED
    oids = [(1, 3, 6, 1, 2, 1, 1, 3, 0), (1, 3, 6, 1, 2, 1, 1, 5, 0), (1, 3, 6, 1, 2, 1, 2, 1, 0)]
    assert get == B.get_request(b"cap", FIRST_REQUEST_ID, oids)
    m = B.decode_message(bulk)
    assert (m.pdu_type, m.request_id, m.error_status, m.error_index) == (B.GET_BULK_REQUEST, FIRST_REQUEST_ID + 1, 0, 5)
    assert bulk == B.get_bulk(b"cap", FIRST_REQUEST_ID + 1, [o for o, _ in m.varbinds], 5)


def test_captured_responses_decode_as_pyasn1_reads_them() -> None:
    decoder, _, mod = _pyasn1()
    types: set[str] = set()
    for kind, data in CAPTURED:
        if kind != "rsp":
            continue
        msg, _ = decoder.decode(data, asn1Spec=mod.Message())
        theirs = [(tuple(o), v) for o, v in mod.apiPDU.get_varbinds(mod.apiMessage.get_pdu(msg))]
        ours = B.decode_message(data).varbinds
        assert len(ours) == len(theirs) > 0
        for (o1, v1), (o2, v2) in zip(ours, theirs, strict=True):
            assert o1 == o2
            assert v1 == (v2.asOctets() if isinstance(v1, bytes) else int(v2))
        types.update(type(v).__name__ for _, v in theirs)
    assert {"OctetString", "Integer", "TimeTicks", "Counter32", "Gauge32", "Counter64"} <= types


def test_replayed_poll_gives_the_same_result_on_both_paths() -> None:
    async def run() -> tuple[PollResult, PollResult, ReplayAgent]:
        loop = asyncio.get_running_loop()
        transport, agent = await loop.create_datagram_endpoint(ReplayAgent, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        target = SnmpTarget(name="cap01", host="127.0.0.1", port=port, community="cap", timeout=2, retries=0)
        try:
            async with SnmpPoller() as p:
                p._v2c_client._next_id = FIRST_REQUEST_ID  # the captured request ids
                ours = await p.poll(target, what=("counters",))
            async with SnmpPoller(v2c="pysnmp") as p:
                theirs = await p.poll(target, what=("counters",))
        finally:
            transport.close()
        return ours, theirs, agent

    ours, theirs, agent = asyncio.run(run())
    assert agent.unknown == [] and agent.verbatim == 2
    assert ours.ok and theirs.ok, (ours.error, theirs.error)
    skip = {"polled_at", "duration_s"}
    a, b = ours.model_dump(exclude=skip), theirs.model_dump(exclude=skip)
    for field in a:
        assert a[field] == b[field], field
    assert ours.what == ["counters"] and ours.warnings == []
    assert (ours.sys_name, ours.sys_uptime_ticks) == ("cap01", SPEC.uptime_ticks)
    assert [i.index for i in ours.interfaces] == [1, 2, 3, 4]
    for i in ours.interfaces:
        n = i.index
        got = (i.name, i.descr, i.alias, i.admin_up, i.speed_mbps, i.last_change_ticks)
        assert got == (SPEC.port_name(n), None, None, None, None, None)
        assert i.oper_status is (OperStatus.UP if SPEC.oper_up(n) else OperStatus.DOWN)
        assert (i.in_octets, i.out_octets, i.octets_bits) == (SPEC.in_initial(n), SPEC.out_initial(n), 64)
        got = (i.in_discards, i.out_discards, i.in_errors, i.out_errors)
        assert got == (SPEC.in_discards(n), SPEC.out_discards(n), 0, SPEC.out_errors(n))
