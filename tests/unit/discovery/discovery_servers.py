"""Loopback HTTPS servers for the probe's tests (hand-made answers, real recorded bodies).

``ServiceRoots`` serves, on every address it is given (127.0.0.0/8 only), one
behaviour per address: a body (a recorded service root), a body that never
ends, a connection that is accepted and never answered, a chunked body. It
runs its own event loop in a thread and counts the connections open at once,
per /24 and overall, so the bounds can be checked.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path


def make_cert(folder: Path) -> tuple[Path, Path, str]:
    """A self-signed certificate for 127.0.0.1: (cert, key, its SHA-256 in hex)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bmc.discover.test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30)).sign(key, hashes.SHA256())
    )  # fmt: skip
    c, k = folder / "cert.pem", folder / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return c, k, hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


@dataclass
class Behaviour:
    """What one address answers. ``kind``: body, endless, silent, chunked, status."""

    kind: str = "body"
    body: bytes = b""
    status: int = 200


@dataclass
class ServiceRoots:
    cert: Path
    key: Path
    fingerprint: str
    port: int = 0
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    open_now: dict[str, int] = field(default_factory=dict)
    max_open: dict[str, int] = field(default_factory=dict)
    max_total: int = 0
    total_now: int = 0
    connections: int = 0

    def start(self, addresses: list[str]) -> None:
        for a in addresses:
            assert ipaddress.ip_address(a).is_loopback, a
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def main() -> None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.cert, self.key)
            # One port on every address: the first bind picks it (port 0 would give each address its own).
            servers = [await asyncio.start_server(self._handle, host=addresses[0], port=self.port, ssl=ctx, backlog=512)]
            self.port = servers[0].sockets[0].getsockname()[1]
            if addresses[1:]:
                servers.append(await asyncio.start_server(self._handle, host=addresses[1:], port=self.port, ssl=ctx, backlog=512))
            self._stop = asyncio.Event()
            ready.set()
            await self._stop.wait()
            for s in servers:
                s.close()

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(main(),), daemon=True)
        self._thread.start()
        assert ready.wait(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        local = writer.get_extra_info("sockname")[0]
        sub = local.rpartition(".")[0]
        self.connections += 1
        self.open_now[sub] = self.open_now.get(sub, 0) + 1
        self.max_open[sub] = max(self.max_open.get(sub, 0), self.open_now[sub])
        self.total_now += 1
        self.max_total = max(self.max_total, self.total_now)
        b = self.behaviours.get(local, Behaviour())
        try:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(0.02)  # hold the connection a moment, so concurrent ones overlap
            if b.kind == "silent":
                await asyncio.sleep(3600)
            elif b.kind == "endless":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
                chunk = b" " * 65536
                while not writer.is_closing():
                    writer.write(chunk)
                    await writer.drain()
            elif b.kind == "chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
                for i in range(0, len(b.body), 50):
                    part = b.body[i : i + 50]
                    writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(f"HTTP/1.1 {b.status} X\r\nContent-Type: application/json\r\nContent-Length: {len(b.body)}\r\n"
                             "Connection: close\r\n\r\n".encode() + b.body)  # fmt: skip
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError, ssl.SSLError):
            pass
        finally:
            self.open_now[sub] -= 1
            self.total_now -= 1
            writer.close()


