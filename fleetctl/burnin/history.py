"""What burn-in stored: runs, results per board, a board's history, the RMA list."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from fleetctl.errors import NotFound


def runs(conn: Any, *, limit: int = 20) -> list[dict[str, Any]]:
    """The latest runs, newest first, with their results counted by verdict."""
    from fleetctl.store import tables as T
    from fleetctl.times import aware_utc

    out = []
    for r in conn.execute(select(T.burnin_run).order_by(T.burnin_run.c.id.desc()).limit(limit)):
        counts = dict(r.counts or {})
        if r.state != "finished":  # counted only when a run ends: count what it stored so far
            counts = {}
            for v in conn.execute(select(T.burnin_result.c.verdict).where(T.burnin_result.c.run_id == r.id)).scalars():
                counts[v] = counts.get(v, 0) + 1
        started = aware_utc(r.started_at)
        out.append({"run": r.id, "started": started.isoformat(timespec="seconds") if started else None, "state": r.state, "kind": r.kind,
                    "level": r.level, "duration_s": r.duration_s, "servers": len(r.servers or []), "pass": counts.get("pass", 0),
                    "degraded": counts.get("degraded", 0), "fail": counts.get("fail", 0), "error": counts.get("error", 0),
                    "actor": r.actor})  # fmt: skip
    return out


def latest_run(conn: Any) -> int:
    from fleetctl.store import tables as T

    rid = conn.execute(select(T.burnin_run.c.id).order_by(T.burnin_run.c.id.desc()).limit(1)).scalar()
    if rid is None:
        raise NotFound("no burn-in has run yet: fleetctl burnin --kind mncore2|gpu [TARGET]")
    return int(rid)


def results(conn: Any, run_id: int | None = None, *, serial: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """(run id, its results as dicts with reasons, metrics and telemetry), in server and slot order."""
    from fleetctl.store import tables as T
    from fleetctl.times import aware_utc

    rid = run_id if run_id is not None else latest_run(conn)
    if conn.execute(select(T.burnin_run.c.id).where(T.burnin_run.c.id == rid)).first() is None:
        raise NotFound(f"no burn-in run {rid}")
    q = select(T.burnin_result).where(T.burnin_result.c.run_id == rid)
    if serial:
        q = q.where(T.burnin_result.c.serial == serial)
    rows = []
    for r in conn.execute(q.order_by(T.burnin_result.c.server, T.burnin_result.c.slot, T.burnin_result.c.device)):
        rows.append({"run": rid, "server": r.server, "serial": r.serial, "device": r.device, "slot": r.slot, "model": r.model,
                     "verdict": r.verdict, "reasons": list(r.reasons or []), "metrics": dict(r.metrics or {}),
                     "telemetry": list(r.telemetry or []), "started_at": aware_utc(r.started_at),
                     "finished_at": aware_utc(r.finished_at)})  # fmt: skip
    if serial and not rows:
        raise NotFound(f"board {serial} has no result in burn-in run {rid}")
    return rid, rows


def board_history(conn: Any, serial: str) -> list[dict[str, Any]]:
    """Every burn-in verdict of one board, oldest first."""
    from fleetctl.store import tables as T
    from fleetctl.times import aware_utc

    q = (select(T.burnin_result.c.run_id, T.burnin_result.c.verdict, T.burnin_result.c.finished_at, T.burnin_result.c.metrics,
                T.burnin_run.c.level, T.burnin_run.c.duration_s)
         .join(T.burnin_run, T.burnin_run.c.id == T.burnin_result.c.run_id)
         .where(T.burnin_result.c.serial == serial).order_by(T.burnin_result.c.finished_at))  # fmt: skip
    return [{"run": r.run_id, "verdict": r.verdict, "at": aware_utc(r.finished_at), "level": r.level, "duration_s": r.duration_s,
             "throughput": (r.metrics or {}).get("throughput")} for r in conn.execute(q)]  # fmt: skip


def rma_list(conn: Any, *, include_closed: bool = False) -> list[dict[str, Any]]:
    """Boards to ship back (open RMA entries), oldest first; with ``include_closed`` also the shipped or cleared ones."""
    from fleetctl.store import tables as T
    from fleetctl.times import aware_utc

    q = select(T.board_rma).order_by(T.board_rma.c.opened_at)
    if not include_closed:
        q = q.where(T.board_rma.c.closed_at.is_(None))
    out = []
    for r in conn.execute(q):
        opened, closed = aware_utc(r.opened_at), aware_utc(r.closed_at)
        out.append({"serial": r.serial, "kind": r.kind, "model": r.model, "server": r.server, "slot": r.slot, "source": r.source,
                    "reason": r.reason, "opened": opened.isoformat(timespec="seconds") if opened else None,
                    "closed": closed.isoformat(timespec="seconds") if closed else None, "closed_reason": r.closed_reason,
                    "evidence": r.evidence, "actor": r.actor})  # fmt: skip
    return out
