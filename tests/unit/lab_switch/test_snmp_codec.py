"""The lab's SNMP bytes, checked with pysnmp's codec: its readiness probe, and every answer against the data it rendered.

The lab has no BER code of its own (snmpsim encodes the answers, pysnmp the
probe). These tests decode what goes on the wire with pysnmp/pyasn1 and
compare it with what the lab meant: a wrong probe, a wrong snmprec type tag
or a badly hex-encoded string fails here.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
from swlab_helpers import SYS_UPTIME, snmp_walk_typed

EOS, SONIC = "lab-eos-1", "lab-sonic-1"


def _decode_v2c(packet: bytes) -> tuple[Any, Any, Any]:
    """(message, pdu, v2c module) of an SNMPv2c packet, decoded by pysnmp; the whole packet consumed."""
    from pyasn1.codec.ber import decoder
    from pysnmp.proto import api

    assert int(api.decodeMessageVersion(packet)) == api.SNMP_VERSION_2C
    v2c = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]
    msg, rest = decoder.decode(packet, asn1Spec=v2c.Message())
    assert rest == b""
    return msg, v2c.apiMessage.get_pdu(msg), v2c


@pytest.mark.parametrize(
    ("community", "oid", "request_id"),
    [
        ("public@lab-eos-1", SYS_UPTIME, 1),
        ("public@lab-sonic-1", "1.0.8802.1.1.2.1.4.1.1.9.0.6.1", 127),
        ("c" * 300, "1.3.6.1.4.1.30065.1.3011.7050.3741.48", 128),  # long-form lengths; an INTEGER needing a 0 pad
        ("sw-ü", "2.999.4294967295", 2**31 - 1),  # a UTF-8 community, a first arc above 39, a big arc
    ],
)
def test_probe_packet_decodes_with_pysnmp(community: str, oid: str, request_id: int) -> None:
    from fleetctl_lab.switch.snmp import snmp_get_packet
    from pysnmp.proto import rfc1902
    from pysnmp.proto.rfc1905 import GetRequestPDU

    msg, pdu, v2c = _decode_v2c(snmp_get_packet(community, oid, request_id))
    assert bytes(v2c.apiMessage.get_community(msg)) == community.encode()
    assert pdu.tagSet == GetRequestPDU.tagSet
    assert int(v2c.apiPDU.get_request_id(pdu)) == request_id
    assert int(v2c.apiPDU.get_error_status(pdu)) == 0 and int(v2c.apiPDU.get_error_index(pdu)) == 0
    [(name, value)] = v2c.apiPDU.get_varbinds(pdu)
    assert name == rfc1902.ObjectName(oid)
    assert value.tagSet == v2c.null.tagSet


def test_probe_packet_bytes_unchanged() -> None:
    """The probe the lab sends is byte for byte what its former hand-written encoder sent."""
    from fleetctl_lab.switch.snmp import snmp_get_packet

    assert snmp_get_packet("public@lab-eos-1", SYS_UPTIME).hex() == (
        "303002010104107075626c6963406c61622d656f732d31a019020101020100020100300e300c06082b060102010103000500"
    )


def test_probe_answered_by_the_lab(swlab: Any) -> None:
    """snmpsim answers the lab's probe: a Response to the same request id, sysUpTime as TimeTicks."""
    from fleetctl_lab.switch.snmp import snmp_get_packet
    from pysnmp.proto import rfc1902
    from pysnmp.proto.rfc1905 import ResponsePDU

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    try:
        sock.sendto(snmp_get_packet(swlab.community(EOS), SYS_UPTIME, 4242), swlab.snmp_of(EOS))
        answer = sock.recv(65535)
    finally:
        sock.close()
    msg, pdu, v2c = _decode_v2c(answer)
    assert bytes(v2c.apiMessage.get_community(msg)) == swlab.community(EOS).encode()
    assert pdu.tagSet == ResponsePDU.tagSet
    assert int(v2c.apiPDU.get_request_id(pdu)) == 4242 and int(v2c.apiPDU.get_error_status(pdu)) == 0
    [(name, value)] = v2c.apiPDU.get_varbinds(pdu)
    assert name == rfc1902.ObjectName(SYS_UPTIME)
    assert value.tagSet == rfc1902.TimeTicks.tagSet and int(value) > 0


def _expected(tag: str, text: str) -> tuple[Any, Any]:
    """(pysnmp type, value or None) an .snmprec line stands for; None where a variation module computes it."""
    from pysnmp.proto import rfc1902

    types = {"2": rfc1902.Integer32, "4": rfc1902.OctetString, "6": rfc1902.ObjectIdentifier, "64": rfc1902.IpAddress,
             "65": rfc1902.Counter32, "66": rfc1902.Gauge32, "67": rfc1902.TimeTicks, "70": rfc1902.Counter64}  # fmt: skip
    base, _, variation = tag.partition(":")
    kind = types[base.removesuffix("x")]
    if variation:
        return kind, None
    if kind is rfc1902.OctetString:
        return kind, bytes.fromhex(text) if base.endswith("x") else text.encode()
    if kind is rfc1902.ObjectIdentifier:
        return kind, tuple(int(x) for x in text.split("."))
    return kind, int(text)


def _py(value: Any) -> Any:
    """A decoded pysnmp value as bytes (strings), a tuple (OIDs) or an int."""
    from pysnmp.proto import rfc1902

    if value.tagSet == rfc1902.OctetString.tagSet:
        return bytes(value)
    if value.tagSet == rfc1902.ObjectIdentifier.tagSet:
        return tuple(value)
    return int(value)


def _served(swlab: Any, name: str) -> list[tuple[str, Any]]:
    return [(o, v) for o, v in snmp_walk_typed(swlab, name) if v.__class__.__name__ != "EndOfMibView"]


def _mismatches(swlab: Any, name: str) -> list[str]:
    path = Path(swlab.lab.state_dir) / "snmp" / "data" / f"{swlab.community(name)}.snmprec"
    rendered = [line.split("|", 2) for line in path.read_text().splitlines()]
    served = _served(swlab, name)
    out = []
    if [o for o, _ in served] != [o for o, _, _ in rendered]:
        out.append(f"{name}: OIDs served {len(served)} != rendered {len(rendered)}: "
                   f"{sorted({o for o, _ in served} ^ {o for o, _, _ in rendered})[:5]}")  # fmt: skip
    for (oid, tag, text), (_, value) in zip(rendered, served, strict=False):
        kind, want = _expected(tag, text)
        if value.tagSet != kind.tagSet:
            out.append(f"{name} {oid}: type {value.__class__.__name__}, rendered {tag} ({kind.__name__})")
        elif want is not None and _py(value) != want:
            out.append(f"{name} {oid}: served {_py(value)!r}, rendered {want!r}")
    return out


@pytest.mark.parametrize("name", [EOS, SONIC])
def test_every_answer_is_what_the_lab_rendered(swlab: Any, name: str) -> None:
    """Walk the whole agent with pysnmp: every OID of the data file, in order, with its type and (static) value."""
    bad: list[str] = []
    for _ in range(3):  # a fault test may have just rewritten the file; snmpsim re-reads it on its next request
        bad = _mismatches(swlab, name)
        if not bad:
            return
        time.sleep(1.1)
    raise AssertionError("\n".join(bad[:20]))


# The SMI type of every column the lab serves, from the MIBs themselves (SNMPv2-MIB, IF-MIB,
# LLDP-MIB, ENTITY-MIB, ENTITY-SENSOR-MIB, BRIDGE-MIB, Q-BRIDGE-MIB), not from the lab: (column OID, type name).
_MIB_TYPES = {
    "1.3.6.1.2.1.1.1": "OctetString", "1.3.6.1.2.1.1.2": "ObjectIdentifier", "1.3.6.1.2.1.1.3": "TimeTicks",
    "1.3.6.1.2.1.1.4": "OctetString", "1.3.6.1.2.1.1.5": "OctetString", "1.3.6.1.2.1.1.6": "OctetString",
    "1.3.6.1.2.1.1.7": "Integer32", "1.3.6.1.2.1.2.1": "Integer32",
    **{f"1.3.6.1.2.1.2.2.1.{c}": t for c, t in [
        (1, "Integer32"), (2, "OctetString"), (3, "Integer32"), (4, "Integer32"), (5, "Gauge32"), (6, "OctetString"),
        (7, "Integer32"), (8, "Integer32"), (9, "TimeTicks"), (10, "Counter32"), (11, "Counter32"), (13, "Counter32"),
        (14, "Counter32"), (15, "Counter32"), (16, "Counter32"), (17, "Counter32"), (19, "Counter32"), (20, "Counter32")]},
    **{f"1.3.6.1.2.1.31.1.1.1.{c}": t for c, t in [
        (1, "OctetString"), (6, "Counter64"), (7, "Counter64"), (10, "Counter64"), (11, "Counter64"),
        (15, "Gauge32"), (17, "Integer32"), (18, "OctetString")]},
    **{f"1.0.8802.1.1.2.1.3.{c}": t for c, t in [
        (1, "Integer32"), (2, "OctetString"), (3, "OctetString"), (4, "OctetString"),
        ("7.1.2", "Integer32"), ("7.1.3", "OctetString"), ("7.1.4", "OctetString")]},
    **{f"1.0.8802.1.1.2.1.4.1.1.{c}": t for c, t in [
        (4, "Integer32"), (5, "OctetString"), (6, "Integer32"), (7, "OctetString"), (8, "OctetString"),
        (9, "OctetString"), (10, "OctetString"), (11, "OctetString"), (12, "OctetString")]},
    **{f"1.3.6.1.2.1.47.1.1.1.1.{c}": t for c, t in [(2, "OctetString"), (5, "Integer32"), (7, "OctetString"), (11, "OctetString")]},
    **{f"1.3.6.1.2.1.99.1.1.1.{c}": t for c, t in [
        (1, "Integer32"), (2, "Integer32"), (3, "Integer32"), (4, "Integer32"), (5, "Integer32"), (6, "OctetString")]},
    # BRIDGE-MIB dot1dBasePort, dot1dBasePortIfIndex (InterfaceIndex); Q-BRIDGE-MIB dot1qTpFdbPort, dot1qTpFdbStatus
    "1.3.6.1.2.1.17.1.4.1.1": "Integer32", "1.3.6.1.2.1.17.1.4.1.2": "Integer32",
    "1.3.6.1.2.1.17.7.1.2.2.1.2": "Integer32", "1.3.6.1.2.1.17.7.1.2.2.1.3": "Integer32",
}  # fmt: skip


def _column(oid: str) -> str | None:
    for col in _MIB_TYPES:
        if oid.startswith(col + "."):
            return col
    return None


@pytest.mark.parametrize("name", [EOS, SONIC])
def test_answers_carry_the_mib_types_and_the_switch_facts(swlab: Any, name: str) -> None:
    """What pysnmp decodes from the agent has each column's MIB type, and the switch's own facts
    (names, MAC, speeds, serial, LLDP neighbours): independent of how the lab renders them."""
    from pysnmp.proto import rfc1902

    served = dict(_served(swlab, name))
    bad = []
    for oid, value in served.items():
        col = _column(oid)
        if col is None:
            bad.append(f"{oid}: not a column the lab serves")
        elif value.tagSet != getattr(rfc1902, _MIB_TYPES[col]).tagSet:
            bad.append(f"{oid}: {value.__class__.__name__}, the MIB says {_MIB_TYPES[col]}")
    assert not bad, bad[:20]

    sw = swlab.lab.switches[name]
    mac = bytes.fromhex(sw.spec.mac.replace(":", ""))
    v = {o: _py(x) for o, x in served.items()}
    assert v["1.3.6.1.2.1.1.5.0"] == name.encode()
    assert v["1.0.8802.1.1.2.1.3.2.0"] == mac and len(mac) == 6
    assert v["1.0.8802.1.1.2.1.3.3.0"] == name.encode()
    assert v["1.3.6.1.2.1.47.1.1.1.1.11.1"] == sw.spec.serial.encode()
    assert v["1.3.6.1.2.1.2.1.0"] == len(sw.ports)
    for p in sw.ports.values():
        i = p.ifindex
        assert v[f"1.3.6.1.2.1.2.2.1.2.{i}"] == v[f"1.3.6.1.2.1.31.1.1.1.1.{i}"] == p.name.encode()
        assert v[f"1.3.6.1.2.1.2.2.1.6.{i}"] == mac
        assert v[f"1.3.6.1.2.1.2.2.1.5.{i}"] == min(p.speed_mbps * 1_000_000, 2**32 - 1)
        assert v[f"1.3.6.1.2.1.31.1.1.1.15.{i}"] == p.speed_mbps
        nb = sw.lldp_neighbor(p)
        rem = f"1.0.8802.1.1.2.1.4.1.1.{{}}.0.{i}.1"
        if nb is None:
            assert rem.format(9) not in v
            continue
        assert v[rem.format(5)] == bytes.fromhex(nb.chassis_id.replace(":", ""))
        assert v[rem.format(7)] == nb.port.encode() and v[rem.format(9)] == nb.system.encode()
        assert v[rem.format(12)] == (b"\x28" if nb.kind == "switch" else b"\x20")  # bridge+router / router


def test_rendered_data_read_by_snmpsim_keeps_non_ascii_text() -> None:
    """Text with a line break, "|" or non-ASCII goes into the data file hex-encoded; snmpsim's own record
    reader must make of every line the MIB's type, and of that text its UTF-8 bytes."""
    from fleetctl_lab.switch.snmp import render_snmprec
    from fleetctl_lab.switch.spec import LabNeighbor, LabSwitchPort, LabSwitchSpec
    from fleetctl_lab.switch.state import SimSwitch
    from pysnmp.proto import rfc1902
    from snmpsim.record.snmprec import SnmprecRecord

    descr, system, nic = "uplink → spine|1 «é»\nrow 2", "srv-ü1", "ens1f0|p"
    spec = LabSwitchSpec(name="lab-utf-1", platform="eos", ports=[
        LabSwitchPort(name="Ethernet1", description=descr, neighbor=LabNeighbor(system=system, port=nic)),
        LabSwitchPort(name="Ethernet2")])  # fmt: skip
    sw = SimSwitch(spec)
    reader = SnmprecRecord()
    got: dict[str, Any] = {}
    for line in render_snmprec(sw).encode().splitlines():
        oid, tag, text = line.split(b"|", 2)
        col = _column(oid.decode())
        assert col is not None, oid
        base = tag.split(b":")[0]  # a fleetlab line: its value is computed, its type is the tag's
        _, value = reader.evaluate(b"|".join([oid, base, b"0" if base != tag else text]))
        assert value.tagSet == getattr(rfc1902, _MIB_TYPES[col]).tagSet, (oid, tag, value.__class__.__name__)
        got[oid.decode()] = _py(value)
    assert got["1.3.6.1.2.1.31.1.1.1.18.1"] == got["1.0.8802.1.1.2.1.3.7.1.4.1"] == descr.encode()
    assert got["1.0.8802.1.1.2.1.4.1.1.9.0.1.1"] == system.encode()
    assert got["1.0.8802.1.1.2.1.4.1.1.7.0.1.1"] == nic.encode()
    assert got["1.3.6.1.2.1.31.1.1.1.18.2"] == b""
