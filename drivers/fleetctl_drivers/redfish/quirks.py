"""Vendor differences, as data, in one place.

A BMC is recognised from its service root (``Vendor``, ``Oem`` keys,
``Product``) and, where the root says nothing (OpenBMC, DMTF mockups), from
its manager's ``Model``. Each vendor profile starts from the generic DMTF
behaviour and lists its workarounds; every workaround names the vendor, the
models and the firmware that needed it and why (after Ironic's
``NOTE(name): vendor/model/firmware`` comments), so one can be dropped when
that firmware is gone from the fleet.

Code elsewhere never tests a vendor name: it reads a field of
:class:`Quirks`.

Provenance: the HPE iLO 5, AMI (Gigabyte) and OpenBMC workarounds were checked
against the recorded services in ``shared/redfish-mockups``; the Dell iDRAC,
Supermicro and Lenovo XCC entries come from public reports (Ironic/sushy code
and bug threads) and have not been checked against a capture in this tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Quirks:
    """What the driver does differently for one BMC. Defaults are DMTF Redfish."""

    vendor: str = "generic"
    # PCIeFunction VendorId/DeviceId as decimal strings ("4318") instead of "0x10de"
    pci_ids_decimal: bool = False
    # OEM device inventory to read beside the standard PCIeDevices
    # ("hpe": Systems/{id}/Oem/Hpe/Links/PCIDevices + Chassis/{id}/Oem/Hpe/Links/Devices)
    oem_devices: str | None = None
    # PATCH needs If-Match with the resource's ETag (else 412)
    patch_needs_etag: bool = False
    # where virtual media lives, searched in this order
    media_locations: tuple[str, ...] = ("systems", "managers")
    # slot ids/names preferred for a CD image, in order (matched case-insensitively)
    media_cd_slots: tuple[str, ...] = ()
    # insert by PATCH {Image, Inserted} when the slot has no InsertMedia action
    media_patch_fallback: bool = True
    # body keys InsertMedia accepts beyond Image (some reject TransferProtocolType etc.)
    media_insert_extra: tuple[str, ...] = ("Inserted", "WriteProtected")
    # BIOS pending settings object when @Redfish.Settings is absent
    bios_settings_suffix: str = "/Settings"
    # send @Redfish.SettingsApplyTime with staged BIOS settings
    bios_apply_time: bool = False
    # SimpleUpdate wants the TransferProtocol parameter
    update_needs_transfer_protocol: bool = False
    # requests in flight a BMC of this kind stands (caps BMCTarget.max_in_flight)
    max_in_flight_cap: int | None = None
    # Fixed URIs, where a BMC's firmware builds them from a pattern: the driver reads the document it needs at
    # its known URI and skips the one that would only name it (a request per skipped document; the cost of a
    # sweep is per request, docs/sweep.md "Where the time goes"). A guess that misses (404, an error body)
    # falls back to the walk through the naming document, so a BMC that does not follow the pattern is read
    # as before. Used only on reads that are not $expand-ed (a BMC that expands names them in one answer).
    # - the member id of function 0 in a PCIe device's PCIeFunctions collection (the one function the
    #   board rules read: parse.parse_pcie_device), read without the collection;
    pcie_function0_id: str | None = None
    # - where a LogService's entries are, below the service's URI: read without the LogService document;
    log_entries_suffix: str | None = None
    # - where the FirmwareInventory is, below the service root's UpdateService: read without the UpdateService.
    firmware_inventory_suffix: str | None = None
    # Bounds on what one BMC can make fleetctl read and hold (docs/bmc.md, "Bounds on what a BMC says").
    # A BMC answers whatever its firmware builds: a broken one repeats a Members@odata.nextLink, ignores
    # $skip and pages forever, or sends a body without end (one such BMC grew a sweep past 18 GB in four
    # minutes, issue 20). The generic values are well above what real BMCs answer, so only a broken BMC
    # meets them; a vendor whose real answers need more gets a Workaround naming its model and firmware.
    # Going past one ends that read with AnswerOutOfBounds (client.py), naming the BMC, the URI and the bound.
    # - one response body, in bytes: the largest real answers (a BIOS attribute registry, an expanded
    #   log collection) are a few megabytes;
    max_body_bytes: int = 16 * 1024 * 1024
    # - pages of one collection (Members@odata.nextLink followed): BMCs that page at all page log
    #   entries by tens (iDRAC 9's Lifecycle log: 50 a page), so a full log is a few hundred pages;
    max_collection_pages: int = 1_000
    # - members of one collection: the largest real collections are event logs (an IPMI SEL holds about
    #   4,000 records of 16 bytes; Redfish logs of iLO and iDRAC keep a few thousand entries);
    max_collection_members: int = 20_000
    # - bytes of every answer one client (one BMC for one operation, e.g. its sweep) reads: a sweep of a
    #   real BMC reads well under 5 MB, a full 20,000-entry log about 15 MB. This bounds what one BMC can
    #   make a sweep hold whatever the shape of its answers (a thousand log services each with big pages).
    max_bytes_per_bmc: int = 64 * 1024 * 1024
    # why each non-default value is here: "field: vendor model firmware: reason"
    notes: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Workaround:
    field: str
    value: Any
    vendor: str
    models: str  # which models, as operators name them
    firmware: str  # which firmware versions (or "all seen")
    why: str
    model_re: str | None = None  # only when the system/manager model matches


@dataclass(frozen=True)
class VendorProfile:
    name: str
    # detection: any of these matches
    root_vendor: tuple[str, ...] = ()  # ServiceRoot.Vendor (exact, case-insensitive)
    root_oem: tuple[str, ...] = ()  # a key of ServiceRoot.Oem
    product_re: str | None = None  # ServiceRoot.Product
    manager_model_re: str | None = None  # Managers/{id}.Model
    workarounds: tuple[Workaround, ...] = ()


PROFILES: tuple[VendorProfile, ...] = (
    VendorProfile(
        name="hpe",
        root_vendor=("HPE", "HP"),
        root_oem=("Hpe", "Hp"),
        product_re=r"ProLiant|Apollo|Synergy",
        manager_model_re=r"^iLO",
        workarounds=(
            Workaround(
                "pci_ids_decimal",
                True,
                "HPE",
                "ProLiant DL325/XL675d Gen10 Plus",
                "iLO 5 2.46, 2.55",
                'PCIeFunction VendorId/DeviceId are decimal strings ("4215" for 0x1077)',
            ),
            Workaround(
                "oem_devices",
                "hpe",
                "HPE",
                "ProLiant XL675d Gen10 Plus (and Gen10 Plus generally)",
                "iLO 5 2.55",
                "standard Chassis/1/PCIeDevices is empty and its members answer ResourceMissingAtURI; "
                "GPUs, serials and firmware are only in Oem.Hpe Links PCIDevices and Devices",
            ),
            Workaround(
                "media_cd_slots",
                ("2",),
                "HPE",
                "ProLiant Gen10/Gen10 Plus",
                "iLO 5 all seen",
                "virtual media under Managers/1 with numbered slots: 1 is Floppy/USBStick, 2 is CD/DVD",
            ),
            Workaround(
                "media_locations",
                ("managers", "systems"),
                "HPE",
                "ProLiant",
                "iLO 5 all seen",
                "VirtualMedia is under the Manager, not the System",
            ),
            Workaround(
                "media_insert_extra",
                ("Inserted", "WriteProtected"),
                "HPE",
                "ProLiant",
                "iLO 5 < 2.30",
                "older iLO 5 rejected TransferProtocolType/UserName in InsertMedia; send only Image, Inserted",
            ),
            Workaround(
                "bios_settings_suffix",
                "/settings",
                "HPE",
                "ProLiant Gen10",
                "iLO 5 all seen",
                "pending BIOS settings at Systems/1/bios/settings (lower case)",
            ),
            Workaround(
                "update_needs_transfer_protocol",
                True,
                "HPE",
                "ProLiant Gen10",
                "iLO 5 all seen",
                "SimpleUpdate lists TransferProtocol AllowableValues HTTP/HTTPS and expects one",
            ),
        ),
    ),
    VendorProfile(
        name="dell",
        root_vendor=("Dell",),
        root_oem=("Dell",),
        product_re=r"iDRAC|PowerEdge",
        manager_model_re=r"iDRAC",
        workarounds=(
            Workaround(
                "max_in_flight_cap",
                2,
                "Dell",
                "PowerEdge",
                "iDRAC 8/9 all seen",
                "the BMC runs out of sessions and slots under parallel load (RAC0218)",
            ),
            Workaround(
                "bios_settings_suffix",
                "/Settings",
                "Dell",
                "PowerEdge",
                "iDRAC 9",
                "staged BIOS values go to Bios/Settings and need a config job on reset",
            ),
            Workaround(
                "bios_apply_time",
                True,
                "Dell",
                "PowerEdge",
                "iDRAC 9 >= 4.x",
                "without @Redfish.SettingsApplyTime OnReset no BIOS job is created",
            ),
            Workaround(
                "media_locations",
                ("systems", "managers"),
                "Dell",
                "PowerEdge",
                "iDRAC 9 >= 6.x",
                "VirtualMedia moved from Managers/iDRAC.Embedded.1 to Systems/System.Embedded.1",
            ),
            Workaround(
                "media_insert_extra",
                ("Inserted", "WriteProtected"),
                "Dell",
                "PowerEdge",
                "iDRAC 9",
                "InsertMedia with UserName/Password present but empty is refused",
            ),
        ),
    ),
    VendorProfile(
        name="openbmc",
        root_vendor=("OpenBMC",),
        root_oem=("OpenBMC",),
        manager_model_re=r"^OpenBmc$",
        workarounds=(
            Workaround(
                "media_patch_fallback",
                False,
                "OpenBMC",
                "bmcweb builds",
                "2.15.0-dev",
                "bmcweb VirtualMedia supports only InsertMedia/EjectMedia actions (legacy mode), never PATCH",
            ),
            # NOTE(openbmc): the three below save requests, they work around nothing. bmcweb offers no
            # $expand unless built with insecure-enable-redfish-query, so every document is a request;
            # these are URIs its routes fix (redfish-core/lib/pcie.hpp, log_services.hpp,
            # update_service.hpp) and the recorded openbmc-stock answers.
            Workaround(
                "pcie_function0_id",
                "0",
                "OpenBMC",
                "bmcweb builds",
                "all seen",
                "functions are PCIeFunctions/{n}, n the function number (Id and FunctionId), listed 0 to 7; "
                "a function the device lacks answers 404 ResourceNotFound",
            ),
            Workaround(
                "log_entries_suffix",
                "/Entries",
                "OpenBMC",
                "bmcweb builds",
                "2.15.0-dev (openbmc-stock: EventLog, HostLogger, Journal)",
                "every LogService's Entries is {service}/Entries",
            ),
            Workaround(
                "firmware_inventory_suffix",
                "/FirmwareInventory",
                "OpenBMC",
                "bmcweb builds",
                "2.15.0-dev (openbmc-stock)",
                "the UpdateService's FirmwareInventory is /redfish/v1/UpdateService/FirmwareInventory",
            ),
        ),
    ),
    VendorProfile(
        name="ami",
        root_vendor=("AMI",),
        root_oem=("Ami",),
        product_re=r"AMI Redfish",
        workarounds=(
            Workaround(
                "media_cd_slots",
                ("CD1",),
                "AMI (Gigabyte)",
                "Gigabyte H262-Z63",
                "MegaRAC 12.84",
                "named slots CD1/CD2, MediaTypes missing, Image reads the string 'None' when empty",
            ),
            Workaround(
                "media_locations",
                ("managers", "systems"),
                "AMI (Gigabyte)",
                "Gigabyte H262-Z63",
                "MegaRAC 12.84",
                "VirtualMedia under Managers/Self",
            ),
            Workaround(
                "max_in_flight_cap",
                2,
                "AMI (Gigabyte)",
                "Gigabyte H262-Z63",
                "MegaRAC 12.x",
                "the web server answers 503 beyond a couple of parallel requests",
            ),
        ),
    ),
    VendorProfile(
        name="supermicro",
        root_vendor=("Supermicro",),
        root_oem=("Supermicro",),
        workarounds=(
            Workaround(
                "media_locations",
                ("managers", "systems"),
                "Supermicro",
                "X11/X12/H12",
                "BMC 1.7x-3.x",
                "VirtualMedia under Managers/1",
            ),
            Workaround(
                "media_cd_slots",
                ("CD1",),
                "Supermicro",
                "X12/H12",
                "BMC 1.x",
                "the CD slot is named CD1 (X11 used a single slot named 1)",
            ),
        ),
    ),
    VendorProfile(
        name="lenovo",
        root_vendor=("Lenovo",),
        root_oem=("Lenovo",),
        manager_model_re=r"XClarity|XCC",
        workarounds=(
            Workaround(
                "media_cd_slots",
                ("EXT1", "Remote1"),
                "Lenovo",
                "ThinkSystem SR/SD",
                "XCC all seen",
                "named slots EXT1-EXT4 (media mounted from a URL) and Remote1-Remote4; "
                "only EXT slots accept InsertMedia",
            ),
            Workaround(
                "media_locations",
                ("managers", "systems"),
                "Lenovo",
                "ThinkSystem",
                "XCC all seen",
                "VirtualMedia under Managers/1",
            ),
            Workaround(
                "patch_needs_etag",
                True,
                "Lenovo",
                "ThinkSystem",
                "XCC 2.x and later",
                "PATCH without If-Match answers 412 PreconditionFailed",
            ),
        ),
    ),
    # NOTE(nvidia): NVIDIA's OpenBMC (bmcweb) on GPU trays (HGX baseboards, GB200/GB300 compute
    # trays) says Vendor "NVIDIA" and Oem.Nvidia where upstream OpenBMC says "OpenBMC"; without
    # this entry such a BMC reads as generic until its manager model ("OpenBmc") is fetched.
    # Two ComputerSystems sit behind it (System_0, HGX_Baseboard_0: LambdaLabs/redfish_exporter
    # collector/testdata/gb300_happypath); the driver's system stays the first listed, the host.
    VendorProfile(
        name="nvidia",
        root_vendor=("NVIDIA",),
        root_oem=("Nvidia",),
        workarounds=(
            Workaround(
                "media_patch_fallback",
                False,
                "NVIDIA",
                "HGX / GB200 / GB300 trays (NVIDIA OpenBMC)",
                "all seen",
                "bmcweb VirtualMedia takes only the InsertMedia/EjectMedia actions, never PATCH, as upstream OpenBMC",
            ),
        ),
    ),
)

GENERIC = VendorProfile(name="generic")


def detect_vendor(root: dict, manager_model: str | None = None, hint: str | None = None) -> VendorProfile:
    """The vendor profile for a service root (and manager model)."""
    by_name = {p.name: p for p in PROFILES}
    if hint and hint in by_name:
        return by_name[hint]
    vendor = str(root.get("Vendor") or "").strip().lower()
    oem = {k.lower() for k in (root.get("Oem") or {}) if isinstance(k, str)}
    product = str(root.get("Product") or "")
    for p in PROFILES:
        if vendor and vendor in (v.lower() for v in p.root_vendor):
            return p
    for p in PROFILES:
        if p.product_re and product and re.search(p.product_re, product):
            return p
    for p in PROFILES:
        if oem & {o.lower() for o in p.root_oem}:
            return p
    if manager_model:
        for p in PROFILES:
            if p.manager_model_re and re.search(p.manager_model_re, manager_model):
                return p
    return GENERIC


def needs_manager_model(root: dict) -> bool:
    """True when the service root alone does not tell the vendor."""
    return detect_vendor(root) is GENERIC


def quirks_for(profile: VendorProfile, model: str | None = None) -> Quirks:
    """The quirks of a profile, workarounds restricted by model where they say so."""
    q = Quirks(vendor=profile.name)
    notes = []
    changes: dict[str, Any] = {}
    for w in profile.workarounds:
        if w.model_re and not (model and re.search(w.model_re, model)):
            continue
        changes[w.field] = w.value
        notes.append(f"{w.field}: {w.vendor} {w.models}, firmware {w.firmware}: {w.why}")
    return replace(q, **changes, notes=tuple(notes))
