"""Redfish resources of a lab BMC: JSON rendering and request dispatch.

``dispatch(bmc, method, path, body)`` is transport-free: it returns
``(status, body, headers)``, so the HTTP layer stays thin and the Redfish
behaviour can be tested without sockets. Shapes follow the recorded real
services (DMTF, iLO 5, OpenBMC, AMI); ids and slot names come from the
flavour table.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fleetctl_lab.bmc.flavours import HGX_SYSTEM
from fleetctl_lab.bmc.state import (
    FAULTS,
    SESSIONS_SHOWN_UNDER,
    LabActionError,
    SimBMC,
    _board_fw_id,
    _msg,
    iso,
)

R = "/redfish/v1"
Result = tuple[int, Any, dict[str, str]]

# Assumed PCI ids. NOTE: MN-Core 2's vendor/device ids are not public; the
# lab uses a placeholder the MN-Core driver keeps in configuration as well.
PCI_IDS = {
    "mncore2": ("0xf1ee", "0x0002", "0x120000", "Preferred Networks"),  # assumed, not public: the same placeholder as accelerators.yaml
    "gpu": ("0x10de", "0x2331", "0x030200", "NVIDIA Corporation"),  # H100 PCIe
    "amd-instinct": ("0x1002", "0x74a1", "0x120000", "Advanced Micro Devices, Inc. [AMD/ATI]"),  # MI300X (amd-smi static, DEVICE_ID)
    "nic": ("0x15b3", "0x101d", "0x020000", "Mellanox Technologies"),  # ConnectX-6 Dx
}
# The GPUs of an "hgx" tray (GB200: 10de:2941, a 3D controller).
HGX_GPU_PCI_IDS = ("0x10de", "0x2941", "0x030200", "NVIDIA Corporation")


def _ref(path: str) -> dict[str, str]:
    return {"@odata.id": path}


def _collection(path: str, type_: str, name: str, members: list[str]) -> dict[str, Any]:
    return {
        "@odata.id": path,
        "@odata.type": f"#{type_}.{type_}",
        "Name": name,
        "Members": [_ref(m) for m in members],
        "Members@odata.count": len(members),
    }


def error_body(bmc_code: str, status: int, message_id: str, message: str, args: list[str] | None = None) -> dict[str, Any]:
    """A Redfish error body with ``@Message.ExtendedInfo``."""
    return {
        "error": {
            "code": bmc_code,
            "message": "A general error has occurred. See ExtendedInfo for more information."
            if status >= 500 or bmc_code.endswith("GeneralError")
            else message,
            "@Message.ExtendedInfo": [_msg(message_id, message, "Critical" if status >= 500 else "Warning", args)],
        }
    }


def err(bmc: SimBMC, status: int, message_id: str, message: str, args: list[str] | None = None) -> Result:
    return status, error_body(bmc.flavour.error_code, status, message_id, message, args), {}


def not_found(bmc: SimBMC, path: str) -> Result:
    return err(bmc, 404, "Base.1.18.ResourceMissingAtURI", f"The resource at the URI {path} was not found.", [path])


def service_root(bmc: SimBMC) -> dict[str, Any]:
    s = bmc.spec
    return {
        "@odata.id": f"{R}",
        "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
        "Id": "RootService",
        "Name": "Root Service",
        "RedfishVersion": "1.17.0",
        "UUID": _uuid(bmc),
        "Product": s.model if bmc.flavour.product_is_model else (bmc.flavour.product or bmc.flavour.manager_model),
        "Vendor": bmc.flavour.root_vendor,
        "Systems": _ref(f"{R}/Systems"),
        "Chassis": _ref(f"{R}/Chassis"),
        "Managers": _ref(f"{R}/Managers"),
        "SessionService": _ref(f"{R}/SessionService"),
        "UpdateService": _ref(f"{R}/UpdateService"),
        "TaskService": _ref(f"{R}/TaskService"),
        "AccountService": _ref(f"{R}/AccountService"),
        "Links": {"Sessions": _ref(f"{R}/SessionService/Sessions")},
        "Oem": _root_oem(bmc),
        "ProtocolFeaturesSupported": {
            "ExpandQuery": ({"ExpandAll": False, "Levels": True, "MaxLevels": bmc.flavour.expand_levels, "Links": False, "NoLinks": True}
                            if bmc.flavour.expand else {"ExpandAll": False, "Levels": False, "Links": False, "NoLinks": False}),
            "FilterQuery": False, "SelectQuery": False,
            # Only where the vendor's recorded service says it (Flavour.only_query); the others as they were.
            **({"OnlyMemberQuery": True} if bmc.flavour.only_query else {}),
        },  # fmt: skip
    }


def _root_oem(bmc: SimBMC) -> dict[str, Any]:
    """The service root's Oem section: the vendor's key with what it carries there."""
    f, s = bmc.flavour, bmc.spec
    if f.name == "generic":
        return {"Lab": {"Name": s.name}}
    if f.root_oem == "Hpe":  # iLO 6/7: the manager's type and firmware, as HpeiLOServiceExt
        return {"Hpe": {"@odata.type": "#HpeiLOServiceExt.v2_5_0.HpeiLOServiceExt",
                        "Manager": [{"ManagerType": f.manager_model, "ManagerFirmwareVersion": bmc.firmware.get("BMC", "")}],
                        "Moniker": {"PRODGEN": f.manager_model, "PRODNAM": "Integrated Lights-Out"}}}  # fmt: skip
    if f.root_oem == "Dell":  # iDRAC 9: DellServiceRoot with the service tag
        return {"Dell": {"@odata.type": "#DellServiceRoot.v1_0_0.DellServiceRoot", "IsBranded": 0,
                         "ManagerMACAddress": _bmc_mac(bmc), "ServiceTag": s.serial}}  # fmt: skip
    if f.root_oem:
        return {f.root_oem: {}}
    return {}


def _bmc_mac(bmc: SimBMC) -> str:
    """The MAC the Manager reports: its ``bmc`` NIC's (the one its switch port learns), else a made-up one by index."""
    if bmc.spec.bmc_mac:
        return bmc.spec.bmc_mac
    # No `bmc` NIC with a MAC in the spec (generated labs: cabled to no switch): a stable made-up MAC of its own.
    n = bmc.index
    return f"02:1b:{(n >> 24) & 255:02x}:{(n >> 16) & 255:02x}:{(n >> 8) & 255:02x}:{n & 255:02x}"


def _uuid(bmc: SimBMC) -> str:
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{bmc.spec.name}.{bmc.spec.serial}.lab"))


# --- Systems ---------------------------------------------------------------------


def system(bmc: SimBMC) -> dict[str, Any]:
    s, f = bmc.spec, bmc.flavour
    p = f"{R}/Systems/{bmc.sys_id}"
    health = bmc.system_health()
    mem_health = "Warning" if "memory_errors" in bmc.faults else "OK"
    return {
        "@odata.id": p,
        "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
        "Id": bmc.sys_id,
        "Name": s.model if f.name != "openbmc" else "system",
        "SystemType": "Physical",
        "Manufacturer": s.manufacturer,
        "Model": s.model,
        "SerialNumber": s.serial,
        "SKU": "",
        "PartNumber": "",
        "UUID": _uuid(bmc),
        "HostName": s.name,
        "AssetTag": bmc.asset_tag,
        "IndicatorLED": bmc.indicator_led,
        "PowerState": bmc.power_state(),
        "BiosVersion": bmc.firmware.get("BIOS", ""),
        "Status": {"State": "Enabled", "Health": health, "HealthRollup": health},
        "ProcessorSummary": {"Count": 2, "Model": "Lab Xeon 6430", "Status": {"State": "Enabled", "Health": "OK", "HealthRollup": "OK"}},
        "MemorySummary": {
            "TotalSystemMemoryGiB": 1024,
            "Status": {"State": "Enabled", "Health": mem_health, "HealthRollup": mem_health},
        },
        "Boot": {
            "BootSourceOverrideEnabled": bmc.boot_enabled,
            "BootSourceOverrideTarget": bmc.boot_target,
            "BootSourceOverrideTarget@Redfish.AllowableValues": list(f.boot_targets),
            "BootSourceOverrideMode": bmc.boot_mode,
            "BootSourceOverrideEnabled@Redfish.AllowableValues": ["Disabled", "Once", "Continuous"],
        },
        "Bios": _ref(f"{p}/Bios"),
        "Processors": _ref(f"{p}/Processors"),
        "Memory": _ref(f"{p}/Memory"),
        "EthernetInterfaces": _ref(f"{p}/EthernetInterfaces"),
        "LogServices": _ref(f"{p}/LogServices"),
        "Links": {
            "Chassis": [_ref(f"{R}/Chassis/{bmc.chassis_id}")],
            "ManagedBy": [_ref(f"{R}/Managers/{bmc.manager_id}")],
        },
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": f"{p}/Actions/ComputerSystem.Reset",
                "ResetType@Redfish.AllowableValues": list(f.reset_types),
            }
        },
        **({"VirtualMedia": _ref(f"{p}/VirtualMedia")} if f.vm_under == "systems" else {}),
        **_system_oem(bmc),
    }


def _system_oem(bmc: SimBMC) -> dict[str, Any]:
    f = bmc.flavour
    on = bmc.power_state() == "On"
    if f.root_oem == "Hpe":
        return {"Oem": {"Hpe": {"@odata.type": "#HpeComputerSystemExt.v2_16_0.HpeComputerSystemExt",
                                "PostState": "FinishedPost" if on else "PowerOff", "ServerSignature": _uuid(bmc)}}}  # fmt: skip
    if f.root_oem == "Dell":
        return {"Oem": {"Dell": {"@odata.type": "#DellOem.v1_3_0.DellOemResources",
                                 "DellSystem": {"@odata.type": "#DellSystem.v1_4_0.DellSystem", "Id": bmc.sys_id,
                                                "ChassisServiceTag": bmc.spec.serial, "NodeID": bmc.spec.serial,
                                                "SystemGeneration": "16G Monolithic"}}}}  # fmt: skip
    return {}


# --- an hgx tray's GPUs ---------------------------------------------------------------


def _gpus(bmc: SimBMC) -> list[Any]:
    """The GPU boards of an hgx tray, in slot order (their index is the GPU_<n> of every id)."""
    if bmc.flavour.gpu_processors != "hgx":
        return []
    return sorted((b for b in bmc.spec.boards if b.kind == "gpu"), key=lambda b: b.slot)


def _gpu_chassis(bmc: SimBMC) -> list[str]:
    return [f"HGX_GPU_{i}" for i in range(len(_gpus(bmc)))]


def shown_serials(bmc: SimBMC) -> dict[int, str | None]:
    """The serial the BMC shows for each board, by slot (None: no SerialNumber at all).

    An hgx tray shows one serial per processor module, shared by its two GPUs (the module's first
    GPU's); the ``board_no_serial`` fault hides one board's serial.
    """
    out: dict[int, str | None] = {b.slot: b.serial for b in bmc.spec.boards}
    gpus = _gpus(bmc)
    for i, b in enumerate(gpus):
        out[b.slot] = gpus[i - i % 2].serial
    hidden = bmc.board_without_serial()
    if hidden is not None and hidden in out:
        out[hidden] = None
    return out


def hgx_system(bmc: SimBMC) -> dict[str, Any]:
    """Systems/HGX_Baseboard_0: the GPUs' baseboard as a ComputerSystem of its own (no serial, no boot)."""
    p = f"{R}/Systems/{HGX_SYSTEM}"
    health = "OK"
    return {
        "@odata.id": p,
        "@odata.type": "#ComputerSystem.v1_22_0.ComputerSystem",
        "Id": HGX_SYSTEM,
        "Name": HGX_SYSTEM,
        "Description": "Computer System",
        "SystemType": "Physical",
        "Manufacturer": "NVIDIA",
        "Model": bmc.spec.model,
        "PowerState": bmc.power_state(),
        "Status": {"State": "Enabled", "Health": health, "HealthRollup": health, "Conditions": []},
        "MemorySummary": {"TotalSystemMemoryGiB": 186 * len(_gpus(bmc))},
        "Processors": _ref(f"{p}/Processors"),
        "Links": {
            "Chassis": [_ref(f"{R}/Chassis/{c}") for c in _gpu_chassis(bmc)],
            "ManagedBy": [_ref(f"{R}/Managers/{bmc.manager_id}")],
        },
        "Oem": {"Nvidia": {"@odata.type": "#NvidiaComputerSystem.v1_1_0.NvidiaComputerSystem", "ISTModeEnabled": False}},
    }


def hgx_processors(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Systems/{HGX_SYSTEM}/Processors"
    return _collection(p, "ProcessorCollection", "Processor Collection", [f"{p}/GPU_{i}" for i in range(len(_gpus(bmc)))])


def hgx_gpu(bmc: SimBMC, gid: str) -> dict[str, Any] | None:
    """Systems/HGX_Baseboard_0/Processors/GPU_<n>, shaped as the GB300 recording (flavours.py)."""
    gpus = _gpus(bmc)
    i = next((k for k in range(len(gpus)) if gid == f"GPU_{k}"), None)
    if i is None:
        return None
    b = gpus[i]
    p = f"{R}/Systems/{HGX_SYSTEM}/Processors/{gid}"
    dev = f"{R}/Chassis/HGX_GPU_{i}/PCIeDevices/{gid}"
    lanes, gen = b.max_lanes, b.pcie_gen
    fault = bmc.pcie_fault_for(b.slot, _first_board_slot(bmc))
    if fault:
        lanes, gen = fault["lanes"], fault["gen"] or gen
    doc: dict[str, Any] = {
        "@odata.id": p,
        "@odata.type": "#Processor.v1_20_0.Processor",
        "Id": gid,
        "Name": "Processor",
        "ProcessorType": "GPU",
        "Manufacturer": "NVIDIA",
        "Model": b.model,
        "FirmwareVersion": ", ".join(bmc.board_firmware.get(_board_fw_id(b.kind, b.slot, c), v) for c, v in b.firmware.items()),
        "PartNumber": "2901-886-A1",
        "UUID": f"{_uuid(bmc)[:-4]}{i:04d}",
        "Location": {
            "PartLocation": {"LocationType": "Embedded", "ServiceLabel": f"GPU_{i % 2}"},
            "PartLocationContext": f"HGX_Chassis_0/ProcessorModule_{i // 2}",
        },
        "Links": {
            "Chassis": _ref(f"{R}/Chassis/HGX_GPU_{i}"),
            "PCIeDevice": _ref(dev),
            "PCIeFunctions": [_ref(f"{dev}/PCIeFunctions/0")],
        },
        "SystemInterface": {"InterfaceType": "PCIe", "PCIe": {"LanesInUse": lanes, "MaxLanes": b.max_lanes, "PCIeType": gen,
                                                               "MaxPCIeType": b.pcie_gen}},  # fmt: skip
        "Status": {"State": "Enabled", "Health": "OK", "HealthRollup": "OK", "Conditions": []},
        "Oem": {"Nvidia": {"@odata.type": "#NvidiaProcessor.v1_6_0.NvidiaGPU", "MIGModeEnabled": False, "TotalNumberNVLinks": 18}},
    }
    serial = shown_serials(bmc).get(b.slot)
    if serial is not None:
        doc["SerialNumber"] = serial
    return doc


def gpu_chassis_doc(bmc: SimBMC, cid: str) -> dict[str, Any]:
    """Chassis/HGX_GPU_<n>: a GPU's own chassis, holding its PCIe device."""
    i = int(cid.rsplit("_", 1)[1])
    b = _gpus(bmc)[i]
    p = f"{R}/Chassis/{cid}"
    doc: dict[str, Any] = {
        "@odata.id": p,
        "@odata.type": "#Chassis.v1_23_0.Chassis",
        "Id": cid,
        "Name": cid,
        "ChassisType": "Component",
        "Manufacturer": "NVIDIA",
        "Model": b.model,
        "Status": {"State": "Enabled", "Health": "OK", "HealthRollup": "OK"},
        "PCIeDevices": _ref(f"{p}/PCIeDevices"),
        "Links": {"ComputerSystems": [_ref(f"{R}/Systems/{HGX_SYSTEM}")], "ManagedBy": [_ref(f"{R}/Managers/{bmc.manager_id}")]},
    }
    serial = shown_serials(bmc).get(b.slot)
    if serial is not None:
        doc["SerialNumber"] = serial
    return doc


def bios(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Systems/{bmc.sys_id}/Bios"
    return {
        "@odata.id": p,
        "@odata.type": "#Bios.v1_2_0.Bios",
        "Id": "Bios",
        "Name": "BIOS Configuration Current Settings",
        "AttributeRegistry": "BiosAttributeRegistryLab.v1_0_0",
        "Attributes": dict(bmc.bios),
        "@Redfish.Settings": {
            "@odata.type": "#Settings.v1_3_5.Settings",
            "SettingsObject": _ref(f"{p}/Settings"),
            "SupportedApplyTimes": ["OnReset"],
            **({"Time": iso(bmc.bios_applied_at)} if bmc.bios_applied_at else {}),
        },
        "Actions": {"#Bios.ResetBios": {"target": f"{p}/Actions/Bios.ResetBios"}},
    }


def bios_settings(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Systems/{bmc.sys_id}/Bios/Settings"
    return {
        "@odata.id": p,
        "@odata.type": "#Bios.v1_2_0.Bios",
        "Id": "Settings",
        "Name": "BIOS Configuration Pending Settings",
        "Attributes": {**bmc.bios, **bmc.bios_pending},
    }


def ethernet_interfaces(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Systems/{bmc.sys_id}/EthernetInterfaces"
    return _collection(p, "EthernetInterfaceCollection", "Ethernet Interfaces", [f"{p}/{n.name}" for n in bmc.spec.nics])


def ethernet_interface(bmc: SimBMC, name: str) -> dict[str, Any] | None:
    for n in bmc.spec.nics:
        if n.name == name:
            on = bmc.power_state() == "On"
            return {
                "@odata.id": f"{R}/Systems/{bmc.sys_id}/EthernetInterfaces/{n.name}",
                "@odata.type": "#EthernetInterface.v1_9_0.EthernetInterface",
                "Id": n.name,
                "Name": n.name,
                "MACAddress": n.mac,
                "PermanentMACAddress": n.mac,
                "SpeedMbps": n.speed_mbps,
                "LinkStatus": "LinkUp" if on else "LinkDown",
                "InterfaceEnabled": True,
                "Status": {"State": "Enabled", "Health": "OK"},
            }
    return None


def memory_collection(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Systems/{bmc.sys_id}/Memory"
    return _collection(p, "MemoryCollection", "Memory Module Collection", [f"{p}/{d}" for d in _dimms()])


def _dimms() -> list[str]:
    return [f"DIMM_{c}{i}" for c in "ABCDEFGH" for i in (1, 2)]


def memory(bmc: SimBMC, dimm: str) -> dict[str, Any] | None:
    if dimm not in _dimms():
        return None
    bad = "memory_errors" in bmc.faults and dimm == "DIMM_A1"
    return {
        "@odata.id": f"{R}/Systems/{bmc.sys_id}/Memory/{dimm}",
        "@odata.type": "#Memory.v1_17_0.Memory",
        "Id": dimm,
        "Name": dimm,
        "CapacityMiB": 65536,
        "MemoryDeviceType": "DDR5",
        "OperatingSpeedMhz": 4800,
        "Manufacturer": "Lab Memory",
        "SerialNumber": f"{bmc.spec.serial}-{dimm}",
        "DeviceLocator": dimm,
        "Status": {"State": "Enabled", "Health": "Warning" if bad else "OK"},
    }


def _video_slots(bmc: SimBMC) -> dict[str, Any]:
    """iDRAC's GPUs as Processors: Video.Slot.<slot>-1 -> board."""
    if bmc.flavour.gpu_processors != "idrac":
        return {}
    return {f"Video.Slot.{b.slot}-1": b for b in sorted(bmc.spec.boards, key=lambda b: b.slot) if b.kind == "gpu"}


def processors(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Systems/{bmc.sys_id}/Processors"
    ids = [*bmc.flavour.cpu_ids, *_video_slots(bmc)]
    # An hgx tray's host lists the baseboard's GPUs among its Processors, by their HGX_Baseboard_0
    # URIs (the GB300 recording's Systems/System_0/Processors, flavours.py).
    gpus = [f"{R}/Systems/{HGX_SYSTEM}/Processors/GPU_{i}" for i in range(len(_gpus(bmc)))]
    return _collection(p, "ProcessorCollection", "Processors Collection", [f"{p}/{i}" for i in ids] + gpus)


def _video_processor(bmc: SimBMC, pid: str, b: Any) -> dict[str, Any]:
    """An iDRAC 9 GPU Processor (Video.Slot.<slot>-1), linked to its PCIe device."""
    dev = next(d for d in _pcie_list(bmc) if d["kind"] == b.kind and d["slot"] == b.slot)
    doc: dict[str, Any] = {
        "@odata.id": f"{R}/Systems/{bmc.sys_id}/Processors/{pid}",
        "@odata.type": "#Processor.v1_18_0.Processor",
        "Id": pid,
        "Name": pid,
        "ProcessorType": "GPU",
        "Manufacturer": "NVIDIA Corporation",
        "Model": b.model,
        "FirmwareVersion": dev["firmware"],
        "Location": {"PartLocation": {"LocationType": "Slot", "LocationOrdinalValue": b.slot, "ServiceLabel": f"Slot {b.slot}"}},
        "Links": {"PCIeDevice": _ref(f"{R}/Chassis/{dev['chassis']}/PCIeDevices/{dev['id']}")},
        "Status": {"State": "Enabled", "Health": "OK"},
        "Oem": {"Dell": {"@odata.type": "#DellOem.v1_3_0.DellOemResources",
                         "DellVideo": {"@odata.type": "#DellVideo.v1_0_0.DellVideo", "Id": pid, "SlotType": "PCIe",
                                       "BusNumber": int(b.pci_address.split(":")[1], 16)}}},  # fmt: skip
    }
    if dev["serial"] is not None:
        doc["SerialNumber"] = dev["serial"]
    return doc


def processor(bmc: SimBMC, cpu: str) -> dict[str, Any] | None:
    videos = _video_slots(bmc)
    if cpu in videos:
        return _video_processor(bmc, cpu, videos[cpu])
    if cpu not in bmc.flavour.cpu_ids:
        return None
    return {
        "@odata.id": f"{R}/Systems/{bmc.sys_id}/Processors/{cpu}",
        "@odata.type": "#Processor.v1_18_0.Processor",
        "Id": cpu,
        "Name": cpu,
        "Socket": cpu,
        "ProcessorType": "CPU",
        "Manufacturer": "Intel(R) Corporation",
        "Model": "Lab Xeon 6430",
        "TotalCores": 32,
        "TotalThreads": 64,
        "Status": {"State": "Enabled", "Health": "OK"},
    }


def log_services(bmc: SimBMC, base: str, names: tuple[str, ...]) -> dict[str, Any]:
    return _collection(f"{base}/LogServices", "LogServiceCollection", "Log Service Collection", [f"{base}/LogServices/{n}" for n in names])


def log_service(bmc: SimBMC, base: str, name: str) -> dict[str, Any]:
    p = f"{base}/LogServices/{name}"
    return {
        "@odata.id": p,
        "@odata.type": "#LogService.v1_3_0.LogService",
        "Id": name,
        "Name": f"{name} Log Service",
        "MaxNumberOfRecords": 500,
        "OverWritePolicy": "WrapsWhenFull",
        "ServiceEnabled": True,
        "DateTime": iso(bmc.wall_clock()),
        "Entries": _ref(f"{p}/Entries"),
        "Status": {"State": "Enabled", "Health": "OK"},
        "Actions": {"#LogService.ClearLog": {"target": f"{p}/Actions/LogService.ClearLog"}},
    }


def log_entries(bmc: SimBMC, base: str, name: str, primary: bool) -> dict[str, Any]:
    p = f"{base}/LogServices/{name}/Entries"
    entries = bmc.logs if primary else []
    return {
        "@odata.id": p,
        "@odata.type": "#LogEntryCollection.LogEntryCollection",
        "Name": f"{name} Log Entries",
        "Members": [log_entry(bmc, p, e) for e in entries],
        "Members@odata.count": len(entries),
    }


def log_entry(bmc: SimBMC, p: str, e: Any) -> dict[str, Any]:
    return {
        "@odata.id": f"{p}/{e.id}",
        "@odata.type": "#LogEntry.v1_15_0.LogEntry",
        "Id": str(e.id),
        "Name": "Log Entry",
        "EntryType": "Event" if bmc.flavour.name != "hpe" else "Oem",
        "Severity": e.severity,
        "Created": iso(e.created),
        "Message": e.message,
        "MessageId": e.message_id,
    }


# --- Chassis ------------------------------------------------------------------------


def chassis(bmc: SimBMC) -> dict[str, Any]:
    s, f = bmc.spec, bmc.flavour
    p = f"{R}/Chassis/{bmc.chassis_id}"
    h = bmc.chassis_health()
    d: dict[str, Any] = {
        "@odata.id": p,
        "@odata.type": "#Chassis.v1_23_0.Chassis",
        "Id": bmc.chassis_id,
        "Name": "Computer System Chassis",
        "ChassisType": "RackMount",
        "Manufacturer": s.manufacturer,
        "Model": s.model,
        "SerialNumber": s.serial,
        "PowerState": bmc.power_state(),
        "Status": {"State": "Enabled", "Health": h, "HealthRollup": h},
        "PCIeDevices": _ref(f"{p}/PCIeDevices"),
        "Links": {
            "ComputerSystems": [_ref(f"{R}/Systems/{bmc.sys_id}")],
            "ManagedBy": [_ref(f"{R}/Managers/{bmc.manager_id}")],
        },
    }
    if f.old_thermal:
        d["Thermal"] = _ref(f"{p}/Thermal")
        d["Power"] = _ref(f"{p}/Power")
    if f.new_thermal:
        d["ThermalSubsystem"] = _ref(f"{p}/ThermalSubsystem")
        d["PowerSubsystem"] = _ref(f"{p}/PowerSubsystem")
    if f.sensors:
        d["Sensors"] = _ref(f"{p}/Sensors")
    return d


def _pcie_id(bmc: SimBMC, pci: str, lab_id: str) -> str:
    """A PCIe device's Id in the flavour's style: the lab's (GPU3) or iDRAC's bus-device in decimal (59-0)."""
    if bmc.flavour.pcie_ids == "idrac":
        _, bus, devfn = pci.split(":")
        return f"{int(bus, 16)}-{int(devfn.split('.')[0], 16)}"
    return lab_id


def _pcie_list(bmc: SimBMC) -> list[dict[str, Any]]:
    """Every PCIe card: boards then NICs on cards, as plain dicts (``chassis``: the chassis it is under)."""
    out = []
    serials = shown_serials(bmc)
    hgx = {b.slot: i for i, b in enumerate(_gpus(bmc))}
    for b in bmc.spec.boards:
        lab_id = f"{'MNCore' if b.kind == 'mncore2' else 'GPU'}{b.slot}"
        i = hgx.get(b.slot) if b.kind == "gpu" else None
        out.append(
            {
                "id": f"GPU_{i}" if i is not None else _pcie_id(bmc, b.pci_address, lab_id),
                "chassis": f"HGX_GPU_{i}" if i is not None else bmc.chassis_id,
                "kind": b.kind,
                "slot": b.slot,
                "serial": serials.get(b.slot),
                "model": b.model,
                "pci": b.pci_address,
                "lanes": b.max_lanes,
                "gen": b.pcie_gen,
                "firmware": ", ".join(bmc.board_firmware.get(_board_fw_id(b.kind, b.slot, c), v) for c, v in b.firmware.items()),
            }
        )
    for n in bmc.spec.nics:
        if n.slot is not None:
            pci = f"0000:{(0x10 + n.slot * 0x10) & 0xFF:02x}:00.0"
            out.append(
                {
                    "id": _pcie_id(bmc, pci, f"NIC{n.slot}"),
                    "chassis": bmc.chassis_id,
                    "kind": "nic",
                    "slot": n.slot,
                    "serial": f"MT{bmc.spec.serial[-6:]}{n.slot:02d}",
                    "model": n.model,
                    "pci": pci,
                    "lanes": 16,
                    "gen": "Gen4",
                    "firmware": n.firmware,
                }
            )
    return out


def pcie_devices(bmc: SimBMC, cid: str) -> dict[str, Any]:
    p = f"{R}/Chassis/{cid}/PCIeDevices"
    ids = [f"{p}/{d['id']}" for d in _pcie_list(bmc) if d["chassis"] == cid]
    return _collection(p, "PCIeDeviceCollection", "PCIe Device Collection", ids)


def _fn_id(bmc: SimBMC, dev_id: str) -> str:
    return f"{dev_id}-0" if bmc.flavour.pcie_ids == "idrac" else "0"  # iDRAC: 59-0-0


def _first_board_slot(bmc: SimBMC) -> int | None:
    return bmc.spec.boards[0].slot if bmc.spec.boards else (bmc.spec.nics[0].slot if bmc.spec.nics else None)


def pcie_device(bmc: SimBMC, cid: str, dev_id: str) -> dict[str, Any] | None:
    for d in _pcie_list(bmc):
        if d["id"] != dev_id or d["chassis"] != cid:
            continue
        p = f"{R}/Chassis/{cid}/PCIeDevices/{dev_id}"
        vendor = PCI_IDS[d["kind"]][3]
        lanes, gen = d["lanes"], d["gen"]
        fault = bmc.pcie_fault_for(d["slot"], _first_board_slot(bmc))
        if fault:
            lanes = fault["lanes"]
            gen = fault["gen"] or gen
        doc: dict[str, Any] = {
            "@odata.id": p,
            "@odata.type": "#PCIeDevice.v1_11_0.PCIeDevice",
            "Id": dev_id,
            "Name": d["model"],
            "Description": f"Slot {d['slot']}",
            "Manufacturer": vendor,
            "Model": d["model"],
            "SerialNumber": d["serial"],
            "PartNumber": "",
            "FirmwareVersion": d["firmware"],
            "DeviceType": "SingleFunction",
            "PCIeInterface": {
                "LanesInUse": lanes,
                "MaxLanes": d["lanes"],
                "PCIeType": gen,
                "MaxPCIeType": d["gen"],
            },
            "Slot": {
                "Location": {
                    "PartLocation": {"LocationType": "Slot", "LocationOrdinalValue": d["slot"], "ServiceLabel": f"PCIe Slot {d['slot']}"}
                }
            },
            "Status": {"State": "Enabled", "Health": "OK", "HealthRollup": "OK"},
            "PCIeFunctions": _ref(f"{p}/PCIeFunctions"),
            "Links": {"Chassis": [_ref(f"{R}/Chassis/{cid}")]},
            "Oem": {"Lab": {"PciAddress": d["pci"], "Kind": d["kind"]}},
        }
        if d["serial"] is None:
            del doc["SerialNumber"]  # as the HGX B200 recording's GPU_SXM_2: no property at all
        return doc
    return None


def pcie_functions(bmc: SimBMC, cid: str, dev_id: str) -> dict[str, Any] | None:
    if not any(d["id"] == dev_id and d["chassis"] == cid for d in _pcie_list(bmc)):
        return None
    p = f"{R}/Chassis/{cid}/PCIeDevices/{dev_id}/PCIeFunctions"
    return _collection(p, "PCIeFunctionCollection", "PCIe Function Collection", [f"{p}/{_fn_id(bmc, dev_id)}"])


def pcie_function(bmc: SimBMC, cid: str, dev_id: str, fn: str) -> dict[str, Any] | None:
    for d in _pcie_list(bmc):
        if d["id"] == dev_id and d["chassis"] == cid and fn == _fn_id(bmc, dev_id):
            vid, did, cls, _ = HGX_GPU_PCI_IDS if cid != bmc.chassis_id else PCI_IDS[d["kind"]]
            return {
                "@odata.id": f"{R}/Chassis/{cid}/PCIeDevices/{dev_id}/PCIeFunctions/{fn}",
                "@odata.type": "#PCIeFunction.v1_5_0.PCIeFunction",
                "Id": fn,
                "Name": f"{d['model']} function 0",
                "FunctionId": 0,
                "FunctionType": "Physical",
                "VendorId": vid,
                "DeviceId": did,
                "ClassCode": cls,
                "DeviceClass": {"nic": "NetworkController", "gpu": "DisplayController"}.get(d["kind"], "ProcessingAccelerators"),
                "Status": {"State": "Enabled", "Health": "OK"},
                "Links": {"PCIeDevice": _ref(f"{R}/Chassis/{cid}/PCIeDevices/{dev_id}")},
                "Oem": {"Lab": {"PciAddress": d["pci"]}},
            }
    return None


def _temps(bmc: SimBMC) -> list[dict[str, Any]]:
    """Temperature sensors: (id, name, context, reading, warn, crit)."""
    on = bmc.power_state() == "On"
    base = [
        ("Inlet", "Inlet Temp", "Intake", 23.0, 42.0, 47.0),
        ("Exhaust", "Exhaust Temp", "Exhaust", 38.0 if on else 26.0, 70.0, 75.0),
        ("CPU1", "CPU1 Temp", "CPU", 52.0 if on else 25.0, 90.0, 95.0),
        ("CPU2", "CPU2 Temp", "CPU", 50.0 if on else 25.0, 90.0, 95.0),
    ]
    for b in bmc.spec.boards:
        label = "MNCore" if b.kind == "mncore2" else "GPU"
        context = "Accelerator" if b.kind == "mncore2" else "GPU"
        base.append((f"{label}{b.slot}", f"{label}{b.slot} Temp", context, 45.0 if on else 25.0, 85.0, 92.0))
    hot = bmc.faults.get("hot_sensor")
    absent = bmc.sensors_absent()
    out = []
    for i, (sid, name, ctx, r, warn, crit) in enumerate(base):
        if absent:
            # A powered-off server's sensors as iLO reports them: Absent, reading 0, thresholds 0, no health.
            out.append({"id": sid, "name": name, "ctx": ctx, "reading": 0.0, "warn": 0.0, "crit": 0.0, "health": None,
                        "state": "Absent"})  # fmt: skip
            continue
        if _is_hot(hot, i, sid, name):
            r = crit + 6.0
        out.append({"id": sid, "name": name, "ctx": ctx, "reading": r, "warn": warn, "crit": crit, "state": "Enabled",
                    "health": "Critical" if r >= crit else ("Warning" if r >= warn else "OK")})  # fmt: skip
    return out


def _status(state: str, health: str | None) -> dict[str, Any]:
    return {"State": state, "Health": health} if health is not None else {"State": state}


def _is_hot(hot: Any, i: int, sid: str, name: str) -> bool:
    if hot is None:
        return False
    if hot is True:
        return i == 0
    if isinstance(hot, int):
        return hot == i
    return hot in (sid, name)


def _fans(bmc: SimBMC) -> list[dict[str, Any]]:
    on = bmc.power_state() == "On"
    failed = bmc.faults.get("fan_failed")
    fi = None if failed is None else (0 if failed is True else int(failed))
    out = []
    for i in range(6):
        bad = fi == i
        reading = 0 if bad else (9800 if on else 3000)
        out.append({"id": f"Fan{i + 1}", "name": f"Fan {i + 1}", "reading": reading, "health": "Critical" if bad else "OK"})
    return out


def _psus(bmc: SimBMC) -> list[dict[str, Any]]:
    failed = bmc.faults.get("psu_failed")
    fi = None if failed is None else (0 if failed is True else int(failed))
    watts = _watts(bmc)
    good = 2 - (1 if fi is not None else 0)
    out = []
    for i in range(2):
        bad = fi == i
        out.append({"id": f"PSU{i + 1}" if bmc.flavour.name != "generic" else f"Bay{i + 1}", "name": f"Power Supply {i + 1}",
                    "health": "Critical" if bad else "OK", "state": "UnavailableOffline" if bad else "Enabled",
                    "output": 0.0 if bad else round(watts / max(good, 1), 1), "serial": f"PS{bmc.spec.serial[-6:]}{i}",
                    "input_v": 0 if bad else 230})
    return out


def _watts(bmc: SimBMC) -> float:
    st = bmc.power_state()
    idle = bmc.spec.power_watts_idle or 350.0
    if st == "Off":
        return 12.0  # standby
    if st in ("PoweringOn", "PoweringOff"):
        return round(idle * 0.6, 1)
    return idle


def thermal(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/Thermal"
    return {
        "@odata.id": p,
        "@odata.type": "#Thermal.v1_7_0.Thermal",
        "Id": "Thermal",
        "Name": "Thermal",
        "Temperatures": [
            {
                "@odata.id": f"{p}#/Temperatures/{i}",
                "MemberId": str(i),
                "Name": t["name"],
                "SensorNumber": i + 1,
                "ReadingCelsius": t["reading"],
                "UpperThresholdNonCritical": t["warn"],
                "UpperThresholdCritical": t["crit"],
                "PhysicalContext": t["ctx"],
                "Status": _status(t["state"], t["health"]),
            }
            for i, t in enumerate(_temps(bmc))
        ],
        "Fans": [
            {
                "@odata.id": f"{p}#/Fans/{i}",
                "MemberId": str(i),
                "Name": f["name"],
                "Reading": f["reading"],
                "ReadingUnits": "RPM",
                "LowerThresholdCritical": 500,
                "PhysicalContext": "Fan",
                "Status": {"State": "Enabled", "Health": f["health"]},
            }
            for i, f in enumerate(_fans(bmc))
        ],
        "Redundancy": [],
    }


def power(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/Power"
    psus = _psus(bmc)
    watts = _watts(bmc)
    return {
        "@odata.id": p,
        "@odata.type": "#Power.v1_7_0.Power",
        "Id": "Power",
        "Name": "Power",
        "PowerControl": [
            {
                "@odata.id": f"{p}#/PowerControl/0",
                "MemberId": "0",
                "Name": "System Input Power",
                "PowerConsumedWatts": watts,
                "PowerCapacityWatts": bmc.spec.power_watts_peak or 2000.0,
                "PowerMetrics": {"IntervalInMin": 20, "AverageConsumedWatts": watts, "MaxConsumedWatts": watts, "MinConsumedWatts": watts},
                "Status": {"State": "Enabled", "Health": "OK"},
            }
        ],
        "PowerSupplies": [
            {
                "@odata.id": f"{p}#/PowerSupplies/{i}",
                "MemberId": str(i),
                "Name": ps["name"],
                "SerialNumber": ps["serial"],
                "Model": "LAB-PSU-3000",
                "Manufacturer": "Lab Power",
                "FirmwareVersion": "1.02",
                "PowerCapacityWatts": 3000,
                "LastPowerOutputWatts": ps["output"],
                "LineInputVoltage": ps["input_v"],
                "PowerSupplyType": "AC",
                "Status": {"State": ps["state"], "Health": ps["health"]},
            }
            for i, ps in enumerate(psus)
        ],
        "Redundancy": [
            {
                "@odata.id": f"{p}#/Redundancy/0",
                "MemberId": "0",
                "Name": "PowerSupply Redundancy",
                "Mode": "N+m",
                "MinNumNeeded": 1,
                "MaxNumSupported": 2,
                "Status": {"State": "Enabled", "Health": "OK" if all(x["health"] == "OK" for x in psus) else "Warning"},
                "RedundancySet": [_ref(f"{p}#/PowerSupplies/{i}") for i in range(len(psus))],
            }
        ],
    }


def thermal_subsystem(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/ThermalSubsystem"
    fans = _fans(bmc)
    h = "Critical" if any(f["health"] != "OK" for f in fans) or any(t["health"] == "Critical" for t in _temps(bmc)) else "OK"
    return {
        "@odata.id": p,
        "@odata.type": "#ThermalSubsystem.v1_3_0.ThermalSubsystem",
        "Id": "ThermalSubsystem",
        "Name": "Thermal Subsystem",
        "Fans": _ref(f"{p}/Fans"),
        "ThermalMetrics": _ref(f"{p}/ThermalMetrics"),
        "Status": {"State": "Enabled", "Health": h},
    }


def fans_collection(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/ThermalSubsystem/Fans"
    return _collection(p, "FanCollection", "Fan Collection", [f"{p}/{f['id']}" for f in _fans(bmc)])


def fan(bmc: SimBMC, fid: str) -> dict[str, Any] | None:
    c = bmc.chassis_id
    for f in _fans(bmc):
        if f["id"] == fid:
            return {
                "@odata.id": f"{R}/Chassis/{c}/ThermalSubsystem/Fans/{fid}",
                "@odata.type": "#Fan.v1_5_0.Fan",
                "Id": fid,
                "Name": f["name"],
                "PhysicalContext": "Chassis",
                "SpeedPercent": {"Reading": 0 if f["reading"] == 0 else round(f["reading"] / 160), "SpeedRPM": f["reading"],
                                 "DataSourceUri": f"{R}/Chassis/{c}/Sensors/{fid}"},
                "Status": {"State": "Enabled", "Health": f["health"]},
            }
    return None


def thermal_metrics(bmc: SimBMC) -> dict[str, Any]:
    c = bmc.chassis_id
    temps = _temps(bmc)
    by = {t["id"]: t for t in temps}
    return {
        "@odata.id": f"{R}/Chassis/{c}/ThermalSubsystem/ThermalMetrics",
        "@odata.type": "#ThermalMetrics.v1_3_0.ThermalMetrics",
        "Id": "ThermalMetrics",
        "Name": "Chassis Thermal Metrics",
        "TemperatureSummaryCelsius": {
            "Intake": {"Reading": by["Inlet"]["reading"], "DataSourceUri": f"{R}/Chassis/{c}/Sensors/Inlet"},
            "Exhaust": {"Reading": by["Exhaust"]["reading"], "DataSourceUri": f"{R}/Chassis/{c}/Sensors/Exhaust"},
            "Internal": {"Reading": by["CPU1"]["reading"], "DataSourceUri": f"{R}/Chassis/{c}/Sensors/CPU1"},
        },
        "TemperatureReadingsCelsius": [
            {"Reading": t["reading"], "DeviceName": t["name"], "DataSourceUri": f"{R}/Chassis/{c}/Sensors/{t['id']}"} for t in temps
        ],
    }


def power_subsystem(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/PowerSubsystem"
    psus = _psus(bmc)
    return {
        "@odata.id": p,
        "@odata.type": "#PowerSubsystem.v1_1_0.PowerSubsystem",
        "Id": "PowerSubsystem",
        "Name": "Power Subsystem",
        "CapacityWatts": 3000,
        "Allocation": {"AllocatedWatts": bmc.spec.power_watts_peak or 2000.0, "RequestedWatts": bmc.spec.power_watts_peak or 2000.0},
        "PowerSupplyRedundancy": [
            {"RedundancyType": "Failover", "MinNeededInGroup": 1, "MaxSupportedInGroup": 2,
             "RedundancyGroup": [_ref(f"{p}/PowerSupplies/{x['id']}") for x in psus],
             "Status": {"State": "Enabled", "Health": "OK" if all(x["health"] == "OK" for x in psus) else "Warning"}}
        ],
        "PowerSupplies": _ref(f"{p}/PowerSupplies"),
        "Status": {"State": "Enabled", "Health": "OK" if all(x["health"] == "OK" for x in psus) else "Critical"},
    }


def power_supplies(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/PowerSubsystem/PowerSupplies"
    return _collection(p, "PowerSupplyCollection", "Power Supply Collection", [f"{p}/{x['id']}" for x in _psus(bmc)])


def power_supply(bmc: SimBMC, pid: str) -> dict[str, Any] | None:
    for ps in _psus(bmc):
        if ps["id"] == pid:
            return {
                "@odata.id": f"{R}/Chassis/{bmc.chassis_id}/PowerSubsystem/PowerSupplies/{pid}",
                "@odata.type": "#PowerSupply.v1_5_0.PowerSupply",
                "Id": pid,
                "Name": ps["name"],
                "Model": "LAB-PSU-3000",
                "Manufacturer": "Lab Power",
                "SerialNumber": ps["serial"],
                "FirmwareVersion": "1.02",
                "PowerCapacityWatts": 3000,
                "PowerSupplyType": "AC",
                "LineInputStatus": "LossOfInput" if ps["health"] != "OK" else "Normal",
                "Status": {"State": ps["state"], "Health": ps["health"]},
            }
    return None


def _sensor_list(bmc: SimBMC) -> list[dict[str, Any]]:
    out = []
    for t in _temps(bmc):
        out.append({"id": t["id"], "name": t["name"], "reading": t["reading"], "units": "Cel", "type": "Temperature",
                    "ctx": t["ctx"], "health": t["health"], "crit": t["crit"], "warn": t["warn"], "state": t["state"]})
    for f in _fans(bmc):
        out.append({"id": f["id"], "name": f["name"], "reading": f["reading"], "units": "RPM", "type": "Rotational",
                    "ctx": "Fan", "health": f["health"], "crit": None, "warn": None, "state": "Enabled"})
    out.append({"id": "TotalPower", "name": "Total Power", "reading": _watts(bmc), "units": "W", "type": "Power",
                "ctx": "PowerSupply", "health": "OK", "crit": None, "warn": None, "state": "Enabled"})
    return out


def sensors(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Chassis/{bmc.chassis_id}/Sensors"
    return _collection(p, "SensorCollection", "Sensors", [f"{p}/{s['id']}" for s in _sensor_list(bmc)])


def sensor(bmc: SimBMC, sid: str) -> dict[str, Any] | None:
    for s in _sensor_list(bmc):
        if s["id"] == sid:
            d = {
                "@odata.id": f"{R}/Chassis/{bmc.chassis_id}/Sensors/{sid}",
                "@odata.type": "#Sensor.v1_7_0.Sensor",
                "Id": sid,
                "Name": s["name"],
                "Reading": s["reading"],
                "ReadingUnits": s["units"],
                "ReadingType": s["type"],
                "PhysicalContext": s["ctx"],
                "Status": _status(s["state"], s["health"]),
            }
            if s["crit"] is not None:
                d["Thresholds"] = {"UpperCritical": {"Reading": s["crit"]}, "UpperCaution": {"Reading": s["warn"]}}
            return d
    return None


# --- Managers -------------------------------------------------------------------------


def manager(bmc: SimBMC) -> dict[str, Any]:
    f = bmc.flavour
    p = f"{R}/Managers/{bmc.manager_id}"
    skew = float(bmc.faults.get("clock_skew_s", 0) or 0)
    return {
        "@odata.id": p,
        "@odata.type": "#Manager.v1_14_0.Manager",
        "Id": bmc.manager_id,
        "Name": "Manager",
        "ManagerType": "BMC",
        "Model": f.manager_model,
        "FirmwareVersion": bmc.firmware.get("BMC", ""),
        "UUID": _uuid(bmc),
        "DateTime": iso(bmc.wall_clock(skew)),
        "DateTimeLocalOffset": "+00:00",
        "LastResetTime": iso(bmc.boot_time),
        "Status": {"State": "Enabled", "Health": "OK"},
        **({"VirtualMedia": _ref(f"{p}/VirtualMedia")} if f.vm_under == "managers" else {}),
        "LogServices": _ref(f"{p}/LogServices"),
        "EthernetInterfaces": _ref(f"{p}/EthernetInterfaces"),
        "Links": {
            "ManagerForServers": [_ref(f"{R}/Systems/{s}") for s in system_ids(bmc)],
            "ManagerForChassis": [_ref(f"{R}/Chassis/{c}") for c in (bmc.chassis_id, *_gpu_chassis(bmc))],
        },
        "Actions": {"#Manager.Reset": {"target": f"{p}/Actions/Manager.Reset", "ResetType@Redfish.AllowableValues": ["GracefulRestart"]}},
        **({"Oem": {"Hpe": {"@odata.type": "#HpeiLO.v2_9_0.HpeiLO",
                            "Firmware": {"Current": {"VersionString": f"{f.manager_model} v{bmc.firmware.get('BMC', '')}"}}}}}
           if f.root_oem == "Hpe" else {}),
    }


def system_ids(bmc: SimBMC) -> list[str]:
    """Every ComputerSystem behind the BMC: the server's, and an hgx tray's GPU baseboard."""
    return [bmc.sys_id, HGX_SYSTEM] if bmc.flavour.gpu_processors == "hgx" else [bmc.sys_id]


def manager_nics(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/Managers/{bmc.manager_id}/EthernetInterfaces"
    return _collection(p, "EthernetInterfaceCollection", "Manager Ethernet Interfaces", [f"{p}/eth0"])


def manager_nic(bmc: SimBMC) -> dict[str, Any]:
    mac = _bmc_mac(bmc)
    host = bmc.url.split("//", 1)[-1].rsplit(":", 1)[0]
    return {
        "@odata.id": f"{R}/Managers/{bmc.manager_id}/EthernetInterfaces/eth0",
        "@odata.type": "#EthernetInterface.v1_9_0.EthernetInterface",
        "Id": "eth0",
        "Name": "Manager Ethernet Interface",
        "MACAddress": mac,
        "PermanentMACAddress": mac,
        "HostName": f"{bmc.spec.name}-bmc",
        "IPv4Addresses": [{"Address": host, "SubnetMask": "255.0.0.0", "AddressOrigin": "Static"}],
        "LinkStatus": "LinkUp",
        "Status": {"State": "Enabled", "Health": "OK"},
    }


def _vm_base(bmc: SimBMC) -> str:
    if bmc.flavour.vm_under == "systems":
        return f"{R}/Systems/{bmc.sys_id}/VirtualMedia"
    return f"{R}/Managers/{bmc.manager_id}/VirtualMedia"


def virtual_media_collection(bmc: SimBMC) -> dict[str, Any]:
    p = _vm_base(bmc)
    return _collection(p, "VirtualMediaCollection", "Virtual Media Services", [f"{p}/{s.id}" for s in bmc.flavour.vm_slots])


def virtual_media(bmc: SimBMC, slot: str) -> dict[str, Any] | None:
    for s in bmc.flavour.vm_slots:
        if s.id == slot:
            p = f"{_vm_base(bmc)}/{slot}"
            m = bmc.media[slot]
            image = m["Image"]
            return {
                "@odata.id": p,
                "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia",
                "Id": slot,
                "Name": s.name,
                "MediaTypes": list(s.media_types),
                "Image": image if image else ("None" if bmc.flavour.name == "ami" else None),
                "ImageName": image.rsplit("/", 1)[-1] if image else None,
                "Inserted": m["Inserted"],
                "WriteProtected": m["WriteProtected"],
                "ConnectedVia": "URI" if m["Inserted"] else "NotConnected",
                "TransferProtocolType": image.split(":", 1)[0].upper() if image else None,
                "Actions": {
                    "#VirtualMedia.InsertMedia": {"target": f"{p}/Actions/VirtualMedia.InsertMedia"},
                    "#VirtualMedia.EjectMedia": {"target": f"{p}/Actions/VirtualMedia.EjectMedia"},
                },
            }
    return None


# --- Sessions, updates, tasks -------------------------------------------------------


def session_service(bmc: SimBMC) -> dict[str, Any]:
    return {
        "@odata.id": f"{R}/SessionService",
        "@odata.type": "#SessionService.v1_1_8.SessionService",
        "Id": "SessionService",
        "Name": "Session Service",
        "ServiceEnabled": True,
        "SessionTimeout": int(bmc.config.session_timeout_s),
        "Sessions": _ref(f"{R}/SessionService/Sessions"),
        "Oem": {"Lab": {"MaxSessions": bmc.config.max_sessions}},
    }


def session_doc(s: Any) -> dict[str, Any]:
    return {
        "@odata.id": f"{R}/SessionService/Sessions/{s.id}",
        "@odata.type": "#Session.v1_6_0.Session",
        "Id": s.id,
        "Name": "User Session",
        "UserName": s.user,
        "CreatedTime": iso(s.created),
    }


PUSH_URI = f"{R}/UpdateService/upload"  # bmcweb's MultipartHttpPushUri is /redfish/v1/UpdateService/update
APPLY_TIMES = ["Immediate", "OnReset"]


def update_service(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/UpdateService"
    doc: dict[str, Any] = {
        "@odata.id": p,
        "@odata.type": "#UpdateService.v1_11_0.UpdateService",
        "Id": "UpdateService",
        "Name": "Update Service",
        "ServiceEnabled": True,
        "FirmwareInventory": _ref(f"{p}/FirmwareInventory"),
        "Status": {"State": "Enabled", "Health": "OK"},
        "MultipartHttpPushUri": PUSH_URI,
        "HttpPushUriOptions": {"HttpPushUriApplyTime": {"ApplyTime": "Immediate", "ApplyTime@Redfish.AllowableValues": APPLY_TIMES}},
        "Actions": {
            "#UpdateService.SimpleUpdate": {
                "target": f"{p}/Actions/UpdateService.SimpleUpdate",
                "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"],
                "@Redfish.OperationApplyTimeSupport": {
                    "@odata.type": "#Settings.v1_3_5.OperationApplyTimeSupport",
                    "SupportedValues": APPLY_TIMES,
                },
            }
        },
    }
    if bmc.faults.get("push_only"):
        # A BMC that cannot pull an image (no SimpleUpdate): it takes an upload only.
        doc["Actions"] = {}
    return doc


def firmware_inventory(bmc: SimBMC) -> dict[str, Any]:
    p = f"{R}/UpdateService/FirmwareInventory"
    return _collection(p, "SoftwareInventoryCollection", "Firmware Inventory Collection", [f"{p}/{k}" for k in bmc.inventory()])


def firmware_item(bmc: SimBMC, fid: str) -> dict[str, Any] | None:
    inv = bmc.inventory()
    if fid not in inv:
        return None
    names = {"BMC": f"{bmc.flavour.manager_model} firmware", "BIOS": "System BIOS"}
    return {
        "@odata.id": f"{R}/UpdateService/FirmwareInventory/{fid}",
        "@odata.type": "#SoftwareInventory.v1_9_0.SoftwareInventory",
        "Id": fid,
        "Name": names.get(fid, fid),
        "Version": inv[fid],
        "Updateable": True,
        "SoftwareId": fid,
        "Status": {"State": "Enabled", "Health": "OK"},
    }


def task_doc(bmc: SimBMC, t: Any) -> dict[str, Any]:
    p = f"{R}/TaskService/Tasks/{t.id}"
    d = {
        "@odata.id": p,
        "@odata.type": "#Task.v1_7_0.Task",
        "Id": t.id,
        "Name": f"Update {t.component}",
        "TaskState": t.state,
        "TaskStatus": {"Running": "OK", "Completed": "OK"}.get(t.state, "Critical"),
        "PercentComplete": t.percent,
        "StartTime": iso(t.start),
        "TaskMonitor": f"{p}/Monitor",
        "Messages": list(t.messages),
        "Payload": {"TargetUri": PUSH_URI if t.via == "MultipartHttpPushUri" else f"{R}/UpdateService/Actions/UpdateService.SimpleUpdate",
                    "HttpOperation": "POST", "JsonBody": f'{{"ImageURI": "{t.image}", "@Redfish.OperationApplyTime": "{t.apply_time}"}}'},
    }
    if t.done_at:
        d["EndTime"] = iso(t.done_at)
    return d


# --- dispatch ------------------------------------------------------------------------

_GET_COLLECTIONS = {"Systems", "Chassis", "Managers"}


def dispatch(bmc: SimBMC, method: str, path: str, body: Any) -> Result:
    """Serve one authenticated request for a Redfish path.

    Sessions POST and the unauthenticated paths are handled by the HTTP
    layer; everything else lands here.
    """
    try:
        return _dispatch(bmc, method, path, body)
    except LabActionError as e:
        return err(bmc, e.status, e.message_id, e.message, e.args_)
    finally:
        if method not in ("GET", "HEAD") and not path.startswith(SESSIONS_SHOWN_UNDER):
            # PATCH, POST and DELETE write the BMC's state, some of it straight into its attributes
            # (AssetTag, ClearLog, Manager.Reset's sessions): whatever they did, rendered answers are stale.
            # A logout changes only the sessions, which no kept answer shows.
            bmc.touch()


def _dispatch(bmc: SimBMC, method: str, path: str, body: Any) -> Result:
    segs = [s for s in path.split("/") if s][2:]  # drop "redfish", "v1"
    bmc.settle()
    sid, cid, mid = bmc.sys_id, bmc.chassis_id, bmc.manager_id
    gpu_chassis = set(_gpu_chassis(bmc))
    chassis_ids = {cid, *gpu_chassis}
    hgx = bmc.flavour.gpu_processors == "hgx"
    vm_mgr, vm_sys = bmc.flavour.vm_under == "managers", bmc.flavour.vm_under == "systems"
    doc: dict[str, Any] | None = None
    if method in ("GET", "HEAD"):
        match segs:
            case []:
                doc = service_root(bmc)
            case ["Systems"]:
                doc = _collection(f"{R}/Systems", "ComputerSystemCollection", "Computer System Collection",
                                  [f"{R}/Systems/{x}" for x in system_ids(bmc)])  # fmt: skip
            case ["Systems", s] if s == sid:
                doc = system(bmc)
            case ["Systems", s] if hgx and s == HGX_SYSTEM:
                doc = hgx_system(bmc)
            case ["Systems", s, "Processors"] if hgx and s == HGX_SYSTEM:
                doc = hgx_processors(bmc)
            case ["Systems", s, "Processors", g] if hgx and s == HGX_SYSTEM:
                doc = hgx_gpu(bmc, g)
            case ["Systems", s, "VirtualMedia"] if s == sid and vm_sys:
                doc = virtual_media_collection(bmc)
            case ["Systems", s, "VirtualMedia", slot] if s == sid and vm_sys:
                doc = virtual_media(bmc, slot)
            case ["Systems", s, "Bios"] if s == sid:
                doc = bios(bmc)
            case ["Systems", s, "Bios", "Settings"] if s == sid:
                doc = bios_settings(bmc)
            case ["Systems", s, "EthernetInterfaces"] if s == sid:
                doc = ethernet_interfaces(bmc)
            case ["Systems", s, "EthernetInterfaces", n] if s == sid:
                doc = ethernet_interface(bmc, n)
            case ["Systems", s, "Memory"] if s == sid:
                doc = memory_collection(bmc)
            case ["Systems", s, "Memory", d] if s == sid:
                doc = memory(bmc, d)
            case ["Systems", s, "Processors"] if s == sid:
                doc = processors(bmc)
            case ["Systems", s, "Processors", c] if s == sid:
                doc = processor(bmc, c)
            case ["Systems", s, "LogServices"] if s == sid:
                doc = log_services(bmc, f"{R}/Systems/{sid}", bmc.flavour.system_logs)
            case ["Systems", s, "LogServices", n] if s == sid and n in bmc.flavour.system_logs:
                doc = log_service(bmc, f"{R}/Systems/{sid}", n)
            case ["Systems", s, "LogServices", n, "Entries"] if s == sid and n in bmc.flavour.system_logs:
                doc = log_entries(bmc, f"{R}/Systems/{sid}", n, n == bmc.flavour.system_logs[0])
            case ["Chassis"]:
                doc = _collection(f"{R}/Chassis", "ChassisCollection", "Chassis Collection",
                                  [f"{R}/Chassis/{c}" for c in (cid, *_gpu_chassis(bmc))])  # fmt: skip
            case ["Chassis", c] if c == cid:
                doc = chassis(bmc)
            case ["Chassis", c] if c in gpu_chassis:
                doc = gpu_chassis_doc(bmc, c)
            case ["Chassis", c, "PCIeDevices"] if c in chassis_ids:
                doc = pcie_devices(bmc, c)
            case ["Chassis", c, "PCIeDevices", d] if c in chassis_ids:
                doc = pcie_device(bmc, c, d)
            case ["Chassis", c, "PCIeDevices", d, "PCIeFunctions"] if c in chassis_ids:
                doc = pcie_functions(bmc, c, d)
            case ["Chassis", c, "PCIeDevices", d, "PCIeFunctions", fn] if c in chassis_ids:
                doc = pcie_function(bmc, c, d, fn)
            case ["Chassis", c, "Thermal"] if c == cid and bmc.flavour.old_thermal:
                doc = thermal(bmc)
            case ["Chassis", c, "Power"] if c == cid and bmc.flavour.old_thermal:
                doc = power(bmc)
            case ["Chassis", c, "ThermalSubsystem"] if c == cid and bmc.flavour.new_thermal:
                doc = thermal_subsystem(bmc)
            case ["Chassis", c, "ThermalSubsystem", "Fans"] if c == cid and bmc.flavour.new_thermal:
                doc = fans_collection(bmc)
            case ["Chassis", c, "ThermalSubsystem", "Fans", f] if c == cid and bmc.flavour.new_thermal:
                doc = fan(bmc, f)
            case ["Chassis", c, "ThermalSubsystem", "ThermalMetrics"] if c == cid and bmc.flavour.new_thermal:
                doc = thermal_metrics(bmc)
            case ["Chassis", c, "PowerSubsystem"] if c == cid and bmc.flavour.new_thermal:
                doc = power_subsystem(bmc)
            case ["Chassis", c, "PowerSubsystem", "PowerSupplies"] if c == cid and bmc.flavour.new_thermal:
                doc = power_supplies(bmc)
            case ["Chassis", c, "PowerSubsystem", "PowerSupplies", x] if c == cid and bmc.flavour.new_thermal:
                doc = power_supply(bmc, x)
            case ["Chassis", c, "Sensors"] if c == cid and bmc.flavour.sensors:
                doc = sensors(bmc)
            case ["Chassis", c, "Sensors", x] if c == cid and bmc.flavour.sensors:
                doc = sensor(bmc, x)
            case ["Managers"]:
                doc = _collection(f"{R}/Managers", "ManagerCollection", "Manager Collection", [f"{R}/Managers/{mid}"])
            case ["Managers", m] if m == mid:
                doc = manager(bmc)
            case ["Managers", m, "EthernetInterfaces"] if m == mid:
                doc = manager_nics(bmc)
            case ["Managers", m, "EthernetInterfaces", "eth0"] if m == mid:
                doc = manager_nic(bmc)
            case ["Managers", m, "VirtualMedia"] if m == mid and vm_mgr:
                doc = virtual_media_collection(bmc)
            case ["Managers", m, "VirtualMedia", slot] if m == mid and vm_mgr:
                doc = virtual_media(bmc, slot)
            case ["Managers", m, "LogServices"] if m == mid:
                doc = log_services(bmc, f"{R}/Managers/{mid}", bmc.flavour.manager_logs)
            case ["Managers", m, "LogServices", n] if m == mid and n in bmc.flavour.manager_logs:
                doc = log_service(bmc, f"{R}/Managers/{mid}", n)
            case ["Managers", m, "LogServices", n, "Entries"] if m == mid and n in bmc.flavour.manager_logs:
                doc = log_entries(bmc, f"{R}/Managers/{mid}", n, n == bmc.flavour.manager_logs[0])
            case ["SessionService"]:
                doc = session_service(bmc)
            case ["SessionService", "Sessions"]:
                doc = _collection(f"{R}/SessionService/Sessions", "SessionCollection", "Session Collection",
                                  [f"{R}/SessionService/Sessions/{s.id}" for s in bmc.sessions.values()])
            case ["SessionService", "Sessions", x]:
                doc = next((session_doc(s) for s in bmc.sessions.values() if s.id == x), None)
            case ["UpdateService"]:
                doc = update_service(bmc)
            case ["UpdateService", "FirmwareInventory"]:
                doc = firmware_inventory(bmc)
            case ["UpdateService", "FirmwareInventory", x]:
                doc = firmware_item(bmc, x)
            case ["TaskService"]:
                doc = {"@odata.id": f"{R}/TaskService", "@odata.type": "#TaskService.v1_2_0.TaskService", "Id": "TaskService",
                       "Name": "Task Service", "ServiceEnabled": True, "Tasks": _ref(f"{R}/TaskService/Tasks")}
            case ["TaskService", "Tasks"]:
                task_uris = [f"{R}/TaskService/Tasks/{t}" for t in bmc.tasks]
                doc = _collection(f"{R}/TaskService/Tasks", "TaskCollection", "Task Collection", task_uris)
            case ["TaskService", "Tasks", t] if t in bmc.tasks:
                doc = task_doc(bmc, bmc.tasks[t])
            case ["TaskService", "Tasks", t, "Monitor"] if t in bmc.tasks:
                task = bmc.tasks[t]
                status = 202 if task.state == "Running" else 200
                hdrs = {"Location": f"{R}/TaskService/Tasks/{t}/Monitor"} if status == 202 else {}
                if status == 202:
                    hdrs["Retry-After"] = "1"
                return status, task_doc(bmc, task), hdrs
            case ["AccountService"]:
                doc = {"@odata.id": f"{R}/AccountService", "@odata.type": "#AccountService.v1_10_0.AccountService",
                       "Id": "AccountService", "Name": "Account Service", "ServiceEnabled": True}
        if doc is None:
            return not_found(bmc, path)
        return 200, doc, {}

    if method == "PATCH":
        if not isinstance(body, dict):
            return err(bmc, 400, "Base.1.18.MalformedJSON", "The request body submitted was malformed JSON.")
        match segs:
            case ["Systems", s] if s == sid:
                allowed = {"Boot", "AssetTag", "IndicatorLED"}
                extra = set(body) - allowed
                if extra:
                    prop = sorted(extra)[0]
                    return err(
                        bmc, 400, "Base.1.18.PropertyNotWritable",
                        f"The property {prop} is a read only property and cannot be assigned a value.", [prop],
                    )
                if "Boot" in body:
                    if not isinstance(body["Boot"], dict):
                        return err(bmc, 400, "Base.1.18.PropertyValueTypeError", "Boot must be an object.", ["Boot"])
                    bmc.set_boot(body["Boot"])
                if "AssetTag" in body:
                    bmc.asset_tag = str(body["AssetTag"])
                if "IndicatorLED" in body:
                    bmc.indicator_led = str(body["IndicatorLED"])
                return 200, system(bmc), {}
            case ["Systems", s, "Bios", "Settings"] if s == sid:
                attrs = body.get("Attributes")
                if not isinstance(attrs, dict) or set(body) - {"Attributes", "@Redfish.SettingsApplyTime"}:
                    return err(
                        bmc, 400, "Base.1.18.PropertyMissing",
                        "The property Attributes is a required property and must be included in the request.", ["Attributes"],
                    )
                bmc.set_bios_pending(attrs)
                return 200, bios_settings(bmc), {}
            case ["Systems", s, "Bios"] if s == sid:
                return err(bmc, 405, "Base.1.18.OperationNotAllowed", "Bios is read-only; PATCH Bios/Settings instead.")
        if _exists(bmc, path):
            return err(bmc, 405, "Base.1.18.OperationNotAllowed", f"PATCH is not allowed on {path}.")
        return not_found(bmc, path)

    if method == "POST":
        b = body if isinstance(body, dict) else {}
        match segs:
            case ["Systems", s, "Actions", "ComputerSystem.Reset"] if s == sid:
                rt = b.get("ResetType")
                if not rt:
                    return err(
                        bmc, 400, "Base.1.18.ActionParameterMissing",
                        "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.",
                        ["ComputerSystem.Reset", "ResetType"],
                    )
                bmc.reset(str(rt))
                return 204, None, {}
            case ["Systems", s, "Bios", "Actions", "Bios.ResetBios"] if s == sid:
                from fleetctl_lab.bmc.state import DEFAULT_BIOS

                bmc.bios_pending = {**DEFAULT_BIOS, **bmc.spec.bios_attributes}
                return 204, None, {}
            case ["Managers", m, "VirtualMedia", slot, "Actions", "VirtualMedia.InsertMedia"] if m == mid and vm_mgr and slot in bmc.media:
                bmc.insert_media(slot, b.get("Image", ""), b.get("Inserted", True), b.get("WriteProtected", True))
                return 204, None, {}
            case ["Managers", m, "VirtualMedia", slot, "Actions", "VirtualMedia.EjectMedia"] if m == mid and vm_mgr and slot in bmc.media:
                bmc.eject_media(slot)
                return 204, None, {}
            case ["Systems", s, "VirtualMedia", slot, "Actions", "VirtualMedia.InsertMedia"] if s == sid and vm_sys and slot in bmc.media:
                bmc.insert_media(slot, b.get("Image", ""), b.get("Inserted", True), b.get("WriteProtected", True))
                return 204, None, {}
            case ["Systems", s, "VirtualMedia", slot, "Actions", "VirtualMedia.EjectMedia"] if s == sid and vm_sys and slot in bmc.media:
                bmc.eject_media(slot)
                return 204, None, {}
            case ["Managers", m, "Actions", "Manager.Reset"] if m == mid:
                bmc.sessions.clear()  # a BMC reboot drops every session
                bmc.boot_time = time.time()
                return 204, None, {}
            case ["Systems", s, "LogServices", n, "Actions", "LogService.ClearLog"] if s == sid and n in bmc.flavour.system_logs:
                bmc.logs.clear()
                return 204, None, {}
            case ["Managers", m, "LogServices", n, "Actions", "LogService.ClearLog"] if m == mid and n in bmc.flavour.manager_logs:
                bmc.logs.clear()
                return 204, None, {}
            case ["UpdateService", "Actions", "UpdateService.SimpleUpdate"]:
                image = b.get("ImageURI")
                if not image or not isinstance(image, str):
                    return err(
                        bmc, 400, "Base.1.18.ActionParameterMissing",
                        "The action SimpleUpdate requires the parameter ImageURI to be present in the request body.",
                        ["SimpleUpdate", "ImageURI"],
                    )
                targets = b.get("Targets") or []
                if not isinstance(targets, list):
                    return err(bmc, 400, "Base.1.18.ActionParameterValueTypeError", "Targets must be an array.", ["Targets"])
                if bmc.faults.get("push_only"):
                    return err(bmc, 404, "Base.1.18.ResourceNotFound", "SimpleUpdate is not offered by this service.")
                apply_time = b.get("@Redfish.OperationApplyTime", "Immediate")
                task = bmc.simple_update(image, [str(t) for t in targets], apply_time=str(apply_time))
                mon = f"{R}/TaskService/Tasks/{task.id}/Monitor"
                return 202, task_doc(bmc, task), {"Location": mon}
            case ["UpdateService", "upload"]:
                # The HTTP layer hands a multipart body over as {"multipart": {part name: (file name, bytes)}}.
                parts = b.get("multipart")
                if not isinstance(parts, dict) or "UpdateFile" not in parts:
                    return err(bmc, 400, "Base.1.18.ActionParameterMissing",
                               "The multipart upload requires an UpdateFile part.", ["UpdateFile"])  # fmt: skip
                try:
                    params = json.loads(parts.get("UpdateParameters", ("", b"{}"))[1] or b"{}")
                except ValueError:
                    return err(bmc, 400, "Base.1.18.MalformedJSON", "UpdateParameters is not valid JSON.")
                targets = params.get("Targets") or [] if isinstance(params, dict) else []
                if not isinstance(params, dict) or not isinstance(targets, list):
                    return err(bmc, 400, "Base.1.18.ActionParameterValueTypeError", "Targets must be an array.", ["Targets"])
                filename, content = parts["UpdateFile"]
                task = bmc.push_update(str(filename or ""), bytes(content), [str(t) for t in targets],
                                       apply_time=str(params.get("@Redfish.OperationApplyTime", "Immediate")))  # fmt: skip
                mon = f"{R}/TaskService/Tasks/{task.id}/Monitor"
                return 202, task_doc(bmc, task), {"Location": mon}
        if _exists(bmc, path):
            return err(bmc, 405, "Base.1.18.OperationNotAllowed", f"POST is not allowed on {path}.")
        return not_found(bmc, path)

    if method == "DELETE":
        match segs:
            case ["SessionService", "Sessions", x]:
                if bmc.close_session(x):
                    return 204, None, {}
                return not_found(bmc, path)
        if _exists(bmc, path):
            return err(bmc, 405, "Base.1.18.OperationNotAllowed", f"DELETE is not allowed on {path}.")
        return not_found(bmc, path)

    return err(bmc, 405, "Base.1.18.OperationNotAllowed", f"{method} is not allowed.")


def _exists(bmc: SimBMC, path: str) -> bool:
    status, _, _ = _dispatch(bmc, "GET", path, None)
    return status == 200


__all__ = ["FAULTS", "dispatch", "error_body"]
