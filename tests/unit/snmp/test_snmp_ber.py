"""fleetctl's SNMPv2c BER codec (drivers/fleetctl_drivers/snmp/ber.py), no agent.

Round trips of every type, long lengths, negative integers, the unsigned
limits, OIDs with large arcs; and malformed input (truncated, flipped,
random) that must give a BerError, never another exception. The decoder is
also checked against pyasn1's on the same bytes.
"""

from __future__ import annotations

import contextlib
import random

import pytest
from fleetctl_drivers.snmp import ber as B

ALL_VALUES: list[tuple[B.Oid, object, object]] = [
    # (oid, value to encode, value decoded)
    ((1, 3, 6, 1, 2, 1, 1, 1, 0), b"a switch", b"a switch"),
    ((1, 3, 6, 1, 2, 1, 1, 2, 0), B.Typed(B.OBJECT_IDENTIFIER, (1, 3, 6, 1, 4, 1, 8072, 3, 2, 10)), "1.3.6.1.4.1.8072.3.2.10"),
    ((1, 3, 6, 1, 2, 1, 1, 3, 0), B.Typed(B.TIMETICKS, 2**32 - 1), 2**32 - 1),
    ((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 1), 1, 1),
    ((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 2), -5, -5),
    ((1, 3, 6, 1, 2, 1, 4, 20, 1, 1, 10, 0, 0, 1), B.Typed(B.IP_ADDRESS, b"\x0a\x00\x00\x01"), b"\x0a\x00\x00\x01"),
    ((1, 3, 6, 1, 2, 1, 2, 2, 1, 14, 3), B.Typed(B.COUNTER32, 2**32 - 1), 2**32 - 1),
    ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 15, 1), B.Typed(B.GAUGE32, 0), 0),
    ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 1), B.Typed(B.COUNTER64, 2**64 - 1), 2**64 - 1),
    ((1, 3, 6, 1, 4, 1, 2021, 10, 1, 6, 1), B.Typed(B.OPAQUE, b"\x9f\x78\x04\x3f\x80\x00\x00"), b"\x9f\x78\x04\x3f\x80\x00\x00"),
    ((1, 3, 6, 1, 2, 1, 1, 9, 0), None, None),
    ((1, 3, 6, 1, 2, 1, 1, 99, 0), B.NO_SUCH_OBJECT, B.NO_SUCH_OBJECT),
    ((1, 3, 6, 1, 2, 1, 1, 1, 1), B.NO_SUCH_INSTANCE, B.NO_SUCH_INSTANCE),
    ((1, 3, 6, 1, 6, 3, 1, 1, 6, 1, 0), B.END_OF_MIB_VIEW, B.END_OF_MIB_VIEW),
    ((2, 999, 4294967295, 128, 16384, 0), b"", b""),  # multi-octet arcs, first arc 2
]


def response(varbinds: list[tuple[B.Oid, object]], **kw: object) -> bytes:
    return B.encode_message(b"public", B.RESPONSE, kw.pop("request_id", 4242), varbinds, **kw)  # type: ignore[arg-type]


def test_round_trip_of_every_type() -> None:
    data = response([(o, v) for o, v, _ in ALL_VALUES])
    m = B.decode_message(data)
    assert (m.version, m.community, m.pdu_type, m.request_id, m.error_status, m.error_index) == (1, b"public", B.RESPONSE, 4242, 0, 0)
    assert m.varbinds == [(o, d) for o, _, d in ALL_VALUES]
    assert [type(v) for _, v in m.varbinds] == [type(d) for _, _, d in ALL_VALUES]


def test_requests_round_trip_and_get_bulk_fields() -> None:
    oids = [(1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6), (1, 3, 6, 1, 2, 1, 2, 2, 1, 14)]
    m = B.decode_message(B.get_bulk(b"c", 2**31 - 1, oids, 32, non_repeaters=1))
    assert (m.pdu_type, m.request_id, m.error_status, m.error_index) == (B.GET_BULK_REQUEST, 2**31 - 1, 1, 32)
    assert m.varbinds == [(o, None) for o in oids]
    m = B.decode_message(B.get_request(b"c", 1, oids))
    assert m.pdu_type == B.GET_REQUEST and m.varbinds == [(o, None) for o in oids]


@pytest.mark.parametrize(
    "value, body",
    [(0, "00"), (1, "01"), (127, "7f"), (128, "0080"), (255, "00ff"), (256, "0100"), (-1, "ff"), (-128, "80"),
     (-129, "ff7f"), (-256, "ff00"), (2**31 - 1, "7fffffff"), (-(2**31), "80000000")],
)  # fmt: skip
def test_integers_are_minimal_twos_complement(value: int, body: str) -> None:
    assert B.encode_integer_body(value).hex() == body
    (_, got), = B.decode_message(response([((1, 3, 6), value)])).varbinds  # fmt: skip
    assert got == value


def test_unsigned_limits() -> None:
    assert B.encode_value(B.Typed(B.COUNTER64, 2**64 - 1)).hex() == "460900ffffffffffffffff"
    assert B.encode_value(B.Typed(B.COUNTER32, 2**32 - 1)).hex() == "410500ffffffff"
    for tag, bad in ((B.COUNTER64, 2**64), (B.COUNTER64, -1), (B.COUNTER32, 2**32), (B.GAUGE32, -1), (B.TIMETICKS, 2**32)):
        with pytest.raises(B.BerError):
            B.encode_value(B.Typed(tag, bad))
    with pytest.raises(B.BerError):
        B.encode_value(2**31)  # INTEGER is Integer32
    # on the wire: a Counter32 of 2**32, a negative Counter64, an INTEGER beyond 32 bits
    for raw in ("41050100000000", "4601ff", "46090100000000000000000000"[:22], "02050100000000"):
        with pytest.raises(B.BerError):
            B.decode_message(_with_value(bytes.fromhex(raw)))


def _with_value(value_tlv: bytes, oid: B.Oid = (1, 3, 6, 1)) -> bytes:
    """A response whose single varbind carries value_tlv as it is."""
    vb = B.tlv(B.SEQUENCE, B.tlv(B.OBJECT_IDENTIFIER, B.encode_oid_body(oid)) + value_tlv)
    pdu = B.tlv(B.INTEGER, b"\x07") + B.tlv(B.INTEGER, b"\x00") + B.tlv(B.INTEGER, b"\x00") + B.tlv(B.SEQUENCE, vb)
    return B.tlv(B.SEQUENCE, B.tlv(B.INTEGER, b"\x01") + B.tlv(B.OCTET_STRING, b"public") + B.tlv(B.RESPONSE, pdu))


def test_long_form_lengths() -> None:
    for n in (127, 128, 255, 256, 65535, 70_000):
        data = response([((1, 3, 6, 1, 2, 1, 1, 1, 0), b"x" * n)])
        (_, got), = B.decode_message(data).varbinds  # fmt: skip
        assert got == b"x" * n
    assert B.encode_length(127) == b"\x7f"
    assert B.encode_length(128) == b"\x81\x80"
    assert B.encode_length(256) == b"\x82\x01\x00"
    assert B.encode_length(70_000) == b"\x83\x01\x11\x70"
    # BER (not DER) allows a non-minimal long form; agents do send it
    assert B.decode_message(_with_value(b"\x04\x82\x00\x03abc")).varbinds[0][1] == b"abc"


def test_oids() -> None:
    for oid in [(0, 0), (1, 3), (1, 39, 5), (2, 40), (2, 999, 3), (1, 3, 6, 1, 4, 1, 2**32 - 1, 127, 128, 16383, 16384, 2**21)]:
        assert B.decode_oid(B.encode_oid_body(oid)) == oid
    assert B.encode_oid_body((1, 3, 6, 1)) == b"\x2b\x06\x01"
    assert B.encode_oid_body((1, 3, 6, 1, 4, 1, 2021)) == bytes.fromhex("2b06010401 8f65".replace(" ", ""))
    for bad in [(1,), (3, 1), (1, 40), (1, 3, -1), (1, 3, 2**32)]:
        with pytest.raises(B.BerError):
            B.encode_oid_body(bad)
    for body in ("", "2b0680", "2b068001", "2b06" + "8f" * 6 + "7f"):  # empty, unfinished, leading 0x80, arc > 2**32-1
        with pytest.raises(B.BerError):
            B.decode_oid(bytes.fromhex(body))


@pytest.mark.parametrize(
    "data, why",
    [
        (b"", "truncated"),
        (b"\x30", "truncated"),
        (b"\x30\x80\x00\x00", "indefinite"),
        (b"\x30\x85\x00\x00\x00\x00\x01", "length octets"),
        (b"\x04\x00", "message SEQUENCE"),
        (b"\x30\x03\x02\x01\x01", "truncated"),
        (b"\x30\x05\x02\x01\x01\x02\x00", "expected community"),
        (b"\x30\x05\x02\x01\x01\x04\x00\x00", "trailing"),
        (b"\x30\x06\x02\x01\x01\x04\x00", "overruns"),
        (b"\x30\x07\x02\x01\x01\x04\x00\xa4\x00", "unsupported PDU"),
        (b"\x30\x0a\x02\x01\x01\x04\x00\xa2\x03\x02\x05\x01", "overruns"),
        (b"\x30\x07\x02\x00\x04\x00\xa2\x00\x00", "empty INTEGER"),
    ],
)
def test_malformed_messages_are_clean_errors(data: bytes, why: str) -> None:
    with pytest.raises(B.BerError, match=why):
        B.decode_message(data)


@pytest.mark.parametrize(
    "value, why",
    [
        (b"\x05\x01\x00", "NULL with content"),
        (b"\x40\x03\x0a\x00\x01", "IpAddress of 3"),
        (b"\x80\x01\x00", "noSuchObject with content"),
        (b"\x47\x01\x00", "unknown value tag"),
        (b"\x1f\x01\x00", "multi-octet tag"),
        (b"\x02\x00", "empty INTEGER"),
        (b"\x41\x00", "empty INTEGER"),
        (b"\x04\x05abc", "overruns"),
        (b"\x04\x01a\x05\x00", "after the varbind value"),
    ],
)
def test_malformed_values_are_clean_errors(value: bytes, why: str) -> None:
    with pytest.raises(B.BerError, match=why):
        B.decode_message(_with_value(value))


def test_every_truncation_and_random_corruption_gives_a_clean_error() -> None:
    good = response([(o, v) for o, v, _ in ALL_VALUES])
    for n in range(len(good)):
        with pytest.raises(B.BerError):
            B.decode_message(good[:n])
    rng = random.Random(4)
    for _ in range(3000):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        with contextlib.suppress(B.BerError):
            B.decode_message(bytes(bad))
    for _ in range(2000):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        with contextlib.suppress(B.BerError):
            B.decode_message(b"\x30" + bytes([len(junk)]) + junk if len(junk) < 128 else junk)
    assert B.peek_request_id(b"\x30\x02\x02") is None


def test_error_status_names() -> None:
    m = B.decode_message(response([((1, 3, 6, 1), None)], error_status=5, error_index=1))
    assert (m.error_name, m.error_index) == ("genErr", 1)
    assert B.decode_message(response([], error_status=99)).error_name == "error-status 99"


def test_decoder_agrees_with_pyasn1() -> None:
    pytest.importorskip("pysnmp")
    from pyasn1.codec.ber import decoder, encoder
    from pysnmp.proto import api

    data = response([(o, v) for o, v, _ in ALL_VALUES], request_id=-77)
    mod = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]
    msg, rest = decoder.decode(data, asn1Spec=mod.Message())
    assert not rest
    assert encoder.encode(msg) == data  # both encoders make the same bytes
    pdu = mod.apiMessage.get_pdu(msg)
    theirs = [(tuple(o), v) for o, v in mod.apiPDU.get_varbinds(pdu)]
    ours = B.decode_message(data)
    assert ours.request_id == int(mod.apiPDU.get_request_id(pdu)) == -77
    for (o1, v1), (o2, v2) in zip(ours.varbinds, theirs, strict=True):
        assert o1 == o2
        if isinstance(v1, B.SnmpException):
            assert type(v2).__name__.lower() == v1.name.lower()
        elif v1 is None:
            assert v2.prettyPrint() == ""
        elif isinstance(v1, int):
            assert v1 == int(v2)
        elif isinstance(v1, bytes):
            assert v1 == v2.asOctets()
        else:
            assert v1 == ".".join(map(str, v2))
