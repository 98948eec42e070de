"""Run one BMC operation over many servers, journaled, results as data.

Every server gets a verdict (ok, or the reason it failed) and one bad BMC
never stops the rest. The run is a Job with one JobStep per server, so what
was done survives the process; fingerprints pinned on first use are written
to the inventory as they are learned.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, update

from fleetctl.targets import ServerRef


@dataclass
class Outcome:
    server: str
    ok: bool
    value: Any = None
    error: str | None = None
    elapsed: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"server": self.server, "ok": self.ok, "error": self.error, "elapsed": round(self.elapsed, 2), **self.details}


def run(
    servers: list[ServerRef],
    operation: Callable[[Any], Awaitable[Any]],
    *,
    kind: str,
    target_label: str,
    args: dict[str, Any] | None = None,
    concurrency: int = 200,
    progress: Callable[[int, int, str, bool], None] | None = None,
    url: str | None = None,
) -> list[Outcome]:
    """Run ``operation(bmc)`` on each server's BMC; one Outcome per server, in order."""
    from fleetctl.inventory.service import actor
    from fleetctl.models import Job, JobStep, Server
    from fleetctl.models.base import utcnow
    from fleetctl.plugins import drivers_for, sweep
    from fleetctl.store import get_engine
    from fleetctl.targets import bmc_targets

    targets, unreachable = bmc_targets(servers)
    drivers_for("bmc", targets)  # a BMC driver that is not installed stops us before the journal
    engine = get_engine(url)
    job_t, step_t, srv_t = Job.__table__, JobStep.__table__, Server.__table__  # type: ignore[attr-defined]
    with engine.begin() as conn:
        job_id = conn.execute(
            insert(job_t).values(kind=kind, target=target_label, state="running", actor=actor(), args=args or {}, created_at=utcnow())
        ).inserted_primary_key[0]

    ids = {s.name: s.id for s in servers}
    outcomes: dict[str, Outcome] = {n: Outcome(n, False, error=why) for n, why in unreachable.items()}
    done = len(outcomes)
    total = len(servers)
    if progress:
        for n in outcomes:
            progress(done, total, n, False)

    pinned: dict[str, str] = {}

    def on_result(n_done: int, n_total: int, result: Any) -> None:
        if result.fingerprint:
            pinned[result.target] = result.fingerprint
        if progress:
            progress(done + n_done, total, result.target, result.ok)

    # Each server's BMC driver (``BMCTarget.driver``) sweeps its own servers; results come back in order.
    results = sweep("bmc", targets, operation, concurrency=concurrency, progress=on_result)
    for r in results:
        outcomes[r.target] = Outcome(r.target, r.ok, r.value, r.error, r.elapsed)

    from datetime import timedelta

    now = utcnow()
    with engine.begin() as conn:
        steps = [
            {
                "job_id": job_id, "server_id": ids[o.server], "name": kind, "state": "succeeded" if o.ok else "failed",
                "started_at": now - timedelta(seconds=o.elapsed), "finished_at": now, "error": o.error,
                "output": _summary(o.value) if o.ok else None,
            }  # fmt: skip
            for o in outcomes.values()
        ]
        if steps:
            conn.execute(insert(step_t), steps)
        for name, fp in pinned.items():
            # Trust on first use: record only where nothing was pinned yet.
            conn.execute(
                update(srv_t).where(srv_t.c.name == name, srv_t.c.bmc_fingerprint.is_(None)).values(bmc_fingerprint=fp)
            )
        failed = sum(1 for o in outcomes.values() if not o.ok)
        conn.execute(
            update(job_t).where(job_t.c.id == job_id).values(
                state="failed" if failed else "succeeded", finished_at=utcnow(),
                error=f"{failed} of {total} failed" if failed else None,
            )  # fmt: skip
        )
    return [outcomes[s.name] for s in servers]


def _summary(value: Any) -> str | None:
    if value is None:
        return None
    try:
        if hasattr(value, "model_dump"):
            return json.dumps(value.model_dump(mode="json"), sort_keys=True)[:20000]
        return json.dumps(value, default=str, sort_keys=True)[:20000]
    except (TypeError, ValueError):
        return str(value)[:20000]
