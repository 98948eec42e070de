"""Any described workflow on Temporal: one parent workflow ``fleetctl.run``, one child ``fleetctl.run.unit``. Deterministic; no I/O.

The parent runs a :class:`~fleetctl.workflows.describe.Description` found by
its name on the workers: the activity ``fleetctl.run.open`` on the control
queue (the refusals, the job, the locks, the plan made once), then each unit
on its site's queue (the activity ``fleetctl.run.unit``, or a child workflow
of the unit's own id that runs it, when the description gives one: no two
runs work a target at once), at most ``concurrency`` at once, and
``fleetctl.run.close`` on the control queue, also when the run is cancelled.

A ``checked`` description's checks come first: ``fleetctl.run.sites`` (control
queue), then ``fleetctl.run.check`` on each site's queue; any problem ends the
run refused before open. A ``gated`` description's units run wave by wave:
``fleetctl.run.gate`` before each (a wait it asks for is a durable timer, so a
maintenance window's wait outlives the workers), ``fleetctl.run.wave`` after;
what the gates carry from wave to wave is the description's small tally, never
the outcomes so far.

It knows no workflow: the description's dataclasses travel as their JSON
values (:func:`~fleetctl.workflows.describe.plain`), turned back into their
types by the activities (``fleetctl.scaleout.run_act``). So this module
imports nothing of fleetctl but :mod:`.queues` (the sandbox re-imports it).
What its history holds is what the descriptions put in their dataclasses:
names, ids, options, thresholds, outcomes; never a credential, which a unit
resolves on its worker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from fleetctl.scaleout.queues import CONTROL_QUEUE, settled, site_queue

STORE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5)
# The worker's store is not the command's: a refusal no other attempt changes.
NOT_RETRIED = ["StoreMismatch"]


@dataclass
class RunCall:
    """The parent's input: which description, its request (as JSON values), the store, the heartbeat of long units."""

    workflow: str
    request: dict[str, Any]
    store: str  # the store's URL without its password (a worker on another store refuses)
    heartbeat_s: float = 30.0
    checked: bool = False  # the description's ``checked``: its sites' checks run before open


@dataclass
class CheckCall:
    """One site's check of the request, on that site's queue (where its credentials resolve)."""

    call: RunCall
    site: str


@dataclass
class UnitWork:
    """A unit as open made it (``describe.Unit``, its data as JSON values)."""

    key: str
    site: str
    data: dict[str, Any]
    timeout_s: float = 3600.0
    workflow_id: str = ""
    wave: int = 0


@dataclass
class OpenDone:
    """Open's answer: a refusal (its error class's name and message: nothing was touched), or the run and its units."""

    refused: str = ""
    error: str = ""
    run: dict[str, Any] = field(default_factory=dict)
    units: list[UnitWork] = field(default_factory=list)
    kept: Any = None  # for close alone: not in each unit's input
    concurrency: int = 250
    job: int | None = None
    attempts: int = 3
    gated: bool = False  # the description's ``gated``: a gate before each wave, wave_done after


@dataclass
class UnitCall:
    workflow: str
    store: str
    run: dict[str, Any]
    unit: UnitWork
    heartbeat_s: float = 30.0


@dataclass
class UnitOutcome:
    """A unit's end: its output (JSON values), or why it never completed."""

    key: str
    out: dict[str, Any] | None = None
    lost: str | None = None
    skipped: str | None = None


@dataclass
class GateCall:
    """Ask a gated description about wave ``wave`` (the tally as JSON values; None before the first wave's end)."""

    workflow: str
    store: str
    run: dict[str, Any]
    wave: int
    tally: Any = None
    waited: bool = False


@dataclass
class GateDone:
    """The gate's answer (``describe.Gate``, its tally as JSON values)."""

    go: bool = True
    wait_s: float = 0.0
    waiting: str = ""
    reason: str = ""
    tally: Any = None


@dataclass
class WaveCall:
    """A wave's end, for the description's ``wave_done``: that wave's outcomes and the tally before it."""

    workflow: str
    store: str
    run: dict[str, Any]
    wave: int
    outcomes: list[UnitOutcome]
    tally: Any = None


@dataclass
class CloseCall:
    workflow: str
    store: str
    run: dict[str, Any]
    outcomes: list[UnitOutcome]
    interrupted: bool = False
    kept: Any = None


def unit_retry(attempts: int) -> RetryPolicy:
    """A lost worker (missed heartbeat, killed) gives its unit to another worker of the site, ``attempts`` in all."""
    return RetryPolicy(initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=30), maximum_attempts=max(1, attempts),
                       non_retryable_error_types=NOT_RETRIED)  # fmt: skip


@workflow.defn(name="fleetctl.run.unit")
class RunUnit:
    """One unit as a workflow of its own id (``burnin:<server>``): the unit's activity on a worker of its site."""

    def __init__(self) -> None:
        self.stage = "waiting"

    @workflow.query(name="status")
    def status(self) -> str:
        return self.stage

    @workflow.run
    async def run(self, call: UnitCall, attempts: int) -> UnitOutcome:
        self.stage = "running"
        # Cancelled with the run, the child ends only once the activity has stopped (it learns of it at its next
        # heartbeat): the parent's close then never ends the run while a unit may still record.
        out: UnitOutcome = await workflow.execute_activity(
            "fleetctl.run.unit", call, result_type=UnitOutcome, start_to_close_timeout=timedelta(seconds=call.unit.timeout_s),
            heartbeat_timeout=timedelta(seconds=call.heartbeat_s), retry_policy=unit_retry(attempts),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)  # fmt: skip
        self.stage = "done"
        return out


@workflow.defn(name="fleetctl.run")
class RunWorkflow:
    """One command's run of a described workflow: open, the units on their sites' queues, close."""

    def __init__(self) -> None:
        self.workflow = ""
        self.job: int | None = None
        self.rows: dict[str, dict[str, Any]] = {}
        self.wave: int | None = None
        self.waiting: str | None = None  # what a gate waits for (the command says it on stderr)

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        """The job, the wave and what it waits for, and a row per unit: ``stage`` (waiting, running, done, skipped), its
        output or why it was lost or skipped."""
        return {"workflow": self.workflow, "job": self.job, "wave": self.wave, "waiting": self.waiting, "units": list(self.rows.values())}

    @workflow.run
    async def run(self, call: RunCall) -> dict[str, Any]:
        self.workflow = call.workflow
        if call.checked:
            problems = await self._check(call)
            if problems:  # nothing was touched: the command raises the description's refusal of them
                return {"refused": "checks", "error": "", "problems": problems}
        opened: OpenDone = await workflow.execute_activity(
            "fleetctl.run.open", call, result_type=OpenDone, task_queue=CONTROL_QUEUE, start_to_close_timeout=timedelta(minutes=10),
            retry_policy=STORE_RETRY)  # fmt: skip
        if opened.refused:  # nothing was touched: the command says it (exit 2, as in process)
            return {"refused": opened.refused, "error": opened.error}
        self.job = opened.job
        for u in opened.units:
            self.rows[u.key] = {"key": u.key, "stage": "waiting", "out": None, "lost": None}
        bound = asyncio.Semaphore(max(1, opened.concurrency))
        done: list[UnitOutcome] = []
        interrupted = False
        try:
            if not opened.gated and all(u.wave == 0 for u in opened.units):
                await settled(*(self._unit(bound, call, opened, u, done) for u in opened.units))
            else:
                await self._waves(bound, call, opened, done)
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            order = {u.key: i for i, u in enumerate(opened.units)}
            done.sort(key=lambda o: order.get(o.key, len(order)))
            closing = CloseCall(call.workflow, call.store, opened.run, done, interrupted, opened.kept)
            result = await workflow.execute_activity("fleetctl.run.close", closing, task_queue=CONTROL_QUEUE,
                                                     start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip
        return {"result": result, "job": opened.job}

    async def _check(self, call: RunCall) -> list[Any]:
        """The description's sites (control queue), then each site's check on its own queue; every problem found."""
        sites: list[str] = await workflow.execute_activity(
            "fleetctl.run.sites", call, result_type=list[str], task_queue=CONTROL_QUEUE, start_to_close_timeout=timedelta(minutes=10),
            retry_policy=STORE_RETRY)  # fmt: skip
        found = await asyncio.gather(*(workflow.execute_activity(
            "fleetctl.run.check", CheckCall(call, site), result_type=list[Any], task_queue=site_queue(site),
            start_to_close_timeout=timedelta(minutes=10), retry_policy=unit_retry(3)) for site in sites))  # fmt: skip
        return [p for ps in found for p in ps]

    async def _waves(self, bound: asyncio.Semaphore, call: RunCall, opened: OpenDone, done: list[UnitOutcome]) -> None:
        """Its waves in order (as in process, every unit of a wave ended before the next starts); a gated run's each asked of
        the gate (a durable timer for a wait) and told to wave_done."""
        by: dict[int, list[UnitWork]] = {}
        for u in opened.units:
            by.setdefault(u.wave, []).append(u)
        tally: Any = None
        for wave in sorted(by):
            self.wave = wave
            if not opened.gated:
                await settled(*(self._unit(bound, call, opened, u, done) for u in by[wave]))
                continue
            g = await self._gate(call, opened, wave, tally, waited=False)
            if g.wait_s > 0:
                self.waiting = g.waiting or None
                await workflow.sleep(timedelta(seconds=g.wait_s))  # durable: the wait outlives every worker
                self.waiting = None
                g = await self._gate(call, opened, wave, g.tally if g.tally is not None else tally, waited=True)
            tally = g.tally if g.tally is not None else tally
            if not g.go:
                for u in by[wave]:
                    done.append(UnitOutcome(u.key, skipped=g.reason or "not attempted"))
                    self.rows[u.key].update(stage="skipped", lost=g.reason)
                continue
            before = len(done)
            await settled(*(self._unit(bound, call, opened, u, done) for u in by[wave]))
            tally = await workflow.execute_activity(
                "fleetctl.run.wave", WaveCall(call.workflow, call.store, opened.run, wave, done[before:], tally), task_queue=CONTROL_QUEUE,
                start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip

    async def _gate(self, call: RunCall, opened: OpenDone, wave: int, tally: Any, *, waited: bool) -> GateDone:
        asked = GateCall(call.workflow, call.store, opened.run, wave, tally, waited)
        out: GateDone = await workflow.execute_activity("fleetctl.run.gate", asked, result_type=GateDone, task_queue=CONTROL_QUEUE,
                                                        start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip
        return out

    async def _unit(self, gate: asyncio.Semaphore, call: RunCall, opened: OpenDone, u: UnitWork, done: list[UnitOutcome]) -> None:
        unit_call = UnitCall(call.workflow, call.store, opened.run, u, call.heartbeat_s)
        async with gate:
            self.rows[u.key]["stage"] = "running"
            try:
                if u.workflow_id:
                    out: UnitOutcome = await workflow.execute_child_workflow(
                        "fleetctl.run.unit", args=[unit_call, opened.attempts], result_type=UnitOutcome, id=u.workflow_id,
                        task_queue=site_queue(u.site), parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                        cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED)  # fmt: skip
                else:
                    out = await workflow.execute_activity(
                        "fleetctl.run.unit", unit_call, result_type=UnitOutcome, task_queue=site_queue(u.site),
                        start_to_close_timeout=timedelta(seconds=u.timeout_s), heartbeat_timeout=timedelta(seconds=call.heartbeat_s),
                        retry_policy=unit_retry(opened.attempts),
                        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)  # fmt: skip
            except WorkflowAlreadyStartedError:
                out = UnitOutcome(u.key, lost=f"another run works it (workflow {u.workflow_id})")
            except (ChildWorkflowError, ActivityError) as e:
                if workflow.cancellation_reason() is not None and is_cancelled_exception(e):  # cancelled with the run
                    raise asyncio.CancelledError from e
                # Its attempts used up (workers lost again and again), or its time limit: the unit's outcome, for close.
                out = UnitOutcome(u.key, lost=f"the unit did not complete: {e.cause or e}")
        done.append(out)
        self.rows[u.key].update(stage="done", out=out.out, lost=out.lost)
