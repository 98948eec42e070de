"""The health sweep's history: runs, a verdict per target, findings, cursors, acks.

Only problems are stored as findings (an ok check leaves no row), and each
run keeps one small verdict row per target, so 90 daily sweeps of a
10,000-server fleet stay a few hundred thousand rows and reading the findings
of a run is one indexed query. ``finding_state`` is the current picture, one
row per problem key (target, check, subject): it says since when a problem
persists, even when the sweeps in between covered other racks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field

from fleetctl.models.base import TableModel, tz_column, utcnow


class SweepRun(TableModel, table=True):
    __tablename__ = "sweep_run"

    id: int | None = Field(default=None, primary_key=True)
    started_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow, index=True))
    finished_at: datetime | None = Field(default=None, sa_column=tz_column())
    state: str = Field(default="running")  # running, finished, interrupted
    level: str = "bmc"  # bmc, host
    selector: str = "all"
    actor: str = ""
    host: str = ""
    pid: int = 0
    duration_s: float | None = None
    servers: int = 0
    switches: int = 0
    # {"ok": n, "warning": n, "critical": n, "unknown": n}: targets by their worst status
    counts: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    worst_new: str | None = None


class SweepTarget(TableModel, table=True):
    """One target's verdict in one run (every target gets one, reachable or not)."""

    __tablename__ = "sweep_target"
    __table_args__ = (UniqueConstraint("run_id", "kind", "name", name="uq_sweep_target"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="sweep_run.id", ondelete="CASCADE")
    kind: str  # server, switch
    name: str = Field(index=True)
    site: str | None = None
    rack: str | None = None
    position: int | None = None
    status: str = "ok"  # the worst of its findings: ok, warning, critical, unknown
    elapsed: float | None = None
    error: str | None = None
    # Small readings for metrics and reports (temperatures, port error rates, firmware).
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))


class Finding(TableModel, table=True):
    """A problem one check found on one target in one run."""

    __tablename__ = "finding"
    __table_args__ = (
        UniqueConstraint("run_id", "kind", "target", "check", "subject", name="uq_finding"),
        Index("ix_finding_key", "kind", "target", "check", "subject"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="sweep_run.id", ondelete="CASCADE")
    kind: str
    target: str
    check: str
    subject: str = ""  # the part the finding is about (a PSU, a port), "" for the target itself
    status: str  # warning, critical, unknown
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    first_seen: datetime = Field(sa_column=tz_column(nullable=False))
    last_seen: datetime = Field(sa_column=tz_column(nullable=False))
    new: bool = False  # not open before this run, or worse than it was
    ack_id: int | None = None  # the ack in force when it was found: shown, never sets the exit code


class FindingState(TableModel, table=True):
    """The open problems now: one row per key, since when, as of which run."""

    __tablename__ = "finding_state"

    kind: str = Field(primary_key=True)
    target: str = Field(primary_key=True)
    check: str = Field(primary_key=True)
    subject: str = Field(default="", primary_key=True)
    status: str
    message: str
    first_seen: datetime = Field(sa_column=tz_column(nullable=False))
    last_seen: datetime = Field(sa_column=tz_column(nullable=False))
    run_id: int


class SweepCursor(TableModel, table=True):
    """What a sweep must remember of a target for the next one (log cursor, counters, uptime)."""

    __tablename__ = "sweep_cursor"

    kind: str = Field(primary_key=True)
    target: str = Field(primary_key=True)
    value: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))


class FindingAck(TableModel, table=True):
    """A silence: a known problem acknowledged until a date, or until it changes or clears."""

    __tablename__ = "finding_ack"

    id: int | None = Field(default=None, primary_key=True)
    kind: str
    target: str = Field(index=True)
    check: str
    subject: str = ""
    status: str  # the status acknowledged: a change of status ends the ack
    reason: str
    actor: str
    created_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    until: datetime | None = Field(default=None, sa_column=tz_column())
    ended_at: datetime | None = Field(default=None, sa_column=tz_column())
    ended_why: str | None = None  # expired, changed, resolved, removed
