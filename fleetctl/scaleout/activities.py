"""The provisioning activities: the embedded engine's own pieces, called on a worker.

A worker keeps, per job, a :class:`~fleetctl.workflows.provision.engine.Provisioner`
for the job's servers of its site (their inventory read, their credential
references resolved here on the worker, the racks' power figures, the
switches, the coordinators), and runs each step through
:meth:`Provisioner.run_step`: the step's row in the journal (running, then
succeeded or failed), the server's lifecycle state, and the step itself,
which checks before it acts. A step that failed comes back as a value (its
step, kind and reason), never as an exception: only a lost worker makes
Temporal run an activity again, and the step then finds in the journal what
the lost attempt had noted (the firmware it was flashing, the power action
it had requested), exactly as a resumed run in process does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleetctl.config import database_url
from fleetctl.errors import FleetError
from fleetctl.inventory.service import actor
from fleetctl.lifecycle.locks import Holder, release
from fleetctl.lifecycle.states import ServerState as S
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.workflows.journal import OWNER_ARG, AsyncJournal, JobState, Journal
from fleetctl.workflows.provision.context import load_contexts
from fleetctl.workflows.provision.engine import Provisioner
from fleetctl.workflows.provision.model import ErrorKind, Failure, Options, Progress, Result, StepError
from fleetctl.workflows.provision.steps import STEP_NAMES, STEPS

STEP_BY_NAME = {s.name: s for s in STEPS}
IDLE_S = 900.0  # a job's state on a worker is dropped after this long without an activity of it


@asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while the body runs (a third of the activity's heartbeat timeout apart)."""
    timeout = activity.info().heartbeat_timeout
    every = max(0.2, timeout.total_seconds() / 3) if timeout else 10.0

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def store_id(url: str) -> str:
    """The store's URL without its password: which database a command and a worker use, safe to put in a history."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def shared_store(req: dict[str, Any]) -> Any:
    """This worker's store (an engine), refusing one that is not the command's (``req["store"]``, from ``store_id``).

    A worker on another database would write the run where nobody reads it; the refusal is not retried.
    """
    url = database_url()
    if store_id(url) != req["store"]:
        raise ApplicationError(f"this worker's store is {store_id(url)}, the command's {req['store']}: "
                               "workers and commands must share one database", type="StoreMismatch", non_retryable=True)  # fmt: skip
    return get_engine()


def loaded_provisioner(req: dict[str, Any], names: list[str]) -> Provisioner:
    """A Provisioner of ``names`` on this worker's store (the command's, checked), their inventory read."""
    p = Provisioner(names, options=Options(**req["options"]), label=req["label"])
    p.engine = shared_store(req)
    with p.engine.connect() as conn:
        p.ctx = load_contexts(conn, names)
    return p


class ProvisionActivities:
    """The provisioning activities of one worker, with what it keeps per job."""

    def __init__(self, fleets: Any) -> None:
        self.fleets = fleets  # fleetctl.plugins.FleetSessions, open while the worker runs
        self.runs: dict[int, Provisioner] = {}
        self.used: dict[int, float] = {}
        self.making: dict[int, asyncio.Lock] = {}

    # --- on the control queue: the store only ----------------------------------------------

    @activity.defn(name="fleetctl.provision.open")
    async def open(self, req: dict[str, Any]) -> dict[str, Any]:
        """Refusals, the job and the locks: what the embedded engine does before its event loop."""
        return await asyncio.to_thread(self._open, req)

    def _open(self, req: dict[str, Any]) -> dict[str, Any]:
        names: list[str] = req["names"]
        p = loaded_provisioner(req, names)
        p.progress = {n: Progress(n, p.ctx[n].state) for n in names}
        refused = p._refusals()
        rows = [{**_progress_row(p.progress[n]), "result": str(result), "error": text} for n, (result, text) in refused.items()]
        work = [n for n in names if n not in refused]
        args = {"reprovision": p.opt.reprovision, "restart": p.opt.restart, "servers": len(work), "engine": "temporal",
                "workflow": activity.info().workflow_id}  # fmt: skip
        journal = Journal.open(p.engine, kind="provision", target=req["label"], args=args, actor=req["actor"], prefix="provision.")
        # The locks' holder is the run's parent workflow, "ACTOR:temporal:WORKFLOW", not this worker: it may die while
        # the run goes on elsewhere. It is the job's owner too; both are taken for gone once Temporal says it closed.
        p.owner = str(Holder.of_workflow(req["actor"], activity.info().workflow_id))
        _own(p.engine, journal.job_id, p.owner)
        busy = p._lock(work) if work else {}
        for n, why in busy.items():
            rows.append({**_progress_row(p.progress[n]), "result": str(Result.LOCKED), "error": str(why)})
        work = [n for n in work if n in p.locked]
        sites: dict[str, list[str]] = {}
        for n in work:
            sites.setdefault(p.ctx[n].site, []).append(n)
        return {"job": journal.job_id, "owner": p.owner, "rows": rows, "sites": sites,
                "work": [{"server": n, "site": p.ctx[n].site, "state": p.ctx[n].state, "in_service": p.ctx[n].in_service}
                         for n in work]}  # fmt: skip

    @activity.defn(name="fleetctl.provision.close")
    async def close(self, req: dict[str, Any]) -> None:
        await asyncio.to_thread(self._close, req)

    def _close(self, req: dict[str, Any]) -> None:
        engine = get_engine()
        journal = Journal(engine, req["job"], actor(), kind="provision", prefix="provision.")
        failed, total = req["failed"], req["total"]
        state = JobState.INTERRUPTED if req["interrupted"] else (JobState.FAILED if failed else JobState.SUCCEEDED)
        error = f"{failed} of {total} not ready" if failed else ("interrupted" if req["interrupted"] else None)
        journal.finish(state, error)
        release(engine, req["locked"], owner=req["owner"])

    # --- on the site's queue: the devices ------------------------------------------------------

    async def _run(self, req: dict[str, Any]) -> Provisioner:
        """This worker's state of the job (made on its first activity here)."""
        job = int(req["job"])
        self._forget_idle(keep=job)
        async with self.making.setdefault(job, asyncio.Lock()):
            run = self.runs.get(job)
            if run is None:
                run = await self._make_run(req)
                self.runs[job] = run
        self.used[job] = time.monotonic()
        return run

    async def _make_run(self, req: dict[str, Any]) -> Provisioner:
        names: list[str] = req["site_servers"]
        p = Provisioner(names, options=Options(**req["options"]), label=req["label"])

        def read() -> None:
            p.engine = get_engine()
            p._read_inventory()  # the credential references are resolved here, on the worker
            p._read_shared(names)

        await asyncio.to_thread(read)
        p.progress = {n: Progress(n, p.ctx[n].state) for n in names}
        p.owner = req["owner"]
        p.journal = AsyncJournal(Journal(p.engine, int(req["job"]), req["actor"], kind="provision", prefix="provision."))
        p.stats["job"] = int(req["job"])
        p.fleets = self.fleets
        await p._setup_coordinators(names)
        return p

    def _forget_idle(self, keep: int) -> None:
        now = time.monotonic()
        for job, at in list(self.used.items()):
            if job != keep and now - at > IDLE_S:
                run = self.runs.pop(job, None)
                self.used.pop(job, None)
                self.making.pop(job, None)
                if run is not None and run.journal is not None:
                    run.journal.close()

    def close_all(self) -> None:
        for run in self.runs.values():
            if run.journal is not None:
                run.journal.close()
        self.runs.clear()

    @activity.defn(name="fleetctl.provision.begin")
    async def begin(self, req: dict[str, Any]) -> dict[str, Any]:
        """Where the server's pass stands: the steps done (resumed) and those to run; a pass begun when needed."""
        from sqlalchemy import select

        async with heartbeating():
            run = await self._run(req)
            name = req["server"]
            ctx = run.ctx[name]
            ctx.in_service = bool(req.get("in_service"))

            def state() -> str:
                with run.engine.connect() as conn:
                    return str(conn.execute(select(T.server.c.state).where(T.server.c.id == ctx.id)).scalar_one())

            ctx.state = await asyncio.to_thread(state)
            assert run.journal is not None
            try:
                run.passes.update(await run.journal.passes([ctx.id]))
                run.update(name, started=time.monotonic(), status="starting", state=ctx.state)
                done, _ = await run._resume_point(ctx)
                if "ansible" in done:
                    run.ansible.gone(name)
                await run.journal.set_target(name, S.READY)
            except asyncio.CancelledError:  # as a step's: what it queued is written before the cancellation is reported
                await asyncio.shield(run.journal.drain())
                raise
            resumed = [s for s in STEP_NAMES if s in done]
            return {"todo": [s for s in STEP_NAMES if s not in done], "resumed": resumed, "state": ctx.state}

    @activity.defn(name="fleetctl.provision.step")
    async def step(self, req: dict[str, Any]) -> dict[str, Any]:
        """One step on one server through the embedded engine's ``run_step``; its outcome as a value."""
        async with heartbeating():
            run = await self._run(req)
            name = req["server"]
            step = STEP_BY_NAME[req["step"]]
            ctx = run.ctx[name]
            ctx.in_service = bool(req.get("in_service"))
            assert run.journal is not None
            # What this step's earlier attempt (a lost worker, an interrupted run) had noted, and the boot's
            # clock for the OS wait, both from the journal: the attempt may have run on another worker.
            current = (await run.journal.passes([ctx.id]))[ctx.id]
            boot = current.steps.get("boot")
            if boot is not None and boot.finished_at is not None:
                run.boot_done_at[name] = boot.finished_at.timestamp()
            p = run.progress[name]
            p.waited = 0.0
            failure: Failure | None = None
            try:
                await run.run_step(name, step, current.interrupted().get(step.name))
            except asyncio.CancelledError:
                # Cancelled (`fleetctl jobs cancel`): the step stops where it is, its row left running (the next run
                # resumes from it). What it queued for the journal is written before the cancellation is reported, so
                # nothing lands after the run has closed the job and released the locks.
                await asyncio.shield(run.journal.drain())
                raise
            except StepError as e:
                failure = e.failure
            except FleetError as e:
                failure = Failure(step.name, ErrorKind.FLEET, str(e))
            except Exception as e:  # noqa: BLE001 - a bug on one server must not stop the others (as in process)
                failure = Failure(step.name, ErrorKind.INTERNAL, f"{e.__class__.__name__}: {e}")
            if failure is not None and step.name != "ansible":
                run.ansible.gone(name)
            return {"state": str(p.state), "seconds": p.timings.get(step.name, 0.0), "waited": round(p.waited, 2),
                    "failure": asdict(failure) if failure else None}  # fmt: skip

    @activity.defn(name="fleetctl.provision.finish")
    async def finish(self, req: dict[str, Any]) -> dict[str, Any]:
        """Ready, or failed with the step and the reason (the server's ``last_error`` and an audit event)."""
        run = await self._run(req)
        name = req["server"]
        f = req.get("failure")
        if f:
            failure = Failure(f["step"], ErrorKind(f["kind"]), f["reason"])
            await run._failed(name, failure)
            run.ansible.gone(name)
            return {"result": str(Result.FAILED), "state": "failed", "error": str(failure)}
        await run.ready(name)
        return {"result": str(Result.READY), "state": "ready", "error": None}

    def all(self) -> list[Any]:
        return [self.begin, self.step, self.finish]

    def control(self) -> list[Any]:
        return [self.open, self.close]


def _own(engine: Any, job_id: int, owner: str) -> None:
    """Record the job's owner as the Temporal run, not the worker process that opened it."""
    from sqlalchemy import select, update

    with immediate(engine) as c:
        args = c.execute(select(T.job.c.args).where(T.job.c.id == job_id)).scalar_one()
        c.execute(update(T.job).where(T.job.c.id == job_id).values(args={**(args or {}), OWNER_ARG: owner}))


def _progress_row(p: Progress) -> dict[str, Any]:
    return {**p.row(), "elapsed": 0.0, "status": "done"}
