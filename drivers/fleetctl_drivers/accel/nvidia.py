"""Parsers of NVIDIA tool output: nvidia-smi (CSV query, ``-q -x``), ``dcgmi diag -j``, gpu-burn, Xid lines.

Each function takes the text a tool printed and returns typed models; nothing
here runs a tool. Output that does not have the expected shape (garbage, a
capture cut short, a number where none can be read) raises
:class:`AccelParseError` naming the line or element and the field: a parser
never guesses a value. "Not available" values (``[N/A]``, ``N/A``,
``[Not Supported]``) become ``None``; nvidia-smi's bracketed read errors
(``[Unknown Error]``, ``[GPU is lost]`` ...) also become ``None`` and are kept
in ``unreadable`` so a caller sees that a GPU could not be read.

Vendor knowledge is data at module level: the CSV field table
(:data:`QUERY_FIELDS`), the field-name aliases nvidia-smi accepts
(:data:`QUERY_ALIASES`), DCGM's error ids and which of them mean a setup or
environment problem rather than a broken GPU (:data:`DCGM_ERRORS`,
:data:`DCGM_SETUP_CATEGORIES`). Assumptions are written in
``docs/accelerators.md`` ("NVIDIA").
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import enum
import json
import re
import time
import xml.etree.ElementTree as ET
import xml.parsers.expat as expat
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fleetctl import hostio
from fleetctl.interfaces.accel import (
    AccelBurnin,
    AccelDriver,
    AccelReading,
    BoardEvent,
    BoardObservation,
    BoardReading,
    BurninContext,
    Sampler,
    StageError,
    quote_argv,
)
from fleetctl.interfaces.host import HostSession
from fleetctl_drivers.accel import AccelParseError
from fleetctl_drivers.accel.pcie import PcieLink

__all__ = [
    "DCGM_ERRORS",
    "DCGM_SETUP_CATEGORIES",
    "MAX_TEXT_CHARS",
    "MAX_XML_ELEMENTS",
    "QUERY_ALIASES",
    "QUERY_FIELDS",
    "AccelParseError",
    "DiagCategory",
    "DiagEntity",
    "DiagReport",
    "DiagResult",
    "DiagStatus",
    "DiagTest",
    "DiagWarning",
    "EccCounts",
    "GpuBurnGpu",
    "GpuBurnResult",
    "GpuDetail",
    "GpuQuery",
    "XidEvent",
    "parse_dcgmi_diag",
    "parse_gpu_burn",
    "parse_query_gpu_csv",
    "parse_smi_xml",
    "parse_xid",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# nvidia-smi prints these where a value is not available (old drivers print
# them without brackets); they read as None.
NOT_A_VALUE = frozenset({"[N/A]", "N/A", "[Not Supported]", "Not Supported", ""})
# nvidia-smi prints these where reading a value failed; they read as None and
# are kept in ``unreadable`` (a lost GPU must not look like a GPU without ECC).
UNREADABLE = frozenset({"[Unknown Error]", "[GPU is lost]", "[Insufficient Permissions]", "[GPU requires reset]",
                        "Unknown Error", "GPU is lost", "Insufficient Permissions"})  # fmt: skip

# Units nvidia-smi appends to values (``45 W``); a value's unit must match the
# header's ``[W]`` when there is one.
_UNITS = frozenset({"W", "MHz", "MiB", "%", "C", "us", "KB/s", "mV", "x"})
_NUMBER = re.compile(r"^([+-]?\d+(?:\.\d+)?)(?:\s*([A-Za-z%/]+))?$")


def _number(text: str, kind: type[int] | type[float], *, unit: str | None, fail: Callable[[str], AccelParseError]) -> int | float:
    m = _NUMBER.match(text)
    if not m:
        raise fail(f"{text!r} is not a number")
    digits, found = m.group(1), m.group(2)
    if found is not None:
        if unit is not None and found != unit:
            raise fail(f"{text!r}: unit {found!r}, expected {unit!r}")
        if unit is None and found not in _UNITS:
            raise fail(f"{text!r}: unknown unit {found!r}")
    if kind is int:
        if "." in digits:
            raise fail(f"{text!r} is not a whole number")
        return int(digits)
    return float(digits)


# The most text each parser reads (characters), and the most elements an
# nvidia-smi XML may hold. A device's real answer stays far below: nvidia-smi
# -q -x is 20-70 kB and 300-1,100 elements per GPU (the recordings in
# tests/data/accel and ../shared), so ~0.5 MB and ~9,000 elements for 8 GPUs;
# dcgmi diag -j of 8 GPUs some 10-60 kB; a CSV query of 8 GPUs under 10 kB;
# gpu-burn a few hundred bytes per progress line. More is refused before it
# is parsed, so that what a host prints cannot make a parser (or the tree it
# builds) use unbounded memory; the host side bounds what it keeps as well
# (fleetctl.hostio).
MAX_TEXT_CHARS: dict[str, int] = {
    "nvidia-smi --query-gpu": 1 << 20,
    "nvidia-smi -q -x": 4 << 20,
    "dcgmi diag -j": 4 << 20,
    "gpu-burn": 32 << 20,
}
MAX_XML_ELEMENTS = 50_000


def _check_size(text: str, source: str) -> None:
    limit = MAX_TEXT_CHARS[source]
    if len(text) > limit:
        raise AccelParseError(f"{len(text)} characters, more than the {limit} any real output has: refused unread", source=source)


_YES_NO = {"yes": True, "no": False}


def _yes_no(text: str, fail: Callable[[str], AccelParseError]) -> bool:
    try:
        return _YES_NO[text.strip().lower()]
    except KeyError:
        raise fail(f"{text!r} is neither Yes nor No") from None


# ---------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv
# ---------------------------------------------------------------------------


class GpuQuery(_Model):
    """One GPU's row of ``nvidia-smi --query-gpu=... --format=csv``.

    The typed attributes are the fields of :data:`QUERY_FIELDS` that were
    queried (``None`` when not queried or not available); ``fields`` keeps
    every queried field as printed (field name without its ``[unit]``, value
    stripped of surrounding blanks, ``[N/A]`` included); ``unreadable`` maps
    fields nvidia-smi could not read to its message (``[GPU is lost]``).
    """

    line: int = Field(description="line of the text this row was read from (1-based)")
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    vbios_version: str | None = None
    timestamp: str | None = None
    pstate: str | None = None
    temperature_gpu_c: int | None = None
    temperature_memory_c: int | None = None
    power_draw_w: float | None = None
    power_draw_average_w: float | None = None
    power_draw_instant_w: float | None = None
    power_limit_w: float | None = None
    enforced_power_limit_w: float | None = None
    clocks_sm_mhz: int | None = None
    clocks_graphics_mhz: int | None = None
    clocks_memory_mhz: int | None = None
    clocks_max_sm_mhz: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilization_gpu_pct: int | None = None
    ecc_mode_current: str | None = None
    ecc_corrected_volatile_total: int | None = None
    ecc_uncorrected_volatile_total: int | None = None
    ecc_corrected_aggregate_total: int | None = None
    ecc_uncorrected_aggregate_total: int | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_link_gen_current: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_current: int | None = None
    pcie_link_width_max: int | None = None
    clocks_event_reasons_active: int | None = Field(default=None, description="bit mask (nvidia-smi prints it in hex)")
    mig_mode_current: str | None = None
    fields: dict[str, str] = Field(default_factory=dict)
    unreadable: dict[str, str] = Field(default_factory=dict)


# Field name as nvidia-smi prints it in the header (without `` [unit]``) ->
# (GpuQuery attribute, kind). Kinds: str, int, float, "bool" (Yes/No), "hex".
QUERY_FIELDS: dict[str, tuple[str, Any]] = {
    "index": ("index", int),
    "name": ("name", str),
    "uuid": ("uuid", str),
    "serial": ("serial", str),
    "pci.bus_id": ("pci_bus_id", str),
    "driver_version": ("driver_version", str),
    "vbios_version": ("vbios_version", str),
    "timestamp": ("timestamp", str),
    "pstate": ("pstate", str),
    "temperature.gpu": ("temperature_gpu_c", int),
    "temperature.memory": ("temperature_memory_c", int),
    "power.draw": ("power_draw_w", float),
    "power.draw.average": ("power_draw_average_w", float),
    "power.draw.instant": ("power_draw_instant_w", float),
    "power.limit": ("power_limit_w", float),
    "enforced.power.limit": ("enforced_power_limit_w", float),
    "clocks.current.sm": ("clocks_sm_mhz", int),
    "clocks.current.graphics": ("clocks_graphics_mhz", int),
    "clocks.current.memory": ("clocks_memory_mhz", int),
    "clocks.max.sm": ("clocks_max_sm_mhz", int),
    "memory.total": ("memory_total_mib", int),
    "memory.used": ("memory_used_mib", int),
    "utilization.gpu": ("utilization_gpu_pct", int),
    "ecc.mode.current": ("ecc_mode_current", str),
    "ecc.errors.corrected.volatile.total": ("ecc_corrected_volatile_total", int),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_volatile_total", int),
    "ecc.errors.corrected.aggregate.total": ("ecc_corrected_aggregate_total", int),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_uncorrected_aggregate_total", int),
    "retired_pages.single_bit_ecc.count": ("retired_pages_single_bit", int),
    "retired_pages.double_bit.count": ("retired_pages_double_bit", int),
    "retired_pages.pending": ("retired_pages_pending", "bool"),
    "remapped_rows.correctable": ("remapped_rows_correctable", int),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", int),
    "remapped_rows.pending": ("remapped_rows_pending", "bool"),
    "remapped_rows.failure": ("remapped_rows_failure", "bool"),
    "pcie.link.gen.current": ("pcie_link_gen_current", int),
    "pcie.link.gen.max": ("pcie_link_gen_max", int),
    "pcie.link.width.current": ("pcie_link_width_current", int),
    "pcie.link.width.max": ("pcie_link_width_max", int),
    "clocks_event_reasons.active": ("clocks_event_reasons_active", "hex"),
    "mig.mode.current": ("mig_mode_current", str),
}

# Names nvidia-smi accepts in ``--query-gpu`` but prints differently in the
# header (``nvidia-smi --help-query-gpu``), and names of older drivers. With
# ``noheader`` the caller passes the names it queried; they are read through this.
QUERY_ALIASES: dict[str, str] = {
    "clocks.sm": "clocks.current.sm",
    "clocks.gr": "clocks.current.graphics",
    "clocks.mem": "clocks.current.memory",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "retired_pages.sbe": "retired_pages.single_bit_ecc.count",
    "retired_pages.dbe": "retired_pages.double_bit.count",
    # NOTE: drivers before R535 name the clock event reasons "throttle reasons".
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "clocks_event_reasons.active": "clocks_event_reasons.active",
}

# A header item: a field name (they start lower case; values such as ``P0``,
# ``Enabled`` or ``0x1`` do not), then `` [unit]`` unless ``nounits``.
_HEADER_ITEM = re.compile(r"^([a-z_][\w.]*)(?: \[([^\]]+)\])?$")
_CSV = "nvidia-smi --query-gpu"


def _canonical(field: str) -> str:
    return QUERY_ALIASES.get(field, field)


def parse_query_gpu_csv(text: str, *, fields: Iterable[str] | None = None) -> list[GpuQuery]:
    """Read ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    Args:
        text: what nvidia-smi printed, one GPU per line after the header.
        fields: the queried field names, in order, for output printed with
            ``noheader`` (aliases such as ``clocks.sm`` are understood); leave
            it out when the text has its header line.

    Returns:
        One :class:`GpuQuery` per GPU row, in the order printed.

    Raises:
        AccelParseError: no rows; no header and no ``fields`` (or both); a row
            with the wrong number of columns; text that is not a number (or
            carries another unit) in a numeric field; not Yes/No in a Yes/No field.
    """
    _check_size(text, _CSV)
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise AccelParseError("empty output", source=_CSV)
    rows = [(n, [v.strip() for v in next(csv.reader([line], skipinitialspace=True))]) for n, line in lines]

    first_n, first = rows[0]
    looks_like_header = all(_HEADER_ITEM.match(item) for item in first)
    names: list[str]
    units: list[str | None]
    if fields is None:
        if not looks_like_header:
            raise AccelParseError("no header line (noheader output): pass fields=[...] with the queried names",
                                  source=_CSV, location=f"line {first_n}")  # fmt: skip
        parsed = [_HEADER_ITEM.match(item) for item in first]
        names = [_canonical(m.group(1)) for m in parsed if m]
        units = [m.group(2) for m in parsed if m]
        rows = rows[1:]
    else:
        names = [_canonical(f.strip()) for f in fields]
        units = [None] * len(names)
        if not names:
            raise AccelParseError("fields=[] names no field", source=_CSV)
        if looks_like_header and [_canonical(_HEADER_ITEM.match(i).group(1)) for i in first] == names:  # type: ignore[union-attr]
            raise AccelParseError("the text has a header line: do not pass fields", source=_CSV, location=f"line {first_n}")
    if not rows:
        raise AccelParseError("a header and no GPU rows (cut short?)", source=_CSV)
    return [_query_row(n, values, names, units) for n, values in rows]


def _query_row(n: int, values: list[str], names: list[str], units: list[str | None]) -> GpuQuery:
    where = f"line {n}"
    if len(values) != len(names):
        raise AccelParseError(f"{len(values)} columns, the header names {len(names)} (cut short or wrong fields?)",
                              source=_CSV, location=where)  # fmt: skip
    attrs: dict[str, Any] = {"line": n, "fields": dict(zip(names, values, strict=True)), "unreadable": {}}
    for name, unit, value in zip(names, units, values, strict=True):
        known = QUERY_FIELDS.get(name)
        if known is None:
            continue
        attr, kind = known

        def fail(msg: str, name: str = name) -> AccelParseError:
            return AccelParseError(msg, source=_CSV, location=where, field=name)

        if value in NOT_A_VALUE:
            continue
        if value in UNREADABLE:
            attrs["unreadable"][name] = value
            continue
        if kind is str:
            attrs[attr] = value
        elif kind == "bool":
            attrs[attr] = _yes_no(value, fail)
        elif kind == "hex":
            try:
                attrs[attr] = int(value, 16)
            except ValueError:
                raise fail(f"{value!r} is not a hex number") from None
        else:
            attrs[attr] = _number(value, kind, unit=unit, fail=fail)
    return GpuQuery(**attrs)


# ---------------------------------------------------------------------------
# nvidia-smi -q -x
# ---------------------------------------------------------------------------


class EccCounts(_Model):
    """ECC error counts of one kind (volatile: since the driver loaded; aggregate: lifetime).

    Ampere and newer report SRAM and DRAM counts; older GPUs report single-bit
    (correctable) and double-bit (uncorrectable) totals. ``correctable`` and
    ``uncorrectable`` are the totals from whichever the GPU reports.
    """

    correctable: int | None = None
    uncorrectable: int | None = None
    sram_correctable: int | None = None
    sram_uncorrectable: int | None = None
    dram_correctable: int | None = None
    dram_uncorrectable: int | None = None
    single_bit_total: int | None = None
    double_bit_total: int | None = None


class GpuDetail(_Model):
    """One ``<gpu>`` of ``nvidia-smi -q -x``; a missing or ``N/A`` element is ``None``."""

    pci_bus_id: str
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    minor_number: int | None = None
    vbios_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    pstate: str | None = None
    mig_mode_current: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    temperature_gpu_c: int | None = None
    temperature_memory_c: int | None = None
    temperature_slowdown_c: int | None = Field(default=None, description="gpu_temp_slow_threshold")
    temperature_shutdown_c: int | None = Field(default=None, description="gpu_temp_max_threshold")
    temperature_max_gpu_c: int | None = Field(default=None, description="gpu_temp_max_gpu_threshold")
    temperature_max_memory_c: int | None = Field(default=None, description="gpu_temp_max_mem_threshold")
    power_draw_w: float | None = Field(default=None, description="<power_draw>; from DTD v13 on, the average (else instant) draw")
    power_draw_average_w: float | None = Field(default=None, description="<average_power_draw> (DTD v12 of R535 on, v13)")
    power_draw_instant_w: float | None = Field(default=None, description="<instant_power_draw> (DTD v12 of R535 on, v13)")
    power_limit_w: float | None = None
    clocks_graphics_mhz: int | None = None
    clocks_sm_mhz: int | None = None
    clocks_memory_mhz: int | None = None
    clocks_max_sm_mhz: int | None = None
    ecc_mode_current: str | None = None
    ecc_volatile: EccCounts | None = None
    ecc_aggregate: EccCounts | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_link_gen_current: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_current: int | None = None
    pcie_link_width_max: int | None = None
    pcie_replay_counter: int | None = None
    unreadable: dict[str, str] = Field(default_factory=dict)


_XML = "nvidia-smi -q -x"
# Where the board's power draw is, first found wins: <power_draw> (before R530 under <power_readings>), then DTD
# v13's average, then its instant reading.
_POWER_DRAW = ["gpu_power_readings/power_draw", "power_readings/power_draw", "gpu_power_readings/average_power_draw",
               "gpu_power_readings/instant_power_draw"]  # fmt: skip


def _refuse_internal_subset(_name: str, _sysid: str | None, _pubid: str | None, has_internal_subset: bool) -> None:
    if has_internal_subset:
        raise ValueError("a DOCTYPE with an internal subset is refused (it can declare entities)")


def _refuse_entity(*_args: Any) -> None:
    raise ValueError("an ENTITY declaration is refused")


def _safe_xml(text: str, source: str) -> ET.Element:
    """Parse ``text``, refusing DTD internal subsets and entity declarations (entity expansion attacks).

    A DOCTYPE naming an external DTD, as nvidia-smi prints (``<!DOCTYPE
    nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">``), is fine: expat never
    fetches it. defusedxml is not a dependency, so expat is asked directly
    first, then ElementTree builds the tree. The first pass also counts the
    elements: more than :data:`MAX_XML_ELEMENTS` is refused before a tree is
    built (a tree costs some hundred bytes per element).
    """
    _check_size(text, source)
    check = expat.ParserCreate()
    check.StartDoctypeDeclHandler = _refuse_internal_subset
    check.EntityDeclHandler = _refuse_entity
    elements = 0

    def count(_name: str, _attrs: Any) -> None:
        nonlocal elements
        elements += 1
        if elements > MAX_XML_ELEMENTS:
            raise ValueError(f"more than {MAX_XML_ELEMENTS} elements, more than any real output has: refused")

    check.StartElementHandler = count
    try:
        check.Parse(text, True)
        return ET.fromstring(text)
    except (expat.ExpatError, ET.ParseError) as e:
        raise AccelParseError(f"not well-formed XML ({e}; cut short?)", source=source) from e
    except ValueError as e:
        raise AccelParseError(str(e), source=source) from e


def parse_smi_xml(text: str, *, expect_all: bool = True) -> list[GpuDetail]:
    """Read ``nvidia-smi -q -x``.

    Args:
        text: the XML nvidia-smi printed.
        expect_all: refuse output with fewer ``<gpu>`` elements than its
            ``<attached_gpus>`` says (a GPU missing from the report must not
            pass unseen); pass False for a capture trimmed on purpose.

    Returns:
        One :class:`GpuDetail` per ``<gpu>``, in document order.

    Raises:
        AccelParseError: not XML, cut short, entity declarations, not an
            ``nvidia_smi_log``, no GPU, a count that does not match, or a value
            that is not a number where one is expected.
    """
    root = _safe_xml(text, _XML)
    if root.tag != "nvidia_smi_log":
        raise AccelParseError(f"root element <{root.tag}>, expected <nvidia_smi_log>", source=_XML)
    gpus = root.findall("gpu")
    if not gpus:
        raise AccelParseError("no <gpu> element", source=_XML)
    attached = _text(root, "attached_gpus")
    if expect_all and attached is not None and attached.isdigit() and int(attached) != len(gpus):
        raise AccelParseError(f"attached_gpus says {attached}, the report has {len(gpus)} <gpu> elements", source=_XML)
    driver, cuda = _text(root, "driver_version"), _text(root, "cuda_version")
    return [_gpu_detail(gpu, driver, cuda) for gpu in gpus]


def _text(el: ET.Element, path: str) -> str | None:
    found = el.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _gpu_detail(gpu: ET.Element, driver: str | None, cuda: str | None) -> GpuDetail:
    bus_id = gpu.get("id") or _text(gpu, "pci/pci_bus_id")
    if not bus_id:
        raise AccelParseError("a <gpu> without a PCI bus id", source=_XML)
    where = f"gpu {bus_id}"
    unreadable: dict[str, str] = {}

    def value(path: str) -> str | None:
        raw = _text(gpu, path)
        if raw is None or raw in NOT_A_VALUE:
            return None
        if raw in UNREADABLE:
            unreadable[path] = raw
            return None
        return raw

    def num(path: str, kind: type[int] | type[float], unit: str | None) -> Any:
        raw = value(path)
        if raw is None:
            return None

        def fail(msg: str) -> AccelParseError:
            return AccelParseError(msg, source=_XML, location=where, field=path)

        return _number(raw, kind, unit=unit, fail=fail)

    def yes_no(path: str) -> bool | None:
        raw = value(path)
        if raw is None:
            return None
        return _yes_no(raw, lambda msg: AccelParseError(msg, source=_XML, location=where, field=path))

    def first_num(paths: list[str], kind: type[int] | type[float], unit: str | None) -> Any:
        for p in paths:
            got = num(p, kind, unit)
            if got is not None:
                return got
        return None

    def ecc(kind: str) -> EccCounts | None:
        base = f"ecc_errors/{kind}"
        if gpu.find(base) is None:
            return None
        c = {
            "sram_correctable": num(f"{base}/sram_correctable", int, None),
            "sram_uncorrectable": num(f"{base}/sram_uncorrectable", int, None),
            "dram_correctable": num(f"{base}/dram_correctable", int, None),
            "dram_uncorrectable": num(f"{base}/dram_uncorrectable", int, None),
            "single_bit_total": num(f"{base}/single_bit/total", int, None),
            "double_bit_total": num(f"{base}/double_bit/total", int, None),
        }

        def total(*keys: str) -> int | None:
            got = [c[k] for k in keys if c[k] is not None]
            return sum(got) if got else None

        return EccCounts(correctable=total("sram_correctable", "dram_correctable", "single_bit_total"),
                         uncorrectable=total("sram_uncorrectable", "dram_uncorrectable", "double_bit_total"), **c)  # fmt: skip

    links = "pci/pci_gpu_link_info"
    detail = GpuDetail(
        pci_bus_id=bus_id,
        name=value("product_name"),
        uuid=value("uuid"),
        serial=value("serial"),
        minor_number=num("minor_number", int, None),
        vbios_version=value("vbios_version"),
        driver_version=driver,
        cuda_version=cuda,
        pstate=value("performance_state"),
        mig_mode_current=value("mig_mode/current_mig"),
        memory_total_mib=num("fb_memory_usage/total", int, "MiB"),
        memory_used_mib=num("fb_memory_usage/used", int, "MiB"),
        temperature_gpu_c=num("temperature/gpu_temp", int, "C"),
        temperature_memory_c=num("temperature/memory_temp", int, "C"),
        temperature_slowdown_c=num("temperature/gpu_temp_slow_threshold", int, "C"),
        temperature_shutdown_c=num("temperature/gpu_temp_max_threshold", int, "C"),
        temperature_max_gpu_c=num("temperature/gpu_temp_max_gpu_threshold", int, "C"),
        temperature_max_memory_c=num("temperature/gpu_temp_max_mem_threshold", int, "C"),
        # NOTE: drivers before R530 report <power_readings>; later ones <gpu_power_readings>. DTD v13 (R590 on, and the
        # R595 recordings in tests/data/accel) has no <power_draw>: only <average_power_draw> and <instant_power_draw>.
        # power_draw_w is then the average, as --query-gpu's power.draw is on Ampere and newer (a 1 s average).
        power_draw_w=first_num(_POWER_DRAW, float, "W"),
        power_draw_average_w=num("gpu_power_readings/average_power_draw", float, "W"),
        power_draw_instant_w=num("gpu_power_readings/instant_power_draw", float, "W"),
        power_limit_w=first_num(["gpu_power_readings/current_power_limit", "power_readings/power_limit"], float, "W"),
        clocks_graphics_mhz=num("clocks/graphics_clock", int, "MHz"),
        clocks_sm_mhz=num("clocks/sm_clock", int, "MHz"),
        clocks_memory_mhz=num("clocks/mem_clock", int, "MHz"),
        clocks_max_sm_mhz=num("max_clocks/sm_clock", int, "MHz"),
        ecc_mode_current=value("ecc_mode/current_ecc"),
        ecc_volatile=ecc("volatile"),
        ecc_aggregate=ecc("aggregate"),
        retired_pages_single_bit=num("retired_pages/multiple_single_bit_retirement/retired_count", int, None),
        retired_pages_double_bit=num("retired_pages/double_bit_retirement/retired_count", int, None),
        retired_pages_pending=yes_no("retired_pages/pending_retirement"),
        # Old drivers and GPUs before Ampere print <remapped_rows>N/A</remapped_rows>: all None.
        remapped_rows_correctable=num("remapped_rows/remapped_row_corr", int, None),
        remapped_rows_uncorrectable=num("remapped_rows/remapped_row_unc", int, None),
        remapped_rows_pending=yes_no("remapped_rows/remapped_row_pending"),
        remapped_rows_failure=yes_no("remapped_rows/remapped_row_failure"),
        pcie_link_gen_current=num(f"{links}/pcie_gen/current_link_gen", int, None),
        pcie_link_gen_max=num(f"{links}/pcie_gen/max_link_gen", int, None),
        pcie_link_width_current=num(f"{links}/link_widths/current_link_width", int, "x"),
        pcie_link_width_max=num(f"{links}/link_widths/max_link_width", int, "x"),
        pcie_replay_counter=num("pci/replay_counter", int, None),
        unreadable=unreadable,
    )
    return detail


# ---------------------------------------------------------------------------
# dcgmi diag -r N -j
# ---------------------------------------------------------------------------


class DiagStatus(enum.StrEnum):
    """A DCGM diagnostic result; a status this table does not know is UNKNOWN (never a pass)."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    NOT_RUN = "not run"
    UNKNOWN = "unknown"


_DIAG_STATUS = {"pass": DiagStatus.PASS, "fail": DiagStatus.FAIL, "warn": DiagStatus.WARN, "warning": DiagStatus.WARN,
                "skip": DiagStatus.SKIP, "skipped": DiagStatus.SKIP, "not run": DiagStatus.NOT_RUN}  # fmt: skip

# DCGM's error ids (dcgm_errors.h, dcgmError_t) -> (name, setup). ``setup`` is
# True where the id says the diagnostic could not run as it should because of
# the host, the software or how it was called, not because the GPU is broken:
# rerun after fixing the setup instead of pulling the board.
DCGM_ERRORS: dict[int, tuple[str, bool]] = {
    0: ("DCGM_FR_OK", False), 1: ("DCGM_FR_UNKNOWN", False), 2: ("DCGM_FR_UNRECOGNIZED", False),
    3: ("DCGM_FR_PCI_REPLAY_RATE", False), 4: ("DCGM_FR_VOLATILE_DBE_DETECTED", False),
    5: ("DCGM_FR_VOLATILE_SBE_DETECTED", False), 6: ("DCGM_FR_PENDING_PAGE_RETIREMENTS", False),
    7: ("DCGM_FR_RETIRED_PAGES_LIMIT", False), 8: ("DCGM_FR_RETIRED_PAGES_DBE_LIMIT", False),
    9: ("DCGM_FR_CORRUPT_INFOROM", False), 10: ("DCGM_FR_CLOCK_THROTTLE_THERMAL", False),
    11: ("DCGM_FR_POWER_UNREADABLE", False), 12: ("DCGM_FR_CLOCK_THROTTLE_POWER", False),
    13: ("DCGM_FR_NVLINK_ERROR_THRESHOLD", False), 14: ("DCGM_FR_NVLINK_DOWN", False),
    15: ("DCGM_FR_NVSWITCH_FATAL_ERROR", False), 16: ("DCGM_FR_NVSWITCH_NON_FATAL_ERROR", False),
    17: ("DCGM_FR_NVSWITCH_DOWN", False),
    18: ("DCGM_FR_NO_ACCESS_TO_FILE", True),  # a file DCGM needs cannot be read
    19: ("DCGM_FR_NVML_API", True),  # an NVML call failed (deprecated)
    20: ("DCGM_FR_DEVICE_COUNT_MISMATCH", False),  # /dev and NVML disagree: may be a GPU fallen off the bus
    21: ("DCGM_FR_BAD_PARAMETER", True),
    22: ("DCGM_FR_CANNOT_OPEN_LIB", True),
    23: ("DCGM_FR_DENYLISTED_DRIVER", True),  # nouveau loaded
    24: ("DCGM_FR_NVML_LIB_BAD", True),
    25: ("DCGM_FR_GRAPHICS_PROCESSES", True),  # something else runs on the GPU
    26: ("DCGM_FR_HOSTENGINE_CONN", True),
    27: ("DCGM_FR_FIELD_QUERY", True),
    28: ("DCGM_FR_BAD_CUDA_ENV", True),  # environment variables that hurt CUDA
    29: ("DCGM_FR_PERSISTENCE_MODE", True),
    30: ("DCGM_FR_LOW_BANDWIDTH", False), 31: ("DCGM_FR_HIGH_LATENCY", False),
    32: ("DCGM_FR_CANNOT_GET_FIELD_TAG", True),
    33: ("DCGM_FR_FIELD_VIOLATION", False), 34: ("DCGM_FR_FIELD_THRESHOLD", False),
    35: ("DCGM_FR_FIELD_VIOLATION_DBL", False), 36: ("DCGM_FR_FIELD_THRESHOLD_DBL", False),
    37: ("DCGM_FR_UNSUPPORTED_FIELD_TYPE", True),
    38: ("DCGM_FR_FIELD_THRESHOLD_TS", False), 39: ("DCGM_FR_FIELD_THRESHOLD_TS_DBL", False),
    40: ("DCGM_FR_THERMAL_VIOLATIONS", False), 41: ("DCGM_FR_THERMAL_VIOLATIONS_TS", False),
    42: ("DCGM_FR_TEMP_VIOLATION", False), 43: ("DCGM_FR_THROTTLING_VIOLATION", False),
    44: ("DCGM_FR_INTERNAL", True),  # DCGM's own error
    45: ("DCGM_FR_PCIE_GENERATION", False), 46: ("DCGM_FR_PCIE_WIDTH", False),
    47: ("DCGM_FR_ABORTED", True),  # stopped by a signal
    48: ("DCGM_FR_TEST_DISABLED", True),
    49: ("DCGM_FR_CANNOT_GET_STAT", True),
    50: ("DCGM_FR_STRESS_LEVEL", False), 51: ("DCGM_FR_CUDA_API", False), 52: ("DCGM_FR_FAULTY_MEMORY", False),
    53: ("DCGM_FR_CANNOT_SET_WATCHES", True),
    54: ("DCGM_FR_CUDA_UNBOUND", False),
    55: ("DCGM_FR_ECC_DISABLED", True),  # a configuration: turn ECC on and rerun
    56: ("DCGM_FR_MEMORY_ALLOC", False), 57: ("DCGM_FR_CUDA_DBE", False), 58: ("DCGM_FR_MEMORY_MISMATCH", False),
    59: ("DCGM_FR_CUDA_DEVICE", False),
    60: ("DCGM_FR_ECC_UNSUPPORTED", True),  # this SKU has no ECC: the test does not apply
    61: ("DCGM_FR_ECC_PENDING", True),
    62: ("DCGM_FR_MEMORY_BANDWIDTH", False), 63: ("DCGM_FR_TARGET_POWER", False),
    64: ("DCGM_FR_API_FAIL", True),
    65: ("DCGM_FR_API_FAIL_GPU", False),  # an API failed for one GPU: that GPU may be the cause
    66: ("DCGM_FR_CUDA_CONTEXT", False),
    67: ("DCGM_FR_DCGM_API", True),
    68: ("DCGM_FR_CONCURRENT_GPUS", True),  # needs more GPUs than were given
    69: ("DCGM_FR_TOO_MANY_ERRORS", False), 70: ("DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", False),
    71: ("DCGM_FR_NVLINK_ERROR_CRITICAL", False),
    72: ("DCGM_FR_ENFORCED_POWER_LIMIT", True),  # the power limit was set too low to reach the target
    73: ("DCGM_FR_MEMORY_ALLOC_HOST", True),
    74: ("DCGM_FR_GPU_OP_MODE", True), 75: ("DCGM_FR_NO_MEMORY_CLOCKS", True), 76: ("DCGM_FR_NO_GRAPHICS_CLOCKS", True),
    77: ("DCGM_FR_HAD_TO_RESTORE_STATE", False),
    78: ("DCGM_FR_L1TAG_UNSUPPORTED", True),
    79: ("DCGM_FR_L1TAG_MISCOMPARE", False), 80: ("DCGM_FR_ROW_REMAP_FAILURE", False),
    81: ("DCGM_FR_UNCONTAINED_ERROR", False),
    82: ("DCGM_FR_EMPTY_GPU_LIST", True),
    83: ("DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS", False), 84: ("DCGM_FR_UNCORRECTABLE_ROW_REMAP", False),
    85: ("DCGM_FR_PENDING_ROW_REMAP", False), 86: ("DCGM_FR_BROKEN_P2P_MEMORY_DEVICE", False),
    87: ("DCGM_FR_BROKEN_P2P_WRITER_DEVICE", False), 88: ("DCGM_FR_NVSWITCH_NVLINK_DOWN", False),
    89: ("DCGM_FR_EUD_BINARY_PERMISSIONS", True), 90: ("DCGM_FR_EUD_NON_ROOT_USER", True),
    91: ("DCGM_FR_EUD_SPAWN_FAILURE", True), 92: ("DCGM_FR_EUD_TIMEOUT", False), 93: ("DCGM_FR_EUD_ZOMBIE", True),
    94: ("DCGM_FR_EUD_NON_ZERO_EXIT_CODE", False), 95: ("DCGM_FR_EUD_TEST_FAILED", False),
    96: ("DCGM_FR_FILE_CREATE_PERMISSIONS", True),
    97: ("DCGM_FR_PAUSE_RESUME_FAILED", True),
    98: ("DCGM_FR_PCIE_H_REPLAY_VIOLATION", False), 99: ("DCGM_FR_GPU_EXPECTED_NVLINKS_UP", False),
    100: ("DCGM_FR_NVSWITCH_EXPECTED_NVLINKS_UP", False), 101: ("DCGM_FR_XID_ERROR", False),
    102: ("DCGM_FR_SBE_VIOLATION", False), 103: ("DCGM_FR_DBE_VIOLATION", False),
    104: ("DCGM_FR_PCIE_REPLAY_VIOLATION", False), 105: ("DCGM_FR_SBE_THRESHOLD_VIOLATION", False),
    106: ("DCGM_FR_DBE_THRESHOLD_VIOLATION", False), 107: ("DCGM_FR_PCIE_REPLAY_THRESHOLD_VIOLATION", False),
    108: ("DCGM_FR_CUDA_FM_NOT_INITIALIZED", True),  # the fabric manager is not running
    109: ("DCGM_FR_SXID_ERROR", False), 110: ("DCGM_FR_GFLOPS_THRESHOLD_VIOLATION", False),
    111: ("DCGM_FR_NAN_VALUE", False),
}  # fmt: skip

# DCGM error categories (dcgmErrorCategory_t) that mean setup for an error id
# newer than the table above: 3 software configuration, 4 software library.
DCGM_SETUP_CATEGORIES = frozenset({3, 4})


class DiagWarning(_Model):
    """One warning (error) DCGM attached to a result; ids are absent in older DCGM output."""

    message: str
    error_id: int | None = None
    error_name: str | None = Field(default=None, description="DCGM_FR_* name of error_id, when known")
    error_category: int | None = None
    error_severity: int | None = None
    setup_error: bool = Field(default=False, description="the id (or, for an unknown id, the category) says setup, not the GPU")


class DiagResult(_Model):
    """A test's result for one entity (a GPU), or for the whole run when ``entity_id`` is None."""

    status: DiagStatus
    status_text: str
    entity_group: str | None = None
    entity_id: int | None = None
    gpu_ids: list[int] = Field(default_factory=list, description="older DCGM: the GPUs the result covers")
    warnings: list[DiagWarning] = Field(default_factory=list)
    info: list[str] = Field(default_factory=list)
    setup_error: bool = Field(default=False, description="failed, and every warning is a setup error")


class DiagTest(_Model):
    """One test (``PCIe``, ``Memory Bandwidth`` ...) with its results."""

    name: str
    results: list[DiagResult]
    summary_status: DiagStatus | None = None


class DiagCategory(_Model):
    """A category of tests (``Deployment``, ``Integration``, ``Hardware``, ``Stress``)."""

    name: str
    tests: list[DiagTest]


class DiagEntity(_Model):
    """An entity the diagnostic ran on (DCGM 4's ``entity_groups``)."""

    entity_group: str | None
    entity_group_id: int | None
    entity_id: int
    serial: str | None = None
    device_id: str | None = None


class DiagReport(_Model):
    """What ``dcgmi diag -j`` printed: categories of tests, the entities, and a runtime error if any."""

    legacy: bool = Field(description="the pre-4.0 shape ('DCGM GPU Diagnostic', gpu_ids)")
    version: str | None = None
    driver_version: str | None = None
    runtime_error: str | None = Field(default=None, description="the diagnostic did not run; no categories then")
    categories: list[DiagCategory] = Field(default_factory=list)
    entities: list[DiagEntity] = Field(default_factory=list)
    preamble: str | None = Field(default=None, description="text printed before the JSON document (skipped, as DCGM's own reader does)")

    @property
    def results(self) -> list[tuple[str, str, DiagResult]]:
        """Every result as (category, test, result)."""
        return [(c.name, t.name, r) for c in self.categories for t in c.tests for r in t.results]

    @property
    def failures(self) -> list[tuple[str, str, DiagResult]]:
        """The results that failed."""
        return [x for x in self.results if x[2].status is DiagStatus.FAIL]

    def serial_of(self, entity_id: int, group: str = "GPU") -> str | None:
        """The serial number of entity ``entity_id`` of ``group``, when the output gives it."""
        for e in self.entities:
            if e.entity_id == entity_id and (e.entity_group or "GPU") == group:
                return e.serial
        return None


_DIAG = "dcgmi diag -j"


# The JSON document starts at the first line that opens an object; DCGM's own
# reader (nvvs/include/JsonResult.hpp, DCGM 3.x) skips what comes before it.
_JSON_START = re.compile(r"^[ \t]*\{", re.M)


def parse_dcgmi_diag(text: str) -> DiagReport:
    """Read ``dcgmi diag -r N -j`` (DCGM 4's ``DCGM Diagnostic`` or the older ``DCGM GPU Diagnostic``).

    What DCGM's own reader tolerates is tolerated here: ``null`` in place of
    a category, test, result, warning or info (DCGM 3.x's dcgmi fills its
    lists by index, so a test it did not run is a ``null`` between tests),
    ``gpu_ids`` as a number or as ``"0,1"``, and lines printed before the
    document. DCGM 3.x's ``GPU Device Serials`` (GPU id -> serial) are read
    as GPU entities, as DCGM 4's ``entity_groups`` are.

    Returns:
        A :class:`DiagReport`; a status it does not know is
        :attr:`DiagStatus.UNKNOWN` (``status_text`` keeps it).

    Raises:
        AccelParseError: not JSON (garbage, cut short), more text than any
            real output (:data:`MAX_TEXT_CHARS`), neither known top-level key,
            or a part of the wrong type.
    """
    _check_size(text, _DIAG)
    preamble = None
    start = _JSON_START.search(text)
    if start is not None and start.start() > 0:
        preamble, text = text[: start.start()].strip() or None, text[start.start() :]
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise AccelParseError(f"not JSON ({e.msg}; cut short?)", source=_DIAG, location=f"line {e.lineno}") from e
    except RecursionError as e:  # nesting deeper than any real document: refused, not a crash
        raise AccelParseError("nested deeper than any real output: refused", source=_DIAG) from e
    if not isinstance(doc, dict):
        raise AccelParseError("the top level is not an object", source=_DIAG)
    if "DCGM Diagnostic" in doc:
        body, legacy = doc["DCGM Diagnostic"], False
    elif "DCGM GPU Diagnostic" in doc:
        body, legacy = doc["DCGM GPU Diagnostic"], True
    else:
        raise AccelParseError("neither 'DCGM Diagnostic' nor 'DCGM GPU Diagnostic' at the top level", source=_DIAG)
    body = _obj(body, "DCGM Diagnostic")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else body.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    version = meta.get("version", body.get("version"))
    driver = meta.get("Driver Version Detected", body.get("Driver Version Detected"))
    runtime_error = body.get("runtime_error", doc.get("runtime_error"))
    if "test_categories" not in body:
        if runtime_error is None:
            raise AccelParseError("no test_categories and no runtime_error", source=_DIAG)
        cats: list[Any] = []
    else:
        cats = _list(body["test_categories"], "test_categories")
    groups = doc.get("entity_groups", body.get("entity_groups", []))
    entities = _diag_entities(groups)
    if not entities and isinstance(body.get("GPU Device Serials"), dict):
        entities = [DiagEntity(entity_group="GPU", entity_group_id=None, entity_id=gid, serial=str(serial) if serial else None)
                    for key, serial in body["GPU Device Serials"].items()
                    if (gid := _opt_int(key, "GPU Device Serials")) is not None]  # fmt: skip
    return DiagReport(
        legacy=legacy,
        version=None if version is None else str(version),
        driver_version=None if driver is None else str(driver),
        runtime_error=None if runtime_error is None else str(runtime_error),
        categories=[_diag_category(c, i) for i, c in enumerate(cats) if c is not None],
        entities=entities,
        preamble=preamble,
    )


def _obj(x: Any, where: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise AccelParseError(f"expected an object, got {type(x).__name__}", source=_DIAG, location=where)
    return x


def _list(x: Any, where: str) -> list[Any]:
    if not isinstance(x, list):
        raise AccelParseError(f"expected a list, got {type(x).__name__}", source=_DIAG, location=where)
    return x


def _opt_int(x: Any, where: str) -> int | None:
    if x is None or x == "":
        return None
    if isinstance(x, bool):
        raise AccelParseError(f"{x!r} is not a number", source=_DIAG, location=where)
    if isinstance(x, int):
        return x
    if isinstance(x, str) and x.strip().lstrip("-").isdigit():
        return int(x)
    raise AccelParseError(f"{x!r} is not a number", source=_DIAG, location=where)


def _status(text: Any, where: str) -> tuple[DiagStatus, str]:
    if not isinstance(text, str):
        raise AccelParseError(f"status {text!r} is not text", source=_DIAG, location=where)
    return _DIAG_STATUS.get(text.strip().lower(), DiagStatus.UNKNOWN), text


def _diag_category(c: Any, i: int) -> DiagCategory:
    where = f"test_categories[{i}]"
    c = _obj(c, where)
    name = str(c.get("category", ""))
    tests = _list(c.get("tests", []), f"{where}.tests")
    return DiagCategory(name=name, tests=[_diag_test(t, f"{where}.tests[{j}]") for j, t in enumerate(tests) if t is not None])


def _diag_test(t: Any, where: str) -> DiagTest:
    t = _obj(t, where)
    if "name" not in t:
        raise AccelParseError("a test without a name", source=_DIAG, location=where)
    results = _list(t.get("results", []), f"{where}.results")
    summary = t.get("test_summary")
    summary_status = _status(summary["status"], f"{where}.test_summary")[0] if isinstance(summary, dict) and "status" in summary else None
    return DiagTest(name=str(t["name"]), results=[_diag_result(r, f"{where}.results[{k}]") for k, r in enumerate(results) if r is not None],
                    summary_status=summary_status)  # fmt: skip


def _diag_result(r: Any, where: str) -> DiagResult:
    r = _obj(r, where)
    if "status" not in r:
        raise AccelParseError("a result without a status", source=_DIAG, location=where)
    status, status_text = _status(r["status"], where)
    gpu_ids: list[int] = []
    raw_ids = r.get("gpu_ids", r.get("gpu_id"))
    if isinstance(raw_ids, str):
        gpu_ids = [i for i in (_opt_int(x.strip(), f"{where}.gpu_ids") for x in raw_ids.split(",")) if i is not None]
    elif isinstance(raw_ids, int) and not isinstance(raw_ids, bool):
        gpu_ids = [raw_ids]
    elif isinstance(raw_ids, list):
        gpu_ids = [i for i in (_opt_int(x, f"{where}.gpu_ids") for x in raw_ids) if i is not None]
    elif raw_ids is not None:
        raise AccelParseError(f"gpu_ids {raw_ids!r} is not a list of GPU ids", source=_DIAG, location=where)
    entity_id = _opt_int(r.get("entity_id"), f"{where}.entity_id")
    if entity_id is None and len(gpu_ids) == 1:
        entity_id = gpu_ids[0]
    group = r.get("entity_group")
    if group is None and (entity_id is not None or gpu_ids):
        group = "GPU"  # the older output names GPUs only
    warnings = [_diag_warning(w, f"{where}.warnings[{n}]") for n, w in enumerate(_as_list(r.get("warnings")))]
    info = [str(x) for x in _as_list(r.get("info"))]
    setup = status is DiagStatus.FAIL and bool(warnings) and all(w.setup_error for w in warnings)
    return DiagResult(status=status, status_text=status_text, entity_group=None if group is None else str(group),
                      entity_id=entity_id, gpu_ids=gpu_ids, warnings=warnings, info=info, setup_error=setup)  # fmt: skip


def _as_list(x: Any) -> list[Any]:
    """A list of what is there: ``null`` (the whole or an item) is nothing, one value a list of one."""
    if x is None:
        return []
    return [i for i in x if i is not None] if isinstance(x, list) else [x]


def _diag_warning(w: Any, where: str) -> DiagWarning:
    if isinstance(w, str):
        return DiagWarning(message=w)
    w = _obj(w, where)
    error_id = _opt_int(w.get("error_id"), f"{where}.error_id")
    category = _opt_int(w.get("error_category"), f"{where}.error_category")
    known = DCGM_ERRORS.get(error_id) if error_id is not None else None
    setup = known[1] if known is not None else category in DCGM_SETUP_CATEGORIES
    return DiagWarning(message=str(w.get("warning", w.get("message", ""))), error_id=error_id,
                       error_name=known[0] if known else None, error_category=category,
                       error_severity=_opt_int(w.get("error_severity"), f"{where}.error_severity"), setup_error=setup)  # fmt: skip


def _diag_entities(groups: Any) -> list[DiagEntity]:
    out: list[DiagEntity] = []
    for i, g in enumerate(_list(groups, "entity_groups")):
        if g is None:
            continue
        g = _obj(g, f"entity_groups[{i}]")
        for j, e in enumerate(_list(g.get("entities", []), f"entity_groups[{i}].entities")):
            if e is None:
                continue
            e = _obj(e, f"entity_groups[{i}].entities[{j}]")
            eid = _opt_int(e.get("entity_id"), f"entity_groups[{i}].entities[{j}].entity_id")
            if eid is None:
                raise AccelParseError("an entity without entity_id", source=_DIAG, location=f"entity_groups[{i}].entities[{j}]")
            serial = e.get("serial_num")
            out.append(DiagEntity(entity_group=None if g.get("entity_group") is None else str(g["entity_group"]),
                                  entity_group_id=_opt_int(g.get("entity_group_id"), f"entity_groups[{i}].entity_group_id"),
                                  entity_id=eid, serial=str(serial) if serial not in (None, "") else None,
                                  device_id=None if e.get("device_id") in (None, "") else str(e["device_id"])))  # fmt: skip
    return out


# ---------------------------------------------------------------------------
# gpu-burn
# ---------------------------------------------------------------------------


class GpuBurnGpu(_Model):
    """One GPU's outcome in a gpu-burn run."""

    index: int
    ok: bool = Field(description="the final verdict: OK (True) or FAULTY (False)")
    name: str | None = None
    uuid: str | None = None
    max_errors: int | None = Field(default=None, description="the most compute errors any progress line showed")
    gflops_last: float | None = Field(default=None, description="Gflop/s in the last progress line")
    gflops_max: float | None = None
    max_temp_c: int | None = None
    died: bool = Field(default=False, description="a progress line marked the GPU (DIED!)")


class GpuBurnResult(_Model):
    """A gpu-burn run: gpu-burn exits 0 even when a GPU is FAULTY, so this is the verdict."""

    gpus: list[GpuBurnGpu]

    @property
    def ok(self) -> bool:
        """Every GPU OK, none died, none with errors."""
        return all(g.ok and not g.died and not g.max_errors for g in self.gpus)


_BURN = "gpu-burn"
_BURN_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
_BURN_TESTED = re.compile(r"^Tested (\d+) GPUs?:\s*$")
_BURN_VERDICT = re.compile(r"^\s*GPU (\d+): (\S+)\s*$")
_BURN_PROGRESS = re.compile(r"proc'd:\s*(?P<procd>.*?)\s+errors:\s*(?P<errors>.*?)(?:\s+temps:\s*(?P<temps>.*?))?\s*$")
_BURN_PROCD = re.compile(r"^(\d+) \((\d+(?:\.\d+)?) Gflop/s\)$")
_BURN_ERRORS = re.compile(r"^(\d+)(\s*\(DIED!\))?$")
_BURN_TEMP = re.compile(r"^(\d+) C$")
_BURN_VERDICTS = {"OK": True, "FAULTY": False}


def parse_gpu_burn(text: str) -> GpuBurnResult:
    """Read what gpu-burn printed (progress lines, ``\\r``-separated or not, then ``Tested N GPUs:``).

    Returns:
        A :class:`GpuBurnResult` with one :class:`GpuBurnGpu` per tested GPU.

    Raises:
        AccelParseError: no ``Tested N GPUs:`` line or fewer verdicts than N
            (a run cut short), a verdict other than OK/FAULTY, or a progress
            line whose columns do not match the GPUs.
    """
    _check_size(text, _BURN)
    lines = re.split(r"\r\n|\r|\n", text)
    names: dict[int, tuple[str, str]] = {}
    errors: dict[int, int] = {}
    gflops_last: dict[int, float] = {}
    gflops_max: dict[int, float] = {}
    temps: dict[int, int] = {}
    died: set[int] = set()
    tested: int | None = None
    verdicts: dict[int, bool] = {}
    for n, line in enumerate(lines, start=1):
        where = f"line {n}"
        if tested is not None:
            m = _BURN_VERDICT.match(line)
            if m:
                word = m.group(2)
                if word not in _BURN_VERDICTS:
                    raise AccelParseError(f"verdict {word!r} is neither OK nor FAULTY", source=_BURN, location=where)
                verdicts[int(m.group(1))] = _BURN_VERDICTS[word]
            continue
        if m := _BURN_GPU.match(line):
            names[int(m.group(1))] = (m.group(2), m.group(3))
        elif m := _BURN_TESTED.match(line.strip()):
            tested = int(m.group(1))
        elif m := _BURN_PROGRESS.search(line):
            _burn_progress(m, where, errors, gflops_last, gflops_max, temps, died)
    if tested is None:
        raise AccelParseError("no 'Tested N GPUs:' line: the run was cut short, no verdict", source=_BURN)
    if sorted(verdicts) != list(range(tested)):
        raise AccelParseError(f"'Tested {tested} GPUs' but verdicts for GPUs {sorted(verdicts)} (cut short?)", source=_BURN)
    return GpuBurnResult(gpus=[
        GpuBurnGpu(index=i, ok=verdicts[i], name=names.get(i, (None, None))[0], uuid=names.get(i, (None, None))[1],
                   max_errors=errors.get(i), gflops_last=gflops_last.get(i), gflops_max=gflops_max.get(i),
                   max_temp_c=temps.get(i), died=i in died)
        for i in range(tested)
    ])  # fmt: skip


def _burn_progress(m: re.Match[str], where: str, errors: dict[int, int], gflops_last: dict[int, float],
                   gflops_max: dict[int, float], temps: dict[int, int], died: set[int]) -> None:  # fmt: skip
    procd = [p.strip() for p in m.group("procd").split(" - ")]
    errs = [p.strip() for p in m.group("errors").split(" - ")]
    if len(procd) != len(errs):
        raise AccelParseError(f"{len(procd)} GPUs in proc'd, {len(errs)} in errors", source=_BURN, location=where)
    for i, (p, e) in enumerate(zip(procd, errs, strict=True)):
        pm, em = _BURN_PROCD.match(p), _BURN_ERRORS.match(e)
        if not pm:
            raise AccelParseError(f"proc'd {p!r} is not 'N (G Gflop/s)'", source=_BURN, location=where)
        if not em:
            raise AccelParseError(f"errors {e!r} is not a count", source=_BURN, location=where)
        g = float(pm.group(2))
        gflops_last[i] = g
        gflops_max[i] = max(g, gflops_max.get(i, g))
        errors[i] = max(int(em.group(1)), errors.get(i, 0))
        if em.group(2):
            died.add(i)
    if m.group("temps"):
        for i, t in enumerate(p.strip() for p in m.group("temps").split(" - ")):
            tm = _BURN_TEMP.match(t)
            if tm:  # a temperature gpu-burn could not read is printed otherwise: left out, not an error
                temps[i] = max(int(tm.group(1)), temps.get(i, 0))


# ---------------------------------------------------------------------------
# Xid lines (dmesg, journal)
# ---------------------------------------------------------------------------


class XidEvent(_Model):
    """One ``NVRM: Xid (PCI:0000:3b:00): 79, ...`` kernel line."""

    line: int
    pci: str = Field(description="the PCI address as printed, without 'PCI:'")
    xid: int
    message: str


_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),\s*(.*?)\s*$")


def parse_xid(text: str) -> list[XidEvent]:
    """Every NVIDIA Xid in kernel log text (``dmesg``, ``journalctl -k``); other lines are ignored."""
    out: list[XidEvent] = []
    for n, line in enumerate(text.splitlines(), start=1):
        m = _XID.search(line)
        if m:
            out.append(XidEvent(line=n, pci=m.group(1), xid=int(m.group(2)), message=m.group(3)))
    return out


# --- the driver: NVIDIA GPUs on a host, for burn-in and the sweep -------------------------------------------------
# (The core reaches it through the ``fleetctl.accel`` entry points, keyed by board kind: gpu.)

#: What nvidia-smi is asked for before and after the workload.
GPU_CHECK_FIELDS = ("index", "serial", "pci.bus_id", "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
                    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
                    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max")  # fmt: skip
#: ... and while it runs, every interval.
GPU_SAMPLE_FIELDS = ("index", "pci.bus_id", "temperature.gpu", "power.draw", "clocks.sm")
#: What the sweep asks nvidia-smi for.
GPU_SWEEP_FIELDS = ("index", "serial", "pci.bus_id", "temperature.gpu", "ecc.errors.uncorrected.volatile.total",
                    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
                    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max")  # fmt: skip
_ERROR_KEYS = {"ecc_corrected_volatile_total": "corrected_ecc", "ecc_uncorrected_volatile_total": "uncorrected_ecc",
               "retired_pages_single_bit": "retired_single_bit", "retired_pages_double_bit": "retired_double_bit"}  # fmt: skip
_GEN_SPEED = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
# What is kept of a host's output (fleetctl.hostio bounds every read): a workload's output, its beginning and its end
# (gpu-burn's GPU names, its last progress lines and verdicts; its error counts are cumulative, so the last line holds
# the most, while its best Gflop/s is the best of the lines kept); dcgmi's JSON, whole or not at all.
WORKLOAD_HEAD_BYTES = 256 << 10
WORKLOAD_TAIL_BYTES = 1 << 20
DCGM_JSON_BYTES = 4 << 20
#: The most stdout kept per tool in the sweep's read; the kernel log gets the generic bound (~1 MB real at most).
MAX_TOOL_BYTES = 1 << 20
MAX_DMESG_BYTES = hostio.MAX_OUTPUT_BYTES
# dcgmi diag levels take about this long on real GPUs (DOMAIN.md: r1 seconds, r2 ~2 min, r3 ~15 min, r4 longer).
_DCGM_BUDGET = {1: 120.0, 2: 600.0, 3: 2400.0, 4: 7200.0}


def _link_from_gpu(q: GpuQuery) -> dict[str, Any] | None:
    if q.pcie_link_gen_current is None and q.pcie_link_width_current is None:
        return None
    link = PcieLink(speed_gts=_GEN_SPEED.get(q.pcie_link_gen_current or 0), width=q.pcie_link_width_current,
                    max_speed_gts=_GEN_SPEED.get(q.pcie_link_gen_max or 0), max_width=q.pcie_link_width_max)  # fmt: skip
    return link.model_dump()


def _gpu_errors(q: GpuQuery) -> dict[str, int]:
    return {k: int(getattr(q, a)) for a, k in _ERROR_KEYS.items() if getattr(q, a) is not None}


def board_reading(q: GpuQuery) -> BoardReading:
    """A GPU's ``--query-gpu`` row as the core judges a board: retired pages are single + double bit (as burn-in counts
    them, None when nvidia-smi gives neither); the rest of the row stays evidence."""
    single, double = q.retired_pages_single_bit, q.retired_pages_double_bit
    retired = None if single is None and double is None else (single or 0) + (double or 0)
    return BoardReading(device=f"GPU {q.index if q.index is not None else '?'}", serial=q.serial, pci_address=q.pci_bus_id,
                        model=q.name, temp_c=q.temperature_gpu_c, power_w=q.power_draw_w, retired_pages=retired,
                        retired_pages_pending=q.retired_pages_pending, ecc_corrected=q.ecc_corrected_volatile_total,
                        ecc_uncorrected=q.ecc_uncorrected_volatile_total, ecc_corrected_total=q.ecc_corrected_aggregate_total,
                        ecc_uncorrected_total=q.ecc_uncorrected_aggregate_total, link_gen=q.pcie_link_gen_current,
                        link_gen_max=q.pcie_link_gen_max, link_width=q.pcie_link_width_current,
                        link_width_max=q.pcie_link_width_max,
                        extra={"retired_double_bit": double} if double is not None else {})  # fmt: skip


def board_event(x: XidEvent, when: str = "") -> BoardEvent:
    """An Xid line as a board event: which Xids are critical is the kind's criteria (``xid_critical`` in
    nvidia.criteria.yaml, NVIDIA's Xid catalogue), so the event leaves ``critical`` unset."""
    at = f" ({when})" if when else ""
    return BoardEvent(code=x.xid, message=f"Xid {x.xid}{at}: {x.message}", where=x.pci, when=when)


def _bus_of(pci: str) -> str:
    """``00000000:3B:00.0`` and ``0000:3b:00`` -> ``3b``: the bus, how nvidia-smi and the kernel both name it."""
    parts = pci.lower().split(":")
    return parts[-2] if len(parts) >= 2 else pci.lower()


class NvidiaStages(AccelBurnin):
    """The GPU stages on one host: nvidia-smi and the kernel's Xids before; dcgmi diag (the level's) and gpu-burn with
    nvidia-smi sampled beside it; nvidia-smi and Xids after."""

    def __init__(self, ctx: BurninContext) -> None:
        super().__init__(ctx)
        hv = ctx.job.hostvars
        self.nvsmi = str(hv.get("fleetctl_nvidia_smi_cmd") or "nvidia-smi")
        self.dcgmi = str(hv.get("fleetctl_dcgmi_cmd") or "dcgmi")
        self.burn_cmd = str(hv.get("fleetctl_gpu_burn_cmd") or "gpu-burn")
        self.dmesg = str(hv.get("fleetctl_dmesg_cmd") or "dmesg")
        self.before: list[GpuQuery] = []
        self.xid_before: list[XidEvent] = []
        self.obs: dict[int, BoardObservation] = {}  # by nvidia-smi index
        self.sampler = Sampler(time.monotonic())

    async def query(self, fields: tuple[str, ...]) -> list[GpuQuery]:
        text = await self.ctx.run(quote_argv([self.nvsmi, f"--query-gpu={','.join(fields)}", "--format=csv"]),
                                  what="nvidia-smi --query-gpu")  # fmt: skip
        try:
            return parse_query_gpu_csv(text)
        except AccelParseError as e:
            raise StageError(f"nvidia-smi --query-gpu: {e}") from e

    async def xids(self) -> list[XidEvent]:
        return parse_xid(await self.ctx.run(quote_argv([self.dmesg]), what="dmesg"))

    async def prechecks(self) -> list[BoardObservation]:
        job = self.ctx.job
        self.before = before = await self.query(GPU_CHECK_FIELDS)
        self.xid_before = await self.xids()
        by_serial = {q.serial: q for q in before if q.serial}
        boards_out: list[BoardObservation] = []
        for b in sorted(job.boards, key=lambda b: (b.slot if b.slot is not None else 1 << 30, b.serial)):
            q = by_serial.get(b.serial)
            o = BoardObservation(server=job.server, device=f"GPU {q.index}" if q is not None else f"slot {b.slot}", kind=b.kind,
                                 serial=b.serial, slot=b.slot, model=job.model, present=q is not None)  # fmt: skip
            boards_out.append(o)
            if q is None or q.index is None:
                continue
            self.obs[q.index] = o
            o.link_before = _link_from_gpu(q)
            o.errors_before = _gpu_errors(q)
            if q.retired_pages_single_bit is not None or q.retired_pages_double_bit is not None:
                o.retired_pages = (q.retired_pages_single_bit or 0) + (q.retired_pages_double_bit or 0)
            o.retired_pages_pending = q.retired_pages_pending  # judged as the sweep judges it (one set of criteria)
        return boards_out

    async def workload(self) -> None:
        ctx, job, out, obs = self.ctx, self.ctx.job, self.ctx.out, self.obs
        t0 = time.monotonic()
        if job.dcgm_level:
            await self._dcgm()
        # gpu-burn on every GPU at once, with nvidia-smi sampled beside it.
        self.sampler = sampler = Sampler(t0)
        text = hostio.KeptLines(head=WORKLOAD_HEAD_BYTES, tail=WORKLOAD_TAIL_BYTES)
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                try:
                    for i, q in self.by_first_index(await self.query(GPU_SAMPLE_FIELDS)).items():
                        sampler.add(str(i), **{k: v for k, v in (("temp_c", q.temperature_gpu_c), ("power_w", q.power_draw_w),
                                                                          ("clock_mhz", q.clocks_sm_mhz)) if v is not None})  # fmt: skip
                except StageError:
                    pass  # a GPU that falls off the bus makes nvidia-smi fail: the workload's result says so
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), job.interval)

        sampling = asyncio.create_task(sample())
        _, hung = await ctx.host.stream(ctx.in_session(quote_argv([self.burn_cmd, f"{job.seconds:g}"])),
                                        deadline=time.monotonic() + job.seconds + job.grace,
                                        on_line=lambda s, ln: text.add(ln) if s == "stdout" else None)  # fmt: skip
        stop.set()
        await sampling
        out.workload_s = time.monotonic() - t0
        if hung:
            await ctx.stop_session("stopping the hung gpu-burn")
            for o in obs.values():
                o.hung = True
            return
        try:
            burn_res = parse_gpu_burn(text.text())
        except AccelParseError as e:
            for o in obs.values():
                o.lost = f"gpu-burn gave no verdict: {e}"
            return
        # gpu-burn numbers the GPUs it sees as CUDA does; the lab and a default CUDA_DEVICE_ORDER=PCI_BUS_ID
        # host number them as nvidia-smi does. ASSUMPTION: the same order (documented).
        for g in burn_res.gpus:
            o2 = obs.get(g.index)
            if o2 is None:
                continue
            o2.throughput = g.gflops_max
            o2.workload_ok = g.ok
            o2.workload_errors = g.max_errors
            if g.died:
                o2.lost = f"{o2.device}: gpu-burn marked it DIED"
            o2.evidence["result"] = f"GPU {g.index}: {'OK' if g.ok else 'FAULTY'}, max errors {g.max_errors}"

    async def _dcgm(self) -> None:
        ctx, job, out, obs = self.ctx, self.ctx.job, self.ctx.out, self.obs
        cmd = ctx.in_session(quote_argv([self.dcgmi, "diag", "-r", str(job.dcgm_level), "-j"]))
        lines = hostio.KeptLines(head=DCGM_JSON_BYTES)
        diag = f"dcgmi diag -r {job.dcgm_level} -j"

        def keep(stream: str, line: str) -> None:
            if stream != "stdout":
                return
            lines.add(line)
            if lines.overflowed:  # a JSON document is read whole or not at all: stop reading, and stop dcgmi
                raise hostio.HostOutputError(f"printed more than {DCGM_JSON_BYTES} bytes, more than any real report; "
                                             "stopped, not read", host=job.server, command=diag)  # fmt: skip

        try:
            _, hung = await ctx.host.stream(cmd, deadline=time.monotonic() + _DCGM_BUDGET.get(job.dcgm_level or 0, 3600) + job.grace,
                                            on_line=keep)  # fmt: skip
        except hostio.HostOutputError as e:
            await ctx.stop_session("stopping dcgmi")
            raise StageError(str(e)) from e
        if hung:
            # Which GPU hung dcgmi cannot be told from here: a note for the server; gpu-burn next tells the boards apart.
            await ctx.stop_session("stopping a hung dcgmi")
            out.notes.append(f"dcgmi diag -r {job.dcgm_level} did not end in its time and was stopped")
            return
        try:
            report = parse_dcgmi_diag(lines.text())
        except AccelParseError as e:
            raise StageError(f"dcgmi diag: {e}") from e
        if report.runtime_error:
            out.notes.append(f"dcgmi diag did not run: {report.runtime_error}")
        for _cat, test, r in report.results:
            ids = r.gpu_ids or ([r.entity_id] if r.entity_id is not None else list(obs))
            msg = "; ".join(w.message for w in r.warnings)
            if r.status not in (DiagStatus.FAIL, DiagStatus.WARN):
                continue
            if r.setup_error:
                out.notes.append(f"dcgmi diag {test}: a setup error, not the GPU: {msg}")
            status = "Fail" if r.status == DiagStatus.FAIL else "Warn"
            for i in ids:
                if i in obs:
                    obs[i].diag.append({"tool": "dcgmi diag", "test": test, "status": status, "message": msg, "setup_error": r.setup_error,
                                        "error_ids": [w.error_id for w in r.warnings]})  # fmt: skip

    def by_first_index(self, got: list[GpuQuery]) -> dict[int, GpuQuery]:
        """Each GPU of a query under its index at the pre-checks, found by its PCI bus id: a GPU that falls off the bus
        renumbers the ones after it, so an index alone would give one GPU's figures to another. A GPU the pre-checks
        did not list is left out; one without a bus id keeps its index."""
        first = {b.pci_bus_id.lower(): b.index for b in self.before if b.pci_bus_id and b.index is not None}
        out: dict[int, GpuQuery] = {}
        for q in got:
            i = first.get(q.pci_bus_id.lower()) if q.pci_bus_id and first else q.index
            if i is not None:
                out[i] = q
        return out

    async def postchecks(self) -> None:
        try:
            got = await self.query(GPU_CHECK_FIELDS)
        except StageError:
            got = []
        after = self.by_first_index(got)
        xid_before = self.xid_before
        xid_after = await self.xids()
        seen = {(x.pci.lower(), x.xid, x.message) for x in xid_before}
        for i, o in self.obs.items():
            o.telemetry = self.sampler.samples.get(str(i), [])
            q = after.get(i)
            if q is None:
                o.lost = o.lost or f"{o.device}: nvidia-smi no longer lists it after the workload"
            else:
                o.link_after = _link_from_gpu(q)
                o.errors_after = _gpu_errors(q)
            before_bus = next((b.pci_bus_id for b in self.before if b.index == i), None)
            bus = _bus_of(before_bus) if before_bus else None
            for x in xid_before + xid_after:
                if bus and _bus_of(x.pci) == bus:
                    when = "since boot" if (x.pci.lower(), x.xid, x.message) in seen else "during the run"
                    event = board_event(x, when)
                    if all(e.message != event.message for e in o.events):
                        o.events.append(event)


class NvidiaDriver(AccelDriver):
    """NVIDIA GPUs (board kind ``gpu``): nvidia-smi, dcgmi, gpu-burn and the kernel's Xid lines."""

    kinds = ("gpu",)
    criteria_file = Path(__file__).with_name("nvidia.criteria.yaml")

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        """``nvidia-smi --query-gpu`` (the boards) and the kernel's Xid lines (the events), each on its own."""
        name = host.target.name
        nvsmi = str(hostvars.get("fleetctl_nvidia_smi_cmd") or "nvidia-smi")
        dmesg = str(hostvars.get("fleetctl_dmesg_cmd") or "dmesg")
        r = AccelReading()

        async def tool(argv: list[str], max_bytes: int = MAX_TOOL_BYTES) -> str:
            done = await host.run(quote_argv(argv), timeout=timeout, max_bytes=max_bytes)
            if done.exit_status != 0:
                err = done.last_error_line()
                raise RuntimeError(f"`{argv[0]}` exited {done.exit_status}" + (f": {err}" if err else ""))
            return done.stdout

        async def part(label: str, coro: Awaitable[Any]) -> Any:
            try:
                return await coro
            except Exception as e:  # noqa: BLE001 - a tool that fails or prints what its parser refuses is that part's finding
                r.errors[label] = str(e) if isinstance(e, hostio.HostOutputError) else f"{name}: {e}"  # the former names the host
                return None

        async def gpus() -> list[GpuQuery]:
            return parse_query_gpu_csv(await tool([nvsmi, f"--query-gpu={','.join(GPU_SWEEP_FIELDS)}", "--format=csv"]))

        async def xids() -> list[XidEvent]:
            return parse_xid(await tool([dmesg], MAX_DMESG_BYTES))

        gpus_read, xids_read = await asyncio.gather(part("nvidia-smi", gpus()), part("dmesg", xids()))
        r.tool = "nvidia-smi"
        r.boards = None if gpus_read is None else [board_reading(q) for q in gpus_read]
        r.events = None if xids_read is None else [board_event(x) for x in xids_read]
        return r

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        return NvidiaStages(ctx)
