"""`fleetctl burnin` as workflows: a parent per command, a child ``burnin:<server>`` per server. Deterministic; no I/O.

The parent (``fleetctl.burnin``, on the control queue) opens the run as the
embedded engine does (the locks, the run new or resumed, its job), starts a
child per server not done yet on the queue of the server's site, and closes
the run (counts, the job's rows, the locks). The child runs one activity: the
embedded engine's own ``burn_server`` (stages, verdicts, record), on a worker
of the site.

Like :mod:`.workflows`, this module imports nothing of fleetctl but
:mod:`.queues` (the sandbox re-imports it); the activities are named by
their strings. What its history holds: server names, options, the criteria
(thresholds), the run and job ids and the boards' verdicts, reasons and
metrics; never a credential or a key, which the activities resolve on the
worker.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from fleetctl.scaleout.queues import CONTROL_QUEUE, settled, site_queue

STORE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5)
# A lost worker (missed heartbeat, killed) gives its server to another worker of the site, twice at most: the new
# attempt first reads the run's stored results (a server is never recorded twice), and the host's first stage stops
# the workload the lost attempt left running. What the host or the boards do is a value, never a retry.
SERVER_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=30), maximum_attempts=3,
                           non_retryable_error_types=["StoreMismatch"])  # fmt: skip
# Beyond the workload and its grace: SSH connects, pre-checks, resets, post-checks, the record (each bounded by
# the host's own command timeouts, a minute each).
SETUP_S = 900.0


def server_timeout(req: dict[str, Any]) -> timedelta:
    """The server activity's start-to-close: the workload's length, its grace before it counts as hung, and the stages around it."""
    return timedelta(seconds=float(req["seconds"]) + float(req["grace"]) + SETUP_S)


def _row(server: str, stage: str) -> dict[str, Any]:
    return {"server": server, "stage": stage, "verdict": None, "boards": {}, "error": None, "resumed": False}


@workflow.defn(name="fleetctl.burnin.server")
class BurninServer:
    """One server's burn-in: the embedded engine's ``burn_server`` as one activity on a worker of its site."""

    def __init__(self) -> None:
        self.stage = "waiting"

    @workflow.query(name="status")
    def status(self) -> str:
        return self.stage

    @workflow.run
    async def run(self, req: dict[str, Any]) -> dict[str, Any]:
        self.stage = "running"
        # Cancelled (the run cancelled), the child ends only when the activity has stopped (it learns of it at its next
        # heartbeat): the parent's close then never marks the run interrupted while a server's pass may still record.
        out: dict[str, Any] = await workflow.execute_activity(
            "fleetctl.burnin.server", req, start_to_close_timeout=server_timeout(req),
            heartbeat_timeout=timedelta(seconds=float(req.get("heartbeat_s") or 30.0)), retry_policy=SERVER_RETRY,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)  # fmt: skip
        self.stage = "done"
        return out


@workflow.defn(name="fleetctl.burnin")
class BurninRun:
    """One `fleetctl burnin`: open the run and lock, a child workflow per server on its site's queue, close."""

    def __init__(self) -> None:
        self.job: int | None = None
        self.run_id: int | None = None
        self.rows: dict[str, dict[str, Any]] = {}

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return {"job": self.job, "run": self.run_id, "servers": list(self.rows.values())}

    @workflow.run
    async def run(self, req: dict[str, Any]) -> dict[str, Any]:
        t0 = workflow.now()
        opened = await workflow.execute_activity("fleetctl.burnin.open", req, task_queue=CONTROL_QUEUE,
                                                 start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip
        if opened.get("refused"):  # a server another workflow holds: nothing was touched (exit 2, as in process)
            return {"refused": opened["refused"], "error": opened["error"]}
        self.job, self.run_id = opened["job"], opened["run"]
        for name, boards in opened["stored"].items():  # done by an earlier (interrupted) pass of the run: not run again
            self.rows[name] = {**_row(name, "done"), "resumed": True, "boards": boards, "verdict": _worst(list(boards.values()))}
        for w in opened["work"]:
            self.rows[w["server"]] = _row(w["server"], "waiting")
        gate = asyncio.Semaphore(max(1, int(req["concurrency"])))
        common = {k: req[k] for k in ("kind", "level", "seconds", "grace", "interval", "force", "criteria", "actor", "store",
                                      "heartbeat_s", "selector")} | {"run": opened["run"]}  # fmt: skip
        done: list[dict[str, Any]] = []
        interrupted = False
        try:
            await settled(*(self._server(gate, common, w, done) for w in opened["work"]))
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            await workflow.execute_activity(
                "fleetctl.burnin.close",
                {"run": opened["run"], "job": opened["job"], "owner": opened["owner"], "locked": opened["locked"], "actor": req["actor"],
                 "steps": [d["step"] for d in done if d["step"]], "unstored": [d["unstored"] for d in done if d.get("unstored")],
                 "verdicts": [v for b in opened["stored"].values() for v in b.values()] + [v for d in done for v in d["boards"].values()],
                 "interrupted": interrupted},
                task_queue=CONTROL_QUEUE, start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip
        # A summary: the boards' reasons and metrics are read from the store by the command (a fleet's would outgrow
        # what one payload may hold).
        return {"run": opened["run"], "resumed": opened["resumed"], "job": opened["job"], "engine": "temporal",
                "earlier": sorted(opened["stored"]),
                "workload_s": max((float(d["workload_s"]) for d in done), default=0.0),
                "elapsed_s": round((workflow.now() - t0).total_seconds(), 2),
                "rma": [s for d in done for s in d["rma"]], "to_maintenance": [d["server"] for d in done if d["moved"]],
                "notes": {d["server"]: d["notes"] for d in done}}  # fmt: skip

    async def _server(self, gate: asyncio.Semaphore, common: dict[str, Any], work: dict[str, Any], done: list[dict[str, Any]]) -> None:
        name = work["server"]
        async with gate:
            self.rows[name]["stage"] = "running"
            try:
                out = await workflow.execute_child_workflow(
                    "fleetctl.burnin.server", {**common, **work}, id=f"burnin:{name}", task_queue=site_queue(work["site"]),
                    parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                    cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED)  # fmt: skip
            except WorkflowAlreadyStartedError:
                out = _error(work, f"another run works it (workflow burnin:{name})")
            except (ChildWorkflowError, ActivityError) as e:  # attempts used up (workers lost again and again), or its time limit
                out = _error(work, f"the burn-in activity did not complete: {e.cause or e}")
        done.append(out)
        self.rows[name].update(stage="done", verdict=out["verdict"], error=out["error"], boards=out["boards"])


def _error(work: dict[str, Any], message: str) -> dict[str, Any]:
    """A server whose activity never completed: the ``error`` result the engine gives a host that fails, which the close
    activity stores (``unstored``: no attempt could), and its journal row."""
    return {"server": work["server"], "server_id": work["server_id"], "boards": {"": "error"}, "rma": [], "moved": False, "notes": [],
            "workload_s": 0.0, "elapsed_s": 0.0, "error": message, "earlier": False, "verdict": "error", "step": None,
            "unstored": {"server": work["server"], "server_id": work["server_id"], "message": message}}  # fmt: skip


_RANK = {"pass": 0, "degraded": 1, "fail": 2, "error": 3}  # verdict.RANK


def _worst(verdicts: list[str]) -> str:
    """``verdict.worst`` (that module is not the sandbox's to import): the status rows only; the report uses the engine's."""
    return max(verdicts, key=lambda v: _RANK.get(v, 3), default="pass")
