"""Hardware models (device types) and the firmware baselines they follow."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, CheckConstraint, Column, UniqueConstraint
from sqlmodel import Field

from fleetctl.models.base import TableModel


class HardwareModel(TableModel, table=True):
    """What a kind of device is: size, power, the boards it should hold.

    Servers and switches point here so that drift (declared or found boards
    against ``board_count``) and a rack's power budget can be checked.
    """

    __tablename__ = "hardware_model"
    __table_args__ = (
        CheckConstraint("kind IN ('server', 'switch')", name="ck_hardware_model_kind"),
        CheckConstraint("height >= 1", name="ck_hardware_model_height"),
        CheckConstraint("board_count >= 0", name="ck_hardware_model_board_count"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    kind: str
    vendor: str
    model: str
    height: int = 1
    power_idle_w: int | None = None
    power_peak_w: int | None = None
    board_kind: str | None = None
    board_count: int = 0
    bios_profile: str | None = None
    driver: str | None = None  # an entry point name; None: the kind's default driver
    # Switch models: the port names, as the range patterns the site file gave
    # (``Ethernet[1-64]``), newline separated; SwitchPort rows are expanded from it.
    ports: str | None = None


class BiosProfile(TableModel, table=True):
    """BIOS attributes that hardware models name in ``bios_profile``."""

    __tablename__ = "bios_profile"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    description: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))


class FirmwareBaseline(TableModel, table=True):
    """The firmware version wanted for one component of one hardware model."""

    __tablename__ = "firmware_baseline"
    __table_args__ = (UniqueConstraint("model_id", "component", name="uq_firmware_baseline_component"),)

    id: int | None = Field(default=None, primary_key=True)
    model_id: int = Field(foreign_key="hardware_model.id", ondelete="CASCADE", index=True)
    component: str
    version: str
