"""One sweep run: read every target, judge it, and journal it target by target.

The run row is written first (state ``running``); each target's verdict, its
findings, the open-problem picture and its cursor (log position, counters)
are written together, in batches, as targets finish. A sweep killed half
way keeps what it learned; a run whose process is gone is marked ``interrupted``.
An interrupted run reported nothing, so it is never a baseline: new, persisting
and resolved are judged against the last *finished* run that swept each target,
and its cursors stand for "since the last sweep" only once their run finished
(:mod:`fleetctl.sweep.history`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from fleetctl.errors import EXIT_STORE, StoreError
from fleetctl.holders import actor
from fleetctl.interfaces.snmp import PollResult
from fleetctl.plugins import FleetSessions, Stream, sweep_streams
from fleetctl.plugins import sweep as sweep_sync
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.sweep import server_checks, switch_checks
from fleetctl.sweep.collect import (
    ServerExpect,
    ServerReading,
    SwitchReading,
    bmc_operation,
    cabled_targets,
    previous_poll,
    server_expectations,
    switch_cursor,
    switch_expectations,
)
from fleetctl.sweep.history import baseline_cursors, previous_findings, prune, stamp_cursors
from fleetctl.sweep.model import Finding, Status, problem, worst
from fleetctl.sweep.registry import checks
from fleetctl.targets import Credentials, bmc_targets, snmp_targets
from fleetctl.times import aware_utc

#: Servers whose expectations, cursors and BMC targets are loaded from the store at once, as a sweep takes their BMCs.
EXPECT_CHUNK = 500
#: Targets buffered before a write (a write is one transaction).
FLUSH_EVERY = 500
FLUSH_SECONDS = 2.0

Key = tuple[str, str, str, str]  # (kind, target, check, subject)

log = logging.getLogger(__name__)


@dataclass
class SweepOptions:
    """How hard a sweep may push (defaults are gentle: 2 requests in flight per BMC).

    Attributes:
        concurrency: BMCs worked on at once (each with at most ``max_in_flight`` requests).
            The sweep is CPU-bound well below 250 on two cores, and every TLS
            connection holds a 256 KiB buffer: more only costs memory.
        snmp_concurrency: switches polled at once.
        per_target_timeout: seconds a BMC may take in all (a hung BMC costs this, nothing more).
        request_timeout: seconds for one request; retries: extra attempts per request (backoff between).
        max_skew_s: a BMC clock off by more is a finding.
        retention_days: runs older than this are pruned after the sweep (0: keep all).
    """

    level: str = "bmc"
    concurrency: int = 250
    snmp_concurrency: int = 100
    per_target_timeout: float = 60.0
    request_timeout: float = 10.0
    retries: int = 1
    max_in_flight: int = 2
    max_skew_s: float = 30.0
    retention_days: int = 90


@dataclass
class TargetVerdict:
    kind: str
    name: str
    status: Status
    findings: list[Finding]
    elapsed: float = 0.0
    error: str | None = None
    site: str | None = None
    rack: str | None = None
    position: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepResult:
    run_id: int
    started_at: dt.datetime
    duration_s: float
    servers: int
    switches: int
    counts: dict[str, int]
    new: list[dict[str, Any]]
    resolved: list[dict[str, Any]]
    persisting: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    worst_new: Status
    pruned: int = 0
    # What failed after the run was stored and finished (pruning): one line each; the verdict stands.
    warnings: list[str] = field(default_factory=list)


def _evaluate(kind: str, name: str, reading: Any, expect: Any, level: str) -> list[Finding]:
    out: list[Finding] = []
    for spec in checks(kind, level):
        try:
            problems = list(spec.fn(reading, expect))
        except Exception as e:  # noqa: BLE001 - a broken check is that check's unknown, never the sweep's end
            problems = [_broken(spec.name, e)]
        seen: dict[str, int] = {}
        for p in problems:
            # Two parts of one name (three sensors called "CPU Temp") are two problems, not one.
            n = seen[p.subject] = seen.get(p.subject, 0) + 1
            subject = p.subject if n == 1 else f"{p.subject} #{n}"
            out.append(Finding(kind, name, spec.name, p.status, p.message, subject, dict(p.evidence)))
    return out


def _broken(check: str, e: BaseException) -> Any:
    return problem(Status.UNKNOWN, f"check {check} failed: {type(e).__name__}: {e}", "check", bug=True)


class Recorder:
    """Buffers verdicts and writes them with the open-problem picture, cursors and acks, per batch."""

    def __init__(self, engine: Any, run_id: int, now: dt.datetime) -> None:
        self.T = T
        self.engine = engine
        self.run_id = run_id
        self.now = now
        self.buffer: list[tuple[TargetVerdict, dict[str, Any] | None]] = []
        self.last_flush = time.monotonic()
        self.new: list[dict[str, Any]] = []
        self.resolved: list[dict[str, Any]] = []
        self.persisting: list[dict[str, Any]] = []
        self.findings: list[dict[str, Any]] = []
        self.counts = {s.value: 0 for s in Status}
        # Set when a batch could not be written (read-only, full, locked past the timeout): the run's failure is the
        # store's (exit 6), not a reading one, wherever the engine that read the targets reports it.
        self.store_error: StoreError | None = None
        with engine.connect() as c:
            self.acks = {(a.kind, a.target, a.check, a.subject): a
                         for a in c.execute(select(T.finding_ack).where(T.finding_ack.c.ended_at.is_(None)))}  # fmt: skip

    def add(self, verdict: TargetVerdict, cursor: dict[str, Any] | None) -> None:
        self.buffer.append((verdict, cursor))
        if len(self.buffer) >= FLUSH_EVERY or time.monotonic() - self.last_flush > FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return

        batch, self.buffer = self.buffer, []
        self.last_flush = time.monotonic()
        try:
            self._flush(batch)
        except SQLAlchemyError as e:
            self.store_error = store_failure(e, "the sweep's verdicts were not stored")
            raise self.store_error from e

    def _flush(self, batch: list[tuple[TargetVerdict, dict[str, Any] | None]]) -> None:
        T = self.T
        with immediate(self.engine) as c:
            for kind in ("server", "switch"):
                names = [v.name for v, _ in batch if v.kind == kind]
                if not names:
                    continue
                open_now: dict[Key, Any] = {}
                stored: dict[str, Any] = {}
                for chunk in _chunks(names):
                    for r in c.execute(select(T.finding_state).where(T.finding_state.c.kind == kind, T.finding_state.c.target.in_(chunk))):
                        open_now[(r.kind, r.target, r.check, r.subject)] = r
                    for r in c.execute(select(T.sweep_cursor).where(T.sweep_cursor.c.kind == kind, T.sweep_cursor.c.target.in_(chunk))):
                        stored[r.target] = r.value
                    c.execute(delete(T.finding_state).where(T.finding_state.c.kind == kind, T.finding_state.c.target.in_(chunk)))
                    c.execute(delete(T.sweep_cursor).where(T.sweep_cursor.c.kind == kind, T.sweep_cursor.c.target.in_(chunk)))
                previous = previous_findings(c, kind, names, before=self.run_id)
                mine = [(v, cur) for v, cur in batch if v.kind == kind]
                stamped = stamp_cursors(c, self.run_id, {v.name: cur for v, cur in mine if cur is not None}, stored)
                self._write(c, [(v, stamped.get(v.name)) for v, _ in mine], open_now, previous)

    def _write(self, c: Any, batch: list[tuple[TargetVerdict, dict[str, Any] | None]], open_now: dict[Key, Any],
               previous: dict[str, dict[Key, Any]]) -> None:  # fmt: skip
        """Write a batch. New, persisting and resolved are judged against ``previous`` (what the last *finished* run
        that swept each target found open: an interrupted run reported nothing, so what it saw first is still news);
        ``open_now`` (finding_state, which every run keeps, interrupted or not) gives first_seen and the acks to end."""
        T = self.T
        now = self.now
        targets, findings, states, cursors = [], [], [], []
        # The open problems of each target of the batch (a scan of all of them per target costs batch x open).
        open_by_target: dict[str, list[tuple[Key, Any]]] = {}
        for key, before in open_now.items():
            open_by_target.setdefault(key[1], []).append((key, before))
        for v, cursor in batch:
            self.counts[v.status.value] += 1
            targets.append({"run_id": self.run_id, "kind": v.kind, "name": v.name, "site": v.site, "rack": v.rack,
                            "position": v.position, "status": v.status.value, "elapsed": round(v.elapsed, 3),
                            "error": v.error, "metrics": v.metrics})  # fmt: skip
            keys = set()
            for f in v.findings:
                if f.key in keys:  # one finding per key and run: the first one says it
                    continue
                keys.add(f.key)
                before = open_now.get(f.key)
                last = previous.get(v.name, {}).get(f.key)
                first_seen = before.first_seen if before is not None else last.first_seen if last is not None else now
                ack = self._ack_for(c, f)
                is_new = (last is None or Status(f.status).rank > Status(last.status).rank
                          # silenced at the last finished run, no longer (the ack expired or was removed): news again,
                          # as an Alertmanager silence that ends notifies again
                          or (last.ack_id is not None and ack is None and Status(f.status).value == last.status))  # fmt: skip
                row = {"run_id": self.run_id, "kind": f.kind, "target": f.target, "check": f.check, "subject": f.subject,
                       "status": f.status.value, "message": f.message[:2000], "evidence": _jsonable(f.evidence),
                       "first_seen": first_seen, "last_seen": now, "new": is_new, "ack_id": ack}  # fmt: skip
                findings.append(row)
                states.append({"kind": f.kind, "target": f.target, "check": f.check, "subject": f.subject, "status": f.status.value,
                               "message": f.message[:2000], "first_seen": first_seen, "last_seen": now, "run_id": self.run_id})  # fmt: skip
                summary = {k: row[k] for k in ("kind", "target", "check", "subject", "status", "message", "first_seen", "new", "ack_id")}
                summary["evidence"] = row["evidence"]
                self.findings.append(summary)
                (self.new if is_new else self.persisting).append(summary)
            for key, last in previous.get(v.name, {}).items():
                if key not in keys:
                    self.resolved.append({"kind": key[0], "target": key[1], "check": key[2], "subject": key[3],
                                          "status": last.status, "message": last.message, "first_seen": last.first_seen})  # fmt: skip
            for key, _ in open_by_target.get(v.name, []):
                if key not in keys:
                    self._end_ack(c, key, "resolved")
            if cursor is not None:
                cursors.append({"kind": v.kind, "target": v.name, "value": cursor, "updated_at": now})
        for table, rows in ((T.sweep_target, targets), (T.finding, findings), (T.finding_state, states), (T.sweep_cursor, cursors)):
            if rows:
                c.execute(insert(table), rows)

    def _ack_for(self, c: Any, f: Finding) -> int | None:
        a = self.acks.get(f.key)
        if a is None:
            return None
        until = aware_utc(a.until)
        if until is not None and until <= self.now:
            self._end_ack(c, f.key, "expired")
            return None
        if a.status != f.status.value:
            self._end_ack(c, f.key, "changed")
            return None
        return int(a.id)

    def _end_ack(self, c: Any, key: Key, why: str) -> None:
        a = self.acks.pop(key, None)
        if a is not None:
            c.execute(update(self.T.finding_ack).where(self.T.finding_ack.c.id == a.id).values(ended_at=self.now, ended_why=why))


def _chunks(items: list[str], n: int = 500) -> list[list[str]]:
    return [items[i : i + n] for i in range(0, len(items), n)]


def _jsonable(v: Any) -> Any:
    import json

    return json.loads(json.dumps(v, default=str))


def mark_interrupted(engine: Any) -> int:
    """Runs left ``running`` by a process that is gone: ``interrupted`` (returns how many)."""
    host = socket.gethostname()
    # A read then a write: under BEGIN IMMEDIATE, so sweeps starting together wait for each other instead of one
    # failing with "database is locked" (SQLite cannot upgrade a read transaction while another writes).
    with immediate(engine) as c:
        stale = []
        for r in c.execute(select(T.sweep_run.c.id, T.sweep_run.c.host, T.sweep_run.c.pid).where(T.sweep_run.c.state == "running")):
            if r.host == host and not _alive(r.pid):
                stale.append(r.id)
        if stale:
            c.execute(update(T.sweep_run).where(T.sweep_run.c.id.in_(stale)).values(state="interrupted"))
    return len(stale)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run(
    servers: list[Any],
    switches: list[Any],
    *,
    selector: str,
    options: SweepOptions | None = None,
    progress: Callable[[int, int, str, str], None] | None = None,
    url: str | None = None,
    collect: Callable[[Recorder], Coroutine[Any, Any, None]] | None = None,
) -> SweepResult:
    """Sweep the servers (over their BMCs) and switches (over SNMP); journal everything; return the summary.

    ``collect(recorder)`` replaces the reading of devices (tests feed verdicts
    with ``recorder.add``); the journal, diff and acks are the same.
    """
    opts = options or SweepOptions()
    engine = get_engine(url)
    mark_interrupted(engine)
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    with engine.begin() as c:
        run_id = c.execute(insert(T.sweep_run).values(
            started_at=started, state="running", level=opts.level, selector=selector, actor=actor(), host=socket.gethostname(),
            pid=os.getpid(), servers=len(servers), switches=len(switches), counts={},
        ).returning(T.sweep_run.c.id)).scalar_one()  # fmt: skip
    rec = Recorder(engine, run_id, started)
    try:
        asyncio.run(collect(rec) if collect else sweep_targets(engine, rec, servers, switches, opts, progress))
        rec.flush()
    except BaseException as e:
        rec.flush()  # what was learned stays; the run is interrupted
        with engine.begin() as c:
            c.execute(update(T.sweep_run).where(T.sweep_run.c.id == run_id).values(state="interrupted",
                      duration_s=time.perf_counter() - t0, counts=rec.counts))  # fmt: skip
        if rec.store_error is not None and isinstance(e, Exception) and e is not rec.store_error:
            raise rec.store_error from e  # (a shard "lost" because its verdicts could not be written)
        raise
    duration = time.perf_counter() - t0
    new_open = [f for f in rec.new if f["ack_id"] is None]
    worst_new = worst(f["status"] for f in new_open)
    with engine.begin() as c:
        c.execute(update(T.sweep_run).where(T.sweep_run.c.id == run_id).values(
            state="finished", finished_at=dt.datetime.now(dt.UTC), duration_s=duration, counts=rec.counts,
            worst_new=worst_new.value,
        ))  # fmt: skip

    warnings = []
    try:
        pruned = prune(engine, opts.retention_days) if opts.retention_days > 0 else 0
    except SQLAlchemyError as e:  # the run is stored and finished: its verdict stands, the pruning waits for the next run
        pruned = 0
        warnings.append(f"{store_failure(e, 'old runs not pruned')}")
    return SweepResult(run_id, started, duration, len(servers), len(switches), rec.counts, rec.new, rec.resolved,
                       rec.persisting, rec.findings, worst_new, pruned, warnings)  # fmt: skip


def store_failure(e: BaseException, what: str) -> StoreError:
    """A database failure as the one line the CLI prints, with the store's exit code (6)."""
    orig = getattr(e, "orig", None) or e
    first = (str(orig).splitlines() or [type(orig).__name__])[0]
    return StoreError(f"database: {first} ({what})", exit_code=EXIT_STORE)


async def sweep_targets(engine: Any, rec: Recorder, servers: list[Any], switches: list[Any], opts: SweepOptions,
                        progress: Callable[[int, int, str, str], None] | None, *, criteria: Any = None) -> None:  # fmt: skip
    """Read and judge these targets into the run of ``rec``: the whole sweep in process, a shard of it on a Temporal worker
    (:mod:`fleetctl.sweep.workflow`). ``criteria`` (a ``CriteriaFile``): what the host checks judge the boards by, as
    the command read it; None: the criteria in force here."""
    with engine.connect() as c:
        # as of the last finished run (an interrupted one's reading is read again); these switches' only (the servers'
        # come with their chunk, below)
        cursors = baseline_cursors(c, {"switch": [w.name for w in switches]})
        wexp = switch_expectations(c, switches)
    # What the servers' verdicts need (expectations, cursors, log positions), loaded a chunk at a time as their BMCs are
    # taken and let go at each verdict: the servers in flight and the rest of their chunk, not a fleet's (issue 24: with
    # the BMC targets, 10,000 servers' took 31 MB and grew with the fleet).
    sexp: dict[str, ServerExpect] = {}
    server_cursors: dict[str, dict[str, Any]] = {}
    log_cursors: dict[str, str | None] = {}
    total = len(servers) + len(switches)
    done = 0

    # --level host: the hosts whose OS should answer are read first (one SSH session each).
    hosts: dict[str, Any] = {}
    if opts.level == "host":
        from fleetctl.sweep.host import HOST_STATES, read_hosts
        from fleetctl.targets import resolve_hosts

        up = [s.name for s in servers if s.state in HOST_STATES]
        if up:
            with engine.connect() as c:
                refs = resolve_hosts(c, up)
            hosts = await read_hosts(refs, timeout=opts.request_timeout * 2)

    # --level k8s: each server's node, from its cluster (one client per cluster; lightkube is synchronous: a thread).
    nodes: dict[str, Any] = {}
    if opts.level == "k8s":
        from fleetctl.k8s.nodes import node_refs
        from fleetctl.k8s.status import read_nodes

        with engine.connect() as c:
            node_targets = node_refs(c, [s.name for s in servers])
        nodes = await asyncio.to_thread(read_nodes, node_targets)

    def tick(name: str, status: Status) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, name, status.value)

    def server_verdict(name: str, reading: ServerReading, error: str | None) -> None:
        e = sexp.pop(name)
        log_cursors.pop(name, None)
        before = server_cursors.pop(name, None)
        reading.host = hosts.pop(name, None)
        reading.k8s = nodes.pop(name, None)
        found = server_checks.explained(_evaluate("server", name, reading, e, opts.level))
        status = worst(f.status for f in found)
        cursor = {"log_cursor": reading.log_cursor} if reading.log_cursor else before
        rec.add(TargetVerdict("server", name, status, found, reading.elapsed, error, e.site, e.rack, e.position,
                              server_checks.metrics(reading)), cursor)  # fmt: skip
        tick(name, status)

    def switch_verdict(name: str, poll: Any, cls: Any) -> None:
        e = wexp[name]
        prev = previous_poll(name, cursors.get(("switch", name)))
        rates = cls.rates(prev, poll) if (cls is not None and prev is not None and poll.ok) else None
        reading = SwitchReading(poll, prev, rates)
        found = _evaluate("switch", name, reading, e, opts.level)
        status = worst(f.status for f in found)
        cursor = switch_cursor(poll) if poll.ok else cursors.get(("switch", name))
        rec.add(TargetVerdict("switch", name, status, found, poll.duration_s, poll.error, e.site, e.rack, None,
                              switch_checks.metrics(reading)), cursor)  # fmt: skip
        tick(name, status)

    creds = Credentials()  # each credential reference resolved once per sweep, not once per chunk

    def chunk_targets(chunk: list[Any]) -> list[Any]:
        """A chunk's BMC targets, its expectations and cursors loaded; the servers the inventory cannot reach judged
        now, without a packet sent."""
        nonlocal total
        names = [s.name for s in chunk]
        with engine.connect() as c:
            got = {k[1]: v for k, v in baseline_cursors(c, {"server": names}).items()}
            exp = server_expectations(c, names, got, max_skew_s=opts.max_skew_s, criteria=criteria)
        gone = [s for s in chunk if s.name not in exp]
        if gone:  # deleted from the inventory since the command resolved it: no longer a target of this sweep
            log.warning("sweep: %d server(s) no longer in the inventory, not swept: %s", len(gone),
                        ", ".join(s.name for s in gone[:10]))  # fmt: skip
            total -= len(gone)
            chunk = [s for s in chunk if s.name in exp]
        sexp.update(exp)
        server_cursors.update(got)
        log_cursors.update((n, (got.get(n) or {}).get("log_cursor")) for n in exp)
        targets, unreach = bmc_targets(chunk, creds=creds, timeout=opts.request_timeout, retries=opts.retries,
                                       max_in_flight=opts.max_in_flight)  # fmt: skip
        for name, why in unreach.items():
            server_verdict(name, ServerReading(session_error=f"{name}: {why}", session_error_type="Inventory"), why)
        return targets

    def stream(refs: list[Any]) -> Iterator[Any]:
        for i in range(0, len(refs), EXPECT_CHUNK):
            yield from chunk_targets(refs[i : i + EXPECT_CHUNK])

    by_driver: dict[str, list[Any]] = {}
    for s in servers:
        by_driver.setdefault(s.driver, []).append(s)
    streams = [Stream(d, len(refs), stream(refs), [r.name for r in refs]) for d, refs in by_driver.items()]

    starget, sunreach = snmp_targets(switches, timeout=opts.request_timeout, retries=opts.retries)
    starget = cabled_targets(starget, wexp)  # per-port counters only for the ports the plan cables

    for name, why in sunreach.items():
        server_less = PollResult(target=name, host="", port=161, polled_at=dt.datetime.now(dt.UTC), error=f"{name}: {why}",
                                 error_kind="config")  # fmt: skip
        switch_verdict(name, server_less, None)

    def on_bmc(_d: int, _t: int, r: Any) -> None:
        if r.ok:
            reading = r.value
            reading.elapsed = r.elapsed
            r.value = None  # judged: the sweep keeps the verdict, not every reading of 10,000 BMCs
            server_verdict(r.target, reading, None)
        else:
            server_verdict(r.target, ServerReading(session_error=r.error, session_error_type=r.error_type, elapsed=r.elapsed), r.error)

    pollers: dict[str, Any] = {}
    if starget:
        from fleetctl.plugins import drivers_for

        pollers = {t.name: cls for cls, ts in drivers_for("snmp", starget).items() for t in ts}

    judged_polls: set[str] = set()

    def on_poll(p: Any) -> None:
        if p.target in judged_polls:
            return
        judged_polls.add(p.target)
        switch_verdict(p.target, p, pollers.get(p.target))
        # Judged: the verdict and the cursor are kept, not every port's counters, LLDP neighbour and sensor of 500
        # switches until the BMCs are done (bench/sweep.py, 3,000 + 150: 24 MB of them held at the peak).
        p.interfaces, p.lldp, p.sensors, p.fdb = [], [], [], []

    op = bmc_operation(log_cursors)  # filled as the chunks are loaded
    # The switches are polled in a thread of their own, with its own event loop, while this one
    # works the BMCs: an SNMP answer was waited for 2 s then, and a loop busy with 250 BMCs' TLS made
    # healthy switches "unreachable" (bench/sweep.py: 395 of 500 at 1,000 BMCs); polled before
    # the BMCs instead, 500 switches added their own minute to the sweep. Each poll is judged and
    # recorded on this loop as it ends (the recorder is this thread's): the poller's thread hands it
    # over, and its callbacks run before the thread's own end is seen here, so none is left behind.
    loop = asyncio.get_running_loop()

    def polled(_d: int, _t: int, p: Any) -> None:
        loop.call_soon_threadsafe(on_poll, p)

    polls = asyncio.create_task(asyncio.to_thread(sweep_sync, "snmp", starget, what=("if", "lldp", "sensors"),
                                                  concurrency=opts.snmp_concurrency, progress=polled)) if starget else None  # fmt: skip
    async with FleetSessions() as fleets:
        await sweep_streams("bmc", streams, op, concurrency=opts.concurrency, per_target_timeout=opts.per_target_timeout,
                            progress=on_bmc, fleets=fleets, read_once=True, expand=True)  # fmt: skip
    for p in await polls if polls else []:
        on_poll(p)  # a driver that reported no progress: judged now


__all__ = ["Recorder", "SweepOptions", "SweepResult", "TargetVerdict", "mark_interrupted", "run", "sweep_targets"]
