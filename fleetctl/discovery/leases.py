"""DHCP leases as a list of (address, MAC) to probe: ISC Kea's memfile CSV, dnsmasq, ISC dhcpd.

Each format is read strictly: a line that is not what its format says is an
:class:`~fleetctl.errors.InputError` naming the file and line, never skipped.
A file of none of these formats is refused whole (nothing is probed).

Which leases count (the server's own view, not the clock's: a copied file is
old by the time it is read, so expiry times are not judged):

- Kea memfile (``kea-leases4.csv``): an append-only log; the last line of an
  address wins. ``valid_lifetime`` 0 is Kea's deletion marker; ``state`` 0 is
  an active lease (1 declined, 2 expired-reclaimed, 3 released, others newer
  states): only active ones are kept.
- dnsmasq (``dnsmasq.leases``): ``EXPIRY MAC IP HOSTNAME CLIENT-ID`` per line;
  dnsmasq drops a lease from the file when it ends, so every IPv4 line is
  held. The IPv6 part (after the ``duid`` line) carries no MAC and is skipped.
- ISC dhcpd (``dhcpd.leases``, dhcpd.leases(5)): ``lease IP { ... }`` blocks,
  appended as they change; the last block of an address wins, and only
  ``binding state active`` (or a block without a binding state, as dhcpd 2
  wrote them) is kept. Parsed here with the stdlib: the one PyPI parser,
  ``isc-dhcp-leases``, had its last release in 2023 and skips what it does not
  understand, where this refuses it.
"""

from __future__ import annotations

import csv
import io
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fleetctl.errors import InputError
from fleetctl.files import FileRefused, read_capped
from fleetctl.inventory.schema import normalise_mac

LeaseFormat = Literal["kea", "dnsmasq", "dhcpd"]
FORMATS: tuple[str, ...] = ("kea", "dnsmasq", "dhcpd")
#: A lease file larger than this is not a management network's (a /16 of leases is ~10 MB in any format).
MAX_BYTES = 64 * 1024 * 1024

_KEA_ACTIVE = "0"
_DNSMASQ_LINE = re.compile(r"^\d+ \S+ \S+ \S+ \S+$", re.ASCII)


@dataclass(frozen=True)
class Lease:
    """One held lease.

    Attributes:
        address: the IPv4 address leased.
        mac: the client's MAC (lower case, colons), None where the lease has none.
        hostname: the client's host name where it sent one.
        line: where in the file (1-based), for the plan's source comments.
    """

    address: str
    mac: str | None
    hostname: str | None
    line: int


def read_leases(path: Path, fmt: str | None = None) -> tuple[str, list[Lease]]:
    """The held leases of a file, in file order: (its format, leases).

    Args:
        path: the lease file.
        fmt: ``kea``, ``dnsmasq`` or ``dhcpd``; None: detected from the content.

    Raises:
        InputError: the file cannot be read, is of no known format (or not of
            ``fmt``), or a line breaks its format (the error names the line).
    """
    where = str(path)
    try:
        # Read up to the cap, never by the size stat gives: /proc files say 0, a device never ends.
        raw = read_capped(path, MAX_BYTES)
    except FileRefused as e:
        raise InputError(f"{e}; not a lease file", location=where) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", location=where) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not text (byte {e.start}); not a lease file", location=where) from None
    found = detect(text)
    if fmt is None:
        if found is None:
            raise InputError("not a lease file (ISC Kea memfile CSV, dnsmasq or ISC dhcpd); give --leases-format to say which",
                             location=where)  # fmt: skip
        fmt = found
    elif fmt not in FORMATS:
        raise InputError(f"{fmt!r} is not a lease format ({', '.join(FORMATS)})", field="--leases-format")
    elif found is not None and found != fmt:
        raise InputError(f"is a {found} lease file, not {fmt}", location=where)
    parse = {"kea": parse_kea, "dnsmasq": parse_dnsmasq, "dhcpd": parse_dhcpd}[fmt]
    return fmt, parse(text, where)


def detect(text: str) -> str | None:
    """The format the content is in, from its first meaningful line; None when none fits."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), None)
    if first is None:
        # Comments only: dhcpd writes its header comment into an empty lease file.
        return "dhcpd" if "dhcpd.leases" in text else None
    head = [c.strip().lower() for c in first.split(",")]
    if "address" in head and "hwaddr" in head:
        return "kea"
    if re.match(r"^(lease\s+\S+\s*\{|authoring-byte-order\b|server-duid\b|failover\s+peer\b|host\s+\S+\s*\{|ia-(na|ta|pd)\b)", first):
        return "dhcpd"
    if _DNSMASQ_LINE.match(first) or first.startswith("duid "):
        return "dnsmasq"
    return None


def _address(value: str, where: str, line: int, what: str = "address") -> str:
    try:
        a = ipaddress.ip_address(value.strip())
    except ValueError:
        raise InputError(f"{value!r} is not an IP address", location=f"{where}:{line}", field=what) from None
    return str(a)


def _mac(value: str, where: str, line: int, what: str) -> str | None:
    if not value.strip():
        return None
    try:
        return normalise_mac(value)
    except ValueError:
        raise InputError(f"{value!r} is not a MAC address", location=f"{where}:{line}", field=what) from None


def parse_kea(text: str, where: str = "<kea>") -> list[Lease]:
    """Kea's memfile CSV (v4). See the module's docstring for which leases are kept."""
    rows = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    held: dict[str, Lease] = {}
    for row in rows:
        line = rows.line_num
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [c.strip().lower() for c in row]
            missing = [c for c in ("address", "hwaddr", "valid_lifetime", "state") if c not in header]
            # The v4 header: Kea 1.x wrote no state column; taken as active then.
            missing = [c for c in missing if c != "state"]
            if missing:
                raise InputError(f"the header has no {', '.join(missing)} column (a Kea memfile CSV starts "
                                 "address,hwaddr,client_id,valid_lifetime,...)", location=f"{where}:{line}")  # fmt: skip
            continue
        if len(row) < len(header) - 2 or len(row) > len(header):
            # Kea appends columns at the end across versions (user_context, pool_id): a line may lack the newest two.
            raise InputError(f"{len(row)} fields where the header has {len(header)}", location=f"{where}:{line}")
        rec = dict(zip(header, row, strict=False))
        address = _address(rec["address"], where, line)
        lifetime = rec.get("valid_lifetime", "").strip()
        if not lifetime.isdigit():
            raise InputError(f"{lifetime!r} is not a number of seconds", location=f"{where}:{line}", field="valid_lifetime")
        state = (rec.get("state") or _KEA_ACTIVE).strip()
        if not state.isdigit():
            raise InputError(f"{state!r} is not a lease state", location=f"{where}:{line}", field="state")
        mac = _mac(rec["hwaddr"], where, line, "hwaddr")
        hostname = (rec.get("hostname") or "").strip().rstrip(".") or None
        if int(lifetime) == 0 or state != _KEA_ACTIVE:
            held.pop(address, None)  # deleted, declined, reclaimed or released: not held (a later line may hold it again)
            continue
        held.pop(address, None)  # the last line wins, at its own place in the order
        held[address] = Lease(address, mac, hostname, line)
    if header is None:
        raise InputError("empty: no header line", location=where)
    return list(held.values())


def parse_dnsmasq(text: str, where: str = "<dnsmasq>") -> list[Lease]:
    """dnsmasq's lease file: IPv4 lines kept, the IPv6 section after ``duid`` skipped."""
    out: dict[str, Lease] = {}
    v6 = False
    for n, raw in enumerate(text.splitlines(), 1):
        ln = raw.strip()
        if not ln:
            continue
        if ln.startswith("duid "):
            v6 = True  # dnsmasq writes its DUID, then the DHCPv6 leases (IAID in the MAC's place)
            continue
        parts = ln.split()
        if len(parts) != 5 or not parts[0].isdigit():
            raise InputError("not a dnsmasq lease line (EXPIRY MAC IP HOSTNAME CLIENT-ID)", location=f"{where}:{n}")
        address = _address(parts[2], where, n)
        if v6 or ":" in address:
            continue
        mac = _mac(parts[1], where, n, "mac") if parts[1] != "*" else None
        out.pop(address, None)
        out[address] = Lease(address, mac, None if parts[3] == "*" else parts[3], n)
    return list(out.values())


# dhcpd.leases(5): tokens are words, quoted strings (with backslash escapes), ; { }, and # comments to the line's end.
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{};]|[^\s{};"#]+|#[^\n]*|\s+|(?P<bad>.)', re.DOTALL)


def parse_dhcpd(text: str, where: str = "<dhcpd>") -> list[Lease]:
    """ISC dhcpd's lease file: ``lease IP { ... }`` blocks; other top-level statements and blocks are passed over."""
    held: dict[str, Lease] = {}
    depth = 0
    stmt: list[str] = []  # the current statement's words
    block: dict[str, object] | None = None  # the lease block being read
    line = 1
    start_line = open_line = 1
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if m.group("bad") is not None:
            raise InputError(f"unexpected {tok!r} (an unterminated string?)", location=f"{where}:{line}")
        nl = tok.count("\n")
        if tok.isspace() or tok.startswith("#"):
            line += nl
            continue
        line += nl
        if tok == "{":
            depth += 1
            if depth == 1:
                open_line = line
                if stmt and stmt[0] == "lease":
                    if len(stmt) != 2:
                        raise InputError("a lease block is 'lease ADDRESS {'", location=f"{where}:{line}")
                    block = {"address": _address(stmt[1], where, line), "line": line}
                    start_line = line
                elif not stmt:
                    raise InputError("'{' without a statement before it", location=f"{where}:{line}")
            stmt = []
        elif tok == "}":
            if depth == 0:
                raise InputError("'}' without its '{'", location=f"{where}:{line}")
            if stmt:
                raise InputError(f"missing ';' after {' '.join(stmt)!r}", location=f"{where}:{line}")
            depth -= 1
            if depth == 0 and block is not None:
                address = str(block["address"])
                state = block.get("state")
                held.pop(address, None)
                if state in (None, "active"):
                    held[address] = Lease(address, block.get("mac"), block.get("hostname"), start_line)  # type: ignore[arg-type]
                block = None
        elif tok == ";":
            if block is not None and depth == 1:
                _lease_statement(stmt, block, where, line)
            stmt = []
        else:
            stmt.append(tok)
    if depth:
        raise InputError("this block has no closing '}'", location=f"{where}:{open_line}")
    if stmt:
        raise InputError(f"missing ';' after {' '.join(stmt)[:60]!r}", location=f"{where}:{line}")
    return list(held.values())


def _lease_statement(stmt: list[str], block: dict[str, object], where: str, line: int) -> None:
    if stmt[:2] == ["binding", "state"] and len(stmt) == 3:
        block["state"] = stmt[2]
    elif stmt[:2] == ["hardware", "ethernet"]:
        if len(stmt) != 3:
            raise InputError("'hardware ethernet' takes one MAC", location=f"{where}:{line}")
        block["mac"] = _mac(stmt[2], where, line, "hardware ethernet")
    elif stmt[:1] == ["client-hostname"] and len(stmt) == 2 and stmt[1].startswith('"'):
        block["hostname"] = stmt[1][1:-1] or None
