"""GPUs and accelerators listed as ``Systems/{id}/Processors`` become boards.

What the recorded BMCs (shared/redfish-mockups) give, read by hand:
- dmtf-public-rackmount1: Processors CPU1, CPU2 (CPU) and FPGA1 (FPGA,
  Intel Stratix 10): no board (fleetctl has no FPGA kind); no PCIeDevices.
- hpe-xl675d-a40-ilo5: two CPUs as Processors; the eight A40s come from the
  iLO OEM PCI inventory only, so still eight boards, none doubled.
- hpe-dl325-ilo5, gigabyte-ami: CPUs only, no board.
- openbmc-stock: an empty Processors collection, no board.
No recording lists a GPU or an Accelerator as a Processor, so the last tests
serve a copy of the DMTF recording with GPU and Accelerator Processors (and
matching PCIeDevices) added, shaped as in DMTF's Processor schema.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest
from fleetctl_drivers.redfish import RedfishDriver, parse

from fleetctl.interfaces.bmc import BMCTarget, Board

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mockup_server import MockupServer, mockups_dir

MOCKUPS = mockups_dir()
recorded = pytest.mark.skipif(MOCKUPS is None, reason="shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")


def target(url: str) -> BMCTarget:
    return BMCTarget(name="rec", url=url, username="admin", password="secret", timeout=10)


async def facts_of(url: str):
    async with RedfishDriver(target(url)) as bmc:
        return await bmc.inventory.facts()


def facts_and_paths(root: Path):
    with MockupServer(root) as srv:
        facts = asyncio.run(facts_of(srv.url))
        return facts, [p for m, p in srv.paths if m == "GET"]


# ------------------------------------------------------------- recordings


@recorded
@pytest.mark.parametrize(
    ("name", "system", "boards"),
    [
        ("dmtf-public-rackmount1", "437XR1138R2", 0),
        ("hpe-xl675d-a40-ilo5", "1", 8),
        ("hpe-dl325-ilo5", "1", 0),
        ("gigabyte-ami", "Self", 0),
        ("openbmc-stock", "system", 0),
    ],
)
def test_recordings_processors_read_once_and_no_board_doubled(name, system, boards):
    assert MOCKUPS is not None
    facts, paths = facts_and_paths(MOCKUPS / name)
    assert len(facts.boards) == boards
    assert not [w for w in facts.warnings if "Processors" in w]
    coll = f"/redfish/v1/Systems/{system}/Processors".lower()
    assert [p for p in paths if p.lower().rstrip("/") == coll] == [f"/redfish/v1/Systems/{system}/Processors"]
    if name == "hpe-xl675d-a40-ilo5":
        assert {b.model for b in facts.boards} == {"NVIDIA A40"}
        assert len({b.serial for b in facts.boards}) == 8


@recorded
def test_dmtf_fpga_processor_is_not_a_board():
    assert MOCKUPS is not None
    fpga = json.loads((MOCKUPS / "dmtf-public-rackmount1/Systems/437XR1138R2/Processors/FPGA1/index.json").read_text())
    assert fpga["ProcessorType"] == "FPGA"
    assert parse.parse_processor_board(fpga, parse.load_board_rules()) is None


# ------------------------------------------- a recording with GPUs added

SYSTEM = "/redfish/v1/Systems/437XR1138R2"


def _write(root: Path, uri: str, doc: dict) -> None:
    folder = root / uri.removeprefix("/redfish/v1/")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.json").write_text(json.dumps({"@odata.id": uri, **doc}))


def _gpu_processor(pid: str, serial: str | None, *, pcie: str | None = None, **extra) -> dict:
    doc: dict = {
        "@odata.type": "#Processor.v1_20_0.Processor",
        "Id": pid,
        "Name": f"GPU {pid}",
        "ProcessorType": "GPU",
        "Manufacturer": "NVIDIA",
        "Model": "NVIDIA H100 80GB HBM3",
        "FirmwareVersion": "96.00.5E.00.01",
        "Status": {"State": "Enabled", "Health": "OK"},
        "Location": {"PartLocation": {"LocationType": "Slot", "LocationOrdinalValue": int(pid[-1])}},
    }
    if serial:
        doc["SerialNumber"] = serial
    if pcie:
        doc["Links"] = {"PCIeDevice": {"@odata.id": f"{SYSTEM}/PCIeDevices/{pcie}"}}
    doc.update(extra)
    return doc


def _pcie_gpu(root: Path, did: str, serial: str | None) -> None:
    dev = f"{SYSTEM}/PCIeDevices/{did}"
    _write(
        root,
        dev,
        {
            "@odata.type": "#PCIeDevice.v1_11_0.PCIeDevice",
            "Id": did,
            "Name": "NVIDIA H100 80GB HBM3",
            "Manufacturer": "NVIDIA",
            **({"SerialNumber": serial} if serial else {}),
            "PCIeInterface": {"PCIeType": "Gen5", "MaxPCIeType": "Gen5", "LanesInUse": 16, "MaxLanes": 16},
            "PCIeFunctions": {"@odata.id": f"{dev}/PCIeFunctions"},
        },
    )
    _write(root, f"{dev}/PCIeFunctions", {"Name": "PCIe Functions", "Members": [{"@odata.id": f"{dev}/PCIeFunctions/0"}]})
    _write(
        root,
        f"{dev}/PCIeFunctions/0",
        {"Id": "0", "FunctionId": 0, "VendorId": "0x10DE", "DeviceId": "0x2330", "ClassCode": "0x030200"},
    )


@pytest.fixture(scope="module")
def with_gpus(tmp_path_factory) -> Path:
    """dmtf-public-rackmount1 plus: PCIe GPUs A (serial S-A), B (no serial), C (no serial);
    Processors GPU1 (serial S-A), GPU2 (linked to PCIe B), GPU3 (nothing to match: C is a
    candidate, so a warning), an MN-Core 2 Accelerator and an unknown Accelerator."""
    if MOCKUPS is None:
        pytest.skip("shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")
    root = tmp_path_factory.mktemp("rackmount-gpus") / "mockup"
    shutil.copytree(MOCKUPS / "dmtf-public-rackmount1", root)
    sys_file = root / "Systems/437XR1138R2/index.json"
    system = json.loads(sys_file.read_text())
    system["PCIeDevices"] = {"@odata.id": f"{SYSTEM}/PCIeDevices"}
    sys_file.write_text(json.dumps(system))
    for did, serial in (("A", "S-A"), ("B", None), ("C", None)):
        _pcie_gpu(root, did, serial)
    _write(
        root,
        f"{SYSTEM}/PCIeDevices",
        {"Name": "PCIe Devices", "Members": [{"@odata.id": f"{SYSTEM}/PCIeDevices/{d}"} for d in "ABC"]},
    )
    procs = f"{SYSTEM}/Processors"
    coll_file = root / "Systems/437XR1138R2/Processors/index.json"
    coll = json.loads(coll_file.read_text())
    added = {
        "GPU1": _gpu_processor("GPU1", "s-a "),  # the same serial, other case and a blank
        "GPU2": _gpu_processor("GPU2", "S-B", pcie="B"),
        "GPU3": _gpu_processor("GPU3", "S-3"),
        "ACC1": {
            "Id": "ACC1",
            "Name": "Accelerator",
            "ProcessorType": "Accelerator",
            "Manufacturer": "Preferred Networks",
            "Model": "MN-Core 2",
            "SerialNumber": "MNC2-0001",
            "Status": {"State": "Enabled", "Health": "Warning"},
        },
        "ACC2": {"Id": "ACC2", "ProcessorType": "Accelerator", "Manufacturer": "Acme", "Model": "X1"},
    }
    for pid, doc in added.items():
        _write(root, f"{procs}/{pid}", doc)
        coll["Members"].append({"@odata.id": f"{procs}/{pid}"})
    coll["Members@odata.count"] = len(coll["Members"])
    coll_file.write_text(json.dumps(coll))
    return root


def test_processor_gpus_merge_with_pcie_boards(with_gpus):
    facts, paths = facts_and_paths(with_gpus)
    by_dev = {b.pcie_device_id: b for b in facts.boards if b.pcie_device_id}
    # A: matched by serial; the PCIe board keeps its serial and gains firmware and slot
    a = by_dev["A"]
    assert (a.kind, a.serial, a.firmware, a.slot, a.health) == ("gpu", "S-A", {"board": "96.00.5E.00.01"}, "1", "OK")
    # B: matched by Links.PCIeDevice; gains the serial only the Processor knew
    b = by_dev["B"]
    assert (b.kind, b.serial, b.slot) == ("gpu", "S-B", "2")
    # C: no Processor claimed it; GPU3 matched nothing: both kept, with a warning
    assert by_dev["C"].serial is None
    gpu3 = [x for x in facts.boards if x.serial == "S-3"]
    assert len(gpu3) == 1 and gpu3[0].pcie_device_id is None and gpu3[0].model == "NVIDIA H100 80GB HBM3"
    assert any("Processors/GPU3" in w and "may be one of 1 unmatched" in w for w in facts.warnings)
    mnc = [x for x in facts.boards if x.kind == "mncore2"]
    assert [(x.serial, x.model, x.health) for x in mnc] == [("MNC2-0001", "MN-Core 2", "Warning")]
    unknown = [x for x in facts.boards if x.model == "X1"]
    assert [x.kind for x in unknown] == ["gpu"]
    assert any("Processors/ACC2" in w and "Accelerator of unknown kind (Acme X1)" in w for w in facts.warnings)
    # 3 PCIe GPUs + GPU3 + 2 accelerators; the CPUs and the FPGA are not boards
    assert len(facts.boards) == 6
    assert sum(1 for p in paths if p.rstrip("/") == f"{SYSTEM}/Processors") == 1


# ------------------------------------------------------------ parse helpers


def test_parse_processor_board_by_type():
    rules = parse.load_board_rules()
    assert parse.parse_processor_board({"ProcessorType": "CPU", "Model": "EPYC"}, rules) is None
    assert parse.parse_processor_board({"ProcessorType": "DSP"}, rules) is None
    assert parse.parse_processor_board({}, rules) is None
    gpu = parse.parse_processor_board({"ProcessorType": "GPU", "Model": "Unnamed", "Id": "0"}, rules)
    assert gpu is not None and gpu.board.kind == "gpu" and gpu.warning is None
    # an Accelerator known by its PCI vendor id (ProcessorId.VendorId), free-text vendor ids ignored
    amd = parse.parse_processor_board({"ProcessorType": "Accelerator", "Model": "MI300X", "ProcessorId": {"VendorId": "0x1002"}}, rules)
    assert amd is not None and amd.board.kind == "amd-instinct" and amd.warning is None
    mn1 = parse.parse_processor_board({"ProcessorType": "Accelerator", "Model": "MN-Core"}, rules)
    assert mn1 is not None and mn1.board.kind == "mncore"
    odd = parse.parse_processor_board({"@odata.id": "/P/9", "ProcessorType": "Accelerator", "ProcessorId": {"VendorId": "ADD"}}, rules)
    assert odd is not None and odd.board.kind == "gpu"
    assert odd.warning == "/P/9: Accelerator of unknown kind (no manufacturer or model) counted as gpu"


def test_merge_without_processors_changes_nothing():
    boards = [Board(kind="gpu", serial="X", pcie_device_id="1")]
    merged, warnings = parse.merge_processor_boards(boards, [])
    assert merged == boards and warnings == []
    assert merged[0] is not boards[0]


def test_merge_processor_alone_is_a_board_without_warning():
    rules = parse.load_board_rules()
    pb = parse.parse_processor_board({"ProcessorType": "GPU", "SerialNumber": "Z", "Id": "GPU0"}, rules)
    assert pb is not None
    merged, warnings = parse.merge_processor_boards([Board(kind="mncore2", serial="M")], [pb])
    assert [b.serial for b in merged] == ["M", "Z"] and warnings == []


# ------------------------------- recorded NVIDIA GPUs: shared serial, no serial (issue 20)

GPU_DATA = Path(__file__).resolve().parents[1] / "data" / "redfish" / "gpu-processors"


def _recorded_gpu_boards() -> list[Board]:
    rules = parse.load_board_rules()
    pbs = [parse.parse_processor_board(json.loads((GPU_DATA / f).read_text()), rules)
           for f in ("gb300-GPU_2.json", "gb300-GPU_1.json", "hgx-b200-GPU_SXM_2-no-serial.json")]  # fmt: skip
    boards, warnings = parse.merge_processor_boards([], [p for p in pbs if p is not None])
    assert warnings == []
    return boards


def test_recorded_gb300_gpus_sharing_a_serial_are_numbered_and_one_without_serial_is_placed():
    boards = _recorded_gpu_boards()
    got = [(b.bmc_id, b.serial, b.position, b.location, b.pcie_device_id) for b in boards]
    assert got == [
        ("GPU_2", "123456", 2, "GPU_0", "GPU_2"),
        ("GPU_1", "123456", 1, "GPU_1", "GPU_1"),
        ("GPU_SXM_2", None, None, "SXM2", "GPU_SXM_2"),
    ]


def test_recorded_gpus_are_inspected_and_swept_without_a_false_critical():
    from fleetctl.interfaces.bmc import SystemFacts
    from fleetctl.inventory.schema import BoardSpec, ServerSpec
    from fleetctl.sweep.collect import BoardExpect, ServerExpect, ServerReading
    from fleetctl.sweep.engine import _evaluate
    from fleetctl.workflows.inspect import compare

    facts = SystemFacts(serial="SYS", boards=_recorded_gpu_boards())
    spec = ServerSpec(name="gb-01", serial="SYS", model="m", position=1)
    first, edits = compare(spec, None, facts)
    assert first.drift == [] and first.notes == ["board in slot 2 (SXM2): no serial reported"]
    recorded = edits["boards"]
    assert [(b["serial"], b["position"], b["slot"]) for b in recorded] == [("123456", 2, 0), ("123456", 1, 1), ("UNKNOWN-gb-01-2", None, 2)]
    again, edits2 = compare(spec.model_copy(update={"boards": [BoardSpec.model_validate(b) for b in recorded]}), None, facts)
    assert again.drift == [] and edits2["boards"] is None
    e = ServerExpect(name="gb-01", serial="SYS", model="m", site="s", rack="r", position=1, board_kind="gpu", board_count=3,
                     boards=[BoardExpect(b["slot"], b["kind"], b["serial"], b["position"]) for b in recorded])  # fmt: skip
    findings = _evaluate("server", "gb-01", ServerReading(facts=facts), e, "bmc")
    assert [(f.check, f.message) for f in findings if f.status.value != "ok"] == []
