"""A unit's next attempt on a worker that still runs the earlier one: the earlier one is stopped first.

Temporal starts a unit's next attempt only once it has given the earlier one up (its heartbeat lapsed: the
Temporal server was away, or the worker stalled). That attempt runs on in the worker until its next heartbeat
is refused; before ``RunActivities._supersede``, both worked the same server for that while. Here the
activities run in temporalio's ``ActivityEnvironment`` (each in a task of its own, as in a worker), with a
described workflow of one slow unit.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.testing import ActivityEnvironment

from fleetctl.config import database_url
from fleetctl.scaleout import run_act
from fleetctl.scaleout.activities import store_id
from fleetctl.scaleout.run_act import RunActivities
from fleetctl.scaleout.run_wf import UnitCall, UnitWork
from fleetctl.workflows.describe import Context, Description, Opened, Outcome, Unit, register

EVENTS: list[tuple[str, str, int]] = []  # (what, unit, attempt)


@dataclass
class SlowRequest:
    names: list[str]


@dataclass
class SlowRun:
    word: str


@dataclass
class SlowIn:
    name: str
    seconds: float


@dataclass
class SlowOut:
    name: str
    attempt: int


class Slow(Description[SlowRequest, SlowRun, SlowIn, SlowOut, list]):  # type: ignore[type-arg]
    name = "test-unit-attempts"

    def open(self, ctx: Context, request: SlowRequest) -> Opened[SlowRun, SlowIn]:
        return Opened(SlowRun("x"), [Unit(n, "tyo1", SlowIn(n, 1.0)) for n in request.names])

    async def unit(self, ctx: Context, run: SlowRun, data: SlowIn) -> SlowOut:
        EVENTS.append(("start", data.name, ctx.attempt))
        try:
            await asyncio.sleep(data.seconds)
        except asyncio.CancelledError:
            EVENTS.append(("cancelled", data.name, ctx.attempt))
            raise
        EVENTS.append(("end", data.name, ctx.attempt))
        return SlowOut(data.name, ctx.attempt)

    def close(self, ctx: Context, run: SlowRun, kept: Any, outcomes: list[Outcome[SlowOut]], *, interrupted: bool) -> list:  # type: ignore[type-arg]
        return [o.key for o in outcomes]


register(Slow())


def _call(name: str, seconds: float) -> UnitCall:
    return UnitCall(Slow.name, store_id(database_url()), {"word": "x"}, UnitWork(name, "tyo1", {"name": name, "seconds": seconds}), 2.0)


def _env(attempt: int, activity_id: str = "7") -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="provision-run-1", activity_id=activity_id, attempt=attempt,
                                   heartbeat_timeout=timedelta(seconds=2))  # fmt: skip
    return env


async def _until(what: tuple[str, str, int], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while what not in EVENTS:
            await asyncio.sleep(0.01)


def test_a_later_attempt_stops_the_earlier_one_before_it_starts() -> None:
    EVENTS.clear()
    acts = RunActivities()

    async def go() -> tuple[Any, asyncio.Task[Any]]:
        first = asyncio.create_task(_env(1).run(acts.unit, _call("mn-01", 30.0)))
        await _until(("start", "mn-01", 1))
        try:
            out = await asyncio.wait_for(_env(2).run(acts.unit, _call("mn-01", 0.05)), 10)
            await asyncio.wait({first}, timeout=1)
            return out, first
        finally:
            first.cancel()  # (on the old code it sleeps on)

    out, first = asyncio.run(go())
    # The earlier attempt was cancelled, and had ended, before the later one began.
    assert EVENTS == [("start", "mn-01", 1), ("cancelled", "mn-01", 1), ("start", "mn-01", 2), ("end", "mn-01", 2)], EVENTS
    assert first.cancelled()
    assert out.key == "mn-01" and out.out == {"name": "mn-01", "attempt": 2}
    assert acts.attempts == {}  # nothing kept once the attempts are over


def test_other_units_and_an_ended_attempt_are_left_alone() -> None:
    EVENTS.clear()
    acts = RunActivities()

    async def go() -> list[Any]:
        # Attempt 1 of unit 7 ends (raising, as a unit whose worker was lost); attempt 2 runs beside unit 8's first.
        with pytest.raises(asyncio.CancelledError):
            t = asyncio.create_task(_env(1).run(acts.unit, _call("mn-01", 30.0)))
            await _until(("start", "mn-01", 1))
            t.cancel()
            await t
        return await asyncio.gather(_env(2).run(acts.unit, _call("mn-01", 0.2)), _env(1, "8").run(acts.unit, _call("mn-02", 0.2)))

    outs = asyncio.run(go())
    assert [o.out["attempt"] for o in outs] == [2, 1]
    assert ("cancelled", "mn-02", 1) not in EVENTS and ("end", "mn-02", 1) in EVENTS and ("end", "mn-01", 2) in EVENTS
    assert acts.attempts == {}


def test_an_earlier_attempt_that_will_not_stop_is_waited_for_no_longer_than_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    EVENTS.clear()
    monkeypatch.setattr(run_act, "SUPERSEDE_WAIT_S", 0.3)
    acts = RunActivities()
    release = asyncio.Event()

    async def stubborn() -> None:  # a task that goes on after its cancellation (a step in a thread finishing its call)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await release.wait()

    async def go() -> Any:
        t = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        acts.attempts[("provision-run-1", "7")] = t
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        out = await _env(2).run(acts.unit, _call("mn-01", 0.01))
        waited = loop.time() - t0
        release.set()
        await t
        return out, waited

    out, waited = asyncio.run(go())
    assert out.out["attempt"] == 2 and 0.3 <= waited < 5, waited
