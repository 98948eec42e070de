"""The quick accelerator check: the boards the inventory expects are there,
on a PCIe link at full generation and width, with firmware at the baseline.

It reads what the BMC reports (facts and firmware inventory); the vendor
tools on the host (``gpfn3-smi``, ``nvidia-smi``) are the playbooks' part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetctl.workflows.firmware import baseline_key


@dataclass
class AccelCheck:
    server: str
    expected: str | None = None  # "4 mncore2"
    found: int = 0
    problems: list[str] = field(default_factory=list)


def check(facts: Any, firmware: list[Any], *, kind: str | None, count: int, baseline: dict[str, str], server: str) -> AccelCheck:
    """Judge one server from its facts, its firmware inventory and its model's expectations."""
    res = AccelCheck(server, f"{count} {kind}" if kind else None)
    boards = [b for b in facts.boards if kind is None or b.kind == kind]
    res.found = len(boards)
    if kind and len(boards) != count:
        res.problems.append(f"expected {count} {kind} boards, the BMC shows {len(boards)}")
    devices = {d.id: d for d in facts.pcie_devices}
    for b in boards:
        d = devices.get(b.pcie_device_id or "")
        where = f"board {b.serial or '?'} (slot {b.slot})"
        if d is None:
            continue
        if d.link_degraded:
            res.problems.append(
                f"{where}: PCIe link Gen{d.link_gen} x{d.link_width}, expected Gen{d.max_link_gen} x{d.max_link_width}"
            )
        if b.health not in (None, "OK"):
            res.problems.append(f"{where}: health {b.health}")
    board_keys = {k for k in baseline if k not in ("BMC", "BIOS")}
    for comp in firmware:
        key = baseline_key({k: baseline[k] for k in board_keys}, comp)
        if key and comp.version != baseline[key]:
            res.problems.append(f"{comp.id}: firmware {comp.version}, baseline {baseline[key]}")
    return res
