"""Burn-in history: runs, a verdict per board with its evidence and telemetry, and boards to ship back.

A run is one ``fleetctl burnin`` over a set of servers. Each board it finishes
gets one ``burnin_result`` row, written as soon as its server's stages end, so
a run killed half-way keeps every verdict already reached and the re-run
resumes from there (a board with a row in the run is not run again). The
telemetry sampled during the workload is kept on the row (a few hundred
samples at most per board), so the report can plot it without a second table.

``board_rma`` is the list of boards to ship: opened by a failing burn-in (or a
failed board firmware update) with the evidence, closed when the board is
shipped or cleared.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field

from fleetctl.models.base import TableModel, tz_column, utcnow


class BurninRun(TableModel, table=True):
    __tablename__ = "burnin_run"

    id: int | None = Field(default=None, primary_key=True)
    started_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow, index=True))
    finished_at: datetime | None = Field(default=None, sa_column=tz_column())
    state: str = Field(default="running", index=True)  # running, finished, interrupted
    kind: str = Field(index=True)  # mncore, gpu
    level: str = "standard"  # quick, standard, extended
    duration_s: float = 0.0  # the workload's length
    selector: str = ""
    actor: str = ""
    host: str = ""
    pid: int = 0
    servers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False, default=list))
    # {"pass": n, "degraded": n, "fail": n, "error": n}: boards (error: servers) by verdict
    counts: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))


class BurninResult(TableModel, table=True):
    """One board's verdict in one run (or, with ``serial`` None, a server that could not be burned in)."""

    __tablename__ = "burnin_result"
    __table_args__ = (UniqueConstraint("run_id", "server", "device", name="uq_burnin_result"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="burnin_run.id", ondelete="CASCADE", index=True)
    server: str = Field(index=True)
    serial: str | None = Field(default=None, index=True)
    device: str = ""  # mnc2p27s0, GPU 0; "" for a server-level error
    slot: int | None = None
    model: str | None = None
    verdict: str = "pass"  # pass, degraded, fail, error
    # [{"criterion": ..., "severity": "degraded"|"fail"|"error", "message": ..., "evidence": {...}}]
    reasons: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False, default=list))
    # the figures the criteria read: throughput, max temperature, max power, error counts ...
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    # samples through the workload: [{"t": s, "temp_c": .., "power_w": .., "clock_mhz": .., "source": "host"|"bmc"}]
    telemetry: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False, default=list))
    started_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))
    finished_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow))


class BoardRma(TableModel, table=True):
    """A board to ship back to the vendor, with why; open while ``closed_at`` is None."""

    __tablename__ = "board_rma"

    id: int | None = Field(default=None, primary_key=True)
    board_id: int | None = Field(default=None, foreign_key="accelerator_board.id", ondelete="SET NULL", index=True)
    serial: str = Field(index=True)
    kind: str = ""
    model: str | None = None
    server: str = ""
    slot: int | None = None
    source: str = ""  # burnin:<run id>, firmware:<job id>
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    actor: str = ""
    opened_at: datetime = Field(default_factory=utcnow, sa_column=tz_column(nullable=False, default=utcnow, index=True))
    closed_at: datetime | None = Field(default=None, sa_column=tz_column())
    closed_reason: str | None = None
