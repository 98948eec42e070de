"""The firmware campaign's workflows: a parent per `fleetctl firmware update`, a child per server. Deterministic; no I/O.

The parent (``fleetctl.firmware``, on the control queue) opens the campaign's
job and locks its servers through a control activity (the embedded engine's
own functions), then sequences the waves exactly as the embedded
``run_waves`` does: the canary, then the batches, each started inside the
maintenance window only (a durable timer waits for it), and the failure
threshold evaluated here from the children's typed outcomes (``ok`` per
server). The waves after it are ``not attempted``. It closes the job and the
locks in ``finally``, so a cancelled run leaves nothing locked.

A child (``fleetctl.firmware.server``, id ``firmware:<server>``, on the
server's site's queue) runs the embedded engine's per-server function
(``Campaign.op``) as one activity. The server's BMC is reached only there,
its credentials resolved on that worker. A flash is never retried blindly:
an activity lost with its worker runs again, and ``Campaign.op`` first
settles, from the journal (task URI, version before) and the BMC (the task,
the updates still running, the version), every flash the lost attempt left
running, before it flashes anything, as a resumed run in process does.

This module imports nothing of fleetctl but :mod:`.queues` (the sandbox
re-imports it); the report's texts come in the input, made by the command
from the embedded engine's own templates.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from fleetctl.scaleout.queues import CONTROL_QUEUE, STEP_ATTEMPTS, settled, site_queue

# The store-only activities are idempotent enough to retry (a lock taken twice by one owner is the same lock).
STORE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5,
                          non_retryable_error_types=["StoreMismatch"])  # fmt: skip
# Reading a BMC's inventory changes nothing: retry freely.
READ_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5)
# The server's flashing: a failure is a value (the server failed, as in process), never an exception, so a retry
# happens only for a lost attempt (its worker killed, its heartbeat missed, its time limit passed); the retry goes
# through Campaign.op's check of the journal and the BMC before any flash.
FLASH_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_interval=timedelta(seconds=30), maximum_attempts=STEP_ATTEMPTS,
                          non_retryable_error_types=["StoreMismatch"])  # fmt: skip
STORE_TIMEOUT = timedelta(minutes=10)


def flash_limit(planned: int, options: dict[str, Any]) -> timedelta:
    """The server activity's time limit: each planned flash's task timeout, the settling of interrupted ones, the reset."""
    task = float(options["task_timeout"])
    power = float(options["power_timeout"])
    resets = 3 * power if options.get("apply_time") == "on-reset" else 0.0
    # +2 tasks: the updates another run left in the BMC are waited for first, and an interrupted flash is followed.
    return timedelta(seconds=600 + (planned + 2) * task + resets)


def _failed_row(wave: int, server: str, error: str) -> dict[str, Any]:
    """A server that failed outside a component, as the embedded ``rows_for`` has it."""
    return {"wave": wave, "server": server, "component": None, "from": None, "to": None, "result": "failed", "message": error}


@workflow.defn(name="fleetctl.firmware.server")
class FirmwareServer:
    """One server of a campaign to its baseline: the embedded ``Campaign.op``, run as an activity on its site's worker."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return self.state

    @workflow.run
    async def run(self, req: dict[str, Any]) -> dict[str, Any]:
        name, wave = req["server"], int(req["wave"])
        self.state = {"server": name, "wave": wave, "status": "planning"}
        heartbeat = timedelta(seconds=float(req.get("heartbeat_s") or 30.0))
        planned = await workflow.execute_activity("fleetctl.firmware.plan", req, start_to_close_timeout=STORE_TIMEOUT,
                                                  heartbeat_timeout=heartbeat, retry_policy=READ_RETRY)  # fmt: skip
        self.state.update(status="flashing", planned=planned["planned"])
        try:
            out = await workflow.execute_activity(
                "fleetctl.firmware.server", req, start_to_close_timeout=flash_limit(int(planned["planned"]), req["options"]),
                heartbeat_timeout=heartbeat, retry_policy=FLASH_RETRY)  # fmt: skip
        except ActivityError as e:  # attempts used up (workers lost again and again), or the time limit passed each time
            error = f"{name}: the firmware activity did not complete: {e.cause or e}"
            out = {"server": name, "ok": False, "error": error, "elapsed": 0.0, "rows": [_failed_row(wave, name, error)],
                   "summary": None, "fingerprint": None}  # fmt: skip
        self.state.update(status="done" if out["ok"] else "failed")
        return dict(out)


@workflow.defn(name="fleetctl.firmware")
class FirmwareCampaign:
    """One `fleetctl firmware update`: the job and the locks, the waves of child workflows, the threshold, the close."""

    def __init__(self) -> None:
        self.job: int | None = None
        self.wave: int | None = None
        self.waiting: str | None = None  # what the command says on stderr while the workflow waits for the window
        self.done: dict[str, bool] = {}

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return {"job": self.job, "wave": self.wave, "waiting": self.waiting, "done": self.done}

    @workflow.run
    async def run(self, req: dict[str, Any]) -> dict[str, Any]:
        opened = await workflow.execute_activity("fleetctl.firmware.open", req, task_queue=CONTROL_QUEUE,
                                                 start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY)  # fmt: skip
        self.job = int(opened["job"])
        locked = set(opened["locked"])
        waves = [[n for n in w if n in locked] for w in req["waves"]]
        halt_at = int(opened["halt_at"])  # the threshold's count of failed servers, made by the embedded Threshold at open
        rows: list[dict[str, Any]] = []
        failed, halted, stopped, interrupted = 0, False, False, False
        try:
            for n, wave in enumerate(w for w in waves if w):
                self.wave = n
                why_not = None
                if halted:
                    why_not = req["halt_reason"].format(failed=failed, threshold=req["threshold"])
                elif req.get("window"):
                    stopped, text = await self._outside_window(n, req)
                    if stopped:
                        why_not = req["window_reason"].format(window=text)
                if why_not:
                    if stopped:
                        halted = True  # the waves after this one wait too
                    rows += [{"wave": n, "server": s, "component": None, "from": None, "to": None, "after": None,
                              "result": "not attempted", "message": why_not} for s in wave]  # fmt: skip
                    continue
                outs = await settled(*(self._server(req, opened, n, s) for s in wave))
                for o in outs:
                    rows += o["rows"]
                    failed += 0 if o["ok"] else 1
                await workflow.execute_activity(
                    "fleetctl.firmware.wave", {"job": self.job, "wave": n, "label": req["label"], "args": req["args"],
                                               "actor": req["actor"], "outcomes": outs},
                    task_queue=CONTROL_QUEUE, start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY)  # fmt: skip
                if failed >= halt_at:
                    halted = True
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            closed = await workflow.execute_activity(
                "fleetctl.firmware.close",
                {"job": self.job, "owner": opened["owner"], "locked": opened["locked"], "busy": opened["busy"], "rows": rows,
                 "failed": failed, "halted": halted and not stopped, "stopped": stopped, "interrupted": interrupted},
                task_queue=CONTROL_QUEUE, start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY)  # fmt: skip
        return {**closed, "job": self.job, "engine": "temporal"}

    async def _outside_window(self, n: int, req: dict[str, Any]) -> tuple[bool, str]:
        """Whether wave ``n`` must not start (outside the window, not waiting, or still outside after the wait)."""
        read = {"window": req["window"]}
        w = await workflow.execute_activity("fleetctl.firmware.window", read, task_queue=CONTROL_QUEUE,
                                            start_to_close_timeout=STORE_TIMEOUT, retry_policy=READ_RETRY)  # fmt: skip
        if w["inside"]:
            return False, w["text"]
        if not req["wait"]:
            return True, w["text"]
        self.waiting = f"wave {n}: outside the window {w['text']}; waiting {w['opens_in'] / 60:.0f} min for it to open"
        await workflow.sleep(timedelta(seconds=float(w["opens_in"])))  # a durable timer: the wait survives the workers
        self.waiting = None
        w = await workflow.execute_activity("fleetctl.firmware.window", read, task_queue=CONTROL_QUEUE,
                                            start_to_close_timeout=STORE_TIMEOUT, retry_policy=READ_RETRY)  # fmt: skip
        return not w["inside"], w["text"]

    async def _server(self, req: dict[str, Any], opened: dict[str, Any], wave: int, name: str) -> dict[str, Any]:
        child = {k: req[k] for k in ("options", "actor", "store", "heartbeat_s")} | {"job": self.job, "server": name, "wave": wave}
        try:
            out: dict[str, Any] = await workflow.execute_child_workflow(
                "fleetctl.firmware.server", child, id=f"firmware:{name}", task_queue=site_queue(opened["sites"][name]),
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL)  # fmt: skip
        except WorkflowAlreadyStartedError:
            error = f"another run works it (workflow firmware:{name})"
            out = {"server": name, "ok": False, "error": error, "rows": [_failed_row(wave, name, error)]}
        except ChildWorkflowError as e:
            error = f"{name}: internal error: {e.cause or e}"
            out = {"server": name, "ok": False, "error": error, "rows": [_failed_row(wave, name, error)]}
        self.done[name] = bool(out["ok"])
        return out
