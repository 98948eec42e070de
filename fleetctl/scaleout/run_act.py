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
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from fleetctl.burnin.workflow import BURNIN
from fleetctl.errors import FleetError
from fleetctl.holders import Holder
from fleetctl.scaleout.activities import heartbeating, shared_store
from fleetctl.scaleout.run_wf import (
    CheckCall,
    CloseCall,
    GateCall,
    GateDone,
    OpenDone,
    RunCall,
    UnitCall,
    UnitOutcome,
    UnitWork,
    WaveCall,
)
from fleetctl.sweep.workflow import SWEEP
from fleetctl.workflows.describe import Context, Description, Outcome, described, plain, typed
from fleetctl.workflows.firmware_described import FIRMWARE
from fleetctl.workflows.provision.described import PROVISION

# The built-in descriptions (each registered as its module is imported): a worker runs those it knows. A fifth workflow
# is its module, imported here.
BUILTIN = (BURNIN, SWEEP, PROVISION, FIRMWARE)


def _context(actor: str = "fleetctl", **kw: Any) -> Context:
    info = activity.info()
    wid = info.workflow_id or ""
    return Context("temporal", str(Holder.of_workflow(actor, wid)), workflow_id=wid, attempt=info.attempt, **kw)


def _owner_actor(run: dict[str, Any]) -> str:
    """Who started the run (the run's ``actor`` when the description keeps one): the locks' holder names them."""
    return str(run.get("actor") or "fleetctl")


def _outcome(desc: Description[Any, Any, Any, Any, Any], o: UnitOutcome) -> Outcome[Any]:
    return Outcome(o.key, typed(desc.out_type, o.out) if o.out is not None else None, o.lost, o.skipped)


log = logging.getLogger(__name__)

# A run-scoped session (``session_scope = "run"``) is closed after this long without a unit of its run on this worker.
SESSION_IDLE_S = 900.0
# How long a unit's new attempt waits for the earlier attempt it supersedes on this worker to stop (``RunActivities.unit``).
SUPERSEDE_WAIT_S = 60.0


@dataclass
class _Kept:
    """A run-scoped session a worker keeps: what its units share, and when a unit of it last ran."""

    stack: contextlib.AsyncExitStack
    shared: Any
    used: float = field(default_factory=time.monotonic)
    busy: int = 0


class RunActivities:
    """The generic activities of one worker. It keeps nothing between them but the run-scoped sessions of the
    descriptions that ask for one (coordinators of a site's units); the store holds the run."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str, str], _Kept] = {}
        self.making: dict[tuple[str, str, str], asyncio.Lock] = {}
        self.attempts: dict[tuple[str, str], asyncio.Task[Any]] = {}  # (workflow id, activity id) -> its latest attempt here

    @activity.defn(name="fleetctl.run.sites")
    async def sites(self, call: RunCall) -> list[str]:
        """The sites whose workers check the request (a ``checked`` description's ``sites``)."""

        def go() -> list[str]:
            shared_store({"store": call.store})
            desc = described(call.workflow)
            return list(desc.sites(_context(_owner_actor(call.request)), typed(desc.request_type, call.request)))

        return await asyncio.to_thread(go)

    @activity.defn(name="fleetctl.run.check")
    async def check(self, call: CheckCall) -> list[Any]:
        """One site's check of the request, on that site's worker (its credentials resolve here); the problems found."""

        def go() -> list[Any]:
            shared_store({"store": call.call.store})
            desc = described(call.call.workflow)
            request = typed(desc.request_type, call.call.request)
            return list(desc.check(_context(_owner_actor(call.call.request)), request, call.site))

        return await asyncio.to_thread(go)

    @activity.defn(name="fleetctl.run.gate")
    async def gate(self, call: GateCall) -> GateDone:
        """A gated description's gate before a wave (the store and the clock only)."""

        def go() -> GateDone:
            shared_store({"store": call.store})
            desc = described(call.workflow)
            tally = typed(desc.tally_type, call.tally) if call.tally is not None else None
            g = desc.gate(_context(_owner_actor(call.run)), typed(desc.run_type, call.run), call.wave, tally, waited=call.waited)
            return GateDone(g.go, float(g.wait_s), g.waiting, g.reason, plain(g.tally, desc.tally_type) if g.tally is not None else None)

        return await asyncio.to_thread(go)

    @activity.defn(name="fleetctl.run.wave")
    async def wave(self, call: WaveCall) -> Any:
        """A wave's end told to its description (what it records per wave); the new tally."""

        def go() -> Any:
            shared_store({"store": call.store})
            desc = described(call.workflow)
            tally = typed(desc.tally_type, call.tally) if call.tally is not None else None
            outcomes = [_outcome(desc, o) for o in call.outcomes]
            new = desc.wave_done(_context(_owner_actor(call.run)), typed(desc.run_type, call.run), call.wave, outcomes, tally)
            return plain(new, desc.tally_type) if new is not None else None

        return await asyncio.to_thread(go)

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
        units = [UnitWork(u.key, u.site, plain(u.data, desc.unit_type), u.timeout_s, u.workflow_id, u.wave) for u in opened.units]
        return OpenDone(run=plain(opened.run, desc.run_type), units=units, kept=plain(opened.kept, desc.kept_type),
                        concurrency=opened.concurrency, job=opened.job, attempts=opened.attempts, gated=desc.gated)  # fmt: skip

    @activity.defn(name="fleetctl.run.unit")
    async def unit(self, call: UnitCall) -> UnitOutcome:
        """One unit: the description's ``unit`` in its ``session`` (of one), heartbeating; an earlier attempt of it still
        running on this worker stopped first (:meth:`_supersede`)."""
        info = activity.info()
        key = (info.workflow_id or "", info.activity_id)
        me = asyncio.current_task()
        assert me is not None
        try:
            async with heartbeating():  # while it waits for the earlier attempt too
                await self._supersede(key, me, info.attempt)
                return await self._unit(call)
        finally:
            if self.attempts.get(key) is me:
                del self.attempts[key]

    async def _supersede(self, key: tuple[str, str], me: asyncio.Task[Any], attempt: int) -> None:
        """Stop the earlier attempt of this unit if it still runs here, before this one reads what it recorded.

        Temporal starts a unit's next attempt only once it has given the earlier one up (its heartbeat lapsed: the
        Temporal server was away, or this worker stalled); but that attempt runs on in this worker until its next
        heartbeat is refused, and meanwhile both would work one server (a step resumed while the first still runs
        it: a second playbook on the host, a power action both sides check at once). It is cancelled, as a
        cancelled run's unit is (its step stops where it is, its row left running for this attempt to resume), and
        waited for, at most ``SUPERSEDE_WAIT_S``.
        """
        old = self.attempts.get(key)
        self.attempts[key] = me
        if old is None or old.done():
            return
        log.warning("unit %s of %s, attempt %d: the earlier attempt still runs on this worker (Temporal gave it up: its "
                    "heartbeat lapsed); stopping it first", key[1], key[0], attempt)  # fmt: skip
        old.cancel()
        done, _ = await asyncio.wait({old}, timeout=SUPERSEDE_WAIT_S)
        if not done:
            log.warning("unit %s of %s, attempt %d: the earlier attempt did not stop within %g s; this one goes on",
                        key[1], key[0], attempt, SUPERSEDE_WAIT_S)  # fmt: skip

    async def _unit(self, call: UnitCall) -> UnitOutcome:
        shared_store({"store": call.store})
        desc = described(call.workflow)
        run = typed(desc.run_type, call.run)
        data = typed(desc.unit_type, call.unit.data)
        ctx = _context(_owner_actor(call.run))
        if desc.session_scope == "run":
            out = await self._in_run_session(desc, ctx, run, data, call.unit.site)
        else:
            async with desc.session(ctx, run, [data]) as shared:
                ctx.shared = shared
                out = await desc.unit(ctx, run, data)
        return UnitOutcome(call.unit.key, plain(out, desc.out_type))

    async def _in_run_session(self, desc: Description[Any, Any, Any, Any, Any], ctx: Context, run: Any, data: Any, site: str) -> Any:
        """The unit in this worker's session of its run and site, made at the run's first unit here."""
        await self._close_idle()
        key = (desc.name, ctx.workflow_id, site)
        async with self.making.setdefault(key, asyncio.Lock()):
            kept = self.sessions.get(key)
            if kept is None:
                stack = contextlib.AsyncExitStack()
                shared = await stack.enter_async_context(desc.session(ctx, run, [data]))
                kept = self.sessions[key] = _Kept(stack, shared)
            kept.busy += 1
        ctx.shared = kept.shared
        try:
            return await desc.unit(ctx, run, data)
        finally:
            kept.busy -= 1
            kept.used = time.monotonic()

    async def _close_idle(self, *, every: bool = False) -> None:
        """Close the run-scoped sessions no unit used for ``SESSION_IDLE_S`` (``every``: all, the worker stopping)."""
        now = time.monotonic()
        for key, kept in list(self.sessions.items()):
            if every or (kept.busy == 0 and now - kept.used > SESSION_IDLE_S):
                del self.sessions[key]
                self.making.pop(key, None)
                with contextlib.suppress(Exception):  # a session's own clean-up failing must not fail another run's unit
                    await kept.stack.aclose()

    async def aclose(self) -> None:
        """The worker stops: every run-scoped session closed."""
        await self._close_idle(every=True)

    @activity.defn(name="fleetctl.run.close")
    async def close(self, call: CloseCall) -> Any:
        return await asyncio.to_thread(self._close, call)

    def _close(self, call: CloseCall) -> Any:
        shared_store({"store": call.store})
        desc = described(call.workflow)
        run = typed(desc.run_type, call.run)
        outcomes = [_outcome(desc, o) for o in call.outcomes]
        kept = typed(desc.kept_type, call.kept)
        result = desc.close(_context(_owner_actor(call.run)), run, kept, outcomes, interrupted=call.interrupted)
        return plain(result, desc.result_type)

    def site(self) -> list[Any]:
        return [self.unit, self.check]

    def control(self) -> list[Any]:
        return [self.open, self.close, self.sites, self.gate, self.wave]
