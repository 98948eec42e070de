"""The quick accelerator check's judgement, from BMC facts (no BMC needed)."""

from fleetctl.interfaces.bmc import Board, FirmwareComponent, PCIeDevice, SystemFacts
from fleetctl.workflows.accel import check


def _facts(n: int, degraded_slot: int | None = None) -> SystemFacts:
    devices = [
        PCIeDevice(id=f"MNCore{i}", link_gen=3 if i == degraded_slot else 4, link_width=8 if i == degraded_slot else 16,
                   max_link_gen=4, max_link_width=16)  # fmt: skip
        for i in range(n)
    ]
    boards = [Board(kind="mncore2", serial=f"S{i}", slot=str(i), pcie_device_id=f"MNCore{i}", health="OK") for i in range(n)]
    return SystemFacts(boards=boards, pcie_devices=devices)


def test_all_well():
    fw = [FirmwareComponent(id="BIOS", name="BIOS", version="1.0"), FirmwareComponent(id="mncore2_slot0_board", name="b", version="0.9.7")]
    res = check(_facts(4), fw, kind="mncore2", count=4, baseline={"BIOS": "2.0", "board": "0.9.7"}, server="s")
    assert res.problems == [] and res.found == 4  # BIOS drift is not the accelerators' business


def test_missing_board_degraded_link_and_firmware():
    fw = [FirmwareComponent(id="mncore2_slot1_board", name="b", version="0.9.6")]
    res = check(_facts(3, degraded_slot=1), fw, kind="mncore2", count=4, baseline={"board": "0.9.7"}, server="s")
    assert res.problems == [
        "expected 4 mncore2 boards, the BMC shows 3",
        "board S1 (slot 1): PCIe link Gen3 x8, expected Gen4 x16",
        "mncore2_slot1_board: firmware 0.9.6, baseline 0.9.7",
    ]
