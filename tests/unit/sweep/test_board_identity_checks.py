"""Boards without a serial, and boards sharing one, through inspection's compare and the sweep (issue 20, items 3, 4).

The BMC's boards are what the Redfish driver makes of a GB200-like tray (shared
serials numbered by ``parse.number_shared_serials``) and of a tower whose GPUs
the BMC lists without SerialNumber; inspection records them, the sweep then
judges the next reading against that record.
"""

from __future__ import annotations

from typing import Any

from fleetctl_drivers.redfish import parse

from fleetctl.interfaces.bmc import Board, SystemFacts
from fleetctl.inventory.schema import BoardSpec, ServerSpec
from fleetctl.sweep.collect import BoardExpect, ServerExpect, ServerReading
from fleetctl.sweep.engine import _evaluate
from fleetctl.workflows.inspect import compare

NAME = "gb-tray-01"


def tray(*, hide: str | None = None) -> list[Board]:
    """Four GPUs of two modules, each module's serial shared by its two GPUs (order as a BMC may list them)."""
    boards = [Board(kind="gpu", serial=s, bmc_id=g, location=f"GPU_{int(g[-1]) % 2}", model="GB200")
              for g, s in (("GPU_1", "1330124010001"), ("GPU_0", "1330124010001"), ("GPU_2", "1330124010002"),
                           ("GPU_3", "1330124010002"))]  # fmt: skip
    if hide:
        boards = [b.model_copy(update={"serial": None}) if b.bmc_id == hide else b for b in boards]
    return parse.number_shared_serials(boards)


def tower() -> list[Board]:
    """Two GPUs listed as Processors without SerialNumber, one with (slots from Location.PartLocation)."""
    return [Board(kind="gpu", serial=None, slot="1", bmc_id="GPU1", location="PCIe Slot 1"),
            Board(kind="gpu", serial=None, slot="2", bmc_id="GPU2", location="PCIe Slot 2"),
            Board(kind="gpu", serial="S-3", slot="3", bmc_id="GPU3")]  # fmt: skip


def server(boards: list[dict[str, Any]] | None = None) -> ServerSpec:
    return ServerSpec(name=NAME, serial="SYS-1", model="m", position=1, boards=[BoardSpec.model_validate(b) for b in boards or []])


def inspect_twice(boards: list[Board]) -> tuple[Any, dict[str, Any], Any, dict[str, Any]]:
    first, ed = compare(server(), None, SystemFacts(serial="SYS-1", boards=boards))
    assert ed["boards"] is not None
    again, ed2 = compare(server(ed["boards"]), None, SystemFacts(serial="SYS-1", boards=boards))
    return first, ed, again, ed2


def sweep(recorded: list[dict[str, Any]], boards: list[Board]) -> list[tuple[str, str, str]]:
    expected = [BoardExpect(b["slot"], b["kind"], b["serial"], b["position"]) for b in recorded]
    e = ServerExpect(name=NAME, serial="SYS-1", model="m", site="s", rack="r", position=1, board_kind="gpu",
                     board_count=len(recorded), boards=expected)  # fmt: skip
    fs = _evaluate("server", NAME, ServerReading(facts=SystemFacts(serial="SYS-1", boards=boards)), e, "bmc")
    return sorted((f.check, f.status.value, f.message) for f in fs if f.check.startswith(("accel", "inventory")))


def test_shared_serials_are_numbered_by_the_bmc_id() -> None:
    got = sorted((b.bmc_id, b.serial, b.position) for b in tray())
    assert got == [("GPU_0", "1330124010001", 1), ("GPU_1", "1330124010001", 2), ("GPU_2", "1330124010002", 1),
                   ("GPU_3", "1330124010002", 2)]  # fmt: skip
    # a serial of its own gets no position
    assert [b.position for b in parse.number_shared_serials([Board(kind="gpu", serial="A"), Board(kind="gpu", serial="B")])] == [None, None]


def test_a_tray_with_shared_serials_is_inspected_and_swept_clean() -> None:
    first, ed, again, ed2 = inspect_twice(tray())
    assert first.drift == [] and first.filled == ["4 boards"]
    assert sorted((b["serial"], b["position"]) for b in ed["boards"]) == [
        ("1330124010001", 1), ("1330124010001", 2), ("1330124010002", 1), ("1330124010002", 2)]  # fmt: skip
    assert again.drift == [] and ed2["boards"] is None
    assert sweep(ed["boards"], tray()) == []
    # a GPU of a module gone: its (serial, position) is the one said missing
    gone = [b for b in tray() if b.bmc_id != "GPU_3"]
    assert [m for _c, s, m in sweep(ed["boards"], gone) if s == "critical"] == [
        "board 1330124010002 #2 (gpu, slot 3) not seen by the BMC"]  # fmt: skip


def test_boards_without_a_serial_are_recorded_by_slot_and_no_false_critical() -> None:
    first, ed, again, ed2 = inspect_twice(tower())
    assert first.drift == []
    assert first.filled == ["3 boards (2 without a serial reported: recorded by slot)"]
    assert first.notes == ["board in slot 1 (PCIe Slot 1): no serial reported", "board in slot 2 (PCIe Slot 2): no serial reported"]
    assert [(b["serial"], b["slot"]) for b in ed["boards"]] == [(f"UNKNOWN-{NAME}-0", 1), (f"UNKNOWN-{NAME}-1", 2), ("S-3", 3)]
    assert again.drift == [] and ed2["boards"] is None and again.notes == first.notes
    # the next sweep: no board "not seen by the BMC", no drift
    assert sweep(ed["boards"], tower()) == []
    # the BMC lists them in another order: still found by slot
    assert sweep(ed["boards"], list(reversed(tower()))) == []
    # a board without a serial really gone: said, by its slot
    assert sweep(ed["boards"], tower()[1:]) == [
        ("accel.present", "critical", "board in slot 1 (gpu, recorded without a serial) not seen by the BMC")]  # fmt: skip


def test_a_bmc_that_stops_reporting_one_serial_of_a_module_is_no_drift_nor_critical() -> None:
    _first, ed, _again, _ed2 = inspect_twice(tray())
    hidden = tray(hide="GPU_3")
    assert [(b.bmc_id, b.serial, b.position) for b in hidden if b.bmc_id in ("GPU_2", "GPU_3")] == [
        ("GPU_2", "1330124010002", None), ("GPU_3", None, None)]  # fmt: skip
    r, edits = compare(server(ed["boards"]), None, SystemFacts(serial="SYS-1", boards=hidden))
    assert r.drift == [] and edits["boards"] is None
    assert r.notes == ["board in slot 3 (GPU_1): no serial reported"]
    assert sweep(ed["boards"], hidden) == []


def test_a_serial_reported_again_is_filled_in_not_drift() -> None:
    """Recorded while the BMC hid GPU_3's serial; then it reports it again: the sweep finds every board, inspection fills."""
    _first, ed, _again, _ed2 = inspect_twice(tray(hide="GPU_3"))
    assert sorted((b["serial"], b["position"]) for b in ed["boards"])[-2:] == [("1330124010002", None), (f"UNKNOWN-{NAME}-3", None)]
    assert sweep(ed["boards"], tray()) == []
    r, edits = compare(server(ed["boards"]), None, SystemFacts(serial="SYS-1", boards=tray()))
    assert r.drift == [] and edits["boards_filled"]
    assert r.filled == ["board in slot 2: 1330124010002 #1", "board in slot 3: 1330124010002 #2"]
    assert sorted((b["serial"], b["position"]) for b in edits["boards"])[-2:] == [("1330124010002", 1), ("1330124010002", 2)]
