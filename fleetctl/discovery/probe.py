"""Probe addresses for a Redfish service: ``GET /redfish/v1`` without logging in.

The Redfish specification lets anyone read the service root unauthenticated
(DSP0266, "Service root"): UUID, vendor, product and Redfish version, and the
TLS handshake gives the certificate, whose SHA-256 is the pin the inventory
keeps (``fingerprint``). That is enough to tell a BMC from anything else on a
management network and to recognise it again, and it is read-only.

Never trust a device to answer something finite: every address gets one
attempt per pass, a connect timeout and an overall deadline; the headers and
the body are read up to a cap. Connections are bounded overall and per /24
(a management /24 is often one rack's switch: a thousand handshakes at once
on one BMC switch is how scanners get blamed for outages), and new
connections are started at a bounded rate.

The client is asyncio streams, HTTP/1.1 with ``Connection: close``: one
request per address needs no pool, and a hand-read response is where the
size and time caps are plainest (bench/discover.py compares it with a bare
client doing the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import itertools
import json
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetctl.errors import InputError

ROOT_PATH = "/redfish/v1"
#: A service root is a few kilobytes (the largest recorded, HPE iLO 5's, is ~6 KB); a cap far above that.
MAX_BODY = 256 * 1024
MAX_HEADERS = 32 * 1024
#: Failures listed by address for addresses nobody named (the rest are only counted).
MAX_FAILURES_LISTED = 1024
#: The widest range probed without ``--yes``: a /16 (65,536 addresses).
MAX_PREFIX_WITHOUT_YES = 16
#: The most addresses one pass probes, even with ``--yes`` (an IPv4 /12; an IPv6 /64 would never end).
MAX_ADDRESSES = 1 << 20

#: Vendors that name themselves only by their Oem section's key (Redfish before 1.5 had no ServiceRoot.Vendor),
#: as data: the key -> the vendor as operators write it. NOTE: HPE iLO 4/5 (RedfishVersion 1.0-1.6) carry "Vendor"
#: only from iLO 5 1.40 on; AMI MegaRAC firmware before 2019 carries none.
OEM_VENDORS: dict[str, str] = {
    "Hpe": "HPE",
    "Hp": "HPE",
    "Dell": "Dell",
    "Ami": "AMI",
    "Supermicro": "Supermicro",
    "Lenovo": "Lenovo",
    "Fujitsu": "Fujitsu",
    "Cisco": "Cisco",
    "Huawei": "Huawei",
    "Inspur": "Inspur",
    "OpenBmc": "OpenBMC",
}


@dataclass(frozen=True)
class ServiceRoot:
    """What one address's Redfish service root said.

    Attributes:
        address: the IP address probed.
        port: the TCP port.
        url: the BMC URL as the site file writes it (``https://10.0.0.5``; the port only when not 443).
        uuid: ServiceRoot.UUID (the service's, which the spec ties to the manager; lower case).
        vendor: ServiceRoot.Vendor, else the vendor its Oem section names (:data:`OEM_VENDORS`), else None.
        product: ServiceRoot.Product (often the server's model: HPE, iDRAC), None when absent.
        redfish_version: ServiceRoot.RedfishVersion.
        fingerprint: SHA-256 of the certificate (64 lower-case hex digits), None over plain HTTP.
        name: ServiceRoot.Name.
    """

    address: str
    port: int
    url: str
    uuid: str | None
    vendor: str | None
    product: str | None
    redfish_version: str | None
    fingerprint: str | None
    name: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"address": self.address, "port": self.port, "url": self.url, "uuid": self.uuid, "vendor": self.vendor,
                "product": self.product, "redfish_version": self.redfish_version, "fingerprint": self.fingerprint,
                "name": self.name}  # fmt: skip


@dataclass(frozen=True)
class ProbeLimits:
    """The bounds of one pass (docs/discovery.md, "Bounds")."""

    concurrency: int = 512  # connections open at once, overall
    per_subnet: int = 64  # connections open at once into one /24
    rate: float = 2000.0  # new connections per second
    connect_timeout: float = 3.0  # TCP connect and TLS handshake
    deadline: float = 10.0  # one address, connect to last byte
    max_body: int = MAX_BODY
    max_headers: int = MAX_HEADERS


@dataclass
class ProbeReport:
    """One pass: the service roots found, and why the others were not.

    ``failures`` holds a reason for each address that answered something
    other than a Redfish service root, timed out, or was asked for by name
    (a lease); ``counts`` counts every outcome (``redfish``, ``refused``,
    ``timeout``, ``tls``, ``http 404``, ``not redfish`` ...), so a /16 of
    closed ports costs a counter, not 65,536 rows.
    """

    found: list[ServiceRoot] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    probed: int = 0
    seconds: float = 0.0
    unnamed_failures: int = 0  # how many of ``failures`` no lease named (capped at MAX_FAILURES_LISTED)


class ProbeFailed(Exception):
    """One address did not give a service root (internal: becomes a reason in the report)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ------------------------------------------------------------------ ranges


def parse_range(text: str, *, yes: bool = False, what: str = "--range") -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """A CIDR (``10.0.0.0/24``) or one address, checked; larger than a /16 only with ``yes``.

    Raises:
        InputError: not a CIDR, host bits set, or too large without ``yes``.
    """
    t = text.strip()
    if not t or not t.isascii():
        raise InputError(f"{text!r} is not a CIDR range (like 10.0.0.0/24)", field=what)
    try:
        net = ipaddress.ip_network(t, strict=True)
    except ValueError as e:
        raise InputError(f"{text!r} is not a CIDR range (like 10.0.0.0/24): {e}", field=what) from None
    limit = MAX_PREFIX_WITHOUT_YES if net.version == 4 else 112
    if net.num_addresses > MAX_ADDRESSES:
        raise InputError(f"{text} holds {net.num_addresses:,} addresses; one pass probes at most {MAX_ADDRESSES:,}: "
                         "split it", field=what)  # fmt: skip
    if net.prefixlen < limit and not yes:
        raise InputError(f"{text} holds {net.num_addresses:,} addresses, more than a /{limit}; give --yes to probe it", field=what)
    return net


def own_addresses() -> set[str]:
    """This machine's own addresses that are not loopback (IPv4 from the kernel's table, IPv6 from /proc)."""
    out: set[str] = set()
    # /proc/net/fib_trie lists the local (/32 host LOCAL) IPv4 addresses of every interface, no ioctl needed.
    with contextlib.suppress(OSError):
        lines = open("/proc/net/fib_trie", encoding="ascii").read().splitlines()  # noqa: SIM115 (one read)
        for prev, line in itertools.pairwise(lines):
            if "/32 host LOCAL" in line:
                addr = prev.strip().split()[-1]
                with contextlib.suppress(ValueError):
                    if not ipaddress.ip_address(addr).is_loopback:
                        out.add(addr)
    with contextlib.suppress(OSError):
        for line in open("/proc/net/if_inet6", encoding="ascii").read().splitlines():  # noqa: SIM115
            raw = line.split()[0]
            with contextlib.suppress(ValueError, IndexError):
                a = ipaddress.IPv6Address(int(raw, 16))
                if not a.is_loopback:
                    out.add(str(a))
    return out


def check_not_own(networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network], *, yes: bool,
                  own: set[str] | None = None) -> None:  # fmt: skip
    """Refuse a range that holds one of this machine's own (non-loopback) addresses, unless ``yes``.

    Probing ourselves finds our own services (a BMC emulator on the admin host, a
    web server), and in a test it means the test reaches past loopback.
    """
    if yes:
        return
    mine = own_addresses() if own is None else own
    for net in networks:
        hit = sorted(a for a in mine if ipaddress.ip_address(a).version == net.version and ipaddress.ip_address(a) in net)
        if hit:
            raise InputError(f"{net} holds this machine's own address {hit[0]}; give --yes to probe it anyway", field="--range")


def host_addresses(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> list[str]:
    """The addresses of a range to probe: its hosts (a /31, /32 or /128 is all of it)."""
    hosts = net.hosts() if net.num_addresses > 2 else iter(net)
    return [str(a) for a in hosts]


def interleave(addresses: Sequence[str]) -> list[str]:
    """The addresses one /24 after the other, round robin (10.0.0.1, 10.0.1.1, ..., 10.0.0.2 ...), duplicates dropped.

    In address order every connection of a pass would go to one /24 at a time
    and the per-/24 bound would be the whole pass's; interleaved, the passes
    spread over the subnets.
    """
    groups: dict[str, list[str]] = {}
    seen: set[str] = set()
    for a in addresses:
        if a in seen:
            continue
        seen.add(a)
        groups.setdefault(subnet_of(a), []).append(a)
    lists = list(groups.values())
    out: list[str] = []
    i = 0
    while lists:
        lists = [g for g in lists if i < len(g)]
        out.extend(g[i] for g in lists)
        i += 1
    return out


def subnet_of(address: str) -> str:
    """The /24 (IPv4) or /64 (IPv6) an address is in: the unit of the per-subnet bound."""
    if ":" in address:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return address.rpartition(".")[0]


# ------------------------------------------------------------------ parsing


def parse_service_root(doc: Any, *, address: str, port: int, fingerprint: str | None, scheme: str = "https") -> ServiceRoot:
    """A ServiceRoot from the decoded JSON; :class:`ProbeFailed` when it is not one.

    A service root is a JSON object with ``RedfishVersion`` or an ``@odata.type``
    of ``#ServiceRoot.``; anything else (a web server's JSON, an error body) is
    "not redfish".
    """
    if not isinstance(doc, dict):
        raise ProbeFailed("not redfish")
    odata_type = doc.get("@odata.type")
    if "RedfishVersion" not in doc and not (isinstance(odata_type, str) and odata_type.startswith("#ServiceRoot.")):
        raise ProbeFailed("not redfish")

    def text(key: str) -> str | None:
        v = doc.get(key)
        # One line, bounded: it ends up in a table and in a site file's comment.
        return " ".join(v.split())[:255] or None if isinstance(v, str) else None

    vendor = text("Vendor")
    if vendor is None and isinstance(doc.get("Oem"), dict):
        vendor = next((OEM_VENDORS[k] for k in doc["Oem"] if k in OEM_VENDORS), None)
    uuid = text("UUID")
    host = f"[{address}]" if ":" in address else address
    default = 443 if scheme == "https" else 80
    url = f"{scheme}://{host}" + ("" if port == default else f":{port}")
    return ServiceRoot(address=address, port=port, url=url, uuid=uuid.lower() if uuid else None, vendor=vendor,
                       product=text("Product"), redfish_version=text("RedfishVersion"), fingerprint=fingerprint,
                       name=text("Name"))  # fmt: skip


async def _read_response(reader: asyncio.StreamReader, limits: ProbeLimits) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body, each read up to its cap."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise ProbeFailed("headers too large") from None
    except asyncio.IncompleteReadError:
        raise ProbeFailed("not http") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProbeFailed("not http")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    cap = limits.max_body
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip() or b"x", 16)
            except ValueError:
                raise ProbeFailed("bad chunked body") from None
            if size == 0:
                break
            if len(body) + size > cap:
                raise ProbeFailed(f"body larger than {cap} bytes")
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        return status, headers, bytes(body)
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise ProbeFailed("bad content-length")
        if int(length) > cap:
            raise ProbeFailed(f"body larger than {cap} bytes")
        return status, headers, await reader.readexactly(int(length))
    body = bytearray(await reader.read(cap + 1))  # Connection: close: the body ends where the stream does
    while len(body) <= cap:
        more = await reader.read(cap + 1 - len(body))
        if not more:
            break
        body += more
    if len(body) > cap:
        raise ProbeFailed(f"body larger than {cap} bytes")
    return status, headers, bytes(body)


def client_context() -> ssl.SSLContext:
    """TLS for discovery: the certificate is recorded, not verified.

    A BMC fresh from the factory has a self-signed certificate; discovery's
    job is to report its fingerprint so the operator can pin it, not to trust
    it (nothing secret is sent: no credential, one GET of a public document).
    """
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    # Old BMC firmware (iLO 4, iDRAC 7) offers only TLS 1.2 and older suites; 1.2 is the floor, as in the driver.
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


async def get_json(
    address: str,
    port: int,
    path: str,
    *,
    limits: ProbeLimits,
    ctx: ssl.SSLContext | None,
    authorization: str | None = None,
    pinned: str | None = None,
) -> tuple[Any, str | None]:
    """One bounded ``GET path`` on its own connection: (the decoded JSON, the certificate's SHA-256).

    ``pinned``: the fingerprint the certificate must have (a login never goes to
    a certificate other than the one the probe saw). Raises :class:`ProbeFailed`
    with the reason (``refused``, ``timeout``, ``tls: ...``, ``http 401``, ``not json`` ...).
    """
    try:
        async with asyncio.timeout(limits.deadline):
            try:
                # A nested timeout, not wait_for: wait_for wraps the connect in a task of its own (3.11), per address.
                async with asyncio.timeout(limits.connect_timeout):
                    reader, writer = await asyncio.open_connection(
                        address, port, ssl=ctx, limit=limits.max_headers, ssl_handshake_timeout=limits.connect_timeout if ctx else None
                    )
            except ConnectionRefusedError:
                raise ProbeFailed("refused") from None
            except ssl.SSLError as e:
                raise ProbeFailed(f"tls: {e.reason or e}") from None
            except TimeoutError:
                raise ProbeFailed("timeout") from None
            except OSError as e:
                raise ProbeFailed(f"unreachable: {e.strerror or e}") from None
            try:
                fingerprint = None
                if ctx is not None:
                    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
                    fingerprint = hashlib.sha256(der).hexdigest() if der else None
                if pinned is not None and fingerprint != pinned:
                    raise ProbeFailed(f"tls: the certificate is {fingerprint}, not the {pinned} probed")
                host = f"[{address}]" if ":" in address else address
                auth = f"Authorization: {authorization}\r\n" if authorization else ""
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\nOData-Version: 4.0\r\n{auth}"
                    f"User-Agent: fleetctl-discover\r\nConnection: close\r\n\r\n".encode()
                )
                status, _headers, body = await _read_response(reader, limits)
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    # Bounded: a peer that never finishes the TLS close must not hold the pass.
                    await asyncio.wait_for(writer.wait_closed(), 1.0)
    except TimeoutError:
        raise ProbeFailed("timeout") from None
    except (ConnectionError, asyncio.IncompleteReadError):
        raise ProbeFailed("connection dropped") from None
    except ssl.SSLError as e:
        raise ProbeFailed(f"tls: {e.reason or e}") from None
    if status != 200:
        raise ProbeFailed(f"http {status}")
    try:
        return json.loads(body), fingerprint
    except (ValueError, UnicodeDecodeError):
        raise ProbeFailed("not json") from None


async def probe_one(address: str, port: int, *, limits: ProbeLimits, ctx: ssl.SSLContext | None) -> ServiceRoot:
    """One address's service root (``ctx`` None: plain HTTP). Raises :class:`ProbeFailed` with the reason."""
    try:
        doc, fingerprint = await get_json(address, port, ROOT_PATH, limits=limits, ctx=ctx)
    except ProbeFailed as e:
        if e.reason == "not json":
            raise ProbeFailed("not redfish") from None
        raise
    return parse_service_root(doc, address=address, port=port, fingerprint=fingerprint, scheme="https" if ctx else "http")


class _Rate:
    """At most ``rate`` starts per second (a token bucket of one second's worth)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next = time.monotonic()
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self.lock:
            now = time.monotonic()
            # A burst of at most one second's worth after an idle spell, never more.
            self.next = max(self.next, now - 1.0)
            if self.next > now:
                await asyncio.sleep(self.next - now)
            self.next += self.interval


async def probe_addresses(
    addresses: Sequence[str],
    port: int = 443,
    *,
    limits: ProbeLimits | None = None,
    tls: bool = True,
    named: Iterable[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> ProbeReport:
    """Probe every address once (duplicates once), within the limits.

    Args:
        addresses: IP addresses.
        port: the TCP port (443: Redfish over HTTPS).
        limits: the bounds (:class:`ProbeLimits`).
        tls: False for plain HTTP (a lab without TLS; never the default).
        named: addresses whose failure is kept in ``failures`` whatever it is
            (the ones a lease named); for the others only an answer that is
            not a service root (or a timeout) is.
        progress: ``progress(done, total)`` now and then.

    Returns:
        The report; it never raises for one address.
    """
    lim = limits or ProbeLimits()
    order = interleave(addresses)
    keep = set(named)
    report = ProbeReport(probed=len(order))
    ctx = client_context() if tls else None
    per: dict[str, asyncio.Semaphore] = {}
    rate = _Rate(lim.rate)
    started = time.monotonic()
    done = 0
    it = iter(order)

    async def worker() -> None:
        nonlocal done
        for address in it:
            sub = per.setdefault(subnet_of(address), asyncio.Semaphore(max(1, lim.per_subnet)))
            async with sub:
                await rate.wait()
                try:
                    root = await probe_one(address, port, limits=lim, ctx=ctx)
                except ProbeFailed as e:
                    report.counts[e.reason.split(":")[0]] += 1
                    listed = address in keep or (e.reason != "refused" and not e.reason.startswith("unreachable"))
                    # A filtered /16 times out everywhere: the named addresses are all kept, the others up to a cap.
                    if listed and (address in keep or report.unnamed_failures < MAX_FAILURES_LISTED):
                        report.unnamed_failures += address not in keep
                        report.failures[address] = e.reason
                except Exception as e:  # noqa: BLE001 (one address's bug never ends the pass: it is that address's reason)
                    report.counts["error"] += 1
                    report.failures[address] = f"error: {type(e).__name__}: {e}"
                else:
                    report.counts["redfish"] += 1
                    report.found.append(root)
            done += 1
            if progress is not None and (done % 256 == 0 or done == len(order)):
                progress(done, len(order))

    # Workers pull from one iterator, one address at a time: their number is the overall bound on connections
    # (a /16 is 65,536 addresses but only `concurrency` tasks).
    await asyncio.gather(*(worker() for _ in range(max(1, min(lim.concurrency, len(order))))))
    report.found.sort(key=lambda r: ipaddress.ip_address(r.address))
    report.seconds = time.monotonic() - started
    return report
