"""Sweep history in the store: runs, their findings, diffs, acks and retention.

Reads are plain Core queries on indexed columns (a run's findings: one query
on ``run_id``), so listing the findings of a 10,000-server fleet stays fast
however many runs are kept.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from fleetctl.errors import InputError, NotFound
from fleetctl.store import immediate
from fleetctl.store import tables as T

FINDING_COLUMNS = ("id", "run_id", "kind", "target", "check", "subject", "status", "message", "evidence", "first_seen",
                   "last_seen", "new", "ack_id")  # fmt: skip


def _row(r: Any) -> dict[str, Any]:
    return dict(r._mapping)


def runs(conn: Any, limit: int = 30) -> list[dict[str, Any]]:
    q = select(T.sweep_run).order_by(T.sweep_run.c.id.desc()).limit(limit)
    return [_row(r) for r in conn.execute(q)]


def get_run(conn: Any, ref: str | int | None = None, *, finished: bool = True) -> dict[str, Any]:
    """A run by id, ``latest`` (or None: the latest), or ``latest~N`` (N runs before it)."""
    q = select(T.sweep_run).order_by(T.sweep_run.c.id.desc())
    if finished:
        q = q.where(T.sweep_run.c.state == "finished")
    text = str(ref) if ref is not None else "latest"
    if text.startswith("latest"):
        back = 0
        if text != "latest":
            _, sep, n = text.partition("~")
            if not sep or not n.isdigit():
                raise InputError(f"bad run {text!r}: give a run id, latest, or latest~N", field="RUN")
            back = int(n)
        row = conn.execute(q.offset(back).limit(1)).first()
        if row is None:
            raise NotFound("no finished sweep run yet" if back == 0 else f"no run {text!r} (fewer finished runs)")
        return _row(row)
    if not text.isdigit():
        raise InputError(f"bad run {text!r}: give a run id, latest, or latest~N", field="RUN")
    row = conn.execute(select(T.sweep_run).where(T.sweep_run.c.id == int(text))).first()
    if row is None:
        raise NotFound(f"no sweep run {text}")
    return _row(row)


def findings(conn: Any, run_id: int, *, status: list[str] | None = None, target: str | None = None,
             check: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The findings of one run, worst first, each with its ack (reason, until) when one is in force."""
    q = (
        select(T.finding, T.finding_ack.c.reason.label("ack_reason"), T.finding_ack.c.until.label("ack_until"),
               T.finding_ack.c.actor.label("ack_actor"))  # fmt: skip
        .outerjoin(T.finding_ack, T.finding_ack.c.id == T.finding.c.ack_id)
        .where(T.finding.c.run_id == run_id)
    )
    if status:
        q = q.where(T.finding.c.status.in_(status))
    if target:
        q = q.where(T.finding.c.target == target)
    if check:
        q = q.where(T.finding.c.check == check)
    rank = {"critical": 0, "unknown": 1, "warning": 2}
    rows = [_row(r) for r in conn.execute(q)]
    rows.sort(key=lambda f: (rank.get(f["status"], 3), f["target"], f["check"], f["subject"]))
    return rows


def targets(conn: Any, run_id: int, kind: str | None = None) -> list[dict[str, Any]]:
    q = select(T.sweep_target).where(T.sweep_target.c.run_id == run_id)
    if kind:
        q = q.where(T.sweep_target.c.kind == kind)
    return [_row(r) for r in conn.execute(q.order_by(T.sweep_target.c.kind, T.sweep_target.c.name))]


def _key(f: dict[str, Any]) -> tuple[str, str, str, str]:
    return (f["kind"], f["target"], f["check"], f["subject"])


def diff(conn: Any, before: int, after: int) -> dict[str, list[dict[str, Any]]]:
    """New, resolved and persisting problems from run ``before`` to run ``after``.

    Only targets both runs swept are compared (a sweep of one rack resolves
    nothing elsewhere). A persisting problem carries its first_seen.
    """
    common = {(r.kind, r.name) for r in conn.execute(select(T.sweep_target.c.kind, T.sweep_target.c.name).where(
        T.sweep_target.c.run_id == before))} & {(r.kind, r.name) for r in conn.execute(
        select(T.sweep_target.c.kind, T.sweep_target.c.name).where(T.sweep_target.c.run_id == after))}  # fmt: skip
    a = {_key(f): f for f in findings(conn, before) if (f["kind"], f["target"]) in common}
    b = {_key(f): f for f in findings(conn, after) if (f["kind"], f["target"]) in common}
    new = [f for k, f in b.items() if k not in a or a[k]["status"] != f["status"]]
    resolved = [f for k, f in a.items() if k not in b]
    persisting = [f for k, f in b.items() if k in a and a[k]["status"] == f["status"]]
    return {"new": new, "resolved": resolved, "persisting": persisting}


def per_day(conn: Any, days: int = 30, *, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Findings per day and status over the ``days`` before ``now`` (the latest finished run of each day).

    ``now`` is the report's own clock (default: the wall clock), so a report built
    for a given moment counts the same days whenever it is built.
    """
    since = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=days)
    day_runs: dict[str, int] = {}
    for r in conn.execute(select(T.sweep_run.c.id, T.sweep_run.c.started_at).where(
            T.sweep_run.c.state == "finished", T.sweep_run.c.started_at >= since).order_by(T.sweep_run.c.id)):  # fmt: skip
        day_runs[r.started_at.date().isoformat()] = r.id
    if not day_runs:
        return []
    counts: dict[int, dict[str, int]] = {rid: {} for rid in day_runs.values()}
    q = (select(T.finding.c.run_id, T.finding.c.status, func.count()).where(T.finding.c.run_id.in_(list(day_runs.values())))
         .group_by(T.finding.c.run_id, T.finding.c.status))  # fmt: skip
    for rid, status, n in conn.execute(q):
        counts[rid][status] = n
    return [{"day": day, "run_id": rid, **{s: counts[rid].get(s, 0) for s in ("critical", "unknown", "warning")}}
            for day, rid in sorted(day_runs.items())]  # fmt: skip


def prune(engine: Any, keep_days: int) -> int:
    """Delete runs (and their findings and verdicts) older than ``keep_days``; the latest finished run always stays."""
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(days=keep_days)
    with immediate(engine) as c:  # read then delete: one writer at a time, never "database is locked"
        latest = c.execute(select(func.max(T.sweep_run.c.id)).where(T.sweep_run.c.state == "finished")).scalar()
        q = select(T.sweep_run.c.id).where(T.sweep_run.c.started_at < cutoff, T.sweep_run.c.id != (latest or -1))
        old = [r.id for r in c.execute(q)]
        for i in range(0, len(old), 500):
            chunk = old[i : i + 500]
            # SQLite enforces ON DELETE CASCADE only with foreign_keys on (ours is); say it anyway for speed and clarity.
            c.execute(delete(T.finding).where(T.finding.c.run_id.in_(chunk)))
            c.execute(delete(T.sweep_target).where(T.sweep_target.c.run_id.in_(chunk)))
            c.execute(delete(T.sweep_run).where(T.sweep_run.c.id.in_(chunk)))
    return len(old)


# ---------------------------------------------------------------------- acks


def find_open(conn: Any, ref: str) -> dict[str, Any]:
    """The open problem a FINDING argument names: a finding id, or ``target:check[:subject]``."""
    if ref.isdigit():
        row = conn.execute(select(T.finding).where(T.finding.c.id == int(ref))).first()
        if row is None:
            raise NotFound(f"no finding {ref}")
        key = (row.kind, row.target, row.check, row.subject)
    else:
        target, sep, rest = ref.partition(":")
        if not sep or not target or not rest:
            raise InputError(f"bad finding {ref!r}: give a finding id, or TARGET:CHECK[:SUBJECT]", field="FINDING")
        check, _, subject = rest.partition(":")
        cands = list(conn.execute(select(T.finding_state).where(T.finding_state.c.target == target, T.finding_state.c.check == check)))
        cands = [c for c in cands if c.subject == subject] or (cands if not subject and len(cands) == 1 else [])
        if not cands:
            raise NotFound(f"no open finding {ref!r} (see `fleetctl sweep show`)")
        key = (cands[0].kind, cands[0].target, cands[0].check, cands[0].subject)
    fs = T.finding_state.c
    st = conn.execute(select(T.finding_state).where(fs.kind == key[0], fs.target == key[1], fs.check == key[2],
                                                    fs.subject == key[3])).first()  # fmt: skip
    if st is None:
        raise NotFound(f"finding {ref} is no longer open: nothing to acknowledge")
    return _row(st)


def ack(conn: Any, ref: str, *, reason: str, until: dt.datetime | None, actor: str) -> dict[str, Any]:
    """Silence an open problem until ``until`` (or until it changes status or clears)."""
    if not reason.strip():
        raise InputError("--reason must say why", field="--reason")
    if until is not None and until <= dt.datetime.now(dt.UTC):
        raise InputError(f"--until {until.isoformat()} is in the past", field="--until")
    st = find_open(conn, ref)
    k = (st["kind"], st["target"], st["check"], st["subject"])
    now = dt.datetime.now(dt.UTC)
    conn.execute(update(T.finding_ack).where(
        T.finding_ack.c.kind == k[0], T.finding_ack.c.target == k[1], T.finding_ack.c.check == k[2],
        T.finding_ack.c.subject == k[3], T.finding_ack.c.ended_at.is_(None)).values(ended_at=now, ended_why="replaced"))  # fmt: skip
    ack_id = conn.execute(insert(T.finding_ack).values(kind=k[0], target=k[1], check=k[2], subject=k[3], status=st["status"],
                                                       reason=reason, actor=actor, created_at=now, until=until)
                          .returning(T.finding_ack.c.id)).scalar_one()  # fmt: skip
    # The latest run's finding shows the ack at once.
    conn.execute(update(T.finding).where(T.finding.c.run_id == st["run_id"], T.finding.c.kind == k[0], T.finding.c.target == k[1],
                                         T.finding.c.check == k[2], T.finding.c.subject == k[3]).values(ack_id=ack_id))  # fmt: skip
    return {"id": ack_id, "target": k[1], "check": k[2], "subject": k[3], "status": st["status"], "reason": reason,
            "until": until.isoformat() if until else None}  # fmt: skip


def unack(conn: Any, ref: str) -> int:
    st = find_open(conn, ref)
    now = dt.datetime.now(dt.UTC)
    fa = T.finding_ack.c
    res = conn.execute(update(T.finding_ack).where(
        fa.kind == st["kind"], fa.target == st["target"], fa.check == st["check"], fa.subject == st["subject"],
        fa.ended_at.is_(None)).values(ended_at=now, ended_why="removed"))  # fmt: skip
    return int(res.rowcount or 0)


def acks(conn: Any, *, include_ended: bool = False) -> list[dict[str, Any]]:
    q = select(T.finding_ack).order_by(T.finding_ack.c.id)
    if not include_ended:
        q = q.where(T.finding_ack.c.ended_at.is_(None))
    return [_row(r) for r in conn.execute(q)]
