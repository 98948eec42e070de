"""Differential: our Redfish driver against DMTF's own client, on every recorded BMC.

Each recording in ``shared/redfish-mockups`` is served over HTTP
(``mockup_server.py``) and read twice: through fleetctl's driver (the class
the registry hands out, ``load_driver("bmc", "redfish")``) and through the
DMTF ``redfish`` library (``redfish.redfish_client``), whose reader here walks
the links itself and keeps the values as the BMC wrote them. Compared per
recording: system serial, model, manufacturer, power state, BIOS version, the
BMC's firmware version, and the ids (so the count) of the firmware inventory
where the BMC has one.

A difference fails unless :data:`EXPLAINED` lists it, with the two values
and the reason; an explanation that no longer matches what both sides read
fails too, so the list cannot go stale.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mockup_server import mockups_dir

from fleetctl.errors import DriverError
from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.plugins import load_driver

redfish = pytest.importorskip("redfish", reason="the DMTF redfish library is not installed (pip install redfish)")

FIELDS = ("serial", "model", "manufacturer", "power_state", "bios_version", "bmc_firmware", "firmware_ids", "firmware_versions")

# Redfish's PowerState words, written out here rather than taken from the
# driver's own table, so a wrong entry there shows as a difference.
POWER_WORDS = {"On": "on", "Off": "off", "PoweringOn": "powering_on", "PoweringOff": "powering_off"}

# (recording, field) -> (what the DMTF client read, what the driver reports, why they differ).
EXPLAINED: dict[tuple[str, str], tuple[Any, Any, str]] = {}


def _recordings() -> list[str]:
    base = mockups_dir()
    if base is None:
        return []
    return sorted(p.name for p in base.iterdir() if (p / "index.json").is_file())


# --------------------------------------------------------------------------
# The reference reader: DMTF's client, links walked by hand, values as written
# --------------------------------------------------------------------------


def _odata_id(link: Any) -> str | None:
    return link.get("@odata.id") if isinstance(link, dict) else None


def read_with_dmtf(url: str) -> dict[str, Any]:
    """What the recording says, read through ``redfish.redfish_client`` (session login)."""
    client = redfish.redfish_client(
        base_url=url, username="admin", password="secret", default_prefix="/redfish/v1", timeout=10, max_retry=1
    )
    client.login(auth="session")

    def get(uri: str | None) -> dict[str, Any] | None:
        if not uri:
            return None
        r = client.get(uri)
        doc = r.dict if r.status == 200 else None
        # a member that answers a Redfish error body (as iLO does with 200 or 404) is no resource
        return None if not isinstance(doc, dict) or ("error" in doc and "@odata.id" not in doc) else doc

    try:
        root = get("/redfish/v1") or {}
        systems = get(_odata_id(root.get("Systems")))
        if not systems or not systems.get("Members"):
            return {"no_system": True}
        system = get(_odata_id(systems["Members"][0])) or {}
        managed = (system.get("Links") or {}).get("ManagedBy") or []
        if managed:
            manager_uri = _odata_id(managed[0])
        else:
            managers = get(_odata_id(root.get("Managers"))) or {}
            manager_uri = _odata_id((managers.get("Members") or [None])[0])
        manager = get(manager_uri) or {}
        update = get(_odata_id(root.get("UpdateService"))) or {}
        inventory = get(_odata_id(update.get("FirmwareInventory")))
        ids = versions = None
        if inventory is not None:
            docs = [d for d in (get(_odata_id(m)) for m in inventory.get("Members") or []) if d is not None]
            ids = sorted(str(d["Id"]) for d in docs)
            versions = {str(d["Id"]): d.get("Version") for d in docs}
        return {
            "serial": system.get("SerialNumber"),
            "model": system.get("Model"),
            "manufacturer": system.get("Manufacturer"),
            "power_state": POWER_WORDS.get(system.get("PowerState"), system.get("PowerState")),
            "bios_version": system.get("BiosVersion"),
            "bmc_firmware": manager.get("FirmwareVersion"),
            "firmware_ids": ids,
            "firmware_versions": versions,
        }
    finally:
        client.logout()


# --------------------------------------------------------------------------
# Ours
# --------------------------------------------------------------------------


async def read_with_driver(url: str, name: str) -> dict[str, Any]:
    driver_cls = load_driver("bmc", "redfish")
    target = BMCTarget(name=name, url=url, username="admin", password="secret", timeout=10)
    try:
        bmc = await driver_cls(target).__aenter__()
    except DriverError as e:
        if "no Systems" in str(e) or "no ComputerSystem" in str(e):
            return {"no_system": True}
        raise
    try:
        facts = await bmc.inventory.facts()
        manager = await bmc.manager.facts()
        try:
            components = await bmc.firmware.inventory()
        except DriverError as e:
            if "not supported" not in str(e) and "no FirmwareInventory" not in str(e):
                raise
            components = None
        return {
            "serial": facts.serial,
            "model": facts.model,
            "manufacturer": facts.manufacturer,
            "power_state": facts.power_state.value if facts.power_state else None,
            "bios_version": facts.bios_version,
            "bmc_firmware": manager.firmware_version,
            "firmware_ids": None if components is None else sorted(c.id for c in components),
            "firmware_versions": None if components is None else {c.id: c.version for c in components},
        }
    finally:
        await bmc.close()


# --------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------


def test_explanations_name_known_recordings_and_fields() -> None:
    for (folder, fld), (_, _, why) in EXPLAINED.items():
        assert fld in FIELDS and why, (folder, fld)
        if mockups_dir() is not None:
            assert folder in _recordings(), f"{folder}: no such recording"


@pytest.mark.skipif(mockups_dir() is None, reason="shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")
@pytest.mark.parametrize("folder", _recordings() or ["(none)"])
def test_driver_reads_what_the_dmtf_client_reads(mockup_farm: Any, folder: str) -> None:
    srv = mockup_farm(folder)
    ref = read_with_dmtf(srv.url)
    ours = asyncio.run(read_with_driver(srv.url, folder))
    if ref.get("no_system") or ours.get("no_system"):
        assert ref == ours == {"no_system": True}, (ref, ours)
        return
    unexplained = []
    for fld in FIELDS:
        explained = EXPLAINED.get((folder, fld))
        if explained is not None:
            want_ref, want_ours, why = explained
            assert (ref[fld], ours[fld]) == (want_ref, want_ours), f"{fld}: the explanation ({why}) no longer holds"
        elif ref[fld] != ours[fld]:
            unexplained.append(f"{fld}: DMTF client {ref[fld]!r}, driver {ours[fld]!r}")
    assert not unexplained, f"{folder}: " + "; ".join(unexplained)
    assert srv.logouts == srv.logins  # both clients logged out
