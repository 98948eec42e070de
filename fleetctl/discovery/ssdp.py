"""SSDP discovery of Redfish services, as the Redfish specification defines it (DSP0266, "Discovery").

One M-SEARCH for ``urn:dmtf-org:service:redfish-rest:1`` to the SSDP
multicast group; a Redfish service that supports SSDP answers with its
service root's URI in ``AL`` (and ``LOCATION``) and its UUID in ``USN``
(``uuid:<UUID>::urn:dmtf-org:service:redfish-rest:1``). Answers are read for
a bounded time, each datagram up to a cap, and at most ``max_replies`` of them:
the addresses then go through the same probe as a range (an SSDP answer alone
proves nothing: anyone on the segment can send one).

Multicast crosses no router without help: SSDP finds what shares a layer-2
segment (or a multicast-routed one) with the machine that asks.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from fleetctl.errors import InputError

SSDP_GROUP = "239.255.255.250"
SSDP_PORT = 1900
REDFISH_ST = "urn:dmtf-org:service:redfish-rest:1"
MAX_DATAGRAM = 8192
MAX_REPLIES = 65536


@dataclass(frozen=True)
class SsdpReply:
    """One answer to the M-SEARCH.

    Attributes:
        address: where the service root is (AL's host, else the sender's address).
        port: AL's port (443 when AL names none).
        uuid: from USN, lower case; None when USN carries none.
        sender: the address the datagram came from.
        location: the AL (or LOCATION) header as sent.
    """

    address: str
    port: int
    uuid: str | None
    sender: str
    location: str | None


def m_search(mx: int = 2) -> bytes:
    """The M-SEARCH request (UPnP Device Architecture 1.1, 1.3.2), for Redfish services."""
    return (
        f"M-SEARCH * HTTP/1.1\r\nHOST: {SSDP_GROUP}:{SSDP_PORT}\r\nMAN: \"ssdp:discover\"\r\nMX: {mx}\r\n"
        f"ST: {REDFISH_ST}\r\nUSER-AGENT: fleetctl-discover\r\n\r\n"
    ).encode("ascii")


def parse_reply(data: bytes, sender: str) -> SsdpReply | None:
    """An answer for a Redfish service, or None (another ST, not a 200, not SSDP at all)."""
    try:
        text = data[:MAX_DATAGRAM].decode("latin-1")
    except ValueError:  # pragma: no cover - latin-1 decodes any byte
        return None
    lines = text.split("\r\n") if "\r\n" in text else text.split("\n")
    if not lines or not lines[0].startswith("HTTP/1.1 200"):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().upper()] = value.strip()
    if headers.get("ST", "").lower() != REDFISH_ST:
        return None
    location = headers.get("AL") or headers.get("LOCATION")
    address, port = sender, 443
    if location:
        parts = urlsplit(location)
        try:
            host = parts.hostname
            p = parts.port
        except ValueError:
            host, p = None, None
        if host:
            try:
                address = str(ipaddress.ip_address(host))
            except ValueError:
                address = sender  # a host name: the probe goes to the address that answered
            port = p or (443 if parts.scheme != "http" else 80)
    uuid = None
    usn = headers.get("USN", "")
    if usn.lower().startswith("uuid:"):
        uuid = usn[5:].split("::", 1)[0].strip().lower() or None
    return SsdpReply(address=address, port=port, uuid=uuid, sender=sender, location=location)


def search(
    wait: float = 3.0,
    *,
    interface: str | None = None,
    group: tuple[str, int] = (SSDP_GROUP, SSDP_PORT),
    ttl: int = 2,
    max_replies: int = MAX_REPLIES,
) -> list[SsdpReply]:
    """Send one M-SEARCH and collect the Redfish answers for ``wait`` seconds (fewer when ``max_replies`` come first).

    Args:
        wait: seconds to listen (the MX sent is this, rounded down, at least 1).
        interface: the local IPv4 address to send from (its interface carries the multicast); None: the routing table's choice.
        group: where to send (the SSDP group; a unicast address asks one host).
        ttl: multicast hops (2: the segment and one multicast router, as UPnP recommends at most 4).
        max_replies: stop after this many answers.

    Raises:
        InputError: the M-SEARCH cannot be sent (no route for multicast, a bad interface address).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
        if interface:
            try:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
                sock.bind((interface, 0))
            except OSError as e:
                raise InputError(f"{interface}: cannot send SSDP from it: {e.strerror or e}", field="--ssdp-interface") from None
        try:
            sock.sendto(m_search(max(1, int(wait))), group)
        except OSError as e:
            raise InputError(f"cannot send the SSDP M-SEARCH to {group[0]}:{group[1]}: {e.strerror or e} "
                             "(no multicast route? give --ssdp-interface)", field="--ssdp") from None  # fmt: skip
        replies: dict[tuple[str, int], SsdpReply] = {}
        deadline = time.monotonic() + wait
        while len(replies) < max_replies:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                data, (sender, _port) = sock.recvfrom(MAX_DATAGRAM)
            except TimeoutError:
                break
            except OSError:
                continue  # an ICMP error for the datagram sent: other answers may still come
            reply = parse_reply(data, sender)
            if reply is not None:
                replies.setdefault((reply.address, reply.port), reply)
        return sorted(replies.values(), key=lambda r: (ipaddress.ip_address(r.address), r.port))
    finally:
        sock.close()
