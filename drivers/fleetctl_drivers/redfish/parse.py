"""Redfish JSON -> fleetctl's typed models. Pure functions, no I/O.

Everything a BMC says is parsed here, at the edge; the capabilities fetch and
the rest of fleetctl reads models. Vendor enums go through module-level
tables; a value a table does not know maps to UNKNOWN (or None), never an
exception.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from fleetctl.interfaces.bmc import (
    NIC,
    Board,
    BootDevice,
    FirmwareComponent,
    HealthItem,
    LogEntry,
    ManagerFacts,
    PCIeDevice,
    PowerState,
    Temperature,
)

# ComputerSystem.PowerState -> fleetctl (Ironic's GET_POWER_STATE_MAP, extended)
POWER_STATE_MAP: dict[str, PowerState] = {
    "On": PowerState.ON,
    "Off": PowerState.OFF,
    "PoweringOn": PowerState.POWERING_ON,
    "PoweringOff": PowerState.POWERING_OFF,
    "Paused": PowerState.ON,  # the host is powered, its OS paused
}

# BootSourceOverrideTarget <-> fleetctl
BOOT_TARGET_TO_REDFISH: dict[BootDevice, str] = {
    BootDevice.PXE: "Pxe",
    BootDevice.CD: "Cd",
    BootDevice.HDD: "Hdd",
    BootDevice.UEFI_TARGET: "UefiTarget",
    BootDevice.BIOS_SETUP: "BiosSetup",
    BootDevice.USB: "Usb",
    BootDevice.NONE: "None",
}
BOOT_TARGET_FROM_REDFISH: dict[str, BootDevice] = {v: k for k, v in BOOT_TARGET_TO_REDFISH.items()}
BOOT_TARGET_FROM_REDFISH.update({"UefiHttp": BootDevice.PXE, "Floppy": BootDevice.USB})

# PCIeInterface.PCIeType -> generation
PCIE_GEN_MAP: dict[str, int] = {f"Gen{n}": n for n in range(1, 8)}


def power_state(value: Any) -> PowerState:
    return POWER_STATE_MAP.get(value, PowerState.UNKNOWN) if isinstance(value, str) else PowerState.UNKNOWN


def boot_device(value: Any) -> BootDevice:
    return BOOT_TARGET_FROM_REDFISH.get(value, BootDevice.UNKNOWN) if isinstance(value, str) else BootDevice.UNKNOWN


def _s(value: Any) -> str | None:
    """A string field, with the vendors' ways of saying 'nothing' mapped to None."""
    if value is None:
        return None
    text = str(value).strip()
    if text in ("", "N/A", "NA", "None", "nil", "Not Available", "Not Specified", "Unknown", "null"):
        return None
    return text


def _health(status: Any) -> tuple[str | None, str | None]:
    if not isinstance(status, dict):
        return None, None
    return _s(status.get("Health")), _s(status.get("State"))


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def parse_pci_id(value: Any, *, decimal: bool = False) -> str | None:
    """``0x10DE`` / ``10de`` / 4318 / ``"4318"`` (decimal BMCs) -> ``0x10de``."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return f"0x{value:04x}"
    text = str(value).strip().lower()
    try:
        if text.startswith("0x"):
            n = int(text, 16)
        elif decimal and text.isdigit():
            n = int(text, 10)
        else:
            n = int(text, 16)
    except ValueError:
        return None
    if n in (0xFFFF,):
        return None
    return f"0x{n:04x}"


def parse_class_code(value: Any, subclass: Any = None, *, decimal: bool = False) -> str | None:
    """PCI class (+subclass) as ``0xCCSS`` (or ``0xCC`` when only the class is known)."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        cls = value
    else:
        text = str(value).strip().lower()
        try:
            if text.startswith("0x"):
                digits = text[2:]
                if len(digits) >= 4:  # 0x020000: class, subclass, prog-if
                    return "0x" + digits.rjust(6, "0")[:4]
                cls = int(digits, 16)
            else:
                cls = int(text, 10 if decimal or len(text) <= 2 else 16)
        except ValueError:
            return None
    if subclass is not None and str(subclass).strip() != "":
        try:
            sub = subclass if isinstance(subclass, int) else int(str(subclass), 10 if decimal else 16)
            return f"0x{cls:02x}{sub:02x}"
        except ValueError:
            pass
    return f"0x{cls:02x}"


def parse_mac(value: Any) -> str | None:
    mac = _s(value)
    if not mac:
        return None
    mac = mac.lower().replace("-", ":")
    if mac in ("00:00:00:00:00:00",):
        return None
    return mac


def parse_datetime(value: Any) -> dt.datetime | None:
    text = _s(value)
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)  # a BMC without zone: assume UTC
    return t


# ------------------------------------------------------------------- system


def parse_nic(eth: dict) -> NIC:
    mac = parse_mac(eth.get("PermanentMACAddress")) or parse_mac(eth.get("MACAddress"))
    name = _s(eth.get("Name")) or _s(eth.get("Id")) or "?"
    if name in ("Ethernet Interface", "Host Ethernet Interface", "Manager Ethernet Interface"):
        name = _s(eth.get("Id")) or name
    return NIC(name=name, mac=mac)


def slot_of(text: Any) -> str | None:
    """``PCI-E Slot 5`` / ``Slot 5`` / ``PCIe Slot 5`` -> ``5``."""
    t = _s(text)
    if not t:
        return None
    m = re.search(r"slot\s*#?\s*(\w+)", t, re.IGNORECASE)
    return m.group(1) if m else t


def parse_pcie_device(dev: dict, functions: Sequence[dict], *, decimal_ids: bool = False) -> PCIeDevice:
    """A standard PCIeDevice (with its PCIeFunctions)."""
    iface = dev.get("PCIeInterface") or {}
    fn = functions[0] if functions else {}
    # the function with the lowest FunctionId is function 0
    if len(functions) > 1:
        fn = min(functions, key=lambda f: _num(f.get("FunctionId")) or 0)
    health, _state = _health(dev.get("Status"))
    slot = None
    sl = dev.get("Slot")
    if isinstance(sl, dict):
        part = (sl.get("Location") or {}).get("PartLocation") or {}
        slot = _s(part.get("LocationOrdinalValue"))
    if slot is None and "slot" in str(dev.get("Description", "")).lower():
        slot = slot_of(dev.get("Description"))
    firmware = _s(dev.get("FirmwareVersion"))
    return PCIeDevice(
        id=str(dev.get("Id") or dev.get("@odata.id") or "?"),
        name=_s(dev.get("Name")) or _s(dev.get("Model")),
        manufacturer=_s(dev.get("Manufacturer")),
        vendor_id=parse_pci_id(fn.get("VendorId"), decimal=decimal_ids),
        device_id=parse_pci_id(fn.get("DeviceId"), decimal=decimal_ids),
        class_code=parse_class_code(fn.get("ClassCode"), decimal=decimal_ids),
        serial=_s(dev.get("SerialNumber")),
        slot=slot,
        link_gen=PCIE_GEN_MAP.get(str(iface.get("PCIeType"))),
        link_width=int(iface["LanesInUse"]) if isinstance(iface.get("LanesInUse"), int) else None,
        max_link_gen=PCIE_GEN_MAP.get(str(iface.get("MaxPCIeType"))),
        max_link_width=int(iface["MaxLanes"]) if isinstance(iface.get("MaxLanes"), int) else None,
        firmware=firmware,
        health=health,
    )


def parse_hpe_pci_device(pci: dict, device: dict | None) -> PCIeDevice:
    """HPE iLO 5's Oem ``HpeServerPciDevice`` (ids, bus address) joined with its
    ``HpeServerDevice`` (serial, firmware, health) where one links to it."""
    device = device or {}
    seg, bus, devno, fn = (pci.get(k) for k in ("SegmentNumber", "BusNumber", "DeviceNumber", "FunctionNumber"))
    address = None
    if all(isinstance(x, int) for x in (bus, devno, fn)):
        address = f"{seg or 0:04x}:{bus:02x}:{devno:02x}.{fn:x}"
    fw = (device.get("FirmwareVersion") or {}).get("Current", {}).get("VersionString")
    health, _ = _health(device.get("Status"))
    return PCIeDevice(
        id=str(pci.get("Id") or "?"),
        name=_s(device.get("Name")) or _s(pci.get("Name")),
        manufacturer=_s(device.get("Manufacturer")),
        vendor_id=parse_pci_id(pci.get("VendorID")),
        device_id=parse_pci_id(pci.get("DeviceID")),
        class_code=parse_class_code(pci.get("ClassCode"), pci.get("SubclassCode"), decimal=True),
        serial=_s(device.get("SerialNumber")),
        slot=slot_of(pci.get("LocationString")) if "slot" in str(pci.get("LocationString", "")).lower() else None,
        pci_address=address,
        firmware=_s(fw),
        health=health,
    )


# ------------------------------------------------------------------- boards


@dataclass(frozen=True)
class BoardRule:
    kind: str
    vendor_ids: frozenset[str] = frozenset()
    device_ids: frozenset[str] = frozenset()
    class_prefixes: tuple[str, ...] = ()
    name_patterns: tuple[re.Pattern, ...] = field(default=())

    def matches(self, dev: PCIeDevice) -> bool:
        if dev.vendor_id and dev.vendor_id in self.vendor_ids:
            ok = not self.device_ids or dev.device_id in self.device_ids
            if ok and self.class_prefixes and dev.class_code:
                ok = any(dev.class_code.startswith(p) for p in self.class_prefixes)
            if ok:
                return True
        label = " ".join(x for x in (dev.manufacturer, dev.name) if x)
        return any(p.search(label) for p in self.name_patterns)


DEFAULT_ACCELERATORS_FILE = Path(__file__).with_name("accelerators.yaml")


@lru_cache(maxsize=8)
def load_board_rules(path: str | None = None) -> tuple[BoardRule, ...]:
    """Rules from ``path``, ``$FLEETCTL_ACCELERATORS_FILE``, or the bundled file."""
    import yaml  # only needed once per process

    file = Path(path or os.environ.get("FLEETCTL_ACCELERATORS_FILE") or DEFAULT_ACCELERATORS_FILE)
    data = yaml.safe_load(file.read_text()) or {}
    rules = []
    for r in data.get("rules") or []:
        rules.append(
            BoardRule(
                kind=r["kind"],
                vendor_ids=frozenset(pid for v in r.get("vendor_ids") or [] if (pid := parse_pci_id(v))),
                device_ids=frozenset(pid for v in r.get("device_ids") or [] if (pid := parse_pci_id(v))),
                class_prefixes=tuple(str(c).lower() for c in r.get("class_prefixes") or []),
                name_patterns=tuple(re.compile(p, re.IGNORECASE) for p in r.get("name_patterns") or []),
            )
        )
    return tuple(rules)


def classify_boards(devices: Iterable[PCIeDevice], rules: Sequence[BoardRule]) -> list[Board]:
    boards = []
    for dev in devices:
        for rule in rules:
            if rule.matches(dev):
                boards.append(
                    Board(
                        kind=rule.kind,
                        serial=dev.serial,
                        slot=dev.slot,
                        pci_address=dev.pci_address,
                        model=dev.name,
                        firmware={"board": dev.firmware} if dev.firmware else {},
                        pcie_device_id=dev.id,
                        health=dev.health,
                    )
                )
                break
    return boards


# Processor.ProcessorType values that are accelerator boards (DMTF Processor
# schema; OpenBMC and NVIDIA's HGX BMCs list GPUs this way). FPGA, DSP and the
# rest stay out: fleetctl has no board kind for them.
PROCESSOR_BOARD_TYPES: frozenset[str] = frozenset({"GPU", "Accelerator"})

_PCI_ID_TEXT = re.compile(r"(?:0x)?[0-9a-fA-F]{4}")


def _strict_pci_id(value: Any) -> str | None:
    """A PCI id only when it looks like one: ProcessorId.VendorId is free text
    (``GenuineIntel``, ``NVIDIA``), and ``ADD`` must not read as 0x0add."""
    if isinstance(value, str) and not _PCI_ID_TEXT.fullmatch(value.strip()):
        return None
    return parse_pci_id(value)


def _last_segment(uri: str | None) -> str | None:
    return (uri.rstrip("/").rsplit("/", 1)[-1] or None) if uri else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ProcessorBoard:
    """A board read from ``Systems/{id}/Processors/{id}``, before merging with the PCIe boards."""

    board: Board
    uri: str  # the Processor's @odata.id, for messages
    pcie_link: str | None = None  # Links.PCIeDevice's last segment (a PCIeDevice Id), if given
    warning: str | None = None


def parse_processor_board(proc: dict, rules: Sequence[BoardRule]) -> ProcessorBoard | None:
    """A ``Processor`` whose ``ProcessorType`` is GPU or Accelerator, as a board (None for the rest).

    A GPU is kind ``gpu``. An Accelerator is classified by the board rules
    (accelerators.yaml) on its Manufacturer, Model and ProcessorId.VendorId;
    one no rule knows is counted as ``gpu`` with a warning, so an unknown
    board is seen rather than dropped.
    """
    ptype = _s(proc.get("ProcessorType"))
    if ptype not in PROCESSOR_BOARD_TYPES:
        return None
    uri = str(proc.get("@odata.id") or proc.get("Id") or "?")
    pid = _dict(proc.get("ProcessorId"))
    label = _s(proc.get("Model")) or _s(proc.get("Name"))
    view = PCIeDevice(
        id=str(proc.get("Id") or uri),
        name=label,
        manufacturer=_s(proc.get("Manufacturer")),
        vendor_id=_strict_pci_id(pid.get("VendorId")),
    )
    kind, warning = "gpu", None
    if ptype == "Accelerator":
        rule = next((r for r in rules if r.matches(view)), None)
        if rule is not None:
            kind = rule.kind
        else:
            who = " ".join(x for x in (view.manufacturer, label) if x) or "no manufacturer or model"
            warning = f"{uri}: Accelerator of unknown kind ({who}) counted as gpu"
    health, _ = _health(proc.get("Status"))
    part = _dict(_dict(proc.get("Location")).get("PartLocation"))
    slot = _s(part.get("LocationOrdinalValue"))
    if slot is None and "slot" in str(proc.get("Socket", "")).lower():
        slot = slot_of(proc.get("Socket"))
    pcie_ref = _dict(proc.get("Links")).get("PCIeDevice")
    if isinstance(pcie_ref, list):  # some services list it
        pcie_ref = pcie_ref[0] if pcie_ref else None
    pcie_link = _last_segment(pcie_ref.get("@odata.id")) if isinstance(pcie_ref, dict) else None
    firmware = _s(proc.get("FirmwareVersion"))
    board = Board(
        kind=kind,
        serial=_s(proc.get("SerialNumber")),
        slot=slot,
        model=label,
        firmware={"board": firmware} if firmware else {},
        pcie_device_id=pcie_link,
        health=health,
        bmc_id=_s(proc.get("Id")) or _last_segment(_s(proc.get("@odata.id"))),
        location=_s(part.get("ServiceLabel")),
    )
    return ProcessorBoard(board=board, uri=uri, pcie_link=pcie_link, warning=warning)


def _norm_serial(serial: str | None) -> str | None:
    return serial.strip().upper() if serial and serial.strip() else None


def merge_processor_boards(
    pcie_boards: Sequence[Board], processor_boards: Sequence[ProcessorBoard]
) -> tuple[list[Board], list[str]]:
    """The PCIe boards with the Processor boards merged in, and warnings.

    A Processor is the same board as a PCIe one when their serials agree, else
    when its ``Links.PCIeDevice`` names that PCIe device. A match fills what
    the PCIe board lacks (serial, slot, model, firmware, health); the PCIe
    board's kind and address stay. A Processor that matches nothing is a
    board of its own; when PCIe boards of the same kind are unmatched too,
    the two may be one board the BMC describes twice, and a warning says so.
    """
    merged = [b.model_copy(deep=True) for b in pcie_boards]
    matched: set[int] = set()
    extra: list[ProcessorBoard] = []
    warnings = [p.warning for p in processor_boards if p.warning]
    for pb in processor_boards:
        serial = _norm_serial(pb.board.serial)
        hit = None
        if serial:
            hit = next((i for i, b in enumerate(merged) if i not in matched and _norm_serial(b.serial) == serial), None)
        if hit is None and pb.pcie_link:
            hit = next((i for i, b in enumerate(merged) if i not in matched and b.pcie_device_id == pb.pcie_link), None)
        if hit is None:
            extra.append(pb)
            continue
        matched.add(hit)
        b, p = merged[hit], pb.board
        merged[hit] = b.model_copy(
            update={
                "serial": b.serial or p.serial,
                "slot": b.slot or p.slot,
                "model": b.model or p.model,
                "firmware": {**p.firmware, **b.firmware},
                "health": b.health or p.health,
                "bmc_id": b.bmc_id or p.bmc_id,
                "location": b.location or p.location,
            }
        )
    for pb in extra:
        loose = [b for i, b in enumerate(merged) if i not in matched and b.kind == pb.board.kind]
        if loose:
            warnings.append(
                f"{pb.uri}: {pb.board.kind} board (serial {pb.board.serial or 'unknown'}) matches no PCIe device "
                f"by serial or link; kept as its own board, it may be one of {len(loose)} unmatched PCIe board(s)"
            )
    return number_shared_serials(merged + [pb.board for pb in extra]), warnings


def _natural(text: str | None) -> tuple[Any, ...]:
    """``GPU_10`` after ``GPU_2``: digits compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", (text or "").casefold()) if p)


def number_shared_serials(boards: Sequence[Board]) -> list[Board]:
    """The boards, those reporting one serial between them numbered 1.. in ``position``.

    NOTE(issue 20): NVIDIA GB200/GB300 compute trays report one serial per
    superchip module, shared by its two GPUs (NVIDIA k8s-test-infra #727, from
    real nvidia-smi captures); the BMC lists both GPUs as Processors with that
    serial. Their order is the BMC's own ids (GPU_0 before GPU_1), else the
    slot, else the PCIe device, so a board keeps its position from sweep to sweep.
    """
    groups: dict[str, list[int]] = {}
    for i, b in enumerate(boards):
        if (serial := _norm_serial(b.serial)) is not None:
            groups.setdefault(serial, []).append(i)
    out = list(boards)
    for idx in groups.values():
        if len(idx) < 2:
            continue
        ordered = sorted(idx, key=lambda i: (_natural(out[i].bmc_id), _natural(out[i].slot), _natural(out[i].pcie_device_id),
                                             _natural(out[i].pci_address), i))  # fmt: skip
        for n, i in enumerate(ordered, start=1):
            out[i] = out[i].model_copy(update={"position": n})
    return out


# ----------------------------------------------------------------- firmware


def parse_firmware(item: dict) -> FirmwareComponent:
    health, _ = _health(item.get("Status"))
    upd = item.get("Updateable")
    return FirmwareComponent(
        id=str(item.get("Id") or item.get("@odata.id") or "?"),
        name=_s(item.get("Name")) or str(item.get("Id") or "?"),
        version=_s(item.get("Version")),
        updateable=upd if isinstance(upd, bool) else None,
        software_id=_s(item.get("SoftwareId")),
        health=health,
    )


# ------------------------------------------------------------------- health


def _item(obj: dict, *, default_name: str, units: str | None = None) -> HealthItem:
    health, state = _health(obj.get("Status"))
    name = _s(obj.get("Name")) or _s(obj.get("FanName")) or _s(obj.get("MemberId")) or default_name
    reading = _num(obj.get("Reading"))
    return HealthItem(
        name=name, health=health, state=state, reading=reading, units=_s(obj.get("ReadingUnits")) or units
    )


def parse_old_power(power: dict) -> list[HealthItem]:
    """``Chassis/{id}/Power`` PowerSupplies (the old schema)."""
    out = []
    for i, ps in enumerate(power.get("PowerSupplies") or []):
        if not isinstance(ps, dict):
            continue
        item = _item(ps, default_name=f"PSU {i}")
        # NOTE: HPE iLO 5 names every PSU "HpeServerPowerSupply" and AMI "nil": use the bay
        if item.name in ("HpeServerPowerSupply",) or not _s(ps.get("Name")):
            bay = (((ps.get("Oem") or {}).get("Hpe") or {}).get("BayNumber")) or ps.get("MemberId")
            item.name = f"PSU {bay}" if bay is not None else f"PSU {i}"
        item.reading = _num(ps.get("LastPowerOutputWatts")) or _num(ps.get("PowerOutputWatts"))
        item.units = "W" if item.reading is not None else None
        out.append(item)
    return out


def parse_old_thermal(thermal: dict) -> tuple[list[HealthItem], list[Temperature]]:
    """``Chassis/{id}/Thermal`` Fans and Temperatures (the old schema)."""
    fans = [_item(f, default_name=f"Fan {i}") for i, f in enumerate(thermal.get("Fans") or []) if isinstance(f, dict)]
    temps = []
    for i, t in enumerate(thermal.get("Temperatures") or []):
        if not isinstance(t, dict):
            continue
        health, state = _health(t.get("Status"))
        temps.append(
            Temperature(
                name=_s(t.get("Name")) or f"Temperature {i}",
                health=health,
                state=state,
                reading=_num(t.get("ReadingCelsius")),
                units="Cel",
                upper_critical=_num(t.get("UpperThresholdCritical")),
                upper_fatal=_num(t.get("UpperThresholdFatal")),
            )
        )
    return fans, temps


def parse_new_fan(fan: dict) -> HealthItem:
    """``ThermalSubsystem/Fans/{id}`` (the new schema): SpeedPercent is an excerpt of a Sensor."""
    item = _item(fan, default_name=str(fan.get("Id") or "fan"))
    sp = fan.get("SpeedPercent") or {}
    if isinstance(sp, dict):
        if sp.get("Reading") is not None:
            item.reading, item.units = _num(sp.get("Reading")), "%"
        elif sp.get("SpeedRPM") is not None:
            item.reading, item.units = _num(sp.get("SpeedRPM")), "RPM"
    return item


def parse_new_psu(psu: dict) -> HealthItem:
    item = _item(psu, default_name=str(psu.get("Id") or "psu"))
    return item


def parse_sensor_temperature(sensor: dict) -> Temperature | None:
    """A ``Sensors`` member, when it is a temperature."""
    if sensor.get("ReadingType") != "Temperature" and sensor.get("ReadingUnits") not in ("Cel", "C"):
        return None
    health, state = _health(sensor.get("Status"))
    th = sensor.get("Thresholds") or {}

    def threshold(name: str) -> float | None:
        v = th.get(name)
        return _num(v.get("Reading")) if isinstance(v, dict) else None

    return Temperature(
        name=_s(sensor.get("Name")) or str(sensor.get("Id")),
        health=health,
        state=state,
        reading=_num(sensor.get("Reading")),
        units="Cel",
        upper_critical=threshold("UpperCritical"),
        upper_fatal=threshold("UpperFatal"),
    )


def parse_log_entry(entry: dict, log_uri: str) -> LogEntry:
    return LogEntry(
        id=str(entry.get("Id") or entry.get("@odata.id") or "?"),
        log=log_uri,
        created=parse_datetime(entry.get("Created")) or parse_datetime(entry.get("EventTimestamp")),
        severity=_s(entry.get("Severity")),
        message=_s(entry.get("Message")),
        message_id=_s(entry.get("MessageId")),
    )


# ------------------------------------------------------------------ manager


def parse_manager(manager: dict, *, now: dt.datetime | None = None) -> ManagerFacts:
    when = parse_datetime(manager.get("DateTime"))
    skew = None
    if when is not None:
        now = now or dt.datetime.now(dt.UTC)
        skew = round((when - now).total_seconds(), 3)
    health, _ = _health(manager.get("Status"))
    return ManagerFacts(
        id=_s(manager.get("Id")),
        model=_s(manager.get("Model")),
        firmware_version=_s(manager.get("FirmwareVersion")),
        datetime=when,
        clock_skew_seconds=skew,
        health=health,
    )


def whole_collection(value: Any, max_members: int, *, expanded: bool = False) -> dict | None:
    """``value`` when it is a collection document read whole in one answer (an ``$expand`` with levels brought it
    inline, or a deep read answered it): a ``Members`` list within ``max_members`` and no next page; else None.

    What it cannot tell is left to the usual reads: a BMC that ignores ``$levels`` answers a link (or a
    collection whose members are links, which :meth:`RedfishClient.expand` then reads one by one, or with
    ``expanded`` not at all: one expanded read of it costs less); a paged
    collection is walked by :meth:`RedfishClient.members`, with its bounds.
    """
    if not isinstance(value, dict) or "Members@odata.nextLink" in value:
        return None
    members = value.get("Members")
    if not isinstance(members, list) or len(members) > max_members:
        return None
    if expanded and members and all(isinstance(m, dict) and set(m) <= {"@odata.id", "@odata.type"} for m in members):
        return None  # ``expanded``: a collection inline with only links (``$levels`` one short) is read as before
    return value
