"""The ``wrong_cert`` fault: a BMC presents another certificate than the pinned one, until cleared."""

from __future__ import annotations

import hashlib
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from fleetctl_lab.bmc import FAULTS, LabConfig, generate_specs, run_lab_in_thread

from fleetctl.errors import InputError


def _peer(url: str) -> bytes:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=5) as s, ctx.wrap_socket(s) as t:
        der = t.getpeercert(binary_form=True)
    assert der is not None
    return der


def _fp(der: bytes) -> str:
    return "sha256:" + hashlib.sha256(der).hexdigest()


def test_wrong_cert_serves_a_fresh_certificate_until_cleared(tmp_path: Path) -> None:
    assert "wrong_cert" in FAULTS
    specs = generate_specs(2)
    a, b = specs[0].name, specs[1].name
    with run_lab_in_thread(specs, LabConfig(state_dir=tmp_path)) as lab:
        pinned = lab.fingerprint_of(a)
        assert _fp(_peer(lab.url_of(a))) == pinned
        lab.set_fault(a, wrong_cert=True)
        der = _peer(lab.url_of(a))
        wrong = _fp(der)
        assert wrong != pinned
        # another key, the same names: only the pin tells it apart
        cert = x509.load_der_x509_certificate(der)
        cached = x509.load_pem_x509_certificate((tmp_path / "certs" / f"{a}.pem").read_bytes())
        assert _spki(cert) != _spki(cached)
        assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value == \
            cached.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert _fp(_peer(lab.url_of(a))) == wrong  # the same wrong one while the fault stays
        assert _fp(_peer(lab.url_of(b))) == lab.fingerprint_of(b)  # the other BMC is untouched
        assert lab.fingerprint_of(a) == pinned  # what the lab reports is still the pinned one
        assert lab.counters(a)["faults"] == {"wrong_cert": True}
        # set anew: yet another certificate
        lab.set_fault(a, wrong_cert=None)
        assert _fp(_peer(lab.url_of(a))) == pinned
        lab.set_fault(a, wrong_cert=True)
        again = _fp(_peer(lab.url_of(a)))
        assert again not in (pinned, wrong)
        lab.clear_faults(a)
        assert _fp(_peer(lab.url_of(a))) == pinned
        # the cached certificate on disk never changed
        assert lab.fingerprint_of(a) == pinned


def test_unknown_fault_lists_wrong_cert(tmp_path: Path) -> None:
    specs = generate_specs(1)
    with run_lab_in_thread(specs, LabConfig(state_dir=tmp_path)) as lab, pytest.raises(InputError, match="wrong_cert"):
        lab.set_fault(specs[0].name, bogus=1)


def _spki(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
