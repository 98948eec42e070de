"""The firmware campaign's activities: the embedded campaign's own pieces, called on a worker.

On the control queue (the store only): open the campaign's job and lock its
servers (:func:`~fleetctl.workflows.firmware_campaign.lock_servers`), read the
maintenance window, journal each wave as a ``firmware.update`` job with a row
per server, and close (:func:`~fleetctl.workflows.firmware_campaign.close_campaign`).

On a site's queue (its BMCs): read a server's plan (to fit the flashing
activity's time limit), and bring the server to its baseline with
:meth:`~fleetctl.workflows.firmware_campaign.Campaign.op`, through the BMC
driver's own sweep, exactly as ``fleetctl firmware update`` does in process.
The server's credentials are resolved here, from the inventory's references;
none travels in a workflow's input or result.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from fleetctl.errors import FleetError
from fleetctl.lifecycle.locks import Holder
from fleetctl.plugins import sweep_async
from fleetctl.scaleout.activities import heartbeating, shared_store
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.targets import bmc_targets, resolve
from fleetctl.workflows.firmware_campaign import (
    KIND,
    PREFIX,
    Campaign,
    CampaignOptions,
    WaveReport,
    baselines,
    close_campaign,
    done_in_job,
    lock_servers,
    plan,
    server_rows,
)
from fleetctl.workflows.firmware_policy import SystemClock, Threshold, Window
from fleetctl.workflows.journal import AsyncJournal, JobState, Journal, StepResult, summary


def _check_store(req: dict[str, Any]) -> None:
    shared_store(req)


def _options(opts: dict[str, Any]) -> Any:
    return CampaignOptions(**{**opts, "only": set(opts["only"]) if opts.get("only") else None})


class FirmwareActivities:
    """The firmware campaign's activities of one worker."""

    def __init__(self, fleets: Any) -> None:
        self.fleets = fleets  # fleetctl.plugins.FleetSessions, open while the worker runs

    # --- on the control queue: the store only ----------------------------------------------

    @activity.defn(name="fleetctl.firmware.open")
    async def open(self, req: dict[str, Any]) -> dict[str, Any]:
        """The campaign's job and its servers' locks, as in process; the servers' sites and the threshold's count."""
        return await asyncio.to_thread(self._open, req)

    def _open(self, req: dict[str, Any]) -> dict[str, Any]:
        from sqlalchemy import select

        from fleetctl.scaleout.activities import _own

        _check_store(req)
        engine = get_engine()
        who = req["actor"]
        args = {**req["args"], "engine": "temporal", "workflow": activity.info().workflow_id}
        journal = Journal.open(engine, kind=KIND, target=req["label"], args=args, actor=who, prefix=PREFIX)
        # The locks' holder and the job's owner is the run's parent workflow ("ACTOR:temporal:WORKFLOW"), not this
        # worker: it may die while the run goes on elsewhere. Both are taken for gone once Temporal says it closed.
        owner = str(Holder.of_workflow(who, activity.info().workflow_id))
        _own(engine, journal.job_id, owner)
        got, busy = lock_servers(engine, req["names"], owner=owner, who=who)
        sites: dict[str, str] = {}
        if got:
            q = (select(T.server.c.name, T.site.c.name.label("site")).join(T.rack, T.rack.c.id == T.server.c.rack_id)
                 .join(T.site, T.site.c.id == T.rack.c.site_id).where(T.server.c.name.in_(got)))  # fmt: skip
            with engine.connect() as c:
                sites = {r.name: r.site for r in c.execute(q)}
        return {"job": journal.job_id, "owner": owner, "locked": got, "busy": {n: str(why) for n, why in busy.items()},
                "sites": sites, "halt_at": Threshold.parse(req["threshold"]).limit(len(got))}  # fmt: skip

    @activity.defn(name="fleetctl.firmware.window")
    async def window(self, req: dict[str, Any]) -> dict[str, Any]:
        """Whether the maintenance window is open now, and in how many seconds it opens (the workflow's timer)."""
        w, now = Window.parse(req["window"]), SystemClock().now()
        return {"inside": w.contains(now), "opens_in": w.opens_in(now), "text": str(w)}

    @activity.defn(name="fleetctl.firmware.wave")
    async def wave(self, req: dict[str, Any]) -> None:
        """A wave's ``firmware.update`` job, a row per server, and the certificates pinned on first use (as ``workflows.bmc.run``)."""
        await asyncio.to_thread(self._wave, req)

    def _wave(self, req: dict[str, Any]) -> None:
        from sqlalchemy import select

        engine = get_engine()
        outs = req["outcomes"]
        names = [o["server"] for o in outs]
        with engine.connect() as c:
            ids = {r.name: r.id for r in c.execute(select(T.server.c.name, T.server.c.id).where(T.server.c.name.in_(names)))}
        args = {**req["args"], "wave": req["wave"], "job": req["job"]}
        journal = Journal.open(engine, kind="firmware.update", target=req["label"], args=args, actor=req["actor"])
        failed = sum(1 for o in outs if not o["ok"])
        journal.record([StepResult(ids[o["server"]], o["ok"], float(o.get("elapsed") or 0.0), output=o.get("summary"), error=o["error"])
                        for o in outs],
                       pins={o["server"]: o["fingerprint"] for o in outs if o.get("fingerprint")},
                       state=JobState.FAILED if failed else JobState.SUCCEEDED,
                       error=f"{failed} of {len(outs)} failed" if failed else None)  # fmt: skip

    @activity.defn(name="fleetctl.firmware.close")
    async def close(self, req: dict[str, Any]) -> dict[str, Any]:
        """Release the locks and finish the job as in process; the report (the busy servers' rows added)."""
        return await asyncio.to_thread(self._close, req)

    def _close(self, req: dict[str, Any]) -> dict[str, Any]:
        engine = get_engine()
        journal = Journal(engine, int(req["job"]), "", kind=KIND, prefix=PREFIX)
        report = WaveReport(req["rows"], int(req["failed"]), bool(req["halted"]), bool(req["stopped"]))
        if req["interrupted"]:  # cancelled: as the command in process on Ctrl-C
            from fleetctl.lifecycle.locks import release

            release(engine, req["locked"], owner=req["owner"])
            journal.finish(JobState.INTERRUPTED, "stopped")
            return {"rows": report.rows, "failed": report.failed, "halted": report.halted, "stopped": report.stopped_for_window}
        out = close_campaign(engine, journal, req["locked"], owner=req["owner"], report=report, busy=req["busy"])
        return {"rows": out.rows, "failed": out.failed, "halted": out.halted, "stopped": out.stopped_for_window}

    # --- on the site's queue: the BMCs ----------------------------------------------------------

    def _server(self, name: str) -> tuple[Any, Any, dict[str, dict[str, str]], dict[str, int]]:
        """The server's BMC target (its credential resolved here, on the worker), the engine, its baseline, its id."""
        engine = get_engine()
        with engine.connect() as c:
            [ref] = resolve(c, [name])
            want = baselines(c, [name])
        targets, unreachable = bmc_targets([ref])
        if not targets:
            raise FleetError(unreachable.get(name) or f"{name}: no BMC")
        return targets[0], engine, want, {name: ref.id}

    @activity.defn(name="fleetctl.firmware.plan")
    async def plan(self, req: dict[str, Any]) -> dict[str, int]:
        """How many components the server would flash now (read-only): fits the flashing activity's time limit."""
        async with heartbeating():
            try:
                target, _, want, _ = await asyncio.to_thread(self._server, req["server"])
                async with self.fleets.connect(target) as bmc:
                    flashes = plan(await bmc.firmware.inventory(), want.get(req["server"], {}), _options(req["options"]))
            except FleetError:  # the flashing activity meets the same error and reports it as in process
                return {"planned": 0}
            return {"planned": sum(1 for f in flashes if f.state == "planned")}

    @activity.defn(name="fleetctl.firmware.server")
    async def server(self, req: dict[str, Any]) -> dict[str, Any]:
        """One server to its baseline through the embedded ``Campaign.op``; its outcome and report rows as values.

        A later attempt (this worker's predecessor lost) reads what the journal noted and what the BMC says before
        it flashes: ``Campaign.op`` settles every flash left running first.
        """
        name, wave = req["server"], int(req["wave"])
        async with heartbeating():
            _check_store(req)
            try:
                target, engine, want, ids = await asyncio.to_thread(self._server, name)
            except FleetError as e:  # no BMC URL, a credential that does not resolve: failed, as in process
                nothing = Campaign(None, None, _options(req["options"]), {}, {}, actor="")
                return {"server": name, "ok": False, "error": str(e), "elapsed": 0.0, "summary": None, "fingerprint": None,
                        "rows": server_rows(nothing, wave, name, str(e))}  # fmt: skip
            job = int(req["job"])
            # A lost attempt's components done in this job: at the baseline now, so this attempt's plan omits them.
            earlier = await asyncio.to_thread(done_in_job, engine, job, ids[name]) if activity.info().attempt > 1 else []
            journal = AsyncJournal(Journal(engine, job, req["actor"], kind=KIND, prefix=PREFIX))
            campaign = Campaign(engine, journal, _options(req["options"]), want, ids, actor=req["actor"])
            try:
                # The driver's own sweep, as `workflows.bmc.run` in process: the same error texts, the same pinning.
                [r] = await sweep_async("bmc", [target], campaign.op, fleets=self.fleets)
            except FleetError as e:  # the server's BMC driver is not installed on this worker: no attempt would do better
                return {"server": name, "ok": False, "error": str(e), "elapsed": 0.0, "summary": None, "fingerprint": None,
                        "rows": server_rows(campaign, wave, name, str(e))}  # fmt: skip
            finally:
                await asyncio.to_thread(journal.close)
            if earlier and name in campaign.results:
                run = campaign.results[name]
                now = {f.id for f in run.flashes}
                run.flashes[:0] = [f for f in earlier if f.id not in now]
            return {"server": name, "ok": bool(r.ok), "error": r.error, "elapsed": round(float(r.elapsed), 3),
                    "summary": summary(r.value) if r.ok else None, "fingerprint": r.fingerprint,
                    "rows": server_rows(campaign, wave, name, r.error)}  # fmt: skip

    def control(self) -> list[Any]:
        return [self.open, self.window, self.wave, self.close]

    def site(self) -> list[Any]:
        return [self.plan, self.server]
