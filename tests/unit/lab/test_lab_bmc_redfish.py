"""Lab BMC Redfish behaviour: sessions, power, boot, BIOS, media, updates."""

from __future__ import annotations

import itertools
import time
from typing import Any

from lab_client_helpers import RF, assert_redfish_error

MN = "lab-mncore-00000"  # generic
HPE = "lab-gpu-00001"


def wait_power(c: RF, sp: str, want: str, timeout: float = 3.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if c.get(sp)["PowerState"] == want:
            return time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError(f"PowerState never became {want}")


def reset(c: RF, sp: str, kind: str) -> tuple[int, Any]:
    status, doc, _ = c.req("POST", f"{sp}/Actions/ComputerSystem.Reset", {"ResetType": kind})
    return status, doc


def test_sessions_login_logout_limit_and_basic_auth(lab: Any, rf: Any) -> None:
    c = rf("plain", user="root", password="s3cret")
    # Service root is open; everything else needs credentials.
    anon = RF(lab.url_of("plain"))
    anon.auth = None
    assert anon.req("GET", "/redfish/v1")[0] == 200
    status, doc, hdrs = anon.req("GET", "/redfish/v1/Systems")
    assert status == 401
    assert_redfish_error(doc, "NoValidSession")
    # Bad password: 401 on login and on basic auth.
    status, doc, _ = anon.req("POST", "/redfish/v1/SessionService/Sessions", {"UserName": "root", "Password": "nope"})
    assert status == 401
    assert rf("plain", user="root", password="nope").req("GET", "/redfish/v1/Systems")[0] == 401
    # Basic auth with the right password works.
    assert c.get("/redfish/v1/Systems")["Members@odata.count"] == 1
    # Sessions up to the limit (3 in these tests), then 503 SessionLimitExceeded.
    tokens = []
    for _ in range(3):
        status, doc, hdrs = anon.req("POST", "/redfish/v1/SessionService/Sessions", {"UserName": "root", "Password": "s3cret"})
        assert status == 201, doc
        tokens.append((hdrs["X-Auth-Token"], hdrs["Location"]))
    status, doc, _ = anon.req("POST", "/redfish/v1/SessionService/Sessions", {"UserName": "root", "Password": "s3cret"})
    assert status == 503
    assert_redfish_error(doc, "SessionLimitExceeded")
    # A token authenticates; a made-up one does not.
    t = RF(lab.url_of("plain"))
    t.token = tokens[0][0]
    assert t.get("/redfish/v1/SessionService/Sessions")["Members@odata.count"] == 3
    bogus = RF(lab.url_of("plain"))
    bogus.token = "deadbeef"
    assert bogus.req("GET", "/redfish/v1/Systems")[0] == 401
    # Logging out frees a slot and kills the token.
    assert t.req("DELETE", tokens[0][1])[0] == 204
    assert t.req("GET", "/redfish/v1/Systems")[0] == 401
    status, _, hdrs = anon.req("POST", "/redfish/v1/SessionService/Sessions", {"UserName": "root", "Password": "s3cret"})
    assert status == 201
    for tok, loc in [*tokens[1:], (hdrs["X-Auth-Token"], hdrs["Location"])]:
        x = RF(lab.url_of("plain"))
        x.token = tok
        assert x.req("DELETE", loc)[0] == 204
    assert lab.counters("plain")["sessions_open"] == 0


def test_power_transitions_take_time_and_are_counted(lab: Any, rf: Any) -> None:
    c = rf(MN)
    sp = c.system_path()
    assert c.get(sp)["PowerState"] == "Off"
    assert reset(c, sp, "On")[0] == 204
    assert c.get(sp)["PowerState"] == "PoweringOn"
    took = wait_power(c, sp, "On")
    assert 0.15 < took < 1.0  # transition is 0.3 s
    # On while on is a no-op: no power cycle, no counter.
    assert reset(c, sp, "On")[0] == 204
    assert c.get(sp)["PowerState"] == "On"
    # ForceRestart goes through PoweringOff and PoweringOn.
    assert reset(c, sp, "ForceRestart")[0] == 204
    assert c.get(sp)["PowerState"] == "PoweringOff"
    wait_power(c, sp, "PoweringOn")
    wait_power(c, sp, "On")
    # Graceful restart while transitioning is refused with a Redfish error.
    assert reset(c, sp, "PowerCycle")[0] == 204
    status, doc = reset(c, sp, "GracefulRestart")
    assert status == 409
    assert_redfish_error(doc)
    wait_power(c, sp, "On")
    assert reset(c, sp, "GracefulShutdown")[0] == 204
    wait_power(c, sp, "Off")
    # Restarting a server that is off is refused; a bad ResetType is a 400.
    assert reset(c, sp, "ForceRestart")[0] == 409
    status, doc = reset(c, sp, "Explode")
    assert status == 400
    assert_redfish_error(doc, "ActionParameterNotSupported")
    k = lab.counters(MN)
    assert k["power_on"] == 1 and k["power_cycle"] == 2 and k["power_off"] == 1 and k["boots"] == 3
    tl = k["power_timeline"]
    assert len(tl) == 3 and all(i["off"] is not None for i in tl)
    assert all(a["on"] <= a["off"] <= b["on"] for a, b in itertools.pairwise(tl))


def test_boot_once_is_consumed_and_continuous_is_kept(lab: Any, rf: Any) -> None:
    c = rf(HPE)
    sp = c.system_path()
    assert sp == "/redfish/v1/Systems/1"
    status, doc, _ = c.req("PATCH", sp, {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}})
    assert status == 200
    boot = c.get(sp)["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == ("Pxe", "Once")
    reset(c, sp, "On")
    wait_power(c, sp, "On")
    boot = c.get(sp)["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == ("None", "Disabled")
    c.req("PATCH", sp, {"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous"}})
    reset(c, sp, "ForceRestart")
    wait_power(c, sp, "PoweringOn")
    wait_power(c, sp, "On")
    assert c.get(sp)["Boot"]["BootSourceOverrideEnabled"] == "Continuous"
    assert [b["source"] for b in lab.counters(HPE)["boot_log"]] == ["Pxe", "Cd"]
    # An unknown target is refused.
    status, doc, _ = c.req("PATCH", sp, {"Boot": {"BootSourceOverrideTarget": "Floppy"}})
    assert status == 400
    assert_redfish_error(doc, "PropertyValueNotInList")


def test_bios_pending_settings_apply_on_reset(lab: Any, rf: Any) -> None:
    name = "lab-mncore-00002"  # openbmc flavour
    c = rf(name)
    sp = c.system_path()
    assert sp.endswith("/system")
    bios = c.get(f"{sp}/Bios")
    assert bios["Attributes"]["SriovGlobalEnable"] == "Enabled"
    settings_uri = bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
    status, doc, _ = c.req("PATCH", settings_uri, {"Attributes": {"SriovGlobalEnable": "Disabled", "NumaNodesPerSocket": 4}})
    assert status == 200
    assert c.get(settings_uri)["Attributes"]["SriovGlobalEnable"] == "Disabled"
    assert c.get(f"{sp}/Bios")["Attributes"]["SriovGlobalEnable"] == "Enabled"  # not yet
    status, doc, _ = c.req("PATCH", settings_uri, {"Attributes": {"NoSuchKnob": "x"}})
    assert status == 400
    assert_redfish_error(doc, "PropertyUnknown")
    reset(c, sp, "On")
    assert c.get(f"{sp}/Bios")["Attributes"]["SriovGlobalEnable"] == "Enabled"  # still booting
    wait_power(c, sp, "On")
    attrs = c.get(f"{sp}/Bios")["Attributes"]
    assert attrs["SriovGlobalEnable"] == "Disabled" and attrs["NumaNodesPerSocket"] == 4
    assert lab.counters(name)["bios_pending"] == {}


def test_virtual_media_insert_eject_and_boot_from_cd(lab: Any, rf: Any) -> None:
    name = "lab-gpu-00003"  # ami flavour: slot CD1
    c = rf(name)
    mp = c.manager_path()
    slots = [m["@odata.id"].rsplit("/", 1)[-1] for m in c.get(f"{mp}/VirtualMedia")["Members"]]
    assert slots[0] == "CD1"
    vm = c.get(f"{mp}/VirtualMedia/CD1")
    insert = vm["Actions"]["#VirtualMedia.InsertMedia"]["target"]
    assert c.req("POST", insert, {"Image": "http://10.0.0.1/os.iso", "Inserted": True})[0] == 204
    assert c.get(f"{mp}/VirtualMedia/CD1")["Inserted"] is True
    status, doc, _ = c.req("POST", insert, {"Image": "http://10.0.0.1/other.iso"})
    assert status == 409
    assert_redfish_error(doc)
    sp = c.system_path()
    c.req("PATCH", sp, {"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    reset(c, sp, "On")
    wait_power(c, sp, "On")
    assert lab.counters(name)["boot_log"][-1] == {"time": lab.counters(name)["boot_log"][-1]["time"], "source": "Cd", "image": "http://10.0.0.1/os.iso"}
    eject = vm["Actions"]["#VirtualMedia.EjectMedia"]["target"]
    assert c.req("POST", eject, {})[0] == 204
    assert c.get(f"{mp}/VirtualMedia/CD1")["Inserted"] is False


def poll_task(c: RF, monitor: str, timeout: float = 3.0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    seen = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        status, doc, _ = c.req("GET", monitor)
        seen.append(doc)
        if status == 200:
            return seen, doc
        assert status == 202 and doc["TaskState"] == "Running"
        time.sleep(0.05)
    raise AssertionError("task never finished")


def test_simple_update_task_success_changes_version(lab: Any, rf: Any) -> None:
    name = "lab-mncore-00004"  # dell flavour
    c = rf(name)
    mp = c.manager_path()
    assert mp == "/redfish/v1/Managers/iDRAC.Embedded.1"
    before = c.get(mp)["FirmwareVersion"]
    status, doc, hdrs = c.req("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                              {"ImageURI": "http://repo.lab/fw/BMC-7.10.30.00.bin", "TransferProtocol": "HTTP"})
    assert status == 202 and doc["TaskState"] == "Running"
    seen, final = poll_task(c, hdrs["Location"])
    assert final["TaskState"] == "Completed" and final["PercentComplete"] == 100
    assert any(0 < d["PercentComplete"] < 100 for d in seen)
    assert c.get(mp)["FirmwareVersion"] == "7.10.30.00" != before
    assert c.get("/redfish/v1/UpdateService/FirmwareInventory/BMC")["Version"] == "7.10.30.00"
    # A board firmware by explicit target.
    inv = [m["@odata.id"] for m in c.get("/redfish/v1/UpdateService/FirmwareInventory")["Members"]]
    board = next(u for u in inv if "mncore2" in u)
    status, _, hdrs = c.req("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                            {"ImageURI": "http://repo.lab/fw/mnc2_1.5.0.fwpkg", "Targets": [board]})
    assert status == 202
    poll_task(c, hdrs["Location"])
    assert c.get(board)["Version"] == "1.5.0"
    assert lab.counters(name)["firmware_flashes"] == 2
    # An image nobody can place is refused up front.
    status, doc, _ = c.req("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", {"ImageURI": "http://x/blob"})
    assert status == 400
    assert_redfish_error(doc)


def test_simple_update_injected_failure(lab: Any, rf: Any) -> None:
    name = "lab-gpu-00005"
    c = rf(name)
    lab.set_fault(name, firmware_fail=1)  # only the next update fails
    status, _doc, hdrs = c.req("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", {"ImageURI": "http://r/bios-9.9.9.bin"})
    assert status == 202
    _, final = poll_task(c, hdrs["Location"])
    assert final["TaskState"] == "Exception" and final["TaskStatus"] == "Critical"
    assert final["PercentComplete"] < 100 and final["Messages"]
    assert c.get(c.system_path())["BiosVersion"] == "2.10.0"
    k = lab.counters(name)
    assert k["firmware_failures"] == 1 and k["firmware_flashes"] == 0 and "firmware_fail" not in k["faults"]
    status, _, hdrs = c.req("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", {"ImageURI": "http://r/bios-9.9.9.bin"})
    _, final = poll_task(c, hdrs["Location"])
    assert final["TaskState"] == "Completed"
    assert c.get(c.system_path())["BiosVersion"] == "9.9.9"


def test_flavour_shapes(lab: Any, rf: Any) -> None:
    expect = {
        "lab-mncore-00000": ("/redfish/v1/Systems/1", "1U", "CD1", True, True),
        "lab-gpu-00001": ("/redfish/v1/Systems/1", "1", "2", True, False),
        "lab-mncore-00002": ("/redfish/v1/Systems/system", "chassis", "Slot_0", True, True),
        "lab-gpu-00003": ("/redfish/v1/Systems/Self", "Self", "CD1", True, False),
        "lab-mncore-00004": ("/redfish/v1/Systems/System.Embedded.1", "System.Embedded.1", "CD", True, True),
    }
    for name, (sp, cid, slot, old, new) in expect.items():
        c = rf(name)
        assert c.system_path() == sp
        ch = c.get(c.chassis_path())
        assert ch["Id"] == cid
        assert ("Thermal" in ch, "ThermalSubsystem" in ch) == (old, new)
        vm = c.get(c.manager_path() + "/VirtualMedia")
        assert any(m["@odata.id"].endswith("/" + slot) for m in vm["Members"])
        # Accelerators with PCIe link data, NICs with MACs.
        devs = c.get(ch["PCIeDevices"]["@odata.id"])["Members"]
        boards = [c.get(d["@odata.id"]) for d in devs]
        accel = [b for b in boards if b["Oem"]["Lab"]["Kind"] in ("mncore2", "gpu")]
        assert len(accel) == (4 if "mncore" in name else 8)
        for b in accel:
            assert b["SerialNumber"] and b["FirmwareVersion"]
            assert b["PCIeInterface"]["LanesInUse"] == b["PCIeInterface"]["MaxLanes"] == 16
        if new:
            psus = c.get(ch["PowerSubsystem"]["@odata.id"] + "/PowerSupplies")["Members"]
            assert len(psus) == 2
        nics = c.get(sp + "/EthernetInterfaces")["Members"]
        assert all(":" in c.get(n["@odata.id"])["MACAddress"] for n in nics)
        m = c.get(c.manager_path())
        assert m["FirmwareVersion"] and m["DateTime"]
        # A made-up path is a 404 with a Redfish error body in the vendor's code.
        status, doc, _ = c.req("GET", sp + "/Nope")
        assert status == 404
        assert_redfish_error(doc, "ResourceMissingAtURI")
