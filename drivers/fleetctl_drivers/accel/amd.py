"""AMD Instinct boards as the host sees them: ``amd-smi`` JSON and the ROCm Validation Suite (``rvs``).

The board kind is ``amd-instinct``: the vendor and its data-centre line, so it
says what the boards are without claiming every AMD GPU (a Radeon is read by
the same tool, but is not burned in as a server board), and leaves ``gpu``
(today's name for NVIDIA's) alone. One driver serves every Instinct generation
(MI250X, MI300X, MI355X): what differs between them is data (``amd.yaml``).

What is read (every shape from a public recording or from the CLI's own source,
``tests/data/accel/amd/SOURCES.md``):

- ``amd-smi list --json``: ``gpu`` (index), ``bdf``, ``uuid``, ``kfd_id`` (the
  id RVS names a GPU by);
- ``amd-smi static --json``: ``asic.market_name``, ``asic.asic_serial``,
  ``board.product_serial``, ``bus.bdf``, ``bus.max_pcie_width`` /
  ``max_pcie_speed``;
- ``amd-smi metric --json``: ``temperature.{hotspot,edge,mem}``,
  ``power.socket_power``, ``pcie.width`` / ``speed``, ``ecc.total_*_count``;
- ``amd-smi bad-pages --json``: ``retired`` / ``pending`` / ``un_res`` per GPU,
  each "No bad pages found.", "N/A", one page or a list of pages;
- ``amd-smi process --json``: what runs on each GPU (a burn-in does not take a
  GPU another program uses, unless ``--force``);
- ``rvs -c <conf>``: the GST module's ``[GPU:: <id>] GFLOPS <n> Target GFLOPS:
  <t> met: TRUE|FALSE`` per GPU, and the summary table naming each id's index
  and PCI address.

amd-smi's JSON differs between versions: a list of GPUs (24.x, ROCm 6) or
``{"gpu_data": [...]}`` (25.x and later); a value is ``{"value": v, "unit":
u}`` or a plain number (before units were added) or ``"N/A"``. All are read;
anything else is refused with the place it was found.

A GPU's index is not its identity (a GPU that falls off the bus renumbers the
rest): boards are keyed by PCI address and matched to the inventory by serial.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetctl import hostio
from fleetctl.interfaces.accel import (
    AccelBurnin,
    AccelDriver,
    AccelReading,
    BoardObservation,
    BoardReading,
    BurninContext,
    InvBoard,
    Sampler,
    StageError,
    quote_argv,
)
from fleetctl.interfaces.host import HostSession
from fleetctl_drivers.accel import AccelParseError
from fleetctl_drivers.accel.pcie import SPEED_TO_GEN, PcieLink

__all__ = [
    "KIND",
    "AmdBadPages",
    "AmdConfig",
    "AmdGpu",
    "AmdInstinctDriver",
    "AmdMetric",
    "AmdProcesses",
    "RvsReport",
    "RvsResult",
    "amd_config",
    "parse_bad_pages",
    "parse_list",
    "parse_metric",
    "parse_process",
    "parse_rvs",
    "parse_static",
]

KIND = "amd-instinct"
DEFAULT_CONFIG_FILE = Path(__file__).with_name("amd.yaml")
CONFIG_ENV = "FLEETCTL_AMD_CONFIG"

#: The most JSON read from one amd-smi command: a metric of 8 GPUs is ~110 KB (two Radeons: 27 KB recorded).
MAX_JSON_BYTES = 4 << 20
#: GPUs one host may list (an MI300X in CPX mode shows 8 partitions per board: 64 on 8 boards).
MAX_GPUS = 64
#: Bad-page entries read per GPU and kind; more is refused, not truncated (a count that is wrong is worse than none).
MAX_PAGES = 65536
#: Processes kept per GPU (only to name who holds it).
MAX_PROCESSES = 256
#: What is kept of the workload's output: its beginning and its end (RVS prints a line per GPU per interval).
WORKLOAD_HEAD_BYTES = 256 << 10
WORKLOAD_TAIL_BYTES = 1 << 20

#: What amd-smi prints where it has no value.
NOT_A_VALUE = frozenset({"N/A", "NA", "", "No bad pages found."})

# --- reading amd-smi's JSON ------------------------------------------------------------------------------------------

_SMI = "amd-smi"
_JSON_START = re.compile(r"^[ \t]*[\[{]", re.M)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _fail(source: str, message: str, *, location: str | None = None, field: str | None = None) -> AccelParseError:
    return AccelParseError(message, source=source, location=location, field=field)


def _gpu_entries(text: str, source: str) -> list[dict[str, Any]]:
    """The per-GPU objects of an amd-smi ``--json`` output, in either of its shapes.

    A banner line before the JSON (amd-smi warns on stdout when the user is not in the render group) is skipped.

    Raises:
        AccelParseError: too large, not JSON, not a list of GPUs, a GPU without its index, an index twice, too many.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_JSON_BYTES:
        raise _fail(source, f"more than {MAX_JSON_BYTES} bytes of output: refused")
    m = _JSON_START.search(text)
    if m is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise _fail(source, "no JSON in the output" + (f": {first[:200]!r}" if first else " (empty)"))
    try:
        doc = json.loads(text[m.start() :])
    except ValueError as e:
        raise _fail(source, f"not valid JSON: {e}") from e
    if isinstance(doc, dict) and "gpu_data" in doc:
        doc = doc["gpu_data"]
    if not isinstance(doc, list):
        raise _fail(source, f"expected a list of GPUs (or {{'gpu_data': [...]}}), got {type(doc).__name__}")
    if len(doc) > MAX_GPUS:
        raise _fail(source, f"{len(doc)} GPUs listed, more than {MAX_GPUS}: refused")
    seen: set[int] = set()
    out: list[dict[str, Any]] = []
    for n, g in enumerate(doc):
        where = f"entry {n}"
        if not isinstance(g, dict):
            raise _fail(source, f"expected an object, got {type(g).__name__}", location=where)
        idx = g.get("gpu")
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise _fail(source, f"no GPU index (got {idx!r})", location=where, field="gpu")
        if idx in seen:
            raise _fail(source, f"GPU {idx} listed twice", location=where, field="gpu")
        seen.add(idx)
        out.append(g)
    return out


def _value(x: Any, source: str, where: str, field: str, *, units: Mapping[str, float] | None = None) -> float | None:
    """A number amd-smi printed: ``{"value": v, "unit": u}``, a plain number, a number with its unit as text
    (``"32 GT/s"``), or None for "N/A". ``units`` maps the units accepted to a factor (the first is the default).

    Raises:
        AccelParseError: anything else (a word, a unit not accepted, a boolean), naming where.
    """
    unit: str | None = None
    if isinstance(x, dict):
        if set(x) - {"value", "unit"}:
            raise _fail(source, f"unexpected keys {sorted(set(x) - {'value', 'unit'})}", location=where, field=field)
        unit = x.get("unit")
        x = x.get("value")
    if x is None or (isinstance(x, str) and x.strip() in NOT_A_VALUE):
        return None
    if isinstance(x, str):
        m = re.fullmatch(r"\s*([+-]?\d+(?:\.\d+)?)\s*([A-Za-z/%]+)?\s*", x)
        if not m:
            raise _fail(source, f"not a number: {x[:80]!r}", location=where, field=field)
        x, unit = float(m.group(1)), m.group(2) or unit
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise _fail(source, f"not a number: {x!r}", location=where, field=field)
    factor = 1.0
    if units:
        if unit is None:
            factor = next(iter(units.values()))
        elif unit not in units:
            raise _fail(source, f"unit {unit!r} is not one of {sorted(units)}", location=where, field=field)
        else:
            factor = units[unit]
    return float(x) * factor


def _count(x: Any, source: str, where: str, field: str) -> int | None:
    v = _value(x, source, where, field)
    if v is None:
        return None
    if v < 0 or v != int(v):
        raise _fail(source, f"not a count: {v!r}", location=where, field=field)
    return int(v)


def _text(x: Any) -> str | None:
    if x is None or not isinstance(x, str | int) or isinstance(x, bool):
        return None
    s = str(x).strip()
    return None if s in NOT_A_VALUE else s[:200]


def _section(g: Mapping[str, Any], key: str, source: str, where: str) -> Mapping[str, Any]:
    """A GPU's group (``asic``, ``bus``, ``power`` ...): a mapping, or empty when amd-smi printed "N/A" or left it out."""
    v = g.get(key)
    if v is None or (isinstance(v, str) and v.strip() in NOT_A_VALUE):
        return {}
    if not isinstance(v, dict):
        raise _fail(source, f"expected an object, got {type(v).__name__}", location=where, field=key)
    return v


_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _bdf(x: Any, source: str, where: str, field: str) -> str | None:
    s = _text(x)
    if s is None:
        return None
    if not _BDF.match(s):
        raise _fail(source, f"not a PCI address: {s[:40]!r}", location=where, field=field)
    return s.lower()


#: Link speeds in GT/s (amd-smi prints GT/s since units were added; the library gives MT/s).
_SPEED_UNITS = {"GT/s": 1.0, "MT/s": 0.001}


def _speed(x: Any, source: str, where: str, field: str) -> float | None:
    """A PCIe link speed in GT/s. A plain number above 64 (no PCIe generation is faster) is the library's MT/s, as
    amd-smi printed it before units were added (``32000`` for Gen5)."""
    v = _value(x, source, where, field, units=_SPEED_UNITS)
    if v is not None and v > 64 and not isinstance(x, dict):
        v /= 1000
    return v


class AmdGpu(_Model):
    """One GPU as ``amd-smi list`` / ``static`` show it."""

    index: int
    bdf: str | None = None
    uuid: str | None = None
    kfd_id: int | None = None  # the id RVS prints ([GPU:: <kfd_id>])
    serial: str | None = None  # the board's FRU serial, else the ASIC's
    model: str | None = None
    device_id: str | None = None
    max_pcie_width: int | None = None
    max_pcie_gts: float | None = None


def parse_list(text: str) -> list[AmdGpu]:
    """``amd-smi list --json``: each GPU's index, PCI address, UUID and KFD id.

    Raises:
        AccelParseError: not amd-smi's JSON (see :func:`_gpu_entries`), or a field of the wrong type.
    """
    src = "amd-smi list"
    out = []
    for g in _gpu_entries(text, src):
        where = f"GPU {g['gpu']}"
        kfd = _value(g.get("kfd_id"), src, where, "kfd_id")
        out.append(AmdGpu(index=g["gpu"], bdf=_bdf(g.get("bdf"), src, where, "bdf"), uuid=_text(g.get("uuid")),
                          kfd_id=int(kfd) if kfd is not None else None))  # fmt: skip
    return out


def parse_static(text: str, *, models: Mapping[str, str] | None = None) -> list[AmdGpu]:
    """``amd-smi static --json``: each GPU's serial (the board's FRU serial where it has one, else the ASIC's),
    its market name (else the name ``models`` gives its device id), PCI address and the link it can do.

    Raises:
        AccelParseError: not amd-smi's JSON, or a field of the wrong type.
    """
    src = "amd-smi static"
    out = []
    for g in _gpu_entries(text, src):
        where = f"GPU {g['gpu']}"
        asic, bus, board = (_section(g, k, src, where) for k in ("asic", "bus", "board"))
        device_id = _text(asic.get("device_id"))
        width = _count(bus.get("max_pcie_width"), src, where, "bus.max_pcie_width")
        out.append(AmdGpu(
            index=g["gpu"], bdf=_bdf(bus.get("bdf"), src, where, "bus.bdf"),
            serial=_text(board.get("product_serial")) or _text(asic.get("asic_serial")),
            model=_text(asic.get("market_name")) or _text(board.get("product_name")) or (models or {}).get((device_id or "").lower()),
            device_id=device_id, max_pcie_width=width,
            max_pcie_gts=_speed(bus.get("max_pcie_speed"), src, where, "bus.max_pcie_speed"),
        ))  # fmt: skip
    return out


class AmdMetric(_Model):
    """One GPU's ``amd-smi metric``: the figures fleetctl judges (None: "N/A" or not printed)."""

    index: int
    temp_c: dict[str, float] = Field(default_factory=dict)  # by sensor: hotspot, edge, mem
    power_w: float | None = None
    pcie_width: int | None = None
    pcie_gts: float | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    ecc_deferred: int | None = None

    def temperature(self, sensors: list[str]) -> float | None:
        """The first of ``sensors`` (in order) this GPU reports."""
        return next((self.temp_c[s] for s in sensors if s in self.temp_c), None)


def parse_metric(text: str) -> list[AmdMetric]:
    """``amd-smi metric --json`` (all groups, or a subset: ``--power --temperature``): temperatures, power, the
    PCIe link of the moment, the ECC totals.

    Raises:
        AccelParseError: not amd-smi's JSON, or a value that is not a number (or "N/A").
    """
    src = "amd-smi metric"
    out = []
    for g in _gpu_entries(text, src):
        where = f"GPU {g['gpu']}"
        temps = _section(g, "temperature", src, where)
        power, pcie, ecc = (_section(g, k, src, where) for k in ("power", "pcie", "ecc"))
        t = {k: v for k in ("hotspot", "edge", "mem") if (v := _value(temps.get(k), src, where, f"temperature.{k}",
                                                                      units={"C": 1.0})) is not None}  # fmt: skip
        # socket_power on MI300 and later; average_socket_power where a GPU gives only the average (older amd-smi).
        watts = _value(power.get("socket_power"), src, where, "power.socket_power", units={"W": 1.0})
        if watts is None:
            watts = _value(power.get("average_socket_power"), src, where, "power.average_socket_power", units={"W": 1.0})
        out.append(AmdMetric(
            index=g["gpu"], temp_c=t, power_w=watts,
            pcie_width=_count(pcie.get("width"), src, where, "pcie.width"),
            pcie_gts=_speed(pcie.get("speed"), src, where, "pcie.speed"),
            ecc_corrected=_count(ecc.get("total_correctable_count"), src, where, "ecc.total_correctable_count"),
            ecc_uncorrected=_count(ecc.get("total_uncorrectable_count"), src, where, "ecc.total_uncorrectable_count"),
            ecc_deferred=_count(ecc.get("total_deferred_count"), src, where, "ecc.total_deferred_count"),
        ))  # fmt: skip
    return out


class AmdBadPages(_Model):
    """One GPU's ``amd-smi bad-pages``: how many pages are retired, pending retirement, unreservable (None: "N/A")."""

    index: int
    retired: int | None = None
    pending: int | None = None
    unreservable: int | None = None


def _pages(x: Any, src: str, where: str, field: str) -> int | None:
    """A bad-page entry: the not-found string (0), "N/A" (None), one page (an object: amd-smi drops the brackets of a
    list of one) or a list of pages."""
    if isinstance(x, str):
        s = x.strip()
        if s == "No bad pages found.":
            return 0
        if s in NOT_A_VALUE:
            return None
        raise _fail(src, f"expected pages, 'No bad pages found.' or 'N/A', got {s[:80]!r}", location=where, field=field)
    if x is None:
        return None
    pages = [x] if isinstance(x, dict) else x
    if not isinstance(pages, list):
        raise _fail(src, f"expected pages, got {type(x).__name__}", location=where, field=field)
    if len(pages) > MAX_PAGES:
        raise _fail(src, f"{len(pages)} pages, more than {MAX_PAGES}: refused", location=where, field=field)
    for p in pages:
        if not isinstance(p, dict) or "page_address" not in p:
            raise _fail(src, "a page without its page_address", location=where, field=field)
    return len(pages)


def parse_bad_pages(text: str) -> list[AmdBadPages]:
    """``amd-smi bad-pages --json``: the number of retired, pending and unreservable pages of each GPU.

    Raises:
        AccelParseError: not amd-smi's JSON, or an entry that is none of the shapes amd-smi prints.
    """
    src = "amd-smi bad-pages"
    return [AmdBadPages(index=g["gpu"], retired=_pages(g.get("retired"), src, f"GPU {g['gpu']}", "retired"),
                        pending=_pages(g.get("pending"), src, f"GPU {g['gpu']}", "pending"),
                        unreservable=_pages(g.get("un_res"), src, f"GPU {g['gpu']}", "un_res"))
            for g in _gpu_entries(text, src)]  # fmt: skip


class AmdProcesses(_Model):
    """What runs on one GPU: ``(name, pid)`` per process (at most :data:`MAX_PROCESSES`)."""

    index: int
    processes: list[tuple[str, int]] = Field(default_factory=list)


def parse_process(text: str) -> list[AmdProcesses]:
    """``amd-smi process --json``: each GPU's processes (``process_list``; "No running processes detected" or an
    empty list when none).

    Raises:
        AccelParseError: not amd-smi's JSON, or a process without its pid.
    """
    src = "amd-smi process"
    out = []
    for g in _gpu_entries(text, src):
        where = f"GPU {g['gpu']}"
        raw = g.get("process_list") or []
        if isinstance(raw, dict):
            raw = [raw]
        if not isinstance(raw, list):
            raise _fail(src, f"expected a list, got {type(raw).__name__}", location=where, field="process_list")
        procs: list[tuple[str, int]] = []
        for p in raw:
            info = p.get("process_info") if isinstance(p, dict) else None
            if isinstance(info, str) or info is None:  # "No running processes detected"
                continue
            if not isinstance(info, dict):
                raise _fail(src, f"expected an object, got {type(info).__name__}", location=where, field="process_info")
            pid = info.get("pid")
            if isinstance(pid, bool) or not isinstance(pid, int):
                raise _fail(src, f"a process without its pid (got {pid!r})", location=where, field="process_info.pid")
            if len(procs) < MAX_PROCESSES:
                procs.append((str(info.get("name") or "?")[:80], pid))
        out.append(AmdProcesses(index=g["gpu"], processes=procs))
    return out


# --- the ROCm Validation Suite's output ------------------------------------------------------------------------------


class RvsResult(_Model):
    """One GPU's GST result: the best figure, the target, and whether RVS said the target was met."""

    gpu_id: int
    gflops: float | None = None  # the final line's figure (RVS: the best of the run)
    target: float | None = None
    met: bool | None = None
    samples: int = 0  # interval lines seen
    line: str = ""


class RvsReport(_Model):
    """What an ``rvs`` run printed: a result per GPU id, and the summary's GPU ids -> (index, PCI address)."""

    results: dict[int, RvsResult] = Field(default_factory=dict)
    gpus: dict[int, tuple[int, str]] = Field(default_factory=dict)
    actions: dict[str, str] = Field(default_factory=dict)  # the summary's action -> PASS / FAIL


_RVS_GPU = re.compile(r"\[GPU::\s*(?P<id>\d+)\]\s+GFLOPS\s+(?P<gflops>[\d.]+)"
                      r"(?:\s+Target GFLOPS:\s*(?P<target>[\d.]+)\s+met:\s*(?P<met>TRUE|FALSE))?\s*$")  # fmt: skip
_RVS_SUMMARY_ID = re.compile(r"\s-\s(\d+)\s*$")
_RVS_SUMMARY_LOC = re.compile(r"^\s*(\d+)\s+-\s+\d+\s+-\s+([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$")
_RVS_ACTION = re.compile(r"^\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(PASS|FAIL)\s*\|$")


def parse_rvs(text: str) -> RvsReport:
    """The GST lines of an ``rvs`` run (``[RESULT] [ts] [action] [GPU:: id] GFLOPS n [Target GFLOPS: t met: TRUE]``,
    or without the ``[RESULT] [ts]`` prefix in older RVS) and its summary table.

    Lines RVS prints about other things (ramp up, modules, other actions) are skipped: the output is a log.

    Raises:
        AccelParseError: a GST line whose figure is not a number.
    """
    results: dict[int, dict[str, Any]] = {}
    gpus: dict[int, tuple[int, str]] = {}
    actions: dict[str, str] = {}
    pending_ids: list[int | None] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        m = _RVS_GPU.search(line)
        if m:
            try:
                gid, gflops = int(m.group("id")), float(m.group("gflops"))
            except ValueError as e:
                raise _fail("rvs", f"not a number: {line[:120]!r}", location=f"line {n}") from e
            r = results.setdefault(gid, {"gpu_id": gid, "samples": 0})
            r["samples"] += 1
            if m.group("met"):
                r.update(gflops=gflops, target=float(m.group("target")), met=m.group("met") == "TRUE", line=line.strip()[:300])
            elif r.get("met") is None:
                r["gflops"] = max(gflops, r.get("gflops") or 0.0)
            continue
        a = _RVS_ACTION.match(line.strip())
        if a and a.group(1) != "Action":
            actions[a.group(1)] = a.group(3)
            continue
        # The summary: a row of "<name> - <id>" cells, then a row of "<index> - <node> - <bdf>" cells.
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            ids = [(int(m2.group(1)) if (m2 := _RVS_SUMMARY_ID.search(c)) else None) for c in cells]
            if any(i is not None for i in ids) and all(_RVS_SUMMARY_LOC.match(c) is None for c in cells):
                pending_ids = ids
                continue
            locs = [_RVS_SUMMARY_LOC.match(c) for c in cells]
            if pending_ids and any(locs):
                for rid, loc in zip(pending_ids, locs, strict=False):
                    if rid is not None and loc is not None:
                        gpus[rid] = (int(loc.group(1)), loc.group(2).lower())
                pending_ids = []
    return RvsReport(results={k: RvsResult(**v) for k, v in results.items()}, gpus=gpus, actions=actions)


# --- configuration: the facts and quirks kept as data ----------------------------------------------------------------


class AmdRvs(_Model):
    program: str = "/opt/rocm/bin/rvs"
    args: list[str] = Field(default_factory=lambda: ["-c", "{conf}"])
    conf: str = ""
    target_stress: float = Field(0, ge=0)


class AmdModel(_Model):
    device_id: str
    name: str


class AmdConfig(_Model):
    """The AMD facts fleetctl assumes (``amd.yaml``, each value with its source)."""

    smi: str = "amd-smi"
    temperature_sensors: list[str] = Field(default_factory=lambda: ["hotspot", "edge", "mem"])
    rvs: AmdRvs = Field(default_factory=AmdRvs)
    models: list[AmdModel] = Field(default_factory=list)
    source: str = ""

    def model_names(self) -> dict[str, str]:
        return {m.device_id.lower(): m.name for m in self.models}


def amd_config(path: str | os.PathLike[str] | None = None) -> AmdConfig:
    """The AMD facts from ``path``, ``$FLEETCTL_AMD_CONFIG``, or the bundled ``amd.yaml``.

    Raises:
        AccelParseError: the file is missing, not YAML, or has unknown keys or wrong types (a typo must not silently
            fall back to a default).
    """
    import yaml

    file = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE)
    try:
        data: Any = yaml.safe_load(file.read_text())
    except OSError as e:
        raise AccelParseError(f"cannot read the AMD configuration: {e.strerror or e}", source=str(file)) from e
    except yaml.YAMLError as e:
        raise AccelParseError(f"not valid YAML: {e}", source=str(file)) from e
    if not isinstance(data, dict):
        raise AccelParseError(f"expected a mapping of settings, got {type(data).__name__}", source=str(file))
    try:
        return AmdConfig.model_validate({**data, "source": str(file)})
    except ValidationError as e:
        first = e.errors()[0]
        raise AccelParseError(first["msg"], source=str(file), field=".".join(str(p) for p in first["loc"])) from e


# --- the driver ------------------------------------------------------------------------------------------------------

#: The most stdout kept per tool in the sweep's read (a full metric of 8 GPUs is ~110 KB).
MAX_TOOL_BYTES = MAX_JSON_BYTES


def _gen(gts: float | None) -> int | None:
    return SPEED_TO_GEN.get(gts) if gts is not None else None


def _link(m: AmdMetric | None, s: AmdGpu | None) -> dict[str, Any] | None:
    if m is None or (m.pcie_width is None and m.pcie_gts is None):
        return None
    return PcieLink(speed_gts=m.pcie_gts, width=m.pcie_width, max_speed_gts=s.max_pcie_gts if s else None,
                    max_width=s.max_pcie_width if s else None).model_dump()  # fmt: skip


def _errors(m: AmdMetric | None, b: AmdBadPages | None) -> dict[str, int]:
    """The memory error counters burn-in compares before and after (``corrected*`` keys are judged apart)."""
    out: dict[str, int] = {}
    if m is not None:
        for key, v in (("corrected_ecc", m.ecc_corrected), ("uncorrected_ecc", m.ecc_uncorrected), ("deferred_ecc", m.ecc_deferred)):
            if v is not None:
                out[key] = v
    if b is not None and b.retired is not None:
        out["retired_pages"] = b.retired
    return out


class _State:
    """One read of the host's GPUs (list, static, metric, bad pages, processes), keyed by PCI address."""

    def __init__(self, parts: Mapping[str, hostio.BatchPart], cfg: AmdConfig, *, need: tuple[str, ...]) -> None:
        def text(name: str) -> str:
            part = parts.get(name)
            if part is None:
                raise StageError(f"{cfg.smi} {name}: no answer (the host's shell ended early)")
            if part.exit_status != 0:
                last = [ln for ln in part.stdout.splitlines() if ln.strip()]
                raise StageError(f"{cfg.smi} {name}: exited {part.exit_status}" + (f": {last[-1][:200]}" if last else ""))
            return part.stdout

        try:
            self.listed = parse_list(text("list"))
            self.static = {g.index: g for g in parse_static(text("static"), models=cfg.model_names())} if "static" in need else {}
            self.metric = {m.index: m for m in parse_metric(text("metric"))}
            self.bad = {b.index: b for b in parse_bad_pages(text("bad_pages"))}
            self.procs = {p.index: p for p in parse_process(text("process"))} if "process" in need else {}
        except AccelParseError as e:
            raise StageError(str(e)) from e
        self.by_bdf = {g.bdf: g for g in self.listed if g.bdf}


def _commands(smi: str, names: tuple[str, ...]) -> dict[str, str]:
    """The amd-smi reads of one round trip (``bad_pages`` is ``amd-smi bad-pages``), stderr merged (amd-smi says why it
    failed on either)."""
    return {n: f"{quote_argv([smi, n.replace('_', '-'), '--json'])} 2>&1" for n in names}


def match_boards(boards: list[InvBoard], gpus: list[AmdGpu]) -> dict[str, AmdGpu | None]:
    """Inventory serial -> the GPU that is that board: by serial, else by PCI address; None: the host does not list it.

    Never by order: a board the host lacks must not take another GPU's place (a GPU whose serial amd-smi cannot read
    is found by its address, as the inventory records it).
    """
    out: dict[str, AmdGpu | None] = {}
    free = sorted(gpus, key=lambda g: (g.bdf or "", g.index))
    by_serial = {g.serial.lower(): g for g in free if g.serial}
    by_bdf = {g.bdf: g for g in free if g.bdf}
    for b in sorted(boards, key=lambda b: (b.slot if b.slot is not None else 1 << 30, b.serial)):
        g = by_serial.get(b.serial.lower()) or by_bdf.get((b.pci_address or "").lower())
        if g is not None and g in free:
            free.remove(g)
            out[b.serial] = g
        else:
            out[b.serial] = None
    return out


class AmdStages(AccelBurnin):
    """The AMD stages on one host: amd-smi before (one round trip), a reset with ``--force``, RVS GST on every GPU at
    once with ``amd-smi metric`` sampled beside it, amd-smi after."""

    def __init__(self, ctx: BurninContext) -> None:
        super().__init__(ctx)
        self.cfg = cfg = amd_config()
        hv = ctx.job.hostvars
        self.smi = str(hv.get("fleetctl_amd_smi_cmd") or cfg.smi)
        self.rvs = str(hv.get("fleetctl_rvs_cmd") or cfg.rvs.program)
        self.mine: dict[str, BoardObservation] = {}  # present boards by PCI address
        self.index: dict[str, int] = {}  # PCI address -> amd-smi's index at the pre-checks
        self.kfd: dict[int, str] = {}  # RVS's GPU id -> PCI address
        self.text: list[str] = []
        self.hung = False
        self.sampler = Sampler(time.monotonic())

    async def state(self, names: tuple[str, ...], what: str) -> _State:
        try:
            parts = await self.ctx.host.batch(_commands(self.smi, names), timeout=self.ctx.job.command_timeout,
                                              max_bytes=MAX_JSON_BYTES * 2)  # fmt: skip
        except hostio.HostOutputError as e:
            raise StageError(f"{what}: {e}") from e
        return _State(parts, self.cfg, need=names)

    async def prechecks(self) -> list[BoardObservation]:
        job, out = self.ctx.job, self.ctx.out
        st = await self.state(("list", "static", "metric", "bad_pages", "process"), "reading the GPUs (amd-smi)")
        gpus = [st.static.get(g.index, g).model_copy(update={"bdf": g.bdf, "kfd_id": g.kfd_id}) for g in st.listed]
        mapping = match_boards(job.boards, gpus)
        obs: list[BoardObservation] = []
        for b in job.boards:
            g = mapping.get(b.serial)
            o = BoardObservation(server=job.server, device=f"GPU {g.index}" if g else f"slot {b.slot}", kind=b.kind, serial=b.serial,
                                 slot=b.slot, model=job.model, present=g is not None and g.bdf is not None)  # fmt: skip
            obs.append(o)
            if g is None or g.bdf is None:
                continue
            self.mine[g.bdf], self.index[g.bdf] = o, g.index
            if g.kfd_id is not None:
                self.kfd[g.kfd_id] = g.bdf
            m, bad = st.metric.get(g.index), st.bad.get(g.index)
            o.link_before = _link(m, st.static.get(g.index))
            o.errors_before = _errors(m, bad)
            if bad is not None:
                o.retired_pages = bad.retired
                o.retired_pages_pending = None if bad.pending is None else bad.pending > 0
        busy = {self.index[bdf]: p for bdf in self.mine if (p := st.procs.get(self.index[bdf])) and p.processes}
        if busy and not job.force:
            out.observations = obs
            held = "; ".join(f"GPU {i} ({', '.join(f'{n} pid {pid}' for n, pid in p.processes[:3])})" for i, p in sorted(busy.items()))
            raise StageError(f"GPUs in use by another program: {held}; not taken (give --force to reset them)")
        for i, p in sorted(busy.items()):
            out.notes.append(f"GPU {i} was in use ({', '.join(n for n, _ in p.processes[:3])}); reset with --force")
        return obs

    async def prepare(self) -> None:
        """With ``--force``, a GPU reset of each present board (``amd-smi reset --gpureset -g N``), in one round trip;
        nothing otherwise (a GPU does not need a reset to run RVS). A reset that fails stops the host."""
        if not self.ctx.job.force:
            return
        script = "; ".join(
            f"if out=$({quote_argv([self.smi, 'reset', '--gpureset', '-g', str(i)])} 2>&1); then echo ok {i}; "
            f'else echo failed {i} "$(printf \'%s\' "$out" | tail -n 1 | head -c 200)"; fi'
            for i in sorted(self.index.values())
        )  # fmt: skip
        for ln in (await self.ctx.run(script, timeout=self.ctx.job.command_timeout * 2, what=f"{self.smi} reset")).splitlines():
            word, _, rest = ln.partition(" ")
            if word == "failed":
                gpu, _, why = rest.partition(" ")
                raise StageError(f"{self.smi} reset GPU {gpu} failed" + (f": {why.strip()}" if why.strip() else ""))

    async def workload(self) -> None:
        """RVS GST on every GPU at once, its configuration written for this run's length; ``amd-smi metric`` sampled
        beside it every ``interval`` seconds."""
        ctx, job, cfg = self.ctx, self.ctx.job, self.cfg
        conf_path = f"{ctx.work.rstrip('/')}/rvs-gst.conf"
        conf = cfg.rvs.conf.format(device="all", seconds_ms=int(job.seconds * 1000), target_stress=f"{cfg.rvs.target_stress:g}")
        await ctx.run(f"mkdir -p {shlex.quote(ctx.work)} && printf '%s' {shlex.quote(conf)} > {shlex.quote(conf_path)}",
                      what="writing the RVS configuration")  # fmt: skip
        argv = [self.rvs, *(a.format(conf=conf_path) for a in cfg.rvs.args)]
        t0 = time.monotonic()
        self.sampler = sampler = Sampler(t0)
        kept = hostio.KeptLines(head=WORKLOAD_HEAD_BYTES, tail=WORKLOAD_TAIL_BYTES)
        stop = asyncio.Event()
        # A metric names a GPU by its index only, and a GPU that falls off the bus renumbers the rest: the metric is
        # read between two listings in one round trip, and a sample is kept only when both listings agree (one
        # taken across a renumbering would give one GPU's temperature to another).
        listing = f"{quote_argv([self.smi, 'list', '--json'])} 2>&1"
        cmds = {"list": listing, "metric": f"{quote_argv([self.smi, 'metric', '--power', '--temperature', '--json'])} 2>&1",
                "list_after": listing}  # fmt: skip

        async def sample() -> None:
            while not stop.is_set():
                try:
                    parts = await ctx.host.batch(cmds, timeout=job.command_timeout, max_bytes=MAX_JSON_BYTES * 3)
                    listed, metric, after = parts.get("list"), parts.get("metric"), parts.get("list_after")
                    if listed is not None and metric is not None and after is not None and \
                            listed.exit_status == 0 and metric.exit_status == 0 and after.exit_status == 0:  # fmt: skip
                        bdf_of = {g.index: g.bdf for g in parse_list(listed.stdout)}
                        if bdf_of == {g.index: g.bdf for g in parse_list(after.stdout)}:
                            for m in parse_metric(metric.stdout):
                                bdf = bdf_of.get(m.index)
                                values = {"temp_c": m.temperature(cfg.temperature_sensors), "power_w": m.power_w}
                                if bdf in self.mine:
                                    sampler.add(bdf, **{k: v for k, v in values.items() if v is not None})
                except (AccelParseError, hostio.HostOutputError):
                    pass  # a GPU that falls off the bus can make amd-smi fail: the workload's result says so
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), job.interval)

        sampling = asyncio.create_task(sample())
        try:
            _, self.hung = await ctx.host.stream(ctx.in_session(quote_argv(argv)), deadline=t0 + job.seconds + job.grace,
                                                 on_line=lambda s, ln: kept.add(ln))  # fmt: skip
        finally:
            stop.set()
            await sampling
        self.text = kept.lines()
        ctx.out.workload_s = time.monotonic() - t0
        if self.hung:
            await ctx.stop_session("stopping the hung workload")

    async def postchecks(self) -> None:
        st = await self.state(("list", "metric", "bad_pages"), "reading the GPUs after the workload")
        report = parse_rvs("\n".join(self.text))
        by_id = dict(self.kfd)
        by_id.update({gid: bdf for gid, (_, bdf) in report.gpus.items()})  # the summary names them itself
        results = {by_id[gid]: r for gid, r in report.results.items() if gid in by_id}
        for bdf, o in self.mine.items():
            o.telemetry = self.sampler.samples.get(bdf, [])
            now = st.by_bdf.get(bdf)
            r = results.get(bdf)
            if now is not None:
                m, bad = st.metric.get(now.index), st.bad.get(now.index)
                # What the link can do was read at the pre-checks (amd-smi static); the link of the moment now.
                cap = o.link_before or {}
                o.link_after = _link(m, AmdGpu(index=now.index, max_pcie_gts=cap.get("max_speed_gts"), max_pcie_width=cap.get("max_width")))
                o.errors_after = _errors(m, bad)
                if bad is not None and bad.retired is not None:
                    o.retired_pages = bad.retired
                    o.retired_pages_pending = None if bad.pending is None else bad.pending > 0
            if r is not None and r.met is not None:
                o.evidence["result"] = r.line
                o.throughput = r.gflops
                o.workload_ok = r.met
            elif now is None:
                o.lost = f"{o.device} ({bdf}): amd-smi no longer lists it after the workload"
            elif self.hung:
                o.hung = True
            else:
                o.lost = f"{o.device} ({bdf}): no result from rvs"


class AmdInstinctDriver(AccelDriver):
    """AMD Instinct GPUs (board kind ``amd-instinct``): amd-smi for the boards and their counters, RVS GST as the
    burn-in workload."""

    kinds = (KIND,)
    criteria_file = Path(__file__).with_name("amd.criteria.yaml")

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        """amd-smi ``list``, ``static``, ``metric`` and ``bad-pages`` in one round trip, one :class:`BoardReading` per
        GPU; a read that fails is the reading's error (the sweep goes on)."""
        r = AccelReading(tool="amd-smi")
        try:
            cfg = amd_config()
        except AccelParseError as e:
            r.errors["amd-smi"] = str(e)
            return r
        smi = str(hostvars.get("fleetctl_amd_smi_cmd") or cfg.smi)
        try:
            parts = await host.batch(_commands(smi, ("list", "static", "metric", "bad_pages")), timeout=timeout,
                                     max_bytes=MAX_TOOL_BYTES * 2)  # fmt: skip
            st = _State(parts, cfg, need=("list", "static", "metric", "bad_pages"))
        except (hostio.HostOutputError, StageError) as e:
            r.errors["amd-smi"] = str(e) if isinstance(e, hostio.HostOutputError) else f"{host.target.name}: {e}"
            return r
        boards = []
        for g in st.listed:
            s, m, bad = st.static.get(g.index), st.metric.get(g.index), st.bad.get(g.index)
            boards.append(BoardReading(
                device=f"GPU {g.index}", serial=s.serial if s else None, pci_address=g.bdf, model=s.model if s else None,
                temp_c=m.temperature(cfg.temperature_sensors) if m else None, power_w=m.power_w if m else None,
                retired_pages=bad.retired if bad else None,
                retired_pages_pending=None if bad is None or bad.pending is None else bad.pending > 0,
                ecc_corrected=m.ecc_corrected if m else None, ecc_uncorrected=m.ecc_uncorrected if m else None,
                link_gen=_gen(m.pcie_gts) if m else None, link_gen_max=_gen(s.max_pcie_gts) if s else None,
                link_width=m.pcie_width if m else None, link_width_max=s.max_pcie_width if s else None,
                extra={k: v for k, v in (("uuid", g.uuid), ("deferred_ecc", m.ecc_deferred if m else None),
                                         ("unreservable_pages", bad.unreservable if bad else None)) if v is not None},
            ))  # fmt: skip
        r.boards = boards
        return r

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        return AmdStages(ctx)
