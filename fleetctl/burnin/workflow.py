"""`fleetctl burnin`, described once (:mod:`fleetctl.workflows.describe`): run in process or on Temporal alike.

- the command plans (:func:`fleetctl.burnin.engine.plan`: the servers chosen,
  every refusal, exit 2) once, and hands the plan on as plain data
  (:func:`request`): names, ids, boards, baselines, the criteria's values;
- ``open`` (the control queue on Temporal): the locks (held by the run: this
  process, or the workflow), the run new or resumed and its job, what an
  earlier pass stored; the units are the servers not done yet, by site;
- ``unit`` (a worker of the server's site on Temporal): the server's own SSH
  target, key and BMC resolved where it runs (never carried in a history),
  then :func:`~fleetctl.burnin.engine.burn_server`: the stages, the verdicts,
  the record. An attempt after a lost one first reads what that one stored;
- ``close``: a lost server's error stored, the run's counts and the job's rows,
  the locks released (interrupted or not).

The command then reads the boards' verdicts, reasons and metrics from the
store (:func:`result`), the same on both engines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fleetctl.burnin.criteria import CriteriaFile
from fleetctl.burnin.engine import (
    BmcWatch,
    Plan,
    Progress,
    RunResult,
    ServerDone,
    ServerPlan,
    burn_server,
    close_run,
    open_run,
    record_error,
    recorded_already,
    sort_results,
    stored_results,
)
from fleetctl.burnin.host import HostJob, InvBoard
from fleetctl.burnin.verdict import worst
from fleetctl.errors import InputError
from fleetctl.holders import Holder
from fleetctl.lifecycle.locks import lock_all_recovering, release
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.workflows.describe import Context, Description, Opened, Outcome, Unit, register, run_local
from fleetctl.workflows.journal import Journal, StepResult
from fleetctl.workflows.maintained import DrainPlan, NotDrained, maintenance

# Beyond the workload and its grace, a server's unit: SSH connects, pre-checks, resets, post-checks, the record (each
# bounded by the host's own command timeouts, a minute each).
SETUP_S = 900.0


@dataclass
class ServerWork:
    """One server as the command planned it: what its unit needs besides what it resolves where it runs."""

    name: str
    id: int
    model: str
    board_kind: str
    boards: list[InvBoard]
    baseline: dict[str, str] = field(default_factory=dict)


@dataclass
class BurninRequest:
    """The run as the command planned it: the options, the criteria's values, the servers (no credential, no key)."""

    kind: str
    level: str
    seconds: float
    grace: float
    interval: float
    force: bool
    dcgm_level: int | None
    selector: str
    criteria: dict[str, Any]
    restart: bool
    concurrency: int
    actor: str
    servers: list[ServerWork]
    #: The servers that are live Kubernetes nodes: drained before, uncordoned after, in waves (None: none is).
    drain: DrainPlan | None = None


@dataclass
class BurninRunData:
    """What open made, given to each unit and to close (nothing of every server: each unit's input is its own)."""

    run: int
    job: int
    resumed: bool
    actor: str
    kind: str
    level: str
    seconds: float
    grace: float
    interval: float
    force: bool
    dcgm_level: int | None
    criteria: dict[str, Any]
    started: float = 0.0  # wall clock (time.time) at open: the run's elapsed time, wherever close runs
    drain: DrainPlan | None = None


@dataclass
class BurninKept:
    """What open made for close alone: the servers it locked, and what an earlier pass of the run stored."""

    locked: list[str]
    earlier: dict[str, dict[str, str]] = field(default_factory=dict)  # {server: {device: verdict}}


@dataclass
class ServerSummary:
    """A server's pass as a unit's output: the boards' verdicts by device, its journal row; not the boards' reasons and
    metrics (the store holds them: a fleet's would outgrow what a workflow's payload may hold)."""

    server: str
    server_id: int
    boards: dict[str, str]
    rma: list[str]
    moved: bool
    notes: list[str]
    workload_s: float
    elapsed_s: float
    error: str | None
    earlier: bool
    step: StepResult

    @property
    def verdict(self) -> str:
        return worst(list(self.boards.values()))

    @classmethod
    def of(cls, d: ServerDone) -> ServerSummary:
        return cls(d.server, d.server_id, {b.device: b.verdict for b in d.boards}, d.rma, d.moved, d.notes, d.workload_s, d.elapsed_s,
                   d.error, d.earlier, d.step())  # fmt: skip


@dataclass
class BurninSummary:
    """Close's result: what the command reports besides the boards (which it reads from the store)."""

    run: int
    job: int
    resumed: bool
    earlier: list[str]
    workload_s: float
    elapsed_s: float
    rma: list[str]
    to_maintenance: list[str]
    notes: dict[str, list[str]]


@dataclass
class Batch:
    """What the units of one batch share (:meth:`BurninWorkflow.session`)."""

    criteria: CriteriaFile
    plans: dict[str, ServerPlan]
    problems: dict[str, str]  # servers this worker cannot reach, with why
    watch: BmcWatch


def request(p: Plan, *, restart: bool, concurrency: int, actor: str, drain: DrainPlan | None = None) -> BurninRequest:
    """The plan as plain data: what open and the units need, made once by the command."""
    job = p.servers[0].job  # grace, interval, force and the level's diagnostic depth are the run's, the same on each server
    return BurninRequest(p.kind, p.level, p.seconds, job.grace, job.interval, job.force, job.dcgm_level, p.selector,
                         p.criteria.model_dump(mode="json"), restart, concurrency, actor,
                         [ServerWork(s.name, s.id, s.model, s.board_kind, list(s.boards), dict(s.baseline))
                          for s in p.servers], drain)  # fmt: skip


def _sites(names: list[str]) -> dict[str, str]:
    from sqlalchemy import select

    with get_engine().connect() as conn:
        return dict(conn.execute(select(T.server.c.name, T.site.c.name).join(T.rack, T.rack.c.id == T.server.c.rack_id)
                                 .join(T.site, T.site.c.id == T.rack.c.site_id).where(T.server.c.name.in_(names))).all())  # fmt: skip


def resolve_servers(run: BurninRunData, servers: list[ServerWork]) -> tuple[dict[str, ServerPlan], dict[str, str]]:
    """The servers' hosts and BMCs, resolved here from the inventory's references (their SSH target and key, their BMC's
    credential reference): not a plan (no server is chosen or refused here), only how this machine reaches them.
    Returns (the servers reachable, {server: why not})."""
    from fleetctl.targets import resolve, resolve_hosts

    names = [s.name for s in servers]
    with get_engine().connect() as conn:
        hosts = resolve_hosts(conn, names)
        refs = {r.name: r for r in resolve(conn, names)}
    plans: dict[str, ServerPlan] = {}
    problems: dict[str, str] = {}
    for s in servers:
        h = hosts.get(s.name)
        if h is None or s.name not in refs:
            problems[s.name] = f"{s.name}: not in the inventory here"
            continue
        if h.target.key_file and not os.path.exists(h.target.key_file):
            problems[s.name] = f"{s.name}: the site's SSH key {h.target.key_file} does not exist on this machine"
            continue
        job = HostJob(server=s.name, target=h.target, hostvars=dict(h.hostvars), kind=run.kind, boards=list(s.boards), model=h.model,
                      seconds=run.seconds, dcgm_level=run.dcgm_level, grace=run.grace, interval=run.interval, force=run.force,
                      board_kind=h.board_kind or "")  # fmt: skip
        plans[s.name] = ServerPlan(s.name, s.id, "", s.model, s.board_kind, list(s.boards), job, refs[s.name], s.baseline)
    return plans, problems


class BurninWorkflow(Description[BurninRequest, BurninRunData, ServerWork, ServerSummary, BurninSummary]):
    """Burn-in: a unit per server."""

    name = "burnin"
    kept_type: ClassVar[Any] = BurninKept

    def __init__(self, resolved: dict[str, ServerPlan] | None = None) -> None:
        # The command's own plan, in process: its servers are resolved already, and are not resolved again.
        self.resolved = resolved or {}

    def open(self, ctx: Context, request: BurninRequest) -> Opened[BurninRunData, ServerWork]:
        engine = get_engine()
        names = [s.name for s in request.servers]
        started = time.time()
        locked = lock_all_recovering(engine, names, purpose=f"burnin --{request.kind}", reason="burn-in resumes", owner=ctx.owner)
        try:
            run_id, resumed, done_before, journal = open_run(
                engine, kind=request.kind, level=request.level, seconds=request.seconds, selector=request.selector, names=names,
                restart=request.restart, actor=request.actor, owner=ctx.owner, workflow=ctx.workflow_id or None)  # fmt: skip
        except BaseException:
            release(engine, locked, owner=ctx.owner)
            raise
        earlier: dict[str, dict[str, str]] = {}
        for b in stored_results(engine, run_id, done_before) if done_before else []:
            earlier.setdefault(b.server, {})[b.device] = b.verdict
        if ctx.progress is not None:  # in process, the live view: what an earlier pass did, before this one starts
            for name in request.servers:
                if name.name in earlier:
                    ctx.progress(name.name, "done", {"verdict": worst(list(earlier[name.name].values())), "resumed": True})
        run = BurninRunData(run_id, journal.job_id, resumed, request.actor, request.kind, request.level, request.seconds,
                            request.grace, request.interval, request.force, request.dcgm_level, request.criteria, started,
                            request.drain)  # fmt: skip
        todo = [s for s in request.servers if s.name not in done_before]
        sites = _sites([s.name for s in todo]) if ctx.engine == "temporal" else {}
        timeout = request.seconds + request.grace + SETUP_S
        drain = request.drain
        # A live node's unit also drains it first (the drain's own timeout on top), in its wave under --max-unavailable.
        units = [Unit(s.name, sites.get(s.name, ""), s, timeout + (drain.timeout_s if drain else 0.0), f"burnin:{s.name}",
                      wave=drain.wave(s.name) if drain else 0) for s in todo]  # fmt: skip
        return Opened(run, units, BurninKept(locked, earlier), concurrency=request.concurrency, job=journal.job_id, attempts=3)

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: BurninRunData, units: list[ServerWork]) -> AsyncIterator[Batch]:
        """The batch's servers resolved (or the command's, in process), their BMCs watched while they burn in."""
        plans = {s.name: self.resolved[s.name] for s in units if s.name in self.resolved}
        problems: dict[str, str] = {}
        rest = [s for s in units if s.name not in plans]
        if rest:
            got, problems = await asyncio.to_thread(resolve_servers, run, rest)
            plans |= got
        async with BmcWatch(list(plans.values())) as watch:
            yield Batch(CriteriaFile.model_validate(run.criteria), plans, problems, watch)

    async def unit(self, ctx: Context, run: BurninRunData, data: ServerWork) -> ServerSummary:
        engine = get_engine()
        if ctx.attempt > 1:  # a lost attempt may have recorded it: never burned in, nor recorded, twice
            earlier = await asyncio.to_thread(recorded_already, engine, run.run, data.name, data.id)
            if earlier is not None:
                return ServerSummary.of(earlier)
        batch: Batch = ctx.shared
        sp = batch.plans.get(data.name)
        if sp is None:  # this machine cannot reach it (no key, say): the server's error, stored as a host's is
            why = batch.problems.get(data.name, f"{data.name}: cannot be reached from here")
            return ServerSummary.of(await asyncio.to_thread(record_error, engine, run.run, data.name, data.id, why, actor=run.actor))
        try:
            async with maintenance(run.drain, data.name, job=run.job, why=f"burnin --{run.kind} {run.level}") as held:
                done = ServerSummary.of(await burn_server(batch.criteria, sp, engine=engine, run_id=run.run, actor=run.actor,
                                                          watch=batch.watch))  # fmt: skip
                if done.error is not None or done.moved or done.verdict not in ("pass", "degraded"):
                    held.failed(done.error or f"burn-in verdict {done.verdict}" + (", moved to maintenance" if done.moved else ""))
                return done
        except NotDrained as e:  # the drain did not finish (a budget held past the timeout, pods it may not evict): not burned
            return ServerSummary.of(await asyncio.to_thread(record_error, engine, run.run, data.name, data.id, str(e), actor=run.actor))

    def close(self, ctx: Context, run: BurninRunData, kept: BurninKept, outcomes: list[Outcome[ServerSummary]], *,
              interrupted: bool) -> BurninSummary:  # fmt: skip
        engine = get_engine()
        done: list[ServerSummary] = []
        for o in outcomes:
            if o.out is not None:
                done.append(o.out)
            elif o.lost is not None:  # every attempt lost (or, in process, a surprise): the server's error, stored once
                sid = self._server_id(o.key)
                done.append(ServerSummary.of(record_error(engine, run.run, o.key, sid, o.lost, actor=run.actor)))
        journal = Journal(engine, run.job, run.actor, kind="burnin")
        verdicts = [v for b in kept.earlier.values() for v in b.values()] + [v for d in done for v in d.boards.values()]
        # The servers are let go before the run says it is over: whoever sees it finished (a user, a script waiting on
        # it) finds them free, never still reserved by a run that ended (a CI run saw both, between the two writes).
        # Released first, a close that fails leaves the run "running" with no reservation: retried on Temporal, marked
        # interrupted by the next run in process, as a run killed there is.
        try:
            release(engine, kept.locked, owner=ctx.owner)
        finally:
            close_run(engine, run.run, journal, [d.step for d in done], verdicts, interrupted=interrupted)
        return BurninSummary(run.run, run.job, run.resumed, sorted(kept.earlier), max((d.workload_s for d in done), default=0.0),
                             round(time.time() - run.started, 2), [s for d in done for s in d.rma], [d.server for d in done if d.moved],
                             {d.server: d.notes for d in done})  # fmt: skip

    @staticmethod
    def _server_id(name: str) -> int:
        from sqlalchemy import select

        with get_engine().connect() as conn:
            return int(conn.execute(select(T.server.c.id).where(T.server.c.name == name)).scalar_one())


BURNIN = register(BurninWorkflow())


def result(summary: BurninSummary, names: list[str]) -> RunResult:
    """The run's report: the summary, and the boards' verdicts, reasons and metrics as the store holds them."""
    boards = stored_results(get_engine(), summary.run, set(names))
    for b in boards:
        b.resumed = b.server in summary.earlier  # stored by an earlier pass of the run; the rest by this one
    sort_results(boards, names)
    return RunResult(summary.run, summary.resumed, boards, summary.workload_s, summary.elapsed_s, summary.rma, summary.to_maintenance,
                     summary.notes)  # fmt: skip


def progress_of(progress: Progress | None) -> Any:
    """The runner's (server, stage, output) as the command's live view has it: (server, stage, details)."""
    if progress is None:
        return None

    def on(key: str, stage: str, out: Any) -> None:
        if stage == "running":
            progress(key, "running", {})
        elif out is None:
            progress(key, "done", {"verdict": "error", "boards": {}, "error": "the server's burn-in did not complete"})
        else:
            progress(key, "done", {"verdict": out.verdict, "boards": out.boards, "error": out.error})

    return on


def run(
    p: Plan, *, restart: bool = False, concurrency: int = 250, progress: Progress | None = None, drain: DrainPlan | None = None
) -> RunResult:
    """Burn in the plan's servers in this process; results are stored as each server ends.

    Raises:
        Locked: a server is held by another workflow (nothing was touched).
    """
    from fleetctl.inventory.service import actor

    if not p.servers:
        raise InputError("no server to burn in", field="TARGET")
    req = request(p, restart=restart, concurrency=concurrency, actor=actor(), drain=drain)
    wf = BurninWorkflow(resolved={s.name: s for s in p.servers})
    summary = run_local(wf, req, progress=progress_of(progress), ctx=Context("process", str(Holder.me()), progress=progress))
    return result(summary, [s.name for s in p.servers])


__all__ = ["BURNIN", "BurninKept", "BurninRequest", "BurninRunData", "BurninSummary", "BurninWorkflow", "ServerSummary", "ServerWork",
           "request", "result", "run"]  # fmt: skip
