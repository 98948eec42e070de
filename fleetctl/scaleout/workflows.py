"""The workflows: a parent per command, a child per server. Deterministic; no I/O.

They only sequence: every read and write of the store, every device reached,
is an activity (:mod:`.activities`), named here by its string so this module
imports nothing of fleetctl but :mod:`.queues` (the sandbox re-imports it).

What travels in a workflow's history is names, options, step names, typed
outcomes (a failure's step, kind and reason) and the journal's job id: never
a credential, which the activities resolve on the worker from the inventory's
references.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    from fleetctl.scaleout.queues import CONTROL_QUEUE, STEP_ATTEMPTS, STEP_TIMEOUT_S, settled, site_queue

STORE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5)
STEP_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=STEP_ATTEMPTS,
                         non_retryable_error_types=["StoreMismatch"])  # fmt: skip


def _row(server: str, state: str) -> dict[str, Any]:
    """A server's row as the embedded engine's ``Progress.row()`` has it."""
    return {"server": server, "result": "running", "state": state, "step": "", "elapsed": 0.0, "error": None, "done": [],
            "resumed": [], "timings": {}, "waited": 0.0, "own_s": 0.0, "status": "waiting"}  # fmt: skip


@workflow.defn(name="fleetctl.provision.server")
class ProvisionServer:
    """One server through the provisioning steps: the embedded engine's ``Provisioner._server``, as a workflow."""

    def __init__(self) -> None:
        self.row: dict[str, Any] = {}

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return self.row

    @workflow.run
    async def run(self, req: dict[str, Any]) -> dict[str, Any]:
        t0 = workflow.now()
        self.row = _row(req["server"], req["state"])
        heartbeat = timedelta(seconds=float(req.get("heartbeat_s") or 30.0))
        # Every activity of a server is waited for when cancelled (not only a step's): a `begin` or `finish` left to
        # run on would write its journal row after the parent closed the job and released the locks.
        wait = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        begun = await workflow.execute_activity("fleetctl.provision.begin", req, start_to_close_timeout=timedelta(minutes=10),
                                                heartbeat_timeout=heartbeat, retry_policy=STEP_RETRY, cancellation_type=wait)  # fmt: skip
        self.row.update(resumed=begun["resumed"], state=begun["state"], status="running")
        failure: dict[str, Any] | None = None
        for step in begun["todo"]:
            if workflow.cancellation_reason() is not None:  # cancelled while the last step ran to its end: no next step
                raise asyncio.CancelledError
            self.row.update(step=step, status="running")
            try:
                # Cancelled (`fleetctl jobs cancel`), the run waits for the step to stop on its worker before the parent
                # closes the job and releases the locks: never a step still acting on a server another run may lock.
                out = await workflow.execute_activity(
                    "fleetctl.provision.step", {**req, "step": step}, start_to_close_timeout=timedelta(seconds=STEP_TIMEOUT_S[step]),
                    heartbeat_timeout=heartbeat, retry_policy=STEP_RETRY, cancellation_type=wait)  # fmt: skip
            except ActivityError as e:  # attempts used up (workers lost again and again), or the step's own time limit
                if workflow.cancellation_reason() is not None:  # or cancelled: the step stopped, its row left running to resume
                    raise asyncio.CancelledError from e
                failure = {"step": step, "kind": "timeout", "reason": f"the activity did not complete: {e.cause or e}"}
                break
            self.row["state"] = out["state"]
            self.row["waited"] = round(self.row["waited"] + out["waited"], 2)
            if out["failure"]:
                failure = out["failure"]
                break
            self.row["done"].append(step)
            self.row["timings"][step] = out["seconds"]
        end = await workflow.execute_activity("fleetctl.provision.finish", {**req, "failure": failure},
                                              start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY,
                                              cancellation_type=wait)  # fmt: skip
        self.row.update(result=end["result"], state=end["state"], error=end["error"], status=end["result"],
                        step=failure["step"] if failure else "ready",
                        elapsed=round((workflow.now() - t0).total_seconds(), 1),
                        own_s=round(sum(self.row["timings"].values()) - self.row["waited"], 2))  # fmt: skip
        return self.row


@workflow.defn(name="fleetctl.provision")
class ProvisionRun:
    """One `fleetctl provision`: open the job and lock, a child workflow per server on its site's queue, close."""

    def __init__(self) -> None:
        self.job: int | None = None
        self.rows: dict[str, dict[str, Any]] = {}

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return {"job": self.job, "servers": list(self.rows.values())}

    @workflow.run
    async def run(self, req: dict[str, Any]) -> dict[str, Any]:
        t0 = workflow.now()
        # The preflight on a worker of each site involved (the credentials are resolved there: docs/security.md),
        # before the job is opened or anything locked: a problem on any site refuses the whole run, as in process.
        sites: dict[str, list[str]] = req.get("sites") or {}
        reports = await asyncio.gather(*(workflow.execute_activity(
            "fleetctl.provision.preflight", {**req, "servers": names}, task_queue=site_queue(site),
            start_to_close_timeout=timedelta(minutes=10), retry_policy=STEP_RETRY) for site, names in sorted(sites.items())))  # fmt: skip
        if any(reports):  # the type the command maps back to its PreflightError (fleetctl.scaleout.preflight_act.REFUSED)
            raise ApplicationError("provision refused by the preflight", list(reports), type="PreflightRefused", non_retryable=True)
        opened = await workflow.execute_activity("fleetctl.provision.open", req, task_queue=CONTROL_QUEUE,
                                                 start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip
        self.job = opened["job"]
        self.rows = {r["server"]: r for r in opened["rows"]}
        common = {k: req[k] for k in ("options", "label", "actor", "heartbeat_s")} | {"job": opened["job"], "owner": opened["owner"]}
        interrupted = False
        try:
            await settled(*(self._server(common, w, opened["sites"][w["site"]]) for w in opened["work"]))
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            # Interrupted, a server stopped in the middle is not a failure (as in process): the next run resumes it.
            not_ready = ("failed", "locked", "refused") if interrupted else ("failed", "locked", "refused", "running")
            failed = sum(1 for r in self.rows.values() if r["result"] in not_ready)
            await workflow.execute_activity(
                "fleetctl.provision.close",
                {"job": opened["job"], "owner": opened["owner"], "locked": [w["server"] for w in opened["work"]], "failed": failed,
                 "total": len(self.rows), "interrupted": interrupted},
                task_queue=CONTROL_QUEUE, start_to_close_timeout=timedelta(minutes=10), retry_policy=STORE_RETRY)  # fmt: skip
        return {"job": self.job, "servers": [self.rows[n] for n in req["names"] if n in self.rows],
                "makespan_s": round((workflow.now() - t0).total_seconds(), 2), "engine": "temporal"}

    async def _server(self, common: dict[str, Any], work: dict[str, Any], site_servers: list[str]) -> None:
        name = work["server"]
        self.rows[name] = {**_row(name, work["state"]), "status": "starting"}
        req = {**common, **work, "site_servers": site_servers}
        try:
            row = await workflow.execute_child_workflow(
                "fleetctl.provision.server", req, id=f"provision:{name}", task_queue=site_queue(work["site"]),
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL)  # fmt: skip
        except WorkflowAlreadyStartedError:
            row = {**self.rows[name], "result": "locked", "error": f"another run works it (workflow provision:{name})"}
        except ChildWorkflowError as e:
            if workflow.cancellation_reason() is not None and is_cancelled_exception(e):  # cancelled with the run
                self.rows[name] = {**self.rows[name], "status": "cancelled"}
                raise asyncio.CancelledError from e  # not the child's error: the run's gather then ends as cancelled
            row = {**self.rows[name], "result": "failed", "error": f"internal error: {e.cause or e}"}
        self.rows[name] = row
