"""Servers, their NICs and tags, and the accelerator boards they carry."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Column, Index, UniqueConstraint, text
from sqlmodel import Field

from fleetctl.models.base import TableModel, tz_column, utcnow


class Server(TableModel, table=True):
    __tablename__ = "server"
    __table_args__ = (
        UniqueConstraint("bmc_url", "bmc_system_id", name="uq_server_bmc"),
        CheckConstraint("position >= 1", name="ck_server_position"),
        CheckConstraint("height >= 1", name="ck_server_height"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    serial: str = Field(unique=True)
    model_id: int = Field(foreign_key="hardware_model.id", ondelete="RESTRICT", index=True)
    rack_id: int = Field(foreign_key="rack.id", ondelete="RESTRICT", index=True)
    position: int
    height: int = 1
    bmc_url: str | None = None
    # Where one BMC serves several systems (blade chassis), which one is ours.
    bmc_system_id: str | None = None
    credential: str | None = None  # a reference (env:/file:/cmd:), never a secret
    bmc_fingerprint: str | None = None  # sha256 of the BMC's pinned certificate
    # How to reach the installed OS over SSH ("host" or "host:port"); None: the
    # server's name, port 22. Extra Ansible host variables beside it.
    host_address: str | None = None
    host_vars: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # Its Kubernetes node, as the site file declares it (docs/kubernetes.md): the
    # cluster's name (None: the site's only cluster) and the node's (None: learned).
    k8s_cluster: str | None = None
    k8s_node: str | None = None
    state: str = Field(default="registered", index=True)
    target_state: str | None = None
    last_error: str | None = None
    # The lock: a compare-and-set on these columns (see fleetctl.lifecycle).
    reservation: str | None = None
    reserved_at: datetime | None = Field(default=None, sa_column=tz_column())
    reserved_for: str | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))


class ServerTag(TableModel, table=True):
    __tablename__ = "server_tag"

    server_id: int = Field(foreign_key="server.id", ondelete="CASCADE", primary_key=True)
    tag: str = Field(primary_key=True, index=True)


class Nic(TableModel, table=True):
    __tablename__ = "nic"
    __table_args__ = (UniqueConstraint("server_id", "name", name="uq_nic_server_name"),)

    id: int | None = Field(default=None, primary_key=True)
    server_id: int = Field(foreign_key="server.id", ondelete="CASCADE", index=True)
    name: str
    mac: str | None = Field(default=None, unique=True)  # lower-case, colon separated


class AcceleratorBoard(TableModel, table=True):
    """A board: its identity is its serial, with ``position`` where boards share one.

    NVIDIA GB200/GB300 report one serial per superchip module, shared by its
    two GPUs: those boards are (serial, 1) and (serial, 2). A serial of a
    board's own has no position, and is unique alone (the partial index: in
    SQL two NULL positions would not collide).
    """

    __tablename__ = "accelerator_board"
    __table_args__ = (
        UniqueConstraint("server_id", "slot", name="uq_board_server_slot"),
        UniqueConstraint("serial", "position", name="uq_board_serial_position"),
        Index("uq_board_serial_alone", "serial", unique=True, sqlite_where=text("position IS NULL"),
              postgresql_where=text("position IS NULL")),  # fmt: skip
        CheckConstraint("position >= 1", name="ck_board_position"),
    )

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)  # mncore2, mncore, gpu
    serial: str
    # 1.. among the boards sharing ``serial``; None for a serial of the board's own.
    position: int | None = None
    server_id: int | None = Field(default=None, foreign_key="server.id", ondelete="CASCADE", index=True)
    slot: int | None = None
    pci_address: str | None = None
    model: str | None = None
    firmware: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    # A BoardState value. Set on creation (the site file); changed only by
    # fleetctl.lifecycle.boards.move_board, along its transition table.
    state: str = Field(default="ok")
