"""Self-signed certificates for lab BMCs: EC P-256, one per BMC, cached.

A certificate is valid for the BMC's IP address and ``<name>.lab``; it is
cached as ``<state_dir>/certs/<name>.pem`` (key + certificate) and reused on
restart when it still names the same address and has a year left.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import re
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def cert_path(state_dir: Path, name: str) -> Path:
    return state_dir / "certs" / (_SAFE.sub("_", name) + ".pem")


def ensure_cert(state_dir: Path, name: str, ip: str) -> tuple[Path, str]:
    """Return (pem path, SHA-256 fingerprint of the certificate's DER)."""
    path = cert_path(state_dir, name)
    if path.exists():
        try:
            pem = path.read_bytes()
            cert = x509.load_pem_x509_certificate(pem)
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
            if ipaddress.ip_address(ip) in sans.get_values_for_type(x509.IPAddress) and left > dt.timedelta(days=365):
                return path, fingerprint(cert)
        except (ValueError, x509.ExtensionNotFound):
            pass  # unreadable or foreign: make a new one
    pem, cert = _new_cert(name, ip)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    os.replace(tmp, path)
    return path, fingerprint(cert)


def _new_cert(name: str, ip: str) -> tuple[bytes, x509.Certificate]:
    """A new key and a self-signed certificate for ``ip`` and ``<name>.lab``: (key + cert PEM, cert)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name[:64]), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fleetctl lab")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip)), x509.DNSName(_dns_label(name) + ".lab")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    pem += cert.public_bytes(serialization.Encoding.PEM)
    return pem, cert


def wrong_context(name: str, ip: str) -> tuple[ssl.SSLContext, str]:
    """A server context with a freshly generated certificate (another key) for the
    same names: what the ``wrong_cert`` fault serves. Returns (context, fingerprint).
    """
    pem, cert = _new_cert(name, ip)
    # load_cert_chain reads files only: a private temporary file, removed at once
    fd, tmp = tempfile.mkstemp(prefix="fleetctl-lab-wrong-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        return server_context(Path(tmp)), fingerprint(cert)
    finally:
        os.unlink(tmp)


def fingerprint(cert: x509.Certificate) -> str:
    return "sha256:" + hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def fingerprint_of_der(der: bytes) -> str:
    """Fingerprint of a peer certificate as ``ssl`` returns it (binary form)."""
    return "sha256:" + hashlib.sha256(der).hexdigest()


def server_context(pem: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(pem)
    return ctx


def _dns_label(name: str) -> str:
    label = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")
    return label[:63] or "bmc"
