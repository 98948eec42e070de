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
    # ExpandQuery.MaxLevels the service root advertises (and the deepest ``$levels`` served), where ``expand``:
    # iLO 5 says 1, the recorded Gigabyte AMI (shared/redfish-mockups/gigabyte-ami) 5, DMTF's rackmount 6.
    expand_levels: int = 1
    # The ``only`` query (DSP0266: ``GET {collection}?only`` on a collection of exactly one member answers that
    # member): "" not advertised (ProtocolFeaturesSupported has no OnlyMemberQuery) and ignored, as a service
    # ignores a query parameter it does not know that does not start with "$"; "served": advertised and served,
    # as every recorded service does (bmcweb, iLO 5, the Gigabyte AMI, DMTF's rackmount1); and, for tests of a
    # client's fallback, "ignored" (advertised, the collection answered anyway) and "refused" (advertised,
    # answered 501).
    only_query: str = ""
    # ServiceRoot.Vendor and the key of ServiceRoot.Oem ("" = no Oem section); Product is the
    # manager model unless ``product_is_model`` (iLO puts the server's model there).
    root_vendor: str = "Lab"
    root_oem: str = ""
    product_is_model: bool = False
    product: str = ""  # a fixed ServiceRoot.Product (iDRAC's), when not the model or the manager model
    # Processor ids of the two CPU sockets.
    cpu_ids: tuple[str, str] = ("CPU1", "CPU2")
    # Where GPUs show besides PCIeDevices: "" nowhere; "idrac": Systems/{id}/Processors/Video.Slot.<slot>-1;
    # "hgx": a second ComputerSystem HGX_Baseboard_0 whose Processors are the GPUs, each GPU's PCIe
    # device under a chassis of its own (Chassis/HGX_GPU_<n>/PCIeDevices/GPU_<n>), two GPUs per
    # processor module sharing the module's serial.
    gpu_processors: str = ""
    # PCIe device ids: "lab" (GPU3, NIC10), "idrac" (bus-device in decimal: "59-0", functions "59-0-0").
    pcie_ids: str = "lab"
    # Virtual media under "managers" (Managers/{id}/VirtualMedia) or "systems" (Systems/{id}/VirtualMedia).
    vm_under: str = "managers"
    # A powered-off server's temperatures read Status.State Absent, reading 0 and thresholds 0.
    absent_when_off: bool = False


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
        only_query="served",  # DMTF public-rackmount1 advertises OnlyMemberQuery
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
        root_vendor="HPE",
        only_query="served",  # NOTE(hpe): both iLO 5 captures advertise OnlyMemberQuery
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
        root_vendor="OpenBMC",
        only_query="served",  # NOTE(openbmc): the recorded bmcweb (openbmc-stock) advertises OnlyMemberQuery
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
        root_vendor="AMI",
        expand_levels=5,  # NOTE(ami): the Gigabyte MegaRAC capture's ExpandQuery.MaxLevels
        only_query="served",  # NOTE(ami): the Gigabyte MegaRAC capture advertises OnlyMemberQuery
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
        root_vendor="Dell",
    ),
    # NOTE(ilo6): HPE iLO 6 (ProLiant Gen11) and iLO 7 (Gen12). The resource maps HPE publishes
    # (HPEDevCom/redfishdocs, docs/redfishServices/ilos/ilo6/ilo6_164/ilo6_resmap164.md, and
    # ilo7_111/ilo7_resmap111.md) list Chassis/{item}/PowerSubsystem, ThermalSubsystem (Fans) and
    # Sensors beside the deprecated Power and Thermal, which iLO 6 and 7 still serve; ids stay
    # Systems/1, Chassis/1, Managers/1 and VirtualMedia 1 (floppy/USB) and 2 (CD/DVD) as on iLO 5;
    # ServiceRoot Vendor "HPE" with an Oem.Hpe section; logs IML and SL (system), IEL (manager).
    # A powered-off iLO reports temperature sensors it cannot read as Status.State "Absent" with
    # reading 0 (the iLO 5 DL325 capture in shared/redfish-mockups, Chassis/1/Thermal, shows 8 of
    # 35 so; issue 20 saw iLO 6/7 do it for every sensor of a server that is off, thresholds 0).
    "ilo6": Flavour(
        name="ilo6",
        chassis_id="1",
        manager_id="1",
        manager_model="iLO 6",
        vm_slots=(VMSlot("1", "VirtualMedia", ("Floppy", "USBStick")), VMSlot("2", "VirtualMedia", ("CD", "DVD"))),
        system_logs=("IML", "SL"),
        manager_logs=("IEL",),
        old_thermal=True,
        new_thermal=True,
        sensors=True,
        boot_targets=(
            "None", "Cd", "Hdd", "Usb", "SDCard", "Utilities", "Diags", "BiosSetup", "Pxe", "UefiShell", "UefiHttp", "UefiTarget",
        ),
        error_code="iLO.0.10.ExtendedInfo",
        reset_types=_ALL_RESETS,
        root_vendor="HPE",
        root_oem="Hpe",
        product_is_model=True,
        cpu_ids=("1", "2"),
        absent_when_off=True,
    ),
    # NOTE(idrac9): Dell iDRAC 9 (PowerEdge 15G/16G, firmware 6.x/7.x). Ids System.Embedded.1 /
    # iDRAC.Embedded.1; CPUs CPU.Socket.1/2; GPUs listed as Processors Video.Slot.<slot>-1 with
    # ProcessorType GPU beside their PCIe devices (an XE9680 with iDRAC9 7.20.80.50 seen so by a
    # public field report indexed from GitHub; the Go test "TestIDRAC9GPUFromProcessorsSkipsPCIe"
    # of a public Redfish collector encodes the same); PCIe devices named by bus-device in decimal
    # ("59-0") with functions "59-0-0"; since 6.00 virtual media lives under
    # Systems/System.Embedded.1/VirtualMedia/1 and /2 (the move Ironic/sushy-oem-idrac follow);
    # ServiceRoot Vendor "Dell" with Oem.Dell (ServiceTag); logs Sel (system), Sel, Lclog and
    # FaultList (manager). Not from a capture of our own: the JSON is the lab's.
    "idrac9": Flavour(
        name="idrac9",
        chassis_id="System.Embedded.1",
        manager_id="iDRAC.Embedded.1",
        manager_model="16G Monolithic",
        vm_slots=(VMSlot("1", "VirtualMedia", ("CD", "DVD", "USBStick")), VMSlot("2", "VirtualMedia", ("CD", "DVD", "USBStick"))),
        system_logs=("Sel",),
        manager_logs=("Sel", "Lclog", "FaultList"),
        old_thermal=True,
        new_thermal=True,
        sensors=True,
        boot_targets=("None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup", "Utilities", "UefiTarget", "SDCard", "UefiHttp"),
        error_code="Base.1.12.GeneralError",
        reset_types=_ALL_RESETS,
        root_vendor="Dell",
        root_oem="Dell",
        product="Integrated Dell Remote Access Controller",
        cpu_ids=("CPU.Socket.1", "CPU.Socket.2"),
        gpu_processors="idrac",
        pcie_ids="idrac",
        vm_under="systems",
    ),
    # NOTE(nvidia): an NVIDIA OpenBMC (bmcweb) GPU tray, GB200/GB300-like: TWO ComputerSystems
    # behind one BMC, System_0 (the host: Grace CPUs, boot, BIOS, power) and HGX_Baseboard_0 (the
    # GPUs as Processors GPU_0..GPU_n, ProcessorType GPU, Oem.Nvidia). Each GPU's Links name its
    # chassis HGX_GPU_<n> and PCIe device Chassis/HGX_GPU_<n>/PCIeDevices/GPU_<n>; its Location
    # says its processor module (PartLocationContext "HGX_Chassis_0/ProcessorModule_<k>") and its
    # place in it (ServiceLabel "GPU_0"/"GPU_1"). As recorded in LambdaLabs/redfish_exporter,
    # collector/testdata/gb300_happypath (Systems/HGX_Baseboard_0/Processors/GPU_1, GPU_2) and
    # gpu_info_unknown_multi (an HGX B200 whose GPU_SXM_2 has no SerialNumber at all: the lab's
    # ``board_no_serial`` fault). In that GB300 recording System_0 links chassis BMC_0 and manager
    # BMC_0, and its Processors collection lists CPU_0, CPU_1 and the GPUs by their
    # HGX_Baseboard_0 URIs: the lab does the same, so a client reading System_0 alone meets the
    # GPUs there. GB200/GB300 report one serial per processor module, shared by its two GPUs
    # (issue 20): the lab shows the module's first GPU's serial on both. The recorded tray is
    # Supermicro-branded (ServiceRoot Vendor "Supermicro", Product "GB NVL"); the lab says
    # "NVIDIA" with Oem.Nvidia, as NVIDIA's own builds do. Assumed, not recorded: only the new
    # ThermalSubsystem/PowerSubsystem/Sensors (bmcweb builds without the deprecated schemas).
    "nvidia": Flavour(
        name="nvidia",
        chassis_id="BMC_0",
        manager_id="BMC_0",
        manager_model="OpenBmc",
        vm_slots=(
            VMSlot("Slot_0", "Virtual Removable Media", ("CD", "USBStick")),
            VMSlot("Slot_1", "Virtual Removable Media", ("CD", "USBStick")),
        ),
        system_logs=("EventLog",),
        manager_logs=("Journal",),
        old_thermal=False,
        new_thermal=True,
        sensors=True,
        boot_targets=("None", "Pxe", "Hdd", "Cd", "Diags", "BiosSetup", "Usb", "UefiHttp"),
        error_code="Base.1.18.GeneralError",
        reset_types=_ALL_RESETS,
        root_vendor="NVIDIA",
        root_oem="Nvidia",
        cpu_ids=("CPU_0", "CPU_1"),
        gpu_processors="hgx",
    ),
}

# The second ComputerSystem of an "hgx" flavour, and its chassis of the GPUs' baseboard.
HGX_SYSTEM = "HGX_Baseboard_0"
