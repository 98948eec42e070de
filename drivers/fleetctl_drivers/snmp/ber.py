"""A small, strict BER codec for SNMPv2c messages (RFC 3416 / RFC 1905 PDUs).

Only what the poller needs: encode GetRequest and GetBulkRequest messages,
decode Response (and Report) messages. Values decode to the same plain
python values the pysnmp path hands to :mod:`.parse`:

==================  ======  ==========================================
type                tag     python value
==================  ======  ==========================================
INTEGER             0x02    int (signed)
OCTET STRING        0x04    bytes
NULL                0x05    None
OBJECT IDENTIFIER   0x06    str, dotted ("1.3.6.1.4.1.8072")
IpAddress           0x40    bytes (4)
Counter32           0x41    int, 0..2**32-1
Gauge32             0x42    int, 0..2**32-1
TimeTicks           0x43    int, 0..2**32-1
Opaque              0x44    bytes
Counter64           0x46    int, 0..2**64-1
noSuchObject        0x80    :data:`NO_SUCH_OBJECT`
noSuchInstance      0x81    :data:`NO_SUCH_INSTANCE`
endOfMibView        0x82    :data:`END_OF_MIB_VIEW`
==================  ======  ==========================================

"Strict" means: definite lengths only (short or long form, at most 4 length
octets), every length must fit its enclosing element exactly, no trailing
bytes, known tags only, unsigned types within their range, and well-formed
OIDs. Anything else raises :class:`BerError` (a ``ValueError``) with the
offset; the decoder never reads past its input and never raises anything
else on bad input.

Pure python, no dependencies. Decoding OIDs is the hot path: sub-identifiers
below 128 (nearly all of them in MIB-2 tables) take a C-speed fast path, and
decoded OIDs are memoised (the same column OIDs come back from every switch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

Oid = tuple[int, ...]
T = TypeVar("T")

# universal / application / context tags
INTEGER = 0x02
OCTET_STRING = 0x04
NULL = 0x05
OBJECT_IDENTIFIER = 0x06
SEQUENCE = 0x30
IP_ADDRESS = 0x40
COUNTER32 = 0x41
GAUGE32 = 0x42
TIMETICKS = 0x43
OPAQUE = 0x44
COUNTER64 = 0x46
NO_SUCH_OBJECT_TAG = 0x80
NO_SUCH_INSTANCE_TAG = 0x81
END_OF_MIB_VIEW_TAG = 0x82

# PDU tags
GET_REQUEST = 0xA0
GET_NEXT_REQUEST = 0xA1
RESPONSE = 0xA2
SET_REQUEST = 0xA3
GET_BULK_REQUEST = 0xA5
INFORM_REQUEST = 0xA6
SNMPV2_TRAP = 0xA7
REPORT = 0xA8

VERSION_1 = 0
VERSION_2C = 1
VERSION_3 = 3

TOO_BIG = 1  # error-status tooBig (RFC 3416): the response would not fit the agent's message size

ERROR_STATUS_NAMES = (
    "noError",
    "tooBig",
    "noSuchName",
    "badValue",
    "readOnly",
    "genErr",
    "noAccess",
    "wrongType",
    "wrongLength",
    "wrongEncoding",
    "wrongValue",
    "noCreation",
    "inconsistentValue",
    "resourceUnavailable",
    "commitFailed",
    "undoFailed",
    "authorizationError",
    "notWritable",
    "inconsistentName",
)

_MAX_LENGTH_OCTETS = 4
_MAX_INT32 = 2**31 - 1
_MIN_INT32 = -(2**31)
_MAX_U32 = 2**32 - 1
_MAX_U64 = 2**64 - 1
_MAX_SUBID = 2**32 - 1
_MAX_OID_ARCS = 128


class BerError(ValueError):
    """Malformed or unsupported BER input (or a value that cannot be encoded)."""


class SnmpException:
    """An SNMPv2 exception value (noSuchObject, noSuchInstance, endOfMibView)."""

    __slots__ = ("name", "tag")

    def __init__(self, name: str, tag: int) -> None:
        self.name = name
        self.tag = tag

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:  # singletons survive pickling
        return {0x80: "NO_SUCH_OBJECT", 0x81: "NO_SUCH_INSTANCE", 0x82: "END_OF_MIB_VIEW"}[self.tag]


NO_SUCH_OBJECT = SnmpException("noSuchObject", NO_SUCH_OBJECT_TAG)
NO_SUCH_INSTANCE = SnmpException("noSuchInstance", NO_SUCH_INSTANCE_TAG)
END_OF_MIB_VIEW = SnmpException("endOfMibView", END_OF_MIB_VIEW_TAG)
_EXCEPTIONS = {NO_SUCH_OBJECT_TAG: NO_SUCH_OBJECT, NO_SUCH_INSTANCE_TAG: NO_SUCH_INSTANCE, END_OF_MIB_VIEW_TAG: END_OF_MIB_VIEW}


@dataclass(frozen=True)
class Typed:
    """A value with an explicit SNMP type, for encoding (``Typed(COUNTER64, 5)``)."""

    tag: int
    value: object


@dataclass
class Message:
    """One decoded SNMPv1/v2c message."""

    version: int
    community: bytes
    pdu_type: int
    request_id: int
    error_status: int  # non-repeaters in a GetBulkRequest
    error_index: int  # max-repetitions in a GetBulkRequest
    varbinds: list[tuple[Oid, object]] = field(default_factory=list)

    @property
    def error_name(self) -> str:
        s = self.error_status
        return ERROR_STATUS_NAMES[s] if 0 <= s < len(ERROR_STATUS_NAMES) else f"error-status {s}"


# --------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------


def encode_length(n: int) -> bytes:
    if n < 0:
        raise BerError(f"negative length {n}")
    if n < 0x80:
        return bytes((n,))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    if len(body) > _MAX_LENGTH_OCTETS:
        raise BerError(f"length {n} too large")
    return bytes((0x80 | len(body),)) + body


def tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes((tag, n)) + body
    return bytes((tag,)) + encode_length(n) + body


def encode_integer_body(v: int) -> bytes:
    """Two's complement, minimal octets."""
    bits = v.bit_length() if v >= 0 else (~v).bit_length()
    return v.to_bytes(bits // 8 + 1, "big", signed=True)


def encode_unsigned_body(v: int, maximum: int) -> bytes:
    if not 0 <= v <= maximum:
        raise BerError(f"{v} out of range 0..{maximum}")
    return encode_integer_body(v)


_oid_enc_cache: dict[Oid, bytes] = {}


def encode_oid_body(oid: Oid) -> bytes:
    b = _oid_enc_cache.get(oid)
    if b is not None:
        return b
    if len(oid) < 2:
        raise BerError(f"an OID needs at least two arcs: {oid}")
    if len(oid) > _MAX_OID_ARCS:
        raise BerError(f"OID of {len(oid)} arcs")
    first, second = oid[0], oid[1]
    if first not in (0, 1, 2) or second < 0 or (first < 2 and second > 39):
        raise BerError(f"bad first arcs {first}.{second}")
    if any(not isinstance(a, int) or a < 0 or a > _MAX_SUBID for a in oid[1:]):
        raise BerError(f"OID arc out of range in {oid}")
    out = bytearray()
    for arc in (first * 40 + second, *oid[2:]):
        if arc < 0x80:
            out.append(arc)
            continue
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        out += bytes(reversed(chunk))
    b = bytes(out)
    if len(_oid_enc_cache) > 50_000:
        _oid_enc_cache.clear()
    _oid_enc_cache[oid] = b
    return b


def encode_value(value: object) -> bytes:
    """One varbind value as a TLV. Plain python: None -> NULL, int -> INTEGER,
    bytes/str -> OCTET STRING, tuple -> OID; use :class:`Typed` for the rest."""
    if value is None:
        return b"\x05\x00"
    if isinstance(value, SnmpException):
        return bytes((value.tag, 0))
    if isinstance(value, Typed):
        tag, v = value.tag, value.value
        if tag in (INTEGER,):
            if not isinstance(v, int) or not _MIN_INT32 <= v <= _MAX_INT32:
                raise BerError(f"INTEGER {v!r} out of range")
            return tlv(tag, encode_integer_body(v))
        if tag in (COUNTER32, GAUGE32, TIMETICKS):
            if not isinstance(v, int):
                raise BerError(f"{v!r} is not an int")
            return tlv(tag, encode_unsigned_body(v, _MAX_U32))
        if tag == COUNTER64:
            if not isinstance(v, int):
                raise BerError(f"{v!r} is not an int")
            return tlv(tag, encode_unsigned_body(v, _MAX_U64))
        if tag in (OCTET_STRING, OPAQUE, IP_ADDRESS):
            if isinstance(v, str):
                raw = v.encode()
            elif isinstance(v, bytes | bytearray):
                raw = bytes(v)
            else:
                raise BerError(f"{v!r} is not bytes")
            if tag == IP_ADDRESS and len(raw) != 4:
                raise BerError("IpAddress needs 4 octets")
            return tlv(tag, raw)
        if tag == OBJECT_IDENTIFIER:
            return tlv(tag, encode_oid_body(_as_oid(v)))
        if tag == NULL:
            return b"\x05\x00"
        raise BerError(f"cannot encode tag 0x{tag:02x}")
    if isinstance(value, bool):
        raise BerError("bool is not an SNMP value")
    if isinstance(value, int):
        return encode_value(Typed(INTEGER, value))
    if isinstance(value, bytes | bytearray | str):
        return encode_value(Typed(OCTET_STRING, value))
    if isinstance(value, tuple):
        return tlv(OBJECT_IDENTIFIER, encode_oid_body(value))
    raise BerError(f"cannot encode {type(value).__name__}")


def _as_oid(v: object) -> Oid:
    if isinstance(v, str):
        try:
            return tuple(int(x) for x in v.strip(".").split("."))
        except ValueError as e:
            raise BerError(f"bad OID {v!r}") from e
    if isinstance(v, tuple):
        return v
    raise BerError(f"bad OID {v!r}")


def encode_message(
    community: bytes,
    pdu_type: int,
    request_id: int,
    varbinds: list[tuple[Oid, object]],
    *,
    error_status: int = 0,
    error_index: int = 0,
    version: int = VERSION_2C,
) -> bytes:
    """A whole SNMPv1/v2c message. For GetBulkRequest, ``error_status`` is
    non-repeaters and ``error_index`` max-repetitions (see :func:`get_bulk`)."""
    pdu = encode_pdu(pdu_type, request_id, varbinds, error_status=error_status, error_index=error_index)
    return community_message(community, pdu, version)


def community_message(community: bytes, pdu: bytes, version: int = VERSION_2C) -> bytes:
    """An SNMPv1/v2c message around an encoded PDU."""
    return tlv(SEQUENCE, tlv(INTEGER, encode_integer_body(version)) + tlv(OCTET_STRING, community) + pdu)


def encode_pdu(pdu_type: int, request_id: int, varbinds: list[tuple[Oid, object]], *, error_status: int = 0, error_index: int = 0) -> bytes:
    """One PDU as a TLV (the part a v2c message and a v3 ScopedPDU share)."""
    if not _MIN_INT32 <= request_id <= _MAX_INT32:
        raise BerError(f"request-id {request_id} out of range")
    vbs = b"".join(tlv(SEQUENCE, tlv(OBJECT_IDENTIFIER, encode_oid_body(o)) + encode_value(v)) for o, v in varbinds)
    body = (
        tlv(INTEGER, encode_integer_body(request_id))
        + tlv(INTEGER, encode_integer_body(error_status))
        + tlv(INTEGER, encode_integer_body(error_index))
        + tlv(SEQUENCE, vbs)
    )
    return tlv(pdu_type, body)


def bulk_fields(oids: list[Oid], max_repetitions: int, non_repeaters: int = 0) -> dict[str, int]:
    """GetBulkRequest's non-repeaters and max-repetitions, in the error fields' places, checked."""
    if not 0 <= non_repeaters <= len(oids) or not 0 <= max_repetitions <= _MAX_INT32:
        raise BerError(f"bad non-repeaters {non_repeaters} / max-repetitions {max_repetitions}")
    return {"error_status": non_repeaters, "error_index": max_repetitions}


def get_request(community: bytes, request_id: int, oids: list[Oid]) -> bytes:
    return encode_message(community, GET_REQUEST, request_id, [(o, None) for o in oids])


def get_bulk(community: bytes, request_id: int, oids: list[Oid], max_repetitions: int, non_repeaters: int = 0) -> bytes:
    fields = bulk_fields(oids, max_repetitions, non_repeaters)
    return encode_message(community, GET_BULK_REQUEST, request_id, [(o, None) for o in oids], **fields)


def request_pdu(kind: str, request_id: int, oids: list[Oid], max_repetitions: int = 0) -> bytes:
    """The poller's two requests as a bare PDU: ``kind`` "get" (GetRequest) or anything else (GetBulkRequest)."""
    varbinds: list[tuple[Oid, object]] = [(o, None) for o in oids]
    if kind == "get":
        return encode_pdu(GET_REQUEST, request_id, varbinds)
    return encode_pdu(GET_BULK_REQUEST, request_id, varbinds, **bulk_fields(oids, max_repetitions))


# --------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------


def _header(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, body start, body end) of the TLV at pos, all within [pos, end)."""
    if pos + 2 > end:
        raise BerError(f"truncated TLV header at offset {pos}")
    tag = data[pos]
    if tag & 0x1F == 0x1F:
        raise BerError(f"multi-octet tag at offset {pos}")
    n = data[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0:
            raise BerError(f"indefinite length at offset {pos - 2}")
        if k > _MAX_LENGTH_OCTETS:
            raise BerError(f"{k} length octets at offset {pos - 2}")
        if pos + k > end:
            raise BerError(f"truncated length at offset {pos - 2}")
        n = int.from_bytes(data[pos : pos + k], "big")
        pos += k
    if pos + n > end:
        raise BerError(f"length {n} at offset {pos} overruns its container (ends at {end})")
    return tag, pos, pos + n


def _int(data: bytes, start: int, stop: int) -> int:
    if start == stop:
        raise BerError(f"empty INTEGER at offset {start}")
    return int.from_bytes(data[start:stop], "big", signed=True)


def _expect(data: bytes, pos: int, end: int, tag: int, what: str) -> tuple[int, int]:
    t, s, e = _header(data, pos, end)
    if t != tag:
        raise BerError(f"expected {what} (0x{tag:02x}) at offset {pos}, got 0x{t:02x}")
    return s, e


_oid_dec_cache: dict[bytes, Oid] = {}


def decode_oid(body: bytes) -> Oid:
    """An OBJECT IDENTIFIER's content octets as a tuple of ints."""
    got = _oid_dec_cache.get(body)
    if got is not None:
        return got
    if not body:
        raise BerError("empty OBJECT IDENTIFIER")
    if body.isascii():  # every sub-identifier fits in one octet
        first = body[0]
        oid: Oid = (first // 40, first % 40, *body[1:]) if first < 80 else (2, first - 80, *body[1:])
    else:
        arcs: list[int] = []
        acc = 0
        started = False
        for b in body:
            if not started and b == 0x80:
                raise BerError("OID sub-identifier with a leading 0x80 octet")
            started = True
            acc = (acc << 7) | (b & 0x7F)
            if not b & 0x80:
                arcs.append(acc)
                acc = 0
                started = False
        if started:
            raise BerError("OID ends inside a sub-identifier")
        first = arcs[0]
        head = (first // 40, first % 40) if first < 80 else (2, first - 80)
        if any(a > _MAX_SUBID for a in arcs[1:]):
            raise BerError("OID sub-identifier above 2**32-1")
        oid = head + tuple(arcs[1:])
    if len(oid) > _MAX_OID_ARCS:
        raise BerError(f"OID of {len(oid)} arcs")
    if len(_oid_dec_cache) > 100_000:
        _oid_dec_cache.clear()
    _oid_dec_cache[body] = oid
    return oid


def _value(data: bytes, tag: int, s: int, e: int) -> object:
    if tag == INTEGER:
        v = _int(data, s, e)
        if not _MIN_INT32 <= v <= _MAX_INT32:
            raise BerError(f"INTEGER {v} out of range at offset {s}")
        return v
    if tag in (OCTET_STRING, OPAQUE):
        return data[s:e]
    if tag in (COUNTER32, GAUGE32, TIMETICKS):
        v = _int(data, s, e)
        if not 0 <= v <= _MAX_U32:
            raise BerError(f"unsigned32 value {v} out of range at offset {s}")
        return v
    if tag == COUNTER64:
        v = _int(data, s, e)
        if not 0 <= v <= _MAX_U64:
            raise BerError(f"Counter64 value {v} out of range at offset {s}")
        return v
    if tag == OBJECT_IDENTIFIER:
        return ".".join(map(str, decode_oid(data[s:e])))
    if tag == NULL:
        if e != s:
            raise BerError(f"NULL with content at offset {s}")
        return None
    if tag == IP_ADDRESS:
        if e - s != 4:
            raise BerError(f"IpAddress of {e - s} octets at offset {s}")
        return data[s:e]
    exc = _EXCEPTIONS.get(tag)
    if exc is not None:
        if e != s:
            raise BerError(f"{exc.name} with content at offset {s}")
        return exc
    raise BerError(f"unknown value tag 0x{tag:02x} at offset {s}")


def strictly(what: str, decode: Callable[[bytes], T], data: bytes) -> T:
    """Run ``decode`` so that bad input can only ever raise BerError."""
    try:
        return decode(bytes(data))
    except BerError:
        raise
    except (IndexError, ValueError, TypeError, OverflowError) as e:  # belt and braces: never anything else
        raise BerError(f"malformed {what}: {e}") from e


def decode_message(data: bytes) -> Message:
    """A whole SNMPv1/v2c message (any PDU but Trap-v1). Raises BerError."""
    return strictly("message", _decode_message, data)


def expect_whole(data: bytes, tag: int, what: str) -> tuple[int, int]:
    """The body of the one TLV that ``data`` must be, nothing after it."""
    s, e = _expect(data, 0, len(data), tag, what)
    if e != len(data):
        raise BerError(f"{len(data) - e} trailing octets after the {what}")
    return s, e


def _decode_message(data: bytes) -> Message:
    s, e = expect_whole(data, SEQUENCE, "message SEQUENCE")
    vs, ve = _expect(data, s, e, INTEGER, "version")
    version = _int(data, vs, ve)
    cs, ce = _expect(data, ve, e, OCTET_STRING, "community")
    community = data[cs:ce]
    return decode_pdu(data, ce, e, version, community)


def decode_pdu(data: bytes, pos: int, end: int, version: int = 3, community: bytes = b"") -> Message:
    """The PDU TLV at ``pos``, which must end exactly at ``end``."""
    pdu_type, ps, pe = _header(data, pos, end)
    if pdu_type not in (GET_REQUEST, GET_NEXT_REQUEST, RESPONSE, SET_REQUEST, GET_BULK_REQUEST, INFORM_REQUEST, SNMPV2_TRAP, REPORT):
        raise BerError(f"unsupported PDU type 0x{pdu_type:02x}")
    if pe != end:
        raise BerError("octets after the PDU")
    rs, re_ = _expect(data, ps, pe, INTEGER, "request-id")
    request_id = _int(data, rs, re_)
    es, ee = _expect(data, re_, pe, INTEGER, "error-status")
    error_status = _int(data, es, ee)
    xs, xe = _expect(data, ee, pe, INTEGER, "error-index")
    error_index = _int(data, xs, xe)
    ls, le = _expect(data, xe, pe, SEQUENCE, "varbind list")
    if le != pe:
        raise BerError("octets after the varbind list")
    varbinds: list[tuple[Oid, object]] = []
    append = varbinds.append
    pos = ls
    header = _header
    while pos < le:
        t, bs, be = header(data, pos, le)
        if t != SEQUENCE:
            raise BerError(f"expected a varbind SEQUENCE at offset {pos}, got 0x{t:02x}")
        t, os_, oe = header(data, bs, be)
        if t != OBJECT_IDENTIFIER:
            raise BerError(f"expected a varbind name (OID) at offset {bs}, got 0x{t:02x}")
        oid = decode_oid(data[os_:oe])
        t, vs_, ve_ = header(data, oe, be)
        if ve_ != be:
            raise BerError(f"octets after the varbind value at offset {ve_}")
        append((oid, _value(data, t, vs_, ve_)))
        pos = be
    return Message(version, community, pdu_type, request_id, error_status, error_index, varbinds)


def peek_request_id(data: bytes) -> int | None:
    """The request-id of a v1/v2c message, the msgID of a v3 one, or None (cheap demux)."""
    try:
        end = len(data)
        s, e = _expect(data, 0, end, SEQUENCE, "message")
        vs, ve = _expect(data, s, e, INTEGER, "version")
        if _int(data, vs, ve) == VERSION_3:
            hs, he = _expect(data, ve, e, SEQUENCE, "msgGlobalData")
            ms, me = _expect(data, hs, he, INTEGER, "msgID")
            return _int(data, ms, me)
        _, ce = _expect(data, ve, e, OCTET_STRING, "community")
        _, ps, pe = _header(data, ce, e)
        rs, re_ = _expect(data, ps, pe, INTEGER, "request-id")
        return _int(data, rs, re_)
    except BerError:
        return None
