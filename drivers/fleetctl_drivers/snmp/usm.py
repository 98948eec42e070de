"""SNMPv3 messages with the User-based Security Model: HMAC-SHA-96 and AES-128.

What the inventory can ask for (``snmp: {version: "3"}`` is authPriv with
SHA and AES, see ``docs/site-files.md``), on the BER codec of :mod:`.ber`:

- RFC 3412: the v3 message (msgGlobalData, msgSecurityParameters, ScopedPDU);
- RFC 3414: keys from passwords (1 MiB of the password through SHA-1),
  localized to the agent's engine ID; HMAC-SHA-96 over the whole message;
  discovery of the agent's engine ID, boots and time; the usmStats reports;
- RFC 3826: AES-128 in CFB mode, IV = boots, time and a 64-bit salt.

pysnmp does the same work about 20 times slower (see ``docs/snmp.md``); the
poller uses it for the protocols this module does not implement.

Pure functions: the client (:mod:`.v2c`) keeps the engines and the sockets.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from dataclasses import dataclass
from functools import lru_cache

from . import ber
from .ber import (
    OCTET_STRING,
    SEQUENCE,
    BerError,
    Message,
    Oid,
    _expect,
    _header,
    _int,
    encode_integer_body,
    tlv,
)

FLAG_AUTH = 0x01
FLAG_PRIV = 0x02
FLAG_REPORTABLE = 0x04
USM = 3  # msgSecurityModel
MAX_SIZE = 65507  # msgMaxSize: the largest UDP payload
AUTH_LEN = 12  # HMAC-SHA-96

# usmStats counters (1.3.6.1.6.3.15.1.1.N.0) that an agent's Report carries
USM_STATS: Oid = (1, 3, 6, 1, 6, 3, 15, 1, 1)
REPORTS = {
    1: "unsupported security level",
    2: "not in time window",
    3: "unknown user name",
    4: "unknown engine ID",
    5: "wrong digest (authentication key)",
    6: "decryption error (privacy key)",
}
NOT_IN_TIME_WINDOW = 2
UNKNOWN_ENGINE_ID = 4


@lru_cache(maxsize=256)
def password_to_key(password: str | bytes) -> bytes:
    """RFC 3414 A.2.2: SHA-1 over 1 MiB of the password repeated."""
    pw = password.encode() if isinstance(password, str) else password
    if not pw:
        raise ValueError("an empty SNMPv3 password")
    n = 1_048_576
    return hashlib.sha1((pw * (n // len(pw) + 1))[:n]).digest()


@lru_cache(maxsize=8192)
def localized_key(password: str, engine_id: bytes) -> bytes:
    """The key for one agent: SHA-1(Ku + engine ID + Ku) (RFC 3414 2.6).

    Ku (1 MiB through SHA-1, a few ms) is cached per password, so 500
    switches that share one password cost it once, not 500 times.
    """
    ku = password_to_key(password)
    return hashlib.sha1(ku + engine_id + ku).digest()


@dataclass
class Engine:
    """What discovery learned of an agent: its engine ID, boots and time (at ``learned``, monotonic)."""

    engine_id: bytes
    boots: int
    time: int
    learned: float

    def now(self) -> int:
        """The agent's engine time now, by our clock since we learned it."""
        return self.time + int(time.monotonic() - self.learned)


@dataclass
class V3Message:
    """One decoded SNMPv3 message, before authentication and decryption."""

    msg_id: int
    flags: int
    engine_id: bytes
    boots: int
    time: int
    user: bytes
    auth_params: bytes
    priv_params: bytes
    auth_offset: int  # where auth_params sits in ``raw`` (zeroed to check the HMAC)
    raw: bytes
    scoped: bytes | None  # the plaintext ScopedPDU TLV
    encrypted: bytes | None  # or the encrypted one

    def authentic(self, auth_key: bytes) -> bool:
        if len(self.auth_params) != AUTH_LEN:
            return False
        zeroed = self.raw[: self.auth_offset] + bytes(AUTH_LEN) + self.raw[self.auth_offset + AUTH_LEN :]
        return hmac.compare_digest(hmac.new(auth_key, zeroed, hashlib.sha1).digest()[:AUTH_LEN], self.auth_params)

    def pdu(self, priv_key: bytes | None = None) -> Message:
        """The PDU inside (decrypted with ``priv_key`` when the message is encrypted)."""
        scoped = self.scoped
        if scoped is None:
            if priv_key is None or self.encrypted is None:
                raise BerError("an encrypted ScopedPDU and no privacy key")
            if len(self.priv_params) != 8:
                raise BerError(f"AES salt of {len(self.priv_params)} octets")
            scoped = _aes(priv_key, self.boots, self.time, self.priv_params, self.encrypted, encrypt=False)
        return decode_scoped(scoped)

    def report(self) -> tuple[int, str] | None:
        """For a Report of usmStats: (N of usmStats N, what it means); else None."""
        try:
            msg = self.pdu() if self.scoped is not None else None
        except BerError:
            return None
        if msg is None or msg.pdu_type != ber.REPORT or not msg.varbinds:
            return None
        oid = msg.varbinds[0][0]
        if oid[: len(USM_STATS)] == USM_STATS and len(oid) > len(USM_STATS):
            n = oid[len(USM_STATS)]
            return n, REPORTS.get(n, f"usmStats {n}")
        return 0, "report " + ".".join(map(str, oid))


def _aes(key: bytes, boots: int, engine_time: int, salt: bytes, data: bytes, *, encrypt: bool) -> bytes:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    try:  # CFB moved to "decrepit" in cryptography 44; the old place goes in 49
        from cryptography.hazmat.decrepit.ciphers.modes import CFB
    except ImportError:  # pragma: no cover - older cryptography
        from cryptography.hazmat.primitives.ciphers.modes import CFB

    iv = boots.to_bytes(4, "big") + engine_time.to_bytes(4, "big") + salt
    c = Cipher(algorithms.AES(key[:16]), CFB(iv))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


def _octets(b: bytes) -> bytes:
    return tlv(OCTET_STRING, b)


def _integer(v: int) -> bytes:
    return tlv(ber.INTEGER, encode_integer_body(v))


def supports(auth_protocol: str, priv_protocol: str, has_auth: bool, has_priv: bool) -> bool:
    """Whether this module can speak for a v3 target (else the poller uses pysnmp)."""
    return auth_protocol == "SHA" and priv_protocol == "AES" and has_auth and has_priv


def scoped_pdu(pdu: bytes, *, context_engine_id: bytes = b"", context_name: bytes = b"") -> bytes:
    return tlv(SEQUENCE, _octets(context_engine_id) + _octets(context_name) + pdu)


def encode(
    msg_id: int,
    scoped: bytes,
    *,
    flags: int,
    engine: Engine | None = None,
    user: bytes = b"",
    auth_key: bytes | None = None,
    priv_key: bytes | None = None,
    salt: bytes | None = None,
) -> bytes:
    """A whole v3 message carrying the ScopedPDU ``scoped``, encrypted and signed as ``flags`` say.

    With no ``engine`` (discovery) the engine ID is empty and boots and time are 0.
    """
    engine_id, boots, etime = (engine.engine_id, engine.boots, engine.now()) if engine else (b"", 0, 0)
    if flags & FLAG_PRIV:
        if priv_key is None or not flags & FLAG_AUTH:
            raise ValueError("privacy needs a key and authentication")
        salt = salt if salt is not None else os.urandom(8)
        data = _octets(_aes(priv_key, boots, etime, salt, scoped, encrypt=True))
        priv_params = salt
    else:
        data, priv_params = scoped, b""
    if flags & FLAG_AUTH and auth_key is None:
        raise ValueError("authentication needs a key")
    auth_params = bytes(AUTH_LEN) if flags & FLAG_AUTH else b""
    before = _octets(engine_id) + _integer(boots) + _integer(etime) + _octets(user)
    sec = tlv(SEQUENCE, before + _octets(auth_params) + _octets(priv_params))
    header = tlv(SEQUENCE, _integer(msg_id) + _integer(MAX_SIZE) + _octets(bytes((flags,))) + _integer(USM))
    inner = _integer(ber.VERSION_3) + header + _octets(sec) + data
    whole = tlv(SEQUENCE, inner)
    if not flags & FLAG_AUTH:
        return whole
    assert auth_key is not None
    # where the 12 zero octets sit: each enclosing TLV's header, then what comes before them
    offset = (len(whole) - len(inner)) + len(_integer(ber.VERSION_3)) + len(header)
    offset += len(_octets(sec)) - len(sec)  # the OCTET STRING around the security parameters
    offset += len(sec) - len(before) - len(_octets(auth_params)) - len(_octets(priv_params))  # their SEQUENCE header
    offset += len(before) + 2  # the auth parameters' own tag and length
    mac = hmac.new(auth_key, whole, hashlib.sha1).digest()[:AUTH_LEN]
    return whole[:offset] + mac + whole[offset + AUTH_LEN :]


def decode(data: bytes) -> V3Message:
    """A v3 message's envelope (strict, like :mod:`.ber`); raises BerError."""
    return ber.strictly("v3 message", _decode, data)


def _decode(data: bytes) -> V3Message:
    s, e = ber.expect_whole(data, SEQUENCE, "message SEQUENCE")
    vs, ve = _expect(data, s, e, ber.INTEGER, "version")
    if _int(data, vs, ve) != ber.VERSION_3:
        raise BerError("not an SNMPv3 message")
    hs, he = _expect(data, ve, e, SEQUENCE, "msgGlobalData")
    ms, me = _expect(data, hs, he, ber.INTEGER, "msgID")
    _, xe = _expect(data, me, he, ber.INTEGER, "msgMaxSize")
    fs, fe = _expect(data, xe, he, OCTET_STRING, "msgFlags")
    ss, se = _expect(data, fe, he, ber.INTEGER, "msgSecurityModel")
    if se != he or fe - fs != 1:
        raise BerError("malformed msgGlobalData")
    if _int(data, ss, se) != USM:
        raise BerError(f"security model {_int(data, ss, se)}, not USM")
    ps, pe = _expect(data, he, e, OCTET_STRING, "msgSecurityParameters")
    qs, qe = _expect(data, ps, pe, SEQUENCE, "UsmSecurityParameters")
    if qe != pe:
        raise BerError("octets after the USM parameters")
    es_, ee = _expect(data, qs, qe, OCTET_STRING, "msgAuthoritativeEngineID")
    bs, be = _expect(data, ee, qe, ber.INTEGER, "msgAuthoritativeEngineBoots")
    ts, te = _expect(data, be, qe, ber.INTEGER, "msgAuthoritativeEngineTime")
    us, ue = _expect(data, te, qe, OCTET_STRING, "msgUserName")
    as_, ae = _expect(data, ue, qe, OCTET_STRING, "msgAuthenticationParameters")
    vs2, ve2 = _expect(data, ae, qe, OCTET_STRING, "msgPrivacyParameters")
    if ve2 != qe:
        raise BerError("octets after msgPrivacyParameters")
    tag, ds, de = _header(data, pe, e)
    if de != e:
        raise BerError("octets after the ScopedPDU")
    scoped = encrypted = None
    if tag == SEQUENCE:
        scoped = data[pe:de]
    elif tag == OCTET_STRING:
        encrypted = data[ds:de]
    else:
        raise BerError(f"ScopedPduData of tag 0x{tag:02x}")
    return V3Message(
        msg_id=_int(data, ms, me),
        flags=data[fs],
        engine_id=data[es_:ee],
        boots=_int(data, bs, be),
        time=_int(data, ts, te),
        user=data[us:ue],
        auth_params=data[as_:ae],
        priv_params=data[vs2:ve2],
        auth_offset=as_,
        raw=data,
        scoped=scoped,
        encrypted=encrypted,
    )


def decode_scoped(scoped: bytes) -> Message:
    """A ScopedPDU TLV. AES-CFB does not pad, so a decrypted one must end exactly."""
    return ber.strictly("ScopedPDU", _decode_scoped, scoped)


def _decode_scoped(scoped: bytes) -> Message:
    s, e = ber.expect_whole(scoped, SEQUENCE, "ScopedPDU")
    _, ce = _expect(scoped, s, e, OCTET_STRING, "contextEngineID")
    _, ne = _expect(scoped, ce, e, OCTET_STRING, "contextName")
    return ber.decode_pdu(scoped, ne, e)
