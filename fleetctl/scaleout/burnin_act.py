"""The burn-in activities: the embedded engine's own pieces (``fleetctl.burnin.engine``), called on a worker.

- ``fleetctl.burnin.open`` (control queue): the locks, the run new or resumed
  (``open_run``: the same ``_open_run`` and job as in process) and what an
  earlier pass of it stored;
- ``fleetctl.burnin.server`` (the server's site queue): the worker plans the
  server itself (its SSH endpoint and key, its BMC's credentials, resolved
  here, never carried in a history), then runs ``burn_servers`` for it: the
  very function the in-process run calls, stages, verdicts and record;
- ``fleetctl.burnin.close`` (control queue): ``close_run`` (the run's counts,
  the job's rows) and the locks released.

A server activity run again after its worker was lost first reads what the
run stored of the server: when the lost attempt had recorded it, that stands
(a server is never recorded twice); else it burns the server in, and the
host's first stage stops the workload the lost attempt left running
(``host.stop_leftover_script``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleetctl.burnin.criteria import CriteriaFile
from fleetctl.burnin.engine import burn_servers, close_run, open_run, plan, record_error, recorded_already, stored_results
from fleetctl.errors import FleetError
from fleetctl.lifecycle.locks import Holder, _refusal, lock_recovering, release
from fleetctl.scaleout.activities import heartbeating, shared_store
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.workflows.journal import Journal, StepResult


def _engine(req: dict[str, Any]) -> Any:
    """The store, refusing a worker whose store is not the command's (it would write a run in another database)."""
    return shared_store(req)


def _plan(engine: Any, req: dict[str, Any], names: list[str]) -> Any:
    """The engine's plan of ``names``, made on this worker: the same checks, the credentials and keys read here."""
    with engine.connect() as conn:
        p = plan(conn, kind=req["kind"], targets=names, level=req["level"], duration=float(req["seconds"]),
                 criteria=CriteriaFile.model_validate(req["criteria"]), force=bool(req["force"]), grace=float(req["grace"]),
                 interval=float(req["interval"]))  # fmt: skip
    p.selector = req["selector"]  # the command's ("due", or its TARGETs), not the names it resolved them to
    return p


class BurninActivities:
    """The burn-in activities of one worker (it keeps nothing between them: the store holds the run)."""

    @activity.defn(name="fleetctl.burnin.open")
    async def open(self, req: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self._open, req)

    def _open(self, req: dict[str, Any]) -> dict[str, Any]:
        from sqlalchemy import select, update

        from fleetctl.scaleout.activities import _own

        engine = _engine(req)
        names: list[str] = req["names"]
        wid = activity.info().workflow_id
        try:
            p = _plan(engine, req, names)
        except FleetError as e:  # what the command checked changed since, or this worker lacks a credential: nothing touched
            return {"refused": str(e), "error": "input"}
        # The locks' holder is the workflow, not this worker's process: the run goes on if this worker dies, and its
        # locks are then not stale; they are once Temporal says the workflow closed (terminated, say).
        owner = str(Holder.of_workflow(req["actor"], wid))
        release(engine, names, owner=owner)  # an earlier attempt of this activity, lost after it locked: this run's own locks
        got, refused = lock_recovering(engine, names, purpose=f"burnin --{p.kind}", reason="burn-in resumes", owner=owner)
        if refused:
            release(engine, got, owner=owner)
            return {"refused": str(_refusal(refused)), "error": "locked"}
        run_id, resumed, done_before, journal = open_run(engine, p, restart=bool(req["restart"]), actor=req["actor"],
                                                         args={"engine": "temporal", "workflow": wid})  # fmt: skip
        _own(engine, journal.job_id, owner)  # the job, too, belongs to the workflow (never marked interrupted for this process)
        with immediate(engine) as conn:
            # Likewise the run: another process of this host must not take it for one whose process is gone.
            conn.execute(update(T.burnin_run).where(T.burnin_run.c.id == run_id).values(host=f"temporal:{wid}", pid=journal.job_id))
            sites = dict(conn.execute(select(T.server.c.name, T.site.c.name).join(T.rack, T.rack.c.id == T.server.c.rack_id)
                                      .join(T.site, T.site.c.id == T.rack.c.site_id).where(T.server.c.name.in_(names))).all())  # fmt: skip
        stored: dict[str, dict[str, str]] = {}
        for b in stored_results(engine, run_id, done_before) if done_before else []:
            stored.setdefault(b.server, {})[b.device] = b.verdict
        return {"run": run_id, "resumed": resumed, "job": journal.job_id, "owner": owner, "locked": got, "stored": stored,
                "work": [{"server": s.name, "server_id": s.id, "site": sites[s.name]}
                         for s in p.servers if s.name not in done_before]}  # fmt: skip

    @activity.defn(name="fleetctl.burnin.server")
    async def server(self, req: dict[str, Any]) -> dict[str, Any]:
        """One server through the engine's ``burn_servers``; its outcome as a value."""
        async with heartbeating():
            engine = _engine(req)
            name, run_id = req["server"], int(req["run"])
            earlier = await asyncio.to_thread(recorded_already, engine, run_id, name, int(req["server_id"]))
            if earlier is not None:  # a lost attempt recorded it: never burned in, nor recorded, twice
                return earlier.as_dict()
            try:
                p = await asyncio.to_thread(_plan, engine, req, [name])
            except FleetError as e:  # this worker cannot reach it (a key, a credential): the server's error, not stored
                raise ApplicationError(f"{name}: {e}", type="Refused", non_retryable=True) from e
            [done] = await burn_servers(p, p.servers, engine=engine, run_id=run_id, actor=req["actor"], concurrency=1)
            return done.as_dict()

    @activity.defn(name="fleetctl.burnin.close")
    async def close(self, req: dict[str, Any]) -> None:
        await asyncio.to_thread(self._close, req)

    def _close(self, req: dict[str, Any]) -> None:
        engine = get_engine()
        run_id = int(req["run"])
        journal = Journal(engine, int(req["job"]), req["actor"], kind="burnin")
        steps = [StepResult(**d) for d in req["steps"]]
        for u in req["unstored"]:  # every attempt lost: the server's error result, stored as the engine stores a host's
            steps.append(record_error(engine, run_id, u["server"], int(u["server_id"]), u["message"], actor=req["actor"]).step())
        close_run(engine, run_id, journal, steps, list(req["verdicts"]), interrupted=bool(req["interrupted"]))
        release(engine, list(req["locked"]), owner=req["owner"])

    def site(self) -> list[Any]:
        return [self.server]

    def control(self) -> list[Any]:
        return [self.open, self.close]
