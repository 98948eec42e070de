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


def last_swept(conn: Any, kind: str, names: list[str], *, before: int) -> dict[str, int]:
    """The last *finished* run before run ``before`` that swept each of ``names`` (a name no finished run swept is left out).

    An interrupted run's findings were written (what it learned stays), but it
    is no baseline: a problem it saw first was never reported as new by a run
    that ended, so the next finished run must still call it new. The latest
    few finished runs are tried one by one (each an indexed lookup: usually the
    latest, a sweep of all, has every name); the names left, swept only by older
    partial sweeps or never, take one grouped query.
    """
    st, sr = T.sweep_target.c, T.sweep_run.c
    found: dict[str, int] = {}
    left = sorted(set(names))
    recent = [r.id for r in conn.execute(select(sr.id).where(sr.state == "finished", sr.id < before).order_by(sr.id.desc()).limit(3))]
    for rid in recent:
        if not left:
            break
        for i in range(0, len(left), 500):
            for r in conn.execute(select(st.name).where(st.run_id == rid, st.kind == kind, st.name.in_(left[i : i + 500]))):
                found[r.name] = rid
        left = [n for n in left if n not in found]
    if left and len(recent) == 3:
        for i in range(0, len(left), 500):
            q = (select(st.name, func.max(st.run_id)).join(T.sweep_run, sr.id == st.run_id)
                 .where(st.kind == kind, st.name.in_(left[i : i + 500]), sr.state == "finished", sr.id < before)
                 .group_by(st.name))  # fmt: skip
            found.update({name: int(rid) for name, rid in conn.execute(q)})
    return found


def previous_findings(conn: Any, kind: str, names: list[str], *, before: int) -> dict[str, dict[tuple[str, str, str, str], Any]]:
    """What was open on each target at the last finished run before ``before`` that swept it: {name: {key: finding row}}.

    A target that run found healthy maps to ``{}``; one no finished run swept is
    left out (everything on it is new).
    """
    last = last_swept(conn, kind, names, before=before)
    out: dict[str, dict[tuple[str, str, str, str], Any]] = {name: {} for name in last}
    by_run: dict[int, list[str]] = {}
    for name, rid in last.items():
        by_run.setdefault(rid, []).append(name)
    f = T.finding.c
    for rid, targets in by_run.items():
        for i in range(0, len(targets), 500):
            q = select(T.finding).where(f.run_id == rid, f.kind == kind, f.target.in_(targets[i : i + 500]))
            for r in conn.execute(q):
                out[r.target][(r.kind, r.target, r.check, r.subject)] = r
    return out


# A target's cursor (its BMC log position, its switch counters) marks what "since the last sweep" means. An
# interrupted run reported nothing, so its cursor must not move that mark: each stored cursor says which run wrote it
# and carries the cursor as of the last finished run before it, which the next sweep reads instead while the run that
# wrote it has not finished (a log entry an interrupted run saw is read, and reported, again).
CURSOR_RUN = "_run"
CURSOR_FINISHED = "_finished"


def _bare(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if k not in (CURSOR_RUN, CURSOR_FINISHED)}


def _finished_runs(conn: Any, values: list[Any]) -> set[int]:
    ids = sorted({v[CURSOR_RUN] for v in values if isinstance(v, dict) and isinstance(v.get(CURSOR_RUN), int)})
    state: dict[int, str] = {}
    sr = T.sweep_run.c
    for i in range(0, len(ids), 500):
        state.update((r.id, r.state) for r in conn.execute(select(sr.id, sr.state).where(sr.id.in_(ids[i : i + 500]))))
    # A run no longer stored (pruned) is taken as finished: its cursor is all there is.
    return {i for i in ids if state.get(i, "finished") == "finished"}


def _as_of_finished(value: Any, finished: set[int]) -> dict[str, Any] | None:
    """A stored cursor as of the last finished run: its own value if its run finished (or it names none), else the one it carries."""
    if not isinstance(value, dict):
        return None
    run = value.get(CURSOR_RUN)
    if run is None or run in finished:
        return _bare(value)
    return _bare(value.get(CURSOR_FINISHED))


def baseline_cursors(conn: Any, targets: dict[str, list[str]] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """{(kind, target): cursor} as of the last finished run that swept each target (a target without one is left out).

    ``targets`` ({kind: names}): only theirs (a shard's, not a whole fleet's switch counters); None: every target's.
    """
    if targets is None:
        rows = [(r.kind, r.target, r.value) for r in conn.execute(select(T.sweep_cursor))]
    else:
        rows = []
        for kind, names in targets.items():
            for i in range(0, len(names), 500):
                q = select(T.sweep_cursor).where(T.sweep_cursor.c.kind == kind, T.sweep_cursor.c.target.in_(names[i : i + 500]))
                rows += [(r.kind, r.target, r.value) for r in conn.execute(q)]
    finished = _finished_runs(conn, [v for _, _, v in rows])
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, target, value in rows:
        cur = _as_of_finished(value, finished)
        if cur is not None:
            out[(kind, target)] = cur
    return out


def stamp_cursors(conn: Any, run_id: int, cursors: dict[str, dict[str, Any]], stored: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The cursors run ``run_id`` writes ({target: cursor}), each marked with the run and carrying the cursor as of the
    last finished run (from ``stored``, the values they replace)."""
    finished = _finished_runs(conn, list(stored.values())) - {run_id}
    out: dict[str, dict[str, Any]] = {}
    for target, cur in cursors.items():
        prev = stored.get(target)
        base = _as_of_finished(prev, finished) if not (isinstance(prev, dict) and prev.get(CURSOR_RUN) == run_id) else (
            _bare(prev.get(CURSOR_FINISHED)))  # fmt: skip
        out[target] = {**(_bare(cur) or {}), CURSOR_RUN: run_id, CURSOR_FINISHED: base}
    return out


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
