"""Vendor flavours of a lab BMC, as data.

Each flavour reproduces where a real vendor puts things (ids, virtual media
slot names, log services, old vs new thermal/power schemas), learned from
the recorded services in ``redfish-mockups`` and vendor documentation. The
JSON itself is written by the lab, not copied from the recordings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VMSlot:
    id: str
    name: str
    media_types: tuple[str, ...]


@dataclass(frozen=True)
class Flavour:
    name: str
    chassis_id: str
    manager_id: str
    manager_model: str
    # Virtual media lives under Managers/{id}/VirtualMedia for every flavour.
    vm_slots: tuple[VMSlot, ...]
    system_logs: tuple[str, ...]  # Systems/{id}/LogServices/{name}; the first gets fault entries
    manager_logs: tuple[str, ...]  # Managers/{id}/LogServices/{name}
    old_thermal: bool  # Chassis/{id}/Thermal and Power
    new_thermal: bool  # ThermalSubsystem, PowerSubsystem, Sensors
    sensors: bool  # Chassis/{id}/Sensors (AMI has it without the subsystems)
    boot_targets: tuple[str, ...]
    error_code: str  # the top-level ``error.code`` the vendor uses
    reset_types: tuple[str, ...]
    # ``$expand=.($levels=1)`` on collections, as iLO 5, AMI and iDRAC offer (OpenBMC's is off by default).
    expand: bool = True


_ALL_RESETS = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle")

FLAVOURS: dict[str, Flavour] = {
    # DMTF public-rackmount1 style; both schema generations.
    "generic": Flavour(
        name="generic",
        chassis_id="1U",
        manager_id="BMC",
        manager_model="Lab BMC",
        vm_slots=(VMSlot("CD1", "Virtual CD", ("CD", "DVD")), VMSlot("USB1", "Virtual USB", ("USBStick",))),
        system_logs=("Log1",),
        manager_logs=("Log",),
        old_thermal=True,
        new_thermal=True,
        sensors=True,
        boot_targets=("None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup", "UefiHttp", "UefiShell"),
        error_code="Base.1.18.GeneralError",
        reset_types=_ALL_RESETS,
    ),
    # NOTE(hpe): iLO 5 (DL325, XL675d captures): slot 1 is floppy/USB, slot 2
    # is CD/DVD; IML and IEL logs; only the old Thermal/Power schemas.
    "hpe": Flavour(
        name="hpe",
        chassis_id="1",
        manager_id="1",
        manager_model="iLO 5",
        vm_slots=(VMSlot("1", "VirtualMedia", ("Floppy", "USBStick")), VMSlot("2", "VirtualMedia", ("CD", "DVD"))),
        system_logs=("IML", "SL"),
        manager_logs=("IEL",),
        old_thermal=True,
        new_thermal=False,
        sensors=False,
        boot_targets=(
            "None", "Cd", "Hdd", "Usb", "SDCard", "Utilities", "Diags", "BiosSetup", "Pxe", "UefiShell", "UefiHttp", "UefiTarget",
        ),
        error_code="iLO.0.10.ExtendedInfo",
        # NOTE(hpe): iLO 5 lists no PowerCycle; the lab accepts it anyway so
        # drivers can be tested against every reset type.
        reset_types=_ALL_RESETS,
    ),
    # NOTE(openbmc): bmcweb; ids system/chassis/bmc; EventLog and Journal.
    "openbmc": Flavour(
        name="openbmc",
        expand=False,
        chassis_id="chassis",
        manager_id="bmc",
        manager_model="OpenBmc",
        vm_slots=(
            VMSlot("Slot_0", "Virtual Removable Media", ("CD", "USBStick")),
            VMSlot("Slot_1", "Virtual Removable Media", ("CD", "USBStick")),
        ),
        system_logs=("EventLog", "HostLogger"),
        manager_logs=("Journal",),
        old_thermal=True,
        new_thermal=True,
        sensors=True,
        boot_targets=("None", "Pxe", "Hdd", "Cd", "Diags", "BiosSetup", "Usb"),
        error_code="Base.1.13.0.GeneralError",
        reset_types=_ALL_RESETS,
    ),
    # NOTE(ami): Gigabyte MegaRAC capture: ids Self, CD1 slot, SEL under the
    # manager, old Thermal/Power plus a Sensors collection.
    "ami": Flavour(
        name="ami",
        chassis_id="Self",
        manager_id="Self",
        manager_model="AMI Redfish Server",
        vm_slots=(VMSlot("CD1", "virtual CD1", ("CD", "DVD")), VMSlot("USBStick1", "virtual USBStick1", ("USBStick",))),
        system_logs=("BIOS",),
        manager_logs=("SEL", "EventLog", "AuditLog"),
        old_thermal=True,
        new_thermal=False,
        sensors=True,
        boot_targets=(
            "None", "Pxe", "Floppy", "Cd", "Usb", "Hdd", "BiosSetup", "Utilities", "UefiShell", "UefiTarget", "UefiHttp", "RemoteDrive",
        ),
        error_code="Base.1.10.GeneralError",
        reset_types=_ALL_RESETS,
    ),
    # NOTE(dell): iDRAC 9 naming; virtual media slots CD and RemovableDisk;
    # Sel and Lclog under the manager. Not from a recording (none shipped).
    "dell": Flavour(
        name="dell",
        chassis_id="System.Embedded.1",
        manager_id="iDRAC.Embedded.1",
        manager_model="14G Monolithic",
        vm_slots=(VMSlot("CD", "Virtual CD", ("CD", "DVD")), VMSlot("RemovableDisk", "Virtual Removable Disk", ("USBStick",))),
        system_logs=("Sel",),
        manager_logs=("Sel", "Lclog"),
        old_thermal=True,
        new_thermal=True,
        sensors=True,
        boot_targets=("None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup", "Utilities", "UefiTarget", "SDCard", "UefiHttp"),
        error_code="Base.1.12.GeneralError",
        reset_types=_ALL_RESETS,
    ),
}
