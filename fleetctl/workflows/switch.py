"""Run one operation over many switches (SSH), journaled, results as data."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import insert, update

from fleetctl.inventory.service import actor
from fleetctl.plugins import drivers_for, sweep
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.targets import SwitchRef
from fleetctl.times import utcnow
from fleetctl.workflows.bmc import Outcome


def run(
    switches: list[SwitchRef],
    operation: Callable[[Any], Any],
    *,
    kind: str,
    target_label: str,
    args: dict[str, Any] | None = None,
    concurrency: int = 16,
    url: str | None = None,
    judge: Callable[[Any], str | None] | None = None,
) -> list[Outcome]:
    """Run ``operation(switch)`` on each switch; one Outcome per switch, in order; a Job in the journal.

    ``judge(value)`` may call a switch's step failed although the operation
    returned (a port refused): the journal then says so, with the reason.
    """
    from fleetctl.models import Job
    from fleetctl.targets import switch_targets

    targets, unreachable = switch_targets(switches)
    drivers_for("switch", targets)  # a switch driver that is not installed stops us before the journal
    engine = get_engine(url)
    with engine.begin() as conn:
        # The model's table (not the light one) knows its primary key.
        pk = conn.execute(
            insert(Job.__table__).values(
                kind=kind, target=target_label, state="running", actor=actor(), args=args or {}, created_at=utcnow()
            )
        ).inserted_primary_key
        assert pk is not None
        job_id = pk[0]
    outcomes: dict[str, Outcome] = {n: Outcome(n, False, error=why) for n, why in unreachable.items()}
    # Each switch's driver (``SwitchTarget.driver``) sweeps its own switches; results come back in order.
    for r in sweep("switch", targets, operation, concurrency=concurrency):
        outcomes[r.target] = Outcome(r.target, r.ok, r.value, r.error, r.elapsed)
    now = utcnow()
    with engine.begin() as conn:
        # Steps of switch jobs carry the switch in their output (job_step.server_id is for servers).
        verdicts = {o.server: (judge(o.value) if o.ok and judge else None) for o in outcomes.values()}
        rows = [
            {"job_id": job_id, "server_id": None, "name": f"{kind} {o.server}",
             "state": "succeeded" if o.ok and not verdicts[o.server] else "failed", "attempt": 1,
             "started_at": now - timedelta(seconds=o.elapsed), "finished_at": now, "error": o.error or verdicts[o.server],
             "output": _dump(o.value) if o.ok else None}  # fmt: skip
            for o in outcomes.values()
        ]
        if rows:
            conn.execute(insert(T.job_step), rows)
        failed = sum(1 for o in outcomes.values() if not o.ok or verdicts[o.server])
        conn.execute(update(T.job).where(T.job.c.id == job_id).values(
            state="failed" if failed else "succeeded", finished_at=utcnow(),
            error=f"{failed} of {len(switches)} failed" if failed else None))  # fmt: skip
    return [outcomes[s.name] for s in switches]


def _plain(v: Any) -> Any:
    if hasattr(v, "model_dump"):
        return v.model_dump(mode="json")
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    try:
        if isinstance(value, list):
            return json.dumps([_plain(v) for v in value], default=str)[:20000]
        if hasattr(value, "model_dump"):
            return json.dumps(value.model_dump(mode="json"), default=str)[:20000]
        return json.dumps(value, default=str)[:20000]
    except (TypeError, ValueError):
        return str(value)[:20000]
