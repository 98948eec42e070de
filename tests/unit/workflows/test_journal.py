"""The one journal of every workflow: typed rows written and read back; writes never block the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from fleetctl.lifecycle.states import ServerState as S
from fleetctl.workflows.journal import AsyncJournal, JobState, Journal, StepResult, StepState

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _server_ids(engine, names):  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from fleetctl.store import tables as T

    with engine.connect() as c:
        return {r.name: r.id for r in c.execute(select(T.server.c.name, T.server.c.id).where(T.server.c.name.in_(names)))}


@sqlite_only
def test_steps_are_written_and_read_back_as_typed_rows(example_loaded, cli):  # type: ignore[no-untyped-def]
    import json

    from fleetctl.store import get_engine

    engine = get_engine()
    ids = _server_ids(engine, ["mn-tyo1-r12-01", "mn-tyo1-r12-02"])
    j = Journal.open(engine, kind="provision", target="rack-12", args={"servers": 2}, actor="tester@ci", prefix="provision.")
    a, b = ids["mn-tyo1-r12-01"], ids["mn-tyo1-r12-02"]
    # An older pass of a, then the current one: only the current one counts.
    j.begin_pass(a, {"from_state": "registered"})
    j.end_step(j.start_step(a, "bmc"), StepState.SUCCEEDED, output={"old": True})
    j.begin_pass(a, {"from_state": "failed"})
    j.end_step(j.start_step(a, "bmc"), StepState.SUCCEEDED, output={"bmc_firmware": "1.0"})
    boot = j.start_step(a, "boot")
    j.note(boot, {"power_action": "on"})
    j.end_step(j.start_step(a, "firmware"), StepState.FAILED, error="flash failed")

    passes = j.passes([a, b])
    assert passes[b].begin is None and passes[b].steps == {}
    p = passes[a]
    assert p.begin is not None and set(p.steps) == {"bmc", "boot", "firmware"}
    assert p.steps["bmc"].state is StepState.SUCCEEDED and p.steps["bmc"].output == {"bmc_firmware": "1.0"}
    assert p.done() == {"bmc"}
    assert p.interrupted() == {"boot": {"power_action": "on"}}
    assert p.steps["firmware"].state is StepState.FAILED and p.steps["firmware"].finished_at is not None

    assert j.advance("mn-tyo1-r12-01", S.INSTALLING, reason="provision: boot") == S.INSTALLING
    j.fail("mn-tyo1-r12-01", "boot: over budget", reason="provisioning step failed")
    j.finish(JobState.FAILED, "1 of 2 not ready")

    doc = json.loads(cli("jobs", "show", str(j.job_id), "--output", "json").out)
    assert doc["state"] == "failed" and doc["kind"] == "provision" and doc["error"] == "1 of 2 not ready"
    assert [(s["step"], s["state"]) for s in doc["steps"]] == [
        ("provision.begin", "succeeded"), ("provision.bmc", "succeeded"), ("provision.begin", "succeeded"),
        ("provision.bmc", "succeeded"), ("provision.boot", "running"), ("provision.firmware", "failed"),
    ]  # fmt: skip
    assert json.loads(doc["steps"][4]["output"]) == {"power_action": "on"}
    show = json.loads(cli("server", "show", "mn-tyo1-r12-01", "--output", "json").out)
    assert show["state"] == "failed" and show["last_error"] == "boot: over budget"


@sqlite_only
def test_a_one_shot_operation_is_recorded_in_one_go(example_loaded, cli):  # type: ignore[no-untyped-def]
    import json

    from fleetctl.store import get_engine

    engine = get_engine()
    ids = _server_ids(engine, ["mn-tyo1-r12-01", "mn-tyo1-r12-02"])
    j = Journal.open(engine, kind="power.on", target="rack-12", args={}, actor="tester@ci")
    j.record([StepResult(ids["mn-tyo1-r12-01"], True, 0.5, output='{"ok": true}'),
              StepResult(ids["mn-tyo1-r12-02"], False, 1.0, error="timed out")],
             pins={"mn-tyo1-r12-01": "AB:CD"}, state=JobState.FAILED, error="1 of 2 failed")  # fmt: skip
    doc = json.loads(cli("jobs", "show", str(j.job_id), "--output", "json").out)
    assert doc["state"] == "failed" and doc["error"] == "1 of 2 failed"
    assert [(s["server"], s["step"], s["state"], s["error"]) for s in doc["steps"]] == [
        ("mn-tyo1-r12-01", "power.on", "succeeded", None), ("mn-tyo1-r12-02", "power.on", "failed", "timed out"),
    ]  # fmt: skip
    # Trust on first use: a pin is written only where there was none.
    j.pin("mn-tyo1-r12-01", "EF:01")
    from sqlalchemy import select

    from fleetctl.store import tables as T

    with engine.connect() as c:
        assert c.execute(select(T.server.c.bmc_fingerprint).where(T.server.c.name == "mn-tyo1-r12-01")).scalar() == "AB:CD"


@sqlite_only
def test_a_locked_database_does_not_stall_the_event_loop(example_loaded, tmp_path):  # type: ignore[no-untyped-def]
    """Another process holds SQLite's write lock: the server that writes waits, the others go on."""
    from fleetctl.store import get_engine

    engine = get_engine()
    sid = _server_ids(engine, ["mn-tyo1-r12-01"])["mn-tyo1-r12-01"]
    journal = AsyncJournal(Journal.open(engine, kind="provision", target="t", args={}, actor="tester@ci", prefix="provision."))
    other = sqlite3.connect(str(tmp_path / "inv.db"), isolation_level=None, timeout=1)
    other.execute("BEGIN IMMEDIATE")  # the write lock, as another fleetctl would hold it
    ticks = {"a": 0, "b": 0, "c": 0}

    async def server_at_its_device(name: str, until: asyncio.Event) -> None:
        while not until.is_set():
            ticks[name] += 1
            await asyncio.sleep(0.01)

    async def main() -> tuple[bool, float, int]:
        stop = asyncio.Event()
        others = [asyncio.create_task(server_at_its_device(n, stop)) for n in ticks]
        t0 = time.monotonic()
        writer = asyncio.create_task(journal.start_step(sid, "bmc"))
        await asyncio.sleep(0.6)
        waiting = not writer.done()
        other.execute("COMMIT")  # the other process is done: the write goes through
        step_id = await asyncio.wait_for(writer, 30)
        stop.set()
        await asyncio.gather(*others)
        return waiting, time.monotonic() - t0, step_id

    try:
        waiting, took, step_id = asyncio.run(main())
    finally:
        other.close()
        journal.close()
    assert waiting, "the write should have waited for the lock"
    assert step_id > 0 and took < 30
    # The loop went on while the write waited: every other server kept ticking (about 60 ticks in 0.6 s).
    assert all(n >= 30 for n in ticks.values()), ticks
    p = journal.journal.passes([sid])[sid]
    assert p.steps["bmc"].state is StepState.RUNNING


def test_rows_are_typed() -> None:
    assert JobState("interrupted") is JobState.INTERRUPTED and str(StepState.RUNNING) == "running"
