"""PCIe link state as the host sees it: ``lspci -vv`` text and sysfs strings.

Pure functions, no I/O: the caller runs ``lspci -vv`` (``-vvv``, with or
without ``-nn`` and ``-D``) or reads ``/sys/bus/pci/devices/*/current_link_*``
on the host, and hands the text here. What a board trained at (LnkSta) is
compared with what it can do (LnkCap): a GPU or MN-Core board at Gen3 x8 in a
Gen4 x16 slot still works, slowly, and nothing else says so.

``downgraded`` is read from the numbers, not from the word: lspci prints
``(downgraded)`` only since pciutils 3.6.3, and older versions print the
speeds alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, computed_field

from fleetctl_drivers.accel import AccelParseError

# PCIe transfer rate (GT/s, as lspci and sysfs print it) -> generation
SPEED_TO_GEN: dict[float, int] = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


# The package's one parse error, under the name this module's callers know.
ParseError = AccelParseError


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PcieLink(_Model):
    """One PCIe link: what it trained at now and what it is capable of.

    A field is None where the source did not say (``Speed unknown``, a cut
    line, a missing sysfs file); nothing is guessed.
    """

    speed_gts: float | None = None
    width: int | None = None
    max_speed_gts: float | None = None
    max_width: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gen(self) -> int | None:
        return speed_to_gen(self.speed_gts)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def max_gen(self) -> int | None:
        return speed_to_gen(self.max_speed_gts)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def degraded(self) -> bool:
        """True when the current speed or width is below the capability.

        False when either side is unknown: check the fields for None to tell
        "fine" from "could not tell". A width of 0 (lspci's ``x0``, a link
        that is down or a virtual function's) counts as below.
        """
        if self.speed_gts is not None and self.max_speed_gts is not None and self.speed_gts < self.max_speed_gts:
            return True
        return self.width is not None and self.max_width is not None and self.width < self.max_width


class PciDevice(_Model):
    """One PCI function from ``lspci -vv``.

    ``vendor`` and ``device`` are split from lspci's one description string
    by the vendor name's usual last word (Corporation, Technologies, Inc ...):
    best effort, for display; match devices by ``vendor_id``/``device_id``
    (``lspci -nn``) or by ``description``.
    """

    address: str  # domain:bus:dev.fn, lower case, e.g. 0000:3b:00.0
    class_name: str  # "3D controller"
    class_id: str | None = None  # "0302" with -nn
    description: str  # "NVIDIA Corporation Device 20b0", without (rev ..) / (prog-if ..)
    vendor: str | None = None
    device: str | None = None
    vendor_id: str | None = None  # "10de" with -nn
    device_id: str | None = None  # "20b0" with -nn, or from lspci's "Device 20b0" for a name it lacks
    revision: str | None = None  # "a1"; "ff" means the device no longer answers config reads
    subsystem: str | None = None
    physical_slot: str | None = None
    numa_node: int | None = None
    kernel_driver: str | None = None
    link: PcieLink | None = None  # None: no PCI Express capability listed (or the block was cut before it)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def downgraded(self) -> bool:
        """LnkSta speed or width below LnkCap (see :attr:`PcieLink.degraded`)."""
        return self.link is not None and self.link.degraded


def speed_to_gen(speed_gts: float | None) -> int | None:
    """2.5 -> 1, 5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6; anything else None."""
    if speed_gts is None:
        return None
    return SPEED_TO_GEN.get(float(speed_gts))


def normalise_address(text: str) -> str:
    """``3b:00.0`` / ``0000:3B:00.0`` / ``10000:00:00.0`` -> ``0000:3b:00.0`` (domain at least 4 digits)."""
    m = _ADDRESS.fullmatch(text.strip())
    if not m:
        raise ParseError(f"not a PCI address: {text!r}")
    domain, bus, dev, fn = m.groups()
    return f"{(domain or '0').lower().rjust(4, '0')}:{bus.lower()}:{dev.lower()}.{fn}"


# ------------------------------------------------------------------ lspci -vv

_ADDRESS = re.compile(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
# "0001:00:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:20b0] (rev a1)"
_HEADER = re.compile(
    r"^(?P<addr>(?:[0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^\[:]+?)(?:\s+\[(?P<cls_id>[0-9a-fA-F]{4})\])?:\s+(?P<desc>.*)$"
)
_REV = re.compile(r"\s*\(rev ([0-9a-fA-F]{2})\)")
_PROG_IF = re.compile(r"\s*\(prog-if [^()]*(?:\[[^\]]*\])?\)")
_IDS = re.compile(r"\s*\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_UNKNOWN_DEVICE = re.compile(r"\bDevice ([0-9a-fA-F]{4})$")
_SPEED = re.compile(r"\bSpeed\s+(?P<v>[\d.]+)\s*GT/s|\bSpeed\s+(?P<unknown>unknown)", re.IGNORECASE)
_WIDTH = re.compile(r"\bWidth\s+x(\d+)\b")
_EXPRESS = re.compile(r"^Capabilities:\s*\[[0-9a-fA-F]+\]\s*Express\b")
# where lspci's vendor name ends (it prints "<vendor> <device>" as one string)
_VENDOR_END = re.compile(
    r"^(.*?\b(?:Corporation|Corp\.|Technologies|Technology|Inc\.?|Co\.,? Ltd\.?|Ltd\.?|Limited|"
    r"Semiconductor|Systems|Networks|Electronics|Computer|AG|GmbH|LLC|Microsystems)"
    r"(?:,?\s+(?:Inc\.?|Corp\.?|Co\.,? Ltd\.?|Ltd\.?|LLC|GmbH|AG)\b\.?)*),?\s+(.+)$"
)
# lines lspci itself may print before the first device (when stderr was captured too)
_TOOL_NOTICE = re.compile(r"^(pcilib|lspci):")


def parse_lspci_vv(text: str) -> list[PciDevice]:
    """Every device in ``lspci -vv`` / ``-vvv`` output (``-nn``, ``-D`` optional).

    Args:
        text: the whole output.

    Returns:
        One :class:`PciDevice` per header line, in the order printed.

    Raises:
        ParseError: no device header at all (empty output, an error message,
            another tool's output), or text before the first header that is
            not a pcilib/lspci notice.
    """
    blocks = list(_blocks(text))
    if not blocks:
        raise ParseError("lspci output has no device header (expected lines like '0000:3b:00.0 3D controller: ...')")
    return [_device(header, body) for header, body in blocks]


def _blocks(text: str) -> Iterator[tuple[re.Match[str], list[str]]]:
    header: re.Match[str] | None = None
    body: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if not raw[:1].isspace():
            m = _HEADER.match(line)
            if m:
                if header is not None:
                    yield header, body
                header, body = m, []
                continue
            if header is None and _TOOL_NOTICE.match(line):
                continue
            raise ParseError(f"lspci output line {n}: not a device header: {line[:120]!r}")
        if header is None:
            raise ParseError(f"lspci output line {n}: device detail before any device header: {line.strip()[:120]!r}")
        body.append(line.strip())
    if header is not None:
        yield header, body


def _device(header: re.Match[str], body: list[str]) -> PciDevice:
    desc = header["desc"].strip()
    rev = _REV.search(desc)
    desc = _REV.sub("", desc)
    desc = _PROG_IF.sub("", desc).strip()
    vendor_id = device_id = None
    ids = _IDS.search(desc)
    if ids:
        vendor_id, device_id = ids.group(1).lower(), ids.group(2).lower()
    # names without their -nn ids ("NVIDIA Corporation Device [10de:20b0]" -> "... Device")
    names = _IDS.sub("", desc).strip()
    if device_id is None and (unk := _UNKNOWN_DEVICE.search(names)):
        device_id = unk.group(1).lower()
    vendor = device = None
    if vm := _VENDOR_END.match(names):
        vendor, device = vm.group(1).strip(), vm.group(2).strip()
    fields: dict[str, str] = {}
    link: PcieLink | None = None
    in_express = False
    cap: tuple[float | None, int | None] | None = None
    sta: tuple[float | None, int | None] | None = None
    for line in body:
        if line.startswith("Capabilities:"):
            in_express = bool(_EXPRESS.match(line))
            if in_express and link is None:
                link = PcieLink()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key in ("Subsystem", "Physical Slot", "NUMA node", "Kernel driver in use") and key not in fields:
            fields[key] = value.strip()
        elif in_express and key == "LnkCap" and cap is None:
            cap = _speed_width(value)
        elif in_express and key == "LnkSta" and sta is None:
            sta = _speed_width(value)
    if link is not None:
        link = PcieLink(
            speed_gts=sta[0] if sta else None,
            width=sta[1] if sta else None,
            max_speed_gts=cap[0] if cap else None,
            max_width=cap[1] if cap else None,
        )
    numa = fields.get("NUMA node")
    return PciDevice(
        address=normalise_address(header["addr"]),
        class_name=header["cls"].strip(),
        class_id=header["cls_id"].lower() if header["cls_id"] else None,
        description=names,
        vendor=vendor,
        device=device,
        vendor_id=vendor_id,
        device_id=device_id,
        revision=rev.group(1).lower() if rev else None,
        subsystem=fields.get("Subsystem") or None,
        physical_slot=fields.get("Physical Slot") or None,
        numa_node=int(numa) if numa and numa.lstrip("-").isdigit() else None,
        kernel_driver=fields.get("Kernel driver in use") or None,
        link=link,
    )


def _speed_width(value: str) -> tuple[float | None, int | None]:
    """``Port #0, Speed 16GT/s, Width x16, ...`` / ``Speed unknown (downgraded), Width x0 (downgraded)``."""
    speed: float | None = None
    if (m := _SPEED.search(value)) and m.group("v"):
        try:
            speed = float(m.group("v"))
        except ValueError:
            speed = None
    w = _WIDTH.search(value)
    return speed, int(w.group(1)) if w else None


# ------------------------------------------------------------------- sysfs

_SYSFS_SPEED = re.compile(r"^\s*(?P<v>\d+(?:\.\d+)?)\s*GT/s\b")


def parse_sysfs_speed(text: str) -> float | None:
    """``16.0 GT/s PCIe`` / ``8 GT/s`` / ``2.5 GT/s`` -> GT/s; ``Unknown`` / ``Unknown speed`` / empty -> None.

    Raises:
        ParseError: anything else (the caller read the wrong file).
    """
    t = text.strip()
    if not t or t.lower().startswith("unknown"):
        return None
    m = _SYSFS_SPEED.match(t)
    if not m:
        raise ParseError(f"not a PCIe link speed: {t[:60]!r} (expected e.g. '16.0 GT/s PCIe')")
    return float(m.group("v"))


def parse_sysfs_width(text: str) -> int | None:
    """``16`` / ``x16`` -> 16; empty -> None (0 stays 0: a link that is down)."""
    t = text.strip().lower().removeprefix("x")
    if not t:
        return None
    if not t.isdigit():
        raise ParseError(f"not a PCIe link width: {text.strip()[:60]!r} (expected e.g. '16')")
    return int(t)


def parse_sysfs_link(current_speed: str, current_width: str, max_speed: str, max_width: str) -> PcieLink:
    """A link from ``/sys/bus/pci/devices/<addr>/{current,max}_link_{speed,width}``.

    Args:
        current_speed: ``current_link_speed``, e.g. ``"16.0 GT/s PCIe"``.
        current_width: ``current_link_width``, e.g. ``"16"``.
        max_speed: ``max_link_speed``.
        max_width: ``max_link_width``.

    Raises:
        ParseError: a value that is not a speed or width.
    """
    return PcieLink(
        speed_gts=parse_sysfs_speed(current_speed),
        width=parse_sysfs_width(current_width),
        max_speed_gts=parse_sysfs_speed(max_speed),
        max_width=parse_sysfs_width(max_width),
    )
