"""How a board the BMC reports is named in the inventory: its slot, and the placeholder serial of one reported without a
serial (kept apart from :mod:`fleetctl.workflows.inspect`, which records them: the sweep's checks judge by them, and
importing inspection's inventory editing cost every sweep 45 ms of its start)."""

from __future__ import annotations

from typing import Any


def _slot(value: Any, fallback: int) -> int:
    try:
        return int(str(value).rsplit(" ", 1)[-1])
    except (TypeError, ValueError):
        return fallback


def board_slot(board: Any, index: int) -> int:
    """The slot a BMC's board is recorded in: its slot number, else its place in the BMC's list."""
    return _slot(board.slot, index)


def placeholder_board_serial(server: str, n: int) -> str:
    """What a board the BMC reports without a serial is recorded as (a board's serial is its key in the site files)."""
    return f"UNKNOWN-{server}-{n}"


def is_placeholder_board_serial(server: str, serial: str | None) -> bool:
    """Whether a recorded board serial is the placeholder of a board its BMC reports without one."""
    prefix = f"UNKNOWN-{server}-"
    return bool(serial and serial.startswith(prefix) and serial[len(prefix) :].isdigit())


def board_where(board: Any) -> str:
    """Where a BMC's board sits, in the BMC's words, for a message."""
    return board.location or board.bmc_id or board.pci_address or board.pcie_device_id or ""
