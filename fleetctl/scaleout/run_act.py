"""The activities of any described workflow (``fleetctl.run.open``, ``.unit``, ``.close``), run by the workers.

Each finds the description by the name the workflow carries
(:func:`fleetctl.workflows.describe.described`), turns the JSON values back
into the description's dataclasses, and calls its ``open``, ``unit`` or
``close``: the very functions the in-process engine calls. The locks and the
job belong to the workflow (``Holder.of_workflow``), not to the worker that
opened them: the run goes on when that worker dies.

A unit heartbeats while it runs; a worker lost mid-unit gives the unit to
another worker of its site, whose attempt first reads what the lost one
recorded (the description's ``unit`` is written so).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from fleetctl.burnin.workflow import BURNIN
from fleetctl.errors import FleetError
from fleetctl.holders import Holder
from fleetctl.scaleout.activities import heartbeating, shared_store
from fleetctl.scaleout.run_wf import CloseCall, OpenDone, RunCall, UnitCall, UnitOutcome, UnitWork
from fleetctl.sweep.workflow import SWEEP
from fleetctl.workflows.describe import Context, Outcome, described, plain, typed

# The built-in descriptions (each registered as its module is imported): a worker runs those it knows. A fifth workflow
# is its module, imported here.
BUILTIN = (BURNIN, SWEEP)


def _context(actor: str = "fleetctl", **kw: Any) -> Context:
    info = activity.info()
    wid = info.workflow_id or ""
    return Context("temporal", str(Holder.of_workflow(actor, wid)), workflow_id=wid, attempt=info.attempt, **kw)


def _owner_actor(run: dict[str, Any]) -> str:
    """Who started the run (the run's ``actor`` when the description keeps one): the locks' holder names them."""
    return str(run.get("actor") or "fleetctl")


class RunActivities:
    """The generic activities of one worker (it keeps nothing between them: the store holds the run)."""

    @activity.defn(name="fleetctl.run.open")
    async def open(self, call: RunCall) -> OpenDone:
        return await asyncio.to_thread(self._open, call)

    def _open(self, call: RunCall) -> OpenDone:
        shared_store({"store": call.store})
        desc = described(call.workflow)
        request = typed(desc.request_type, call.request)
        try:
            opened = desc.open(_context(_owner_actor(call.request)), request)
        except FleetError as e:  # a refusal: nothing was touched; its kind travels as a value (the command raises it again)
            return OpenDone(refused=str(e), error=type(e).__name__)
        units = [UnitWork(u.key, u.site, plain(u.data, desc.unit_type), u.timeout_s, u.workflow_id) for u in opened.units]
        return OpenDone(run=plain(opened.run, desc.run_type), units=units, kept=plain(opened.kept, desc.kept_type),
                        concurrency=opened.concurrency, job=opened.job, attempts=opened.attempts)  # fmt: skip

    @activity.defn(name="fleetctl.run.unit")
    async def unit(self, call: UnitCall) -> UnitOutcome:
        """One unit: the description's ``unit`` in its ``session`` (of one), heartbeating."""
        async with heartbeating():
            shared_store({"store": call.store})
            desc = described(call.workflow)
            run = typed(desc.run_type, call.run)
            data = typed(desc.unit_type, call.unit.data)
            ctx = _context(_owner_actor(call.run))
            async with desc.session(ctx, run, [data]) as shared:
                ctx.shared = shared
                out = await desc.unit(ctx, run, data)
            return UnitOutcome(call.unit.key, plain(out, desc.out_type))

    @activity.defn(name="fleetctl.run.close")
    async def close(self, call: CloseCall) -> Any:
        return await asyncio.to_thread(self._close, call)

    def _close(self, call: CloseCall) -> Any:
        shared_store({"store": call.store})
        desc = described(call.workflow)
        run = typed(desc.run_type, call.run)
        outcomes = [Outcome(o.key, typed(desc.out_type, o.out) if o.out is not None else None, o.lost) for o in call.outcomes]
        kept = typed(desc.kept_type, call.kept)
        result = desc.close(_context(_owner_actor(call.run)), run, kept, outcomes, interrupted=call.interrupted)
        return plain(result, desc.result_type)

    def site(self) -> list[Any]:
        return [self.unit]

    def control(self) -> list[Any]:
        return [self.open, self.close]
