"""`fleetctl provision`, described once (:mod:`fleetctl.workflows.describe`): run in process or on Temporal alike.

- ``sites`` and ``check`` (the preflight, before anything is touched): every
  credential and setting the run will need, checked where it will be read (on
  Temporal on a worker of each site the servers are in: each has its own
  environment and secrets mapping, docs/security.md). Any problem refuses the
  whole run (:class:`~fleetctl.preflight.PreflightError`, exit 2) and open is
  never called;
- ``open`` (the control queue on Temporal: the store only): the servers
  refused or skipped (RMA, in service, ready), the locks (held by the run:
  this process, or the parent workflow), the job; a unit per server locked;
- ``session`` (``session_scope = "run"``: on Temporal one per run and site on
  each worker, for every server of that run it works): a
  :class:`~fleetctl.workflows.provision.engine.Provisioner` of the run's
  servers of the site, their credentials resolved there, the racks' power
  ledger, the switch batcher and the Ansible batcher they share;
- ``unit``: one server through its steps (:meth:`Provisioner.server`), from
  where its pass stands in the journal: what an earlier run, or a lost attempt
  of this one on another worker, recorded is never done again (a firmware
  component at the baseline is not flashed, a consumed one-time boot powers
  nothing again);
- ``close``: a server whose every attempt was lost marked failed, the job
  finished (interrupted when the run is), the locks released, the run's
  figures.

The dry run reads the BMCs and changes nothing: it stays in process
(:meth:`Provisioner.dry_run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from sqlalchemy import select

from fleetctl.errors import FleetError
from fleetctl.inventory.service import actor
from fleetctl.lifecycle.locks import Refused, release
from fleetctl.plugins import FleetSessions
from fleetctl.preflight import Preflight, PreflightError
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.workflows.describe import Context, Description, Opened, Outcome, Unit, register, run_local
from fleetctl.workflows.journal import JobState, Journal
from fleetctl.workflows.maintained import NotDrained, maintenance
from fleetctl.workflows.provision.engine import NOT_READY, Provisioner
from fleetctl.workflows.provision.model import ErrorKind, Failure, Options, Progress, Result

# A server's unit on Temporal, bounded beyond what its steps enforce themselves (the firmware timeout, the site's
# install timeout, the playbooks'): the sum of each step's own bound (seconds), so a step that hangs ends its server
# (failed, its attempts used up) instead of the run never ending. A worker lost is noticed far sooner, by its heartbeat.
STEP_BOUND_S: dict[str, float] = {
    "bmc": 600, "inspect": 1800, "firmware": 4 * 3600, "bios": 1800, "vlan-provisioning": 3600,
    "boot": 3600, "os": 6 * 3600, "vlan-production": 3600, "ansible": 4 * 3600, "accel": 1800,
}  # fmt: skip
UNIT_TIMEOUT_S = float(sum(STEP_BOUND_S.values()))
# Attempts of a server's unit whose worker is lost: each attempt resumes from the journal, so a retry costs little.
ATTEMPTS = 6
# The in-process engine's one "site": the command's own process checks every server.
HERE = ""


@dataclass
class ProvisionRequest:
    """The run as the command asks it: the servers, the label (the job's target), who, the options (no store URL: the
    workers use their own store, the command's checked; no credential: each is resolved where it is used)."""

    names: list[str]
    label: str
    actor: str
    options: Options


@dataclass
class ServerWork:
    """One server's unit: what it needs besides what its worker reads of the server itself."""

    name: str
    id: int
    site: str
    in_service: bool = False  # reprovisioned while in service: its ports are moved by force


@dataclass
class ProvisionRun:
    """What open made, given to each unit and to close."""

    job: int
    label: str
    actor: str
    options: Options
    started: float = 0.0  # wall clock (time.time) at open: the run's makespan, wherever close runs


@dataclass
class ServerDone:
    """A server's end in the run (a unit's output, or what open or close decided): the report's row."""

    server: str
    result: Result | None
    state: str
    step: str = ""
    elapsed: float = 0.0
    error: str | None = None
    failure: Failure | None = None  # why it failed (result FAILED)
    locked_by: Refused | None = None  # who holds it (result LOCKED)
    done: list[str] = field(default_factory=list)  # steps finished in this run
    resumed: list[str] = field(default_factory=list)  # steps found done in the journal
    timings: dict[str, float] = field(default_factory=dict)
    waited: float = 0.0  # seconds spent waiting on what is shared (a power slot, a switch session, an Ansible batch)

    @property
    def failed_step(self) -> str | None:
        return self.failure.step if self.failure else None

    @property
    def plan(self) -> dict[str, Any]:
        """(A dry run's plan: none, the run did it.)"""
        return {}

    @classmethod
    def of(cls, p: Progress) -> ServerDone:
        row = p.row()
        return cls(p.server, p.result, str(p.state), row["step"], row["elapsed"], p.error, p.failure, p.locked_by, list(p.done),
                   list(p.resumed), dict(p.timings), round(p.waited, 2))  # fmt: skip

    def row(self) -> dict[str, Any]:
        """The row the report shows (as :meth:`Progress.row`)."""
        return {"server": self.server, "result": str(self.result or "running"), "state": self.state, "step": self.failed_step or self.step,
                "elapsed": self.elapsed, "error": self.error, "done": self.done, "resumed": self.resumed, "timings": self.timings,
                "waited": self.waited, "own_s": round(sum(self.timings.values()) - self.waited, 2)}  # fmt: skip


@dataclass
class ProvisionKept:
    """What open made for close alone: the servers in order, those it locked, those it did not work (refused, skipped,
    locked by another run)."""

    names: list[str]
    locked: list[str]
    rows: list[ServerDone] = field(default_factory=list)


@dataclass
class ProcessFigures:
    """What the in-process engine measures of its own process (``bench/provision.py``); on Temporal the work is spread
    over the workers' processes, and only the makespan is the run's."""

    cpu_s: float
    process_cpu_s: float
    ansible_runner_cpu_s: float
    children_cpu_s: float
    ansible_batches: list[int]
    switch_sessions: int


@dataclass
class ProvisionResult:
    """Close's result: every server's row (in the command's order), the job, the run's figures."""

    job: int
    servers: list[ServerDone]
    makespan_s: float
    engine: str
    figures: ProcessFigures | None = None

    def stats(self) -> dict[str, Any]:
        """The run's figures as the command's JSON report gives them beside the servers."""
        out: dict[str, Any] = {"job": self.job, "makespan_s": self.makespan_s, "engine": self.engine}
        if self.figures is not None:
            out |= {k: getattr(self.figures, k) for k in ProcessFigures.__dataclass_fields__}
        return out


def request(names: list[str], options: Options, label: str, actor: str) -> ProvisionRequest:
    """The command's run as plain data (the store's URL left out: a worker refuses a store that is not the command's)."""
    return ProvisionRequest(list(names), label, actor, replace(options, url=None, dry_run=False))


def site_of(names: list[str]) -> dict[str, str]:
    """{server: its site} (the store only)."""
    q = (select(T.server.c.name, T.site.c.name).join(T.rack, T.rack.c.id == T.server.c.rack_id)
         .join(T.site, T.site.c.id == T.rack.c.site_id).where(T.server.c.name.in_(names)))  # fmt: skip
    with get_engine().connect() as conn:
        return {str(n): str(s) for n, s in conn.execute(q)}


def held(owner: str, site: str) -> list[str]:
    """The servers of ``site`` that ``owner`` holds locked: a run's servers of one site (the store only)."""
    q = (select(T.server.c.name).join(T.rack, T.rack.c.id == T.server.c.rack_id).join(T.site, T.site.c.id == T.rack.c.site_id)
         .where(T.server.c.reservation == owner, T.site.c.name == site).order_by(T.server.c.name))  # fmt: skip
    with get_engine().connect() as conn:
        return [str(n) for (n,) in conn.execute(q)]


class ProvisionWorkflow(Description[ProvisionRequest, ProvisionRun, ServerWork, ServerDone, ProvisionResult]):
    """Provisioning: a unit per server (see the module's docstring)."""

    name = "provision"
    kept_type: ClassVar[Any] = ProvisionKept
    session_scope: ClassVar[str] = "run"
    checked: ClassVar[bool] = True

    def __init__(self, local: Provisioner | None = None) -> None:
        # In process: the command's own Provisioner (its live rows drive the live view; its preflight may be done
        # already). None: the registered description, whose every step makes its own (a Temporal worker's).
        self.local = local
        self._cpu0: Any = None
        self._t0 = 0.0

    # --- before anything is touched ------------------------------------------------------

    def sites(self, ctx: Context, request: ProvisionRequest) -> list[str]:
        if self.local is not None:
            return [HERE]
        return sorted(set(site_of(request.names).values()))

    def check(self, ctx: Context, request: ProvisionRequest, site: str) -> list[Any]:
        """The preflight's problems (``{"what", "who"}``) for the site's servers, read here; the servers the run will skip or
        refuse are not checked, as in process. No secret read is kept, only what is missing."""
        if self.local is not None:
            p = self.local
        else:
            sites = site_of(request.names)
            p = Provisioner([n for n in request.names if sites.get(n) == site], options=request.options, label=request.label)
        return [{"what": pr.what, "who": list(pr.who)} for pr in p.preflight()]

    def refusal(self, problems: list[Any]) -> FleetError:
        """The one PreflightError of every site's problems (a problem found on several sites is one, naming them all)."""
        pf = Preflight("provision")
        for pr in problems:
            for who in pr.get("who") or [""]:
                pf.add(who, str(pr["what"]))
        return PreflightError("provision", pf.problems)

    # --- open ------------------------------------------------------------------------------

    def open(self, ctx: Context, request: ProvisionRequest) -> Opened[ProvisionRun, ServerWork]:
        if ctx.engine == "process":
            from fleetctl.config import data_dir
            from fleetctl.workflows.ansible_run import prune_runs, reap_leftovers

            self._cpu0, self._t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            prune_runs(data_dir() / "runs")  # before any lock: a bad FLEETCTL_KEEP_RUNS stops here
            # A killed run's leftovers first: its Ansible still running on our hosts, its token files (issue #13).
            reap_leftovers()
        started = time.time()
        if self.local is not None:
            p = self.local
            p.preflight()  # (done by the checks already: the inventory read once)
            refused = p.refused or {}
        else:  # the control queue: the store only, no credential resolved here
            p = Provisioner(request.names, options=request.options, label=request.label)
            p.load()
            refused = p.refusals()
        for n, (result, text) in refused.items():
            p.update(n, result=result, error=text)
        p.owner = ctx.owner
        work = [n for n in request.names if n in p.ctx and n not in refused]
        busy = p.lock(work) if work else {}
        try:
            for n, why in busy.items():
                p.update(n, result=Result.LOCKED, locked_by=why, error=str(why))
            work = [n for n in work if n in p.locked]
            job = p.open_journal(work, who=request.actor, workflow=ctx.workflow_id if ctx.engine == "temporal" else "")
        except BaseException:
            release(p.engine, p.locked, owner=ctx.owner)
            raise
        rows = [ServerDone.of(p.progress[n]) for n in request.names if n in p.progress and n not in work]
        run = ProvisionRun(job, request.label, request.actor, request.options, started)
        drain = request.options.drain
        # A live node is drained first (its own timeout on top), in its wave under --max-unavailable.
        units = [Unit(n, p.ctx[n].site, ServerWork(n, p.ctx[n].id, p.ctx[n].site, p.ctx[n].in_service),
                      UNIT_TIMEOUT_S + (drain.timeout_s if drain else 0.0), wave=drain.wave(n) if drain else 0) for n in work]  # fmt: skip
        # In process ``--concurrency`` bounds the servers worked at once; on Temporal every unit is started, and each
        # worker bounds what it runs by its own activity slots (`fleetctl worker --activities`), as before.
        concurrency = request.options.concurrency if ctx.engine == "process" else max(1, len(units))
        return Opened(run, units, ProvisionKept(list(request.names), list(p.locked), rows), concurrency=concurrency, job=job,
                      attempts=ATTEMPTS)  # fmt: skip

    # --- the servers -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: ProvisionRun, units: list[ServerWork]) -> AsyncIterator[Provisioner]:
        """What a site's servers share: in process the command's Provisioner; on Temporal one of the run's servers of the
        first unit's site (those the run holds locked there), read and resolved on this worker, writing into the run's job."""
        if self.local is not None:
            p = self.local
            names = [u.name for u in units]
            await asyncio.to_thread(p.read_shared, names)
        else:
            site = units[0].site if units else ""
            p = Provisioner([], options=run.options, label=run.label)

            def read() -> list[str]:
                p.names = held(ctx.owner, site) or [u.name for u in units]
                p.load()
                p.resolve_bmcs()  # the credential references are resolved here, on the site's worker
                p.read_shared(p.names)
                return p.names

            names = await asyncio.to_thread(read)
            p.owner = ctx.owner
            p.join_journal(run.job, run.actor)
        try:
            async with FleetSessions() as fleets:
                p.fleets = fleets
                await p.setup_coordinators(names)
                yield p
        finally:
            if self.local is None and p.journal is not None:
                p.journal.close()  # every queued write in the store (in process, close does it)

    async def unit(self, ctx: Context, run: ProvisionRun, data: ServerWork) -> ServerDone:
        p: Provisioner = ctx.shared
        if data.name not in p.ctx:
            raise FleetError(f"{data.name} is not among the servers this worker's session of the run read")
        journal = p.journal
        assert journal is not None
        if self.local is None:
            # Another attempt of this unit (its worker lost) may have moved the server on: its state and pass read again.
            p.ctx[data.name].in_service = data.in_service
            await p.reread(data.name)
        try:
            async with maintenance(run.options.drain, data.name, job=run.job, why="provision --reprovision") as kept:
                await p.server(data.name)
                done = p.progress[data.name]
                if done.result != Result.READY:
                    kept.failed(f"provisioning {done.result}: {done.error or ''}".rstrip(": "))
        except NotDrained as e:  # the drain did not finish: the server is not reprovisioned
            p.update(data.name, result=Result.FAILED, error=str(e))
        except asyncio.CancelledError:
            # Cancelled (`fleetctl jobs cancel`, Ctrl-C): the step stops where it is, its row left running (the next run
            # resumes from it). What it queued for the journal is written first: nothing lands after close.
            await asyncio.shield(journal.drain())
            raise
        await journal.drain()
        return ServerDone.of(p.progress[data.name])

    # --- close ---------------------------------------------------------------------------------

    def close(self, ctx: Context, run: ProvisionRun, kept: ProvisionKept, outcomes: list[Outcome[ServerDone]], *,
              interrupted: bool) -> ProvisionResult:  # fmt: skip
        engine = self.local.engine if self.local is not None else get_engine()
        if self.local is not None and self.local.journal is not None:
            self.local.journal.close()  # every queued write in the store first
        journal = Journal(engine, run.job, run.actor, kind="provision", prefix="provision.")
        rows = {r.server: r for r in kept.rows}
        try:
            for o in outcomes:
                if o.out is not None:
                    rows[o.key] = o.out
                elif o.lost is not None:  # every attempt lost (or a surprise in process): the server failed, stored once
                    why = f"the server's unit did not complete: {o.lost}"
                    failure = Failure(_last_step(engine, run.job, o.key), ErrorKind.TIMEOUT, why)
                    journal.fail(o.key, str(failure), reason="provisioning step failed")
                    rows[o.key] = ServerDone(o.key, Result.FAILED, "failed", failure.step, error=str(failure), failure=failure)
            servers = [rows.get(n) or ServerDone(n, None, "") for n in kept.names]
            failed = sum(1 for r in servers if r.result in NOT_READY)
            state = JobState.INTERRUPTED if interrupted else (JobState.FAILED if failed else JobState.SUCCEEDED)
            error = f"{failed} of {len(kept.names)} not ready" if failed else ("interrupted" if interrupted else None)
            journal.finish(state, error)
        finally:
            release(engine, kept.locked, owner=ctx.owner)
        figures = None
        if self.local is not None and self._cpu0 is not None:
            f = self.local.figures(cpu0=self._cpu0, t0=self._t0)
            makespan = float(f["makespan_s"])
            figures = ProcessFigures(f["cpu_s"], f["process_cpu_s"], f["ansible_runner_cpu_s"], f["children_cpu_s"], f["ansible_batches"],
                                     f["switch_sessions"])  # fmt: skip
        else:
            makespan = round(time.time() - run.started, 2)
        return ProvisionResult(run.job, servers, makespan, ctx.engine, figures)


def _last_step(engine: Any, job: int, name: str) -> str:
    """The last step the job journaled for the server ("" before its first): where a lost unit stopped."""
    q = (select(T.job_step.c.name).join(T.server, T.server.c.id == T.job_step.c.server_id)
         .where(T.job_step.c.job_id == job, T.server.c.name == name).order_by(T.job_step.c.id.desc()).limit(1))  # fmt: skip
    with engine.connect() as conn:
        step = conn.execute(q).scalar()
    name = str(step or "").removeprefix("provision.")
    return "" if name == "begin" else name


PROVISION = register(ProvisionWorkflow())


def run_here(p: Provisioner) -> ProvisionResult:
    """The run in this process through its description (:func:`~fleetctl.workflows.describe.run_local`): ``p`` is the
    command's (its live rows and ``on_change`` drive the live view; its preflight may be done already).

    Raises:
        PreflightError: a credential or setting the run will need is missing (nothing was touched).
    """
    return run_local(ProvisionWorkflow(p), request(p.names, p.opt, p.label, actor()))


def provision(names: list[str], *, options: Options, label: str, on_change: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """Provision the servers in this process (or plan them: ``options.dry_run``); per-server rows and the run's figures.

    Raises:
        PreflightError: a credential or setting the run will need is missing (nothing was touched).
    """
    p = Provisioner(names, options=options, label=label, on_change=on_change)
    if options.dry_run:
        return list(p.dry_run()), p.stats
    result = run_here(p)
    return list(result.servers), result.stats()


__all__ = ["PROVISION", "ProcessFigures", "ProvisionKept", "ProvisionRequest", "ProvisionResult", "ProvisionRun", "ProvisionWorkflow",
           "ServerDone", "ServerWork", "provision", "request", "run_here"]  # fmt: skip
