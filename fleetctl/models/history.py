"""What was done: jobs and their journaled steps, and the audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field

from fleetctl.models.base import TableModel, tz_column, utcnow


class Job(TableModel, table=True):
    __tablename__ = "job"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)  # provision, inspect, burnin, sweep ...
    target: str
    state: str = Field(default="running", index=True)  # running, succeeded, failed, interrupted
    actor: str
    args: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    created_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    finished_at: datetime | None = Field(default=None, sa_column=tz_column())
    error: str | None = None


class JobStep(TableModel, table=True):
    __tablename__ = "job_step"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id", ondelete="CASCADE", index=True)
    server_id: int | None = Field(default=None, foreign_key="server.id", ondelete="SET NULL", index=True)
    name: str
    state: str = "running"  # running, succeeded, failed, skipped
    attempt: int = 1
    started_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    finished_at: datetime | None = Field(default=None, sa_column=tz_column())
    output: str | None = None
    error: str | None = None


class Event(TableModel, table=True):
    """The audit log: who did what to which object, when and why."""

    __tablename__ = "event"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow, index=True))
    actor: str
    action: str = Field(index=True)
    object_kind: str
    object_name: str = Field(index=True)
    detail: str | None = None
    reason: str | None = None
