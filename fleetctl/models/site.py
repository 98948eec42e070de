"""Sites, racks, and the rack units devices occupy."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, CheckConstraint, Column, UniqueConstraint
from sqlmodel import Field

from fleetctl.models.base import TableModel


class Site(TableModel, table=True):
    __tablename__ = "site"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    description: str | None = None
    # The site file's provisioning block with its defaults left out (NULL: none);
    # inventory.queries.site_provisioning gives it back with the defaults filled in.
    provisioning: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))
    # The Kubernetes clusters its servers are nodes of: [{name, kubeconfig, context, in_cluster}], references
    # only (a kubeconfig's path and context, never a token); NULL: none.
    k8s_clusters: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))


class Rack(TableModel, table=True):
    __tablename__ = "rack"
    __table_args__ = (
        UniqueConstraint("site_id", "name", name="uq_rack_site_name"),
        CheckConstraint("height >= 1 AND height <= 60", name="ck_rack_height"),
    )

    id: int | None = Field(default=None, primary_key=True)
    site_id: int = Field(foreign_key="site.id", ondelete="CASCADE", index=True)
    name: str = Field(index=True)
    row: str | None = None
    position: int | None = None
    height: int = 42
    power_budget_w: int | None = None


class RackUnit(TableModel, table=True):
    """One occupied rack unit.

    The primary key is what makes "no two devices in the same unit" a
    database guarantee rather than only a check in Python.
    """

    __tablename__ = "rack_unit"
    __table_args__ = (
        CheckConstraint("unit >= 1", name="ck_rack_unit_unit"),
        CheckConstraint(
            "(server_id IS NULL) <> (switch_id IS NULL)", name="ck_rack_unit_one_device"
        ),
    )

    rack_id: int = Field(foreign_key="rack.id", ondelete="CASCADE", primary_key=True)
    unit: int = Field(primary_key=True)
    server_id: int | None = Field(default=None, foreign_key="server.id", ondelete="CASCADE", index=True)
    switch_id: int | None = Field(default=None, foreign_key="switch.id", ondelete="CASCADE", index=True)


class PowerAdmission(TableModel, table=True):
    """A power-on admitted in a rack, by any fleetctl process or worker.

    A rack's power budget and the stagger between two starts hold across every
    process working the rack (two operators, several Temporal workers of one
    site), not only within one: each admission reads and writes these rows in
    one short transaction (see ``fleetctl/lifecycle/rack_power.py``). Rows
    older than a day are pruned as new ones come.
    """

    __tablename__ = "power_admission"

    id: int | None = Field(default=None, primary_key=True)
    rack: str = Field(index=True)  # site/rack, as the power figures name it
    server: str
    peak_w: int = 0  # counted at its model's peak draw
    start_at: float  # when the server may start (seconds since the epoch)
    holder: str = ""  # who admitted it: user:host:pid, or user:temporal:workflow
