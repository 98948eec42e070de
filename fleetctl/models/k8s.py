"""The Kubernetes maintenance journal: which node fleetctl cordoned, for which job, and where that stands."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field

from fleetctl.models.base import TableModel, tz_column, utcnow


class K8sMaintenance(TableModel, table=True):
    """One maintenance of one server's node: cordon and drain, the action, uncordon (docs/kubernetes.md).

    A server has at most one row not ``released`` (written inside one short
    transaction that reads first): a re-run of its job, or a new job after the
    old one died, takes that row over and resumes it. ``held`` rows are the
    nodes fleetctl left cordoned on purpose (the action failed, the drain timed
    out); ``fleetctl k8s status`` lists them until someone releases them.
    """

    __tablename__ = "k8s_maintenance"

    id: int | None = Field(default=None, primary_key=True)
    server: str = Field(index=True)  # the server's name (a row outlives a renamed or removed server, as the audit log)
    cluster: str  # the cluster's name in the site file (a reference: never a credential)
    node: str
    # The job holding the node (its taint's value names it: job-<id>); no foreign key: a held row outlives a pruned job.
    job_id: int = Field(index=True)
    why: str = ""  # the action it is for: power.cycle, burnin, k8s.drain ...
    state: str = Field(default="draining", index=True)  # draining, drained, released, held
    was_cordoned: bool = False  # cordoned before fleetctl came: never uncordoned by it
    evicted: int = 0
    waited_s: float = 0.0
    reason: str | None = None  # why it is held
    detail: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))
    started_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    released_at: datetime | None = Field(default=None, sa_column=tz_column())
