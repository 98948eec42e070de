"""SNMPv3 USM messages (usm.py): RFC 3414's key vectors, round trips, tampering, strictness."""

from __future__ import annotations

import time

import pytest
from fleetctl_drivers.snmp import ber, usm

ENGINE_ID = bytes.fromhex("000000000000000000000002")
SYS_UPTIME = (1, 3, 6, 1, 2, 1, 1, 3, 0)


def test_rfc3414_sha_key_vectors() -> None:
    # RFC 3414 A.3.2: password "maplesyrup", engine ID 00..02
    assert usm.password_to_key("maplesyrup").hex() == "9fb5cc0381497b3793528939ff788d5d79145211"
    assert usm.localized_key("maplesyrup", ENGINE_ID).hex() == "6695febc9288e36282235fc7151f128497b38f3f"
    with pytest.raises(ValueError):
        usm.password_to_key("")


def _engine() -> usm.Engine:
    return usm.Engine(b"\x80\x00\x1f\x88\x04fleet", boots=7, time=12345, learned=time.monotonic())


def _message(**kw: object) -> tuple[bytes, bytes]:
    key = usm.localized_key("auth-pass-123", b"\x80\x00\x1f\x88\x04fleet")
    pdu = ber.encode_pdu(ber.GET_BULK_REQUEST, 4242, [(SYS_UPTIME, None)], **ber.bulk_fields([SYS_UPTIME], 10))
    args: dict[str, object] = dict(
        flags=usm.FLAG_AUTH | usm.FLAG_PRIV | usm.FLAG_REPORTABLE, engine=_engine(), user=b"fleetv3", auth_key=key, priv_key=key
    )
    args.update(kw)
    return usm.encode(4242, usm.scoped_pdu(pdu, context_engine_id=b"\x80\x00\x1f\x88\x04fleet"), **args), key  # type: ignore[arg-type]


def test_authpriv_round_trip() -> None:
    raw, key = _message()
    assert ber.peek_request_id(raw) == 4242  # the msgID: how the client demultiplexes v3
    m = usm.decode(raw)
    assert (m.msg_id, m.flags, m.boots, m.user) == (4242, 7, 7, b"fleetv3")
    assert m.time >= 12345 and len(m.priv_params) == 8 and m.scoped is None and m.encrypted
    assert m.authentic(key)
    pdu = m.pdu(key)
    assert (pdu.pdu_type, pdu.request_id, pdu.error_index, pdu.varbinds) == (ber.GET_BULK_REQUEST, 4242, 10, [(SYS_UPTIME, None)])
    with pytest.raises(ber.BerError):
        m.pdu()  # encrypted: needs the key


def test_every_encryption_has_its_own_salt() -> None:
    a, _ = _message()
    b, _ = _message()
    assert usm.decode(a).priv_params != usm.decode(b).priv_params
    assert usm.decode(a).encrypted != usm.decode(b).encrypted


def test_tampering_or_the_wrong_key_fails_authentication() -> None:
    raw, key = _message()
    m = usm.decode(raw)
    assert not m.authentic(usm.localized_key("another-password", b"\x80\x00\x1f\x88\x04fleet"))
    flipped = bytearray(raw)
    flipped[-1] ^= 0x01  # one bit of the encrypted PDU
    assert not usm.decode(bytes(flipped)).authentic(key)


def test_a_wrong_privacy_key_yields_garbage_that_the_strict_decoder_refuses() -> None:
    raw, _ = _message()
    with pytest.raises(ber.BerError):
        usm.decode(raw).pdu(usm.localized_key("not-the-priv-key", b"x"))


def test_discovery_message_and_report_reading() -> None:
    scoped = usm.scoped_pdu(ber.encode_pdu(ber.GET_REQUEST, 9, []))
    raw = usm.encode(9, scoped, flags=usm.FLAG_REPORTABLE)
    m = usm.decode(raw)
    assert (m.engine_id, m.boots, m.time, m.user, m.auth_params, m.priv_params) == (b"", 0, 0, b"", b"", b"")
    assert m.report() is None  # a GET, not a report
    report = usm.scoped_pdu(ber.encode_pdu(ber.REPORT, 9, [((*usm.USM_STATS, 3, 0), ber.Typed(ber.COUNTER32, 1))]))
    assert usm.decode(usm.encode(9, report, flags=0)).report() == (3, "unknown user name")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b[:-3],  # truncated
        lambda b: b + b"\x00",  # trailing octets
        lambda b: b"\x30\x03\x02\x01\x01",  # a v2c-like version
        lambda b: b.replace(b"\x02\x01\x03", b"\x02\x01\x02", 1),  # msgVersion 2 in a v3 envelope
    ],
)
def test_strict_envelope(mangle) -> None:  # type: ignore[no-untyped-def]
    raw, _ = _message()
    with pytest.raises(ber.BerError):
        usm.decode(mangle(raw))


def test_privacy_needs_authentication_and_keys() -> None:
    scoped = usm.scoped_pdu(ber.encode_pdu(ber.GET_REQUEST, 1, []))
    with pytest.raises(ValueError):
        usm.encode(1, scoped, flags=usm.FLAG_PRIV, engine=_engine(), priv_key=b"k" * 20)
    with pytest.raises(ValueError):
        usm.encode(1, scoped, flags=usm.FLAG_AUTH, engine=_engine())
    assert usm.supports("SHA", "AES", True, True)
    assert not usm.supports("SHA256", "AES", True, True) and not usm.supports("SHA", "DES", True, True)
    assert not usm.supports("SHA", "AES", True, False)
