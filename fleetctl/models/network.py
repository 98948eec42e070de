"""Switches, their ports, and the cables of the plan."""

from __future__ import annotations

from sqlalchemy import CheckConstraint, UniqueConstraint
from sqlmodel import Field

from fleetctl.models.base import TableModel


class Switch(TableModel, table=True):
    __tablename__ = "switch"
    __table_args__ = (
        CheckConstraint("role IN ('leaf', 'spine', 'management')", name="ck_switch_role"),
        CheckConstraint("position >= 1", name="ck_switch_position"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    serial: str | None = Field(default=None, unique=True)
    model_id: int = Field(foreign_key="hardware_model.id", ondelete="RESTRICT", index=True)
    platform: str  # sonic, eos, nxos, linux: names a platform file of the switch driver
    role: str
    mgmt_address: str = Field(unique=True)
    credential: str | None = None
    ssh_port: int | None = None  # None: 22
    # SNMP polling: version ('2c' or '3'), a credential reference, the UDP port.
    snmp_version: str | None = None
    snmp_credential: str | None = None
    snmp_port: int | None = None
    rack_id: int = Field(foreign_key="rack.id", ondelete="RESTRICT", index=True)
    position: int
    height: int = 1


class SwitchPort(TableModel, table=True):
    __tablename__ = "switch_port"
    __table_args__ = (UniqueConstraint("switch_id", "name", name="uq_switch_port_name"),)

    id: int | None = Field(default=None, primary_key=True)
    switch_id: int = Field(foreign_key="switch.id", ondelete="CASCADE", index=True)
    name: str
    description: str | None = None


class Link(TableModel, table=True):
    """A planned cable: a switch port to a server NIC or to another switch port.

    ``vlans`` is the comma-separated list the link should carry; ``mode`` says
    whether the switch side is an access port (one VLAN) or a trunk.
    """

    __tablename__ = "link"
    __table_args__ = (
        CheckConstraint("(nic_id IS NULL) <> (peer_port_id IS NULL)", name="ck_link_one_far_end"),
        CheckConstraint("mode IN ('access', 'trunk')", name="ck_link_mode"),
    )

    id: int | None = Field(default=None, primary_key=True)
    port_id: int = Field(foreign_key="switch_port.id", ondelete="CASCADE", unique=True)
    nic_id: int | None = Field(default=None, foreign_key="nic.id", ondelete="CASCADE", unique=True)
    peer_port_id: int | None = Field(default=None, foreign_key="switch_port.id", ondelete="CASCADE", unique=True)
    mode: str = "access"
    vlans: str = ""
