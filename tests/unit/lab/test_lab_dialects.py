"""The lab's newer BMC dialects (ilo6, idrac9, nvidia) and the faults of issue 20.

What the lab serves, read through ``resources.dispatch`` (no sockets) where
that is enough, and over HTTP where the behaviour lives in the server (the
paging faults, the control endpoint). The nvidia flavour is checked against
recorded GB300 / HGX B200 documents (tests/data/lab_dialects/SOURCES.md).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.bmc import FAULTS, LabBoard, LabConfig, LabNic, LabServerSpec, SimBMC, generate_specs, run_lab_in_thread
from fleetctl_lab.bmc.resources import dispatch
from fleetctl_lab.inventory import flavour_for
from lab_client_helpers import RF

DATA = Path(__file__).resolve().parents[2] / "data" / "lab_dialects"
R = "/redfish/v1"


def _gpus(n: int, model: str = "NVIDIA H100 PCIe") -> list[LabBoard]:
    return [LabBoard(kind="gpu", serial=f"SN-GPU-{i}", slot=i + 1, model=model) for i in range(n)]


def _bmc(flavour: str, *, boards: int = 4, power: str = "Off", model: str = "NVIDIA H100 PCIe") -> SimBMC:
    spec = LabServerSpec(name=f"t-{flavour}", serial="SRV123", model="Test Server", flavour=flavour,  # type: ignore[arg-type]
                         boards=_gpus(boards, model), nics=[LabNic(name="ens1f0", mac="02:00:00:00:00:09", slot=10)])  # fmt: skip
    return SimBMC(spec, LabConfig(initial_power=power))  # type: ignore[arg-type]


def get(bmc: SimBMC, path: str) -> Any:
    status, doc, _ = dispatch(bmc, "GET", path, None)
    assert status == 200, (path, status, doc)
    return doc


def ids(doc: dict[str, Any]) -> list[str]:
    return [m["@odata.id"] for m in doc["Members"]]


# --- flavours in a spec -------------------------------------------------------------------


@pytest.mark.parametrize(("flavour", "system"), [("ilo6", "1"), ("idrac9", "System.Embedded.1"), ("nvidia", "System_0")])
def test_each_new_flavour_is_a_spec_value_with_its_system_id(flavour: str, system: str) -> None:
    spec = LabServerSpec.model_validate_json(json.dumps({"name": "x", "flavour": flavour}))
    assert spec.system_id == system
    assert LabServerSpec.model_validate_json(spec.model_dump_json()) == spec  # JSON round-trip (spec.json)


@pytest.mark.parametrize(
    ("vendor", "model", "flavour"),
    [("HPE", "ProLiant DL380a Gen11", "ilo6"), ("Hewlett Packard Enterprise", "ProLiant DL384 Gen12", "ilo6"),
     ("HPE", "ProLiant DL325 Gen10 Plus", "hpe"), ("Dell Inc.", "PowerEdge XE9680", "idrac9"), ("Dell", "PowerEdge R750", "dell"),
     ("NVIDIA", "GB200 NVL Compute Tray", "nvidia"), ("Supermicro", "AS-4124GO-NART", "ami"), (None, None, "generic")],
)  # fmt: skip
def test_a_lab_site_picks_the_dialect_from_vendor_and_model(vendor: str | None, model: str | None, flavour: str) -> None:
    assert flavour_for(vendor, model) == flavour


def test_every_url_a_new_flavour_links_answers() -> None:
    """Walk each new flavour's tree from the root: every @odata.id it links to answers 200."""
    for flavour in ("ilo6", "idrac9", "nvidia"):
        bmc = _bmc(flavour)
        seen: set[str] = set()
        todo = [R]
        while todo:
            path = todo.pop()
            # (log entries are served inline in their collection only, by every flavour)
            if path in seen or "#" in path or "/Actions/" in path or "/Entries/" in path:
                continue
            seen.add(path)
            doc = get(bmc, path)
            stack: list[Any] = [doc]
            while stack:
                x = stack.pop()
                if isinstance(x, dict):
                    link = x.get("@odata.id")
                    if isinstance(link, str) and link.startswith(R) and link not in seen:
                        todo.append(link.rstrip("/"))
                    stack.extend(x.values())
                elif isinstance(x, list):
                    stack.extend(x)
        assert len(seen) > 60, (flavour, len(seen))


# --- iLO 6/7 ---------------------------------------------------------------------------


def test_ilo6_speaks_hpe_with_both_schema_generations() -> None:
    bmc = _bmc("ilo6")
    root = get(bmc, R)
    assert (root["Vendor"], root["Product"]) == ("HPE", "Test Server")
    assert root["Oem"]["Hpe"]["Manager"][0]["ManagerType"] == "iLO 6"
    assert ids(get(bmc, f"{R}/Systems")) == [f"{R}/Systems/1"]
    assert get(bmc, f"{R}/Managers/1")["Model"] == "iLO 6"
    chassis = get(bmc, f"{R}/Chassis/1")
    for link in ("Thermal", "Power", "ThermalSubsystem", "PowerSubsystem", "Sensors"):
        get(bmc, chassis[link]["@odata.id"])
    assert ids(get(bmc, f"{R}/Managers/1/VirtualMedia")) == [f"{R}/Managers/1/VirtualMedia/1", f"{R}/Managers/1/VirtualMedia/2"]
    assert "Hpe" in get(bmc, f"{R}/Systems/1")["Oem"]


def _temperatures(bmc: SimBMC) -> list[dict[str, Any]]:
    sensors = [get(bmc, p) for p in ids(get(bmc, f"{R}/Chassis/{bmc.chassis_id}/Sensors"))]
    return [s for s in sensors if s["ReadingType"] == "Temperature"]


def test_ilo6_reports_a_powered_off_servers_temperatures_absent_at_zero() -> None:
    off = _bmc("ilo6")
    temps = _temperatures(off)
    assert temps and all(t["Status"] == {"State": "Absent"} and t["Reading"] == 0 for t in temps)
    assert all(t["Thresholds"]["UpperCritical"]["Reading"] == 0 for t in temps)
    old = get(off, f"{R}/Chassis/1/Thermal")["Temperatures"]
    assert all(t["Status"] == {"State": "Absent"} and t["ReadingCelsius"] == 0 and t["UpperThresholdCritical"] == 0 for t in old)
    on = _bmc("ilo6", power="On")
    assert all(t["Status"]["State"] == "Enabled" and t["Reading"] > 0 for t in _temperatures(on))


def test_the_sensors_absent_fault_does_it_on_any_flavour_while_off() -> None:
    bmc = _bmc("generic")
    assert all(t["Status"]["State"] == "Enabled" for t in _temperatures(bmc))
    bmc.set_fault(sensors_absent=True)
    assert all(t["Status"] == {"State": "Absent"} and t["Reading"] == 0 for t in _temperatures(bmc))
    assert all(t["Status"]["State"] == "Absent" for t in get(bmc, f"{R}/Chassis/1U/Thermal")["Temperatures"])
    on = _bmc("generic", power="On")
    on.set_fault(sensors_absent=True)
    assert all(t["Status"]["State"] == "Enabled" for t in _temperatures(on)), "a running server's sensors are read"
    bmc.set_fault(sensors_absent=None)
    assert all(t["Status"]["State"] == "Enabled" for t in _temperatures(bmc))


# --- iDRAC 9 ---------------------------------------------------------------------------


def test_idrac9_speaks_dell_with_gpus_as_video_slot_processors() -> None:
    bmc = _bmc("idrac9", boards=2)
    root = get(bmc, R)
    assert root["Vendor"] == "Dell" and root["Oem"]["Dell"]["ServiceTag"] == "SRV123"
    assert root["Product"] == "Integrated Dell Remote Access Controller"
    sys_ = f"{R}/Systems/System.Embedded.1"
    assert ids(get(bmc, f"{sys_}/Processors")) == [f"{sys_}/Processors/{p}" for p in
                                                    ("CPU.Socket.1", "CPU.Socket.2", "Video.Slot.1-1", "Video.Slot.2-1")]  # fmt: skip
    gpu = get(bmc, f"{sys_}/Processors/Video.Slot.2-1")
    assert (gpu["ProcessorType"], gpu["SerialNumber"], gpu["Location"]["PartLocation"]["LocationOrdinalValue"]) == ("GPU", "SN-GPU-1", 2)
    dev = get(bmc, gpu["Links"]["PCIeDevice"]["@odata.id"])
    assert dev["Id"] == "48-0" and dev["SerialNumber"] == "SN-GPU-1"  # bus 0x30 = 48, device 0
    fn = get(bmc, ids(get(bmc, dev["PCIeFunctions"]["@odata.id"]))[0])
    assert (fn["Id"], fn["VendorId"]) == ("48-0-0", "0x10de")
    assert get(bmc, f"{R}/Managers/iDRAC.Embedded.1")["Model"] == "16G Monolithic"
    assert "Dell" in get(bmc, sys_)["Oem"]


def test_idrac9_virtual_media_is_under_the_system() -> None:
    bmc = _bmc("idrac9")
    sys_ = f"{R}/Systems/System.Embedded.1"
    assert get(bmc, sys_)["VirtualMedia"]["@odata.id"] == f"{sys_}/VirtualMedia"
    assert "VirtualMedia" not in get(bmc, f"{R}/Managers/iDRAC.Embedded.1")
    assert dispatch(bmc, "GET", f"{R}/Managers/iDRAC.Embedded.1/VirtualMedia", None)[0] == 404
    st, _, _ = dispatch(bmc, "POST", f"{sys_}/VirtualMedia/1/Actions/VirtualMedia.InsertMedia", {"Image": "http://x/os.iso"})
    assert st == 204
    assert get(bmc, f"{sys_}/VirtualMedia/1")["Inserted"] is True


# --- the NVIDIA tray ---------------------------------------------------------------------


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def test_the_nvidia_tray_has_two_systems_as_the_recorded_gb300() -> None:
    bmc = _bmc("nvidia", model="NVIDIA GB200")
    recorded = ids(_load("gb300/Systems.json"))
    assert ids(get(bmc, f"{R}/Systems")) == recorded == [f"{R}/Systems/System_0", f"{R}/Systems/HGX_Baseboard_0"]
    host, hgx = get(bmc, recorded[0]), get(bmc, recorded[1])
    assert "Actions" in host and "Boot" in host and "SerialNumber" in host
    assert "Actions" not in hgx and "Boot" not in hgx and "SerialNumber" not in hgx
    assert hgx["Oem"]["Nvidia"]["@odata.type"].startswith("#NvidiaComputerSystem")
    # System_0 lists the baseboard's GPUs among its Processors, by their HGX_Baseboard_0 URIs, as recorded
    rec_procs = [p.rsplit("/", 1)[-1] for p in ids(_load("gb300/System_0-Processors.json"))]
    lab_procs = ids(get(bmc, host["Processors"]["@odata.id"]))
    assert [p.rsplit("/", 1)[-1] for p in lab_procs] == rec_procs == ["CPU_0", "CPU_1", "GPU_0", "GPU_1", "GPU_2", "GPU_3"]
    assert [p for p in lab_procs if "GPU" in p] == [p for p in ids(_load("gb300/System_0-Processors.json")) if "GPU" in p]
    managed = get(bmc, f"{R}/Managers/BMC_0")["Links"]["ManagerForServers"]
    assert [m["@odata.id"] for m in managed] == recorded


def _keys(doc: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(prefix + k)
            if k != "Oem":
                out |= _keys(v, prefix + k + ".")
    return out


def test_a_tray_gpu_is_shaped_as_the_recorded_gb300_gpu() -> None:
    """Every property path the lab's GPU Processor has, the recorded GB300 GPU has too (nothing invented)."""
    bmc = _bmc("nvidia", model="NVIDIA GB200")
    lab = get(bmc, f"{R}/Systems/HGX_Baseboard_0/Processors/GPU_1")
    recorded = _load("gb300/HGX_Baseboard_0-Processors-GPU_1.json")
    assert _keys(lab) - _keys(recorded) == set()
    for path in ("ProcessorType", "Location.PartLocation.ServiceLabel", "Location.PartLocationContext", "Links.PCIeDevice",
                 "Links.Chassis", "SerialNumber", "FirmwareVersion", "Model", "Manufacturer", "Oem"):  # fmt: skip
        assert path in _keys(lab), path
    assert lab["Links"]["Chassis"]["@odata.id"] == recorded["Links"]["Chassis"]["@odata.id"] == f"{R}/Chassis/HGX_GPU_1"
    assert lab["Location"] == recorded["Location"]  # ProcessorModule_0, GPU_1
    gpu2 = get(bmc, f"{R}/Systems/HGX_Baseboard_0/Processors/GPU_2")
    assert gpu2["Location"] == _load("gb300/HGX_Baseboard_0-Processors-GPU_2.json")["Location"]  # module 1, GPU_0 again


def test_the_two_gpus_of_a_processor_module_share_its_serial() -> None:
    bmc = _bmc("nvidia", model="NVIDIA GB200")
    gpus = [get(bmc, f"{R}/Systems/HGX_Baseboard_0/Processors/GPU_{i}") for i in range(4)]
    serials = [g["SerialNumber"] for g in gpus]
    assert serials == ["SN-GPU-0", "SN-GPU-0", "SN-GPU-2", "SN-GPU-2"]
    for g in gpus:  # the GPU's PCIe device, under its own chassis, says the same serial
        dev = get(bmc, g["Links"]["PCIeDevice"]["@odata.id"])
        assert dev["SerialNumber"] == g["SerialNumber"]
        fn = get(bmc, ids(get(bmc, dev["PCIeFunctions"]["@odata.id"]))[0])
        assert (fn["VendorId"], fn["DeviceId"]) == ("0x10de", "0x2941")
    assert f"{R}/Chassis/HGX_GPU_3" in ids(get(bmc, f"{R}/Chassis"))


# --- a board without a serial ------------------------------------------------------------


def test_board_no_serial_hides_one_boards_serial_everywhere_the_bmc_shows_it() -> None:
    recorded = _load("hgx-b200/HGX_Baseboard_0-Processors-GPU_SXM_2.json")
    assert "SerialNumber" not in recorded  # what a real HGX B200 served

    tray = _bmc("nvidia", model="NVIDIA GB200")
    tray.set_fault(board_no_serial=True)  # the last board
    last = get(tray, f"{R}/Systems/HGX_Baseboard_0/Processors/GPU_3")
    assert "SerialNumber" not in last and "SerialNumber" not in get(tray, last["Links"]["PCIeDevice"]["@odata.id"])
    assert get(tray, f"{R}/Systems/HGX_Baseboard_0/Processors/GPU_2")["SerialNumber"] == "SN-GPU-2"  # its module partner keeps it

    dell = _bmc("idrac9", boards=2)
    dell.set_fault(board_no_serial=1)  # by slot
    assert "SerialNumber" not in get(dell, f"{R}/Systems/System.Embedded.1/Processors/Video.Slot.1-1")
    assert "SerialNumber" not in get(dell, f"{R}/Chassis/System.Embedded.1/PCIeDevices/32-0")
    assert get(dell, f"{R}/Chassis/System.Embedded.1/PCIeDevices/48-0")["SerialNumber"] == "SN-GPU-1"
    dell.set_fault(board_no_serial=None)
    assert get(dell, f"{R}/Chassis/System.Embedded.1/PCIeDevices/32-0")["SerialNumber"] == "SN-GPU-0"


def test_board_no_serial_zero_is_slot_zero_not_a_clear() -> None:
    spec = LabServerSpec(name="z", boards=[LabBoard(kind="gpu", serial="S0", slot=0), LabBoard(kind="gpu", serial="S1", slot=1)])
    bmc = SimBMC(spec, LabConfig())
    assert bmc.set_fault(board_no_serial=0) == {"board_no_serial": 0}
    assert "SerialNumber" not in get(bmc, f"{R}/Chassis/1U/PCIeDevices/GPU0")


# --- paging faults, over HTTP ---------------------------------------------------------------


@pytest.fixture(scope="module")
def paging_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    specs = [s for s in generate_specs(2, prefix="pg", flavours=("nvidia",))]
    cfg = LabConfig(state_dir=tmp_path_factory.mktemp("lab-dialects"), power_transition_s=0.1)
    with run_lab_in_thread(specs, cfg) as running:
        yield running


def _control(lab: Any, method: str, path: str, body: Any = None) -> Any:
    req = urllib.request.Request(lab.lab.control_url + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=5) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def _walk(rf: RF, path: str, max_pages: int) -> tuple[list[str], list[str]]:
    """Follow Members@odata.nextLink at most max_pages times: (links followed, members read)."""
    links: list[str] = []
    members: list[str] = []
    doc = rf.get(path)
    members += [m["@odata.id"] for m in doc["Members"]]
    while "Members@odata.nextLink" in doc and len(links) < max_pages:
        links.append(doc["Members@odata.nextLink"])
        doc = rf.get(links[-1])
        members += [m["@odata.id"] for m in doc["Members"]]
    return links, members


def test_nextlink_loop_links_the_last_page_back_to_an_earlier_one(paging_lab: Any) -> None:
    name = "pg-gpu-00001"
    rf = RF(paging_lab.url_of(name))
    procs = f"{R}/Systems/System_0/Processors"
    whole = rf.get(procs)
    assert "Members@odata.nextLink" not in whole
    assert _control(paging_lab, "PATCH", f"/lab/v1/bmcs/{name}/faults", {"nextlink_loop": "Processors"}) == {"nextlink_loop": "Processors"}
    links, members = _walk(rf, procs, max_pages=10)
    assert len(links) == 10, "the walk never ends by itself"
    assert len(set(links)) < len(links), f"a link repeats: {links}"
    assert members[:6] == ids(whole), "every member is read once, in order, before the walk comes back"
    assert "Members@odata.nextLink" not in rf.get(f"{R}/Systems"), "only the named collections page"
    assert paging_lab.counters(name)["faults_served"] > 0
    _control(paging_lab, "PATCH", f"/lab/v1/bmcs/{name}/faults", {"nextlink_loop": None})
    assert "Members@odata.nextLink" not in rf.get(procs)


def test_nextlink_forever_pages_with_ever_new_links(paging_lab: Any) -> None:
    name = "pg-mncore-00000"
    rf = RF(paging_lab.url_of(name))
    paging_lab.set_fault(name, nextlink_forever=True)
    try:
        links, members = _walk(rf, f"{R}/Systems/System_0/Memory", max_pages=50)
        assert len(links) == 50 and len(set(links)) == 50, "every page links a page never seen"
        assert len(members) == 51 * 2 and len(set(members)) == 16, "the members repeat: the list grows without end"
        assert "Members@odata.nextLink" in rf.get(f"{R}/Chassis"), "True: every collection"
    finally:
        paging_lab.clear_faults(name)


def test_the_new_faults_are_in_the_catalogue_and_refused_when_unknown(paging_lab: Any) -> None:
    catalogue = _control(paging_lab, "GET", "/lab/v1")["faults"]
    for fault in ("nextlink_loop", "nextlink_forever", "sensors_absent", "board_no_serial"):
        assert fault in catalogue and fault in FAULTS


def test_the_tray_in_a_running_lab_powers_on_and_its_baseboard_follows(paging_lab: Any) -> None:
    name = "pg-gpu-00001"
    rf = RF(paging_lab.url_of(name))
    st, _, _ = rf.req("POST", f"{R}/Systems/System_0/Actions/ComputerSystem.Reset", {"ResetType": "On"})
    assert st == 204
    deadline = time.monotonic() + 10
    while rf.get(f"{R}/Systems/HGX_Baseboard_0")["PowerState"] != "On":
        assert time.monotonic() < deadline, "the baseboard never read On"
        time.sleep(0.05)
    assert rf.get(f"{R}/Systems/System_0")["PowerState"] == "On"
