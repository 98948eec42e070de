"""The provisioning engine with a table of stand-in steps: journal, failures as typed values, resume, locks."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from fleetctl.lifecycle.states import ServerState as S
from fleetctl.workflows.provision import ErrorKind, Failure, Options, Provisioner, Result, Step, StepFailed, provision
from fleetctl.workflows.provision.steps import STEP_NAMES, STEPS


class Hang(Exception):
    """Given as a stand-in step's failure: the step never ends."""


sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
A, B, C = "mn-tyo1-r12-01", "mn-tyo1-r12-02", "mn-tyo1-r12-03"


def test_the_table_holds_the_ten_steps_in_order_each_with_its_state_goal_and_check() -> None:
    assert STEP_NAMES == ("bmc", "inspect", "firmware", "bios", "vlan-provisioning", "boot", "os", "vlan-production", "ansible", "accel")
    assert [s.phase for s in STEPS] == [S.PREPARING] * 5 + [S.INSTALLING] * 3 + [S.CONFIGURING, S.VALIDATING]
    assert all(s.goal and s.check and s.journals and callable(s.run) for s in STEPS)


def test_a_failure_is_a_step_a_kind_and_a_reason() -> None:
    from fleetctl.errors import BMCError, Timeout

    assert Failure.of("boot", StepFailed("over budget")) == Failure("boot", ErrorKind.CHECK, "over budget")
    assert Failure.of("os", Timeout("no answer")).kind is ErrorKind.TIMEOUT
    assert Failure.of("os", TimeoutError()).reason == "TimeoutError"
    assert Failure.of("bmc", BMCError("401")).kind is ErrorKind.FLEET
    assert Failure.of("bmc", ConnectionRefusedError("refused")).kind is ErrorKind.NETWORK
    assert str(Failure("boot", ErrorKind.CHECK, "over budget")) == "boot: over budget"
    assert str(Failure.of("accel", KeyError("x"))) == "accel: internal error: KeyError: 'x'"


@pytest.fixture
def fake_steps(monkeypatch):  # type: ignore[no-untyped-def]
    """Three stand-in steps; ``fail`` says which server fails where, and how."""
    import fleetctl.workflows.provision.engine as engine

    calls: list[tuple[str, str, Any]] = []
    fail: dict[tuple[str, str], BaseException] = {}

    def make(name: str) -> Any:
        async def run(c: Any) -> dict[str, Any]:
            calls.append((c.ctx.name, name, c.noted))
            if name == "two":
                await c.note({"about_to": "act"})
            e = fail.pop((c.ctx.name, name), None)
            if isinstance(e, Hang):  # a step that never ends (its worker is lost meanwhile)
                await asyncio.sleep(3600)
            if e is not None:
                raise e
            return {"did": name}

        return run

    table = (Step("one", S.PREPARING, "g", "c", make("one")), Step("two", S.INSTALLING, "g", "c", make("two")),
             Step("three", S.VALIDATING, "g", "c", make("three")))  # fmt: skip
    monkeypatch.setattr(engine, "STEPS", table)
    monkeypatch.setattr(engine, "STEP_NAMES", tuple(s.name for s in table))

    async def no_bmcs(self: Any) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(engine.Provisioner, "power_states", no_bmcs)
    # The preflight reads every secret the run will need before the first step: the example site's are in the environment.
    for var in ("BMC_TYO1", "SWITCH"):
        monkeypatch.setenv(f"{var}_USERNAME", "admin")
        monkeypatch.setenv(f"{var}_PASSWORD", "not-a-real-one")
    monkeypatch.setenv("FLEETCTL_K8S_TOKEN", "abcdef.0123456789abcdef")
    return calls, fail


def _steps(cli, job: int) -> list[tuple[str, str, str | None]]:  # type: ignore[no-untyped-def]
    doc = json.loads(cli("jobs", "show", str(job), "--output", "json").out)
    return [(s["server"], s["step"], s["state"]) for s in doc["steps"]]


@sqlite_only
def test_steps_are_journaled_a_failure_is_typed_and_a_rerun_resumes(example_loaded, cli, fake_steps):  # type: ignore[no-untyped-def]
    calls, fail = fake_steps
    fail[(B, "two")] = StepFailed("the port would not move")
    fail[(C, "three")] = ValueError("boom")
    results, stats = provision([A, B, C], options=Options(), label="test")
    r = {p.server: p for p in results}
    assert r[A].result is Result.READY and r[A].done == ["one", "two", "three"] and r[A].failure is None
    assert r[B].result is Result.FAILED and r[B].failure == Failure("two", ErrorKind.CHECK, "the port would not move")
    assert r[B].failed_step == "two" and r[B].error == "two: the port would not move"
    assert r[C].failure == Failure("three", ErrorKind.INTERNAL, "ValueError: boom")
    assert r[C].row()["step"] == "three" and r[C].row()["error"] == "three: internal error: ValueError: boom"
    job = stats["job"]
    rows = _steps(cli, job)
    assert [(s, st) for n, s, st in rows if n == B] == [
        ("provision.begin", "succeeded"), ("provision.one", "succeeded"), ("provision.two", "failed")]
    # A bug leaves its step running (it is run again on resume), as before.
    assert [(s, st) for n, s, st in rows if n == C][-1] == ("provision.three", "running")
    show = json.loads(cli("server", "show", B, "--output", "json").out)
    assert show["state"] == "failed" and show["last_error"] == "two: the port would not move" and show["locked_by"] is None
    assert json.loads(cli("server", "show", A, "--output", "json").out)["state"] == "ready"

    calls.clear()
    results, stats = provision([A, B, C], options=Options(), label="test")
    r = {p.server: p for p in results}
    assert r[A].result is Result.SKIPPED
    assert r[B].result is Result.READY and r[B].resumed == ["one"] and r[B].done == ["two", "three"]
    assert r[C].result is Result.READY and r[C].resumed == ["one", "two"]
    # The interrupted step gets back what it had noted; the failed one runs again from scratch.
    assert (C, "three", {}) in calls and (B, "two", None) in calls and not any(s == "one" for _, s, _ in calls)


@sqlite_only
def test_a_live_lock_is_reported_typed_and_a_dead_ones_lock_is_recovered(example_loaded, cli, fake_steps):  # type: ignore[no-untyped-def]
    import os

    from fleetctl.lifecycle.locks import Holder, try_lock
    from fleetctl.store import get_engine

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = socket.gethostname()
    try_lock(get_engine(), [A], purpose="provision elsewhere", owner=f"ghost@x:{here}:{dead.pid}")
    try_lock(get_engine(), [B], purpose="burn-in", owner=f"someone@x:{here}:{os.getpid()}")
    results, _ = provision([A, B], options=Options(), label="test")
    r = {p.server: p for p in results}
    assert r[A].result is Result.READY
    why, text = r[B].locked_by, r[B].error
    assert r[B].result is Result.LOCKED and why is not None and text is not None
    assert why.holder == Holder("someone@x", here, os.getpid()) and why.purpose == "burn-in" and not why.stale
    assert text.startswith(f"locked by someone@x:{here}:{os.getpid()} since ") and text.endswith(" for burn-in")
    events = json.loads(cli("events", "list", "--name", A, "--output", "json").out)
    assert any(e["action"] == "server.unlock" and f"ghost@x:{here}:{dead.pid}" in e["detail"] for e in events)


@sqlite_only
def test_dry_run_writes_nothing(example_loaded, cli, fake_steps, monkeypatch):  # type: ignore[no-untyped-def]
    from fleetctl.workflows.provision import engine

    planned: list[str] = []

    async def fake_plan(run: Any, name: str) -> None:
        planned.append(name)
        run.update(name, result=Result.PLANNED, plan={"boot": "one-time pxe"})

    monkeypatch.setattr(engine, "plan_server", fake_plan)
    before = json.loads(cli("jobs", "list", "--output", "json").out)
    p = Provisioner([A, B], options=Options(dry_run=True), label="test")
    results = p.dry_run()
    assert planned == [A, B] and [r.result for r in results] == [Result.PLANNED] * 2 and "job" not in p.stats
    assert json.loads(cli("jobs", "list", "--output", "json").out) == before
    assert engine.worst_exit(results) == 0


# --- the description as a Temporal worker runs it (no Temporal here: its pieces called in the engine's order) -----------


def _temporal_ctx(wid: str = "fleetctl-provision-test", **kw: Any) -> Any:
    from fleetctl.holders import Holder
    from fleetctl.workflows.describe import Context

    return Context("temporal", str(Holder.of_workflow("tester@ci", wid)), workflow_id=wid, **kw)


@sqlite_only
def test_a_unit_lost_mid_step_runs_again_in_a_new_session_and_resumes_from_the_journal(example_loaded, cli, fake_steps):  # type: ignore[no-untyped-def]
    """What a worker killed in the middle of a server's step leaves, and what the next attempt (another worker, its own
    session) does with it: the steps done are not run again, the interrupted one gets back what it had noted."""
    import contextlib

    from sqlalchemy import text

    from fleetctl.store import get_engine
    from fleetctl.workflows.describe import Outcome, plain, typed
    from fleetctl.workflows.provision.described import PROVISION, ProvisionKept, ProvisionRun, ServerWork, request

    calls, fail = fake_steps
    fail[(A, "two")] = Hang()
    req = typed(PROVISION.request_type, plain(request([A, B], Options(), "test", "tester@ci"), PROVISION.request_type))
    ctx = _temporal_ctx()
    opened = PROVISION.open(ctx, req)
    assert [u.key for u in opened.units] == [A, B] and {u.site for u in opened.units} == {"tyo1"}
    assert opened.concurrency == 2  # on Temporal every server's unit is started: each worker bounds what it runs
    # What travels (the run, a unit, kept): plain values, and no store URL.
    run = typed(ProvisionRun, plain(opened.run, ProvisionRun))
    kept = typed(ProvisionKept, plain(opened.kept, ProvisionKept))
    assert run.options.url is None and kept.locked == [A, B]
    with get_engine().connect() as c:  # held by the run's workflow, not by this process
        held = set(c.execute(text("SELECT DISTINCT reservation FROM server WHERE name IN (:a, :b)"), {"a": A, "b": B}).scalars())
    assert held == {ctx.owner}, held

    async def unit(data: ServerWork, *, lose_in_two: bool) -> Any:
        unit_ctx = _temporal_ctx(attempt=2 if not lose_in_two else 1)
        async with PROVISION.session(unit_ctx, run, [data]) as shared:
            assert sorted(shared.names) == [A, B]  # the run's servers of the site, read from their locks
            unit_ctx.shared = shared
            if not lose_in_two:
                return await PROVISION.unit(unit_ctx, run, data)
            task = asyncio.ensure_future(PROVISION.unit(unit_ctx, run, data))
            while not any(n == data.name and s == "two" for n, s, _ in calls):
                await asyncio.sleep(0.01)
            await shared.journal.drain()  # its note is written
            task.cancel()  # the worker is lost in the middle of step two
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return None

    data = {u.key: typed(ServerWork, plain(u.data, ServerWork)) for u in opened.units}
    assert asyncio.run(unit(data[A], lose_in_two=True)) is None
    assert [(s, st) for n, s, st in _steps(cli, run.job) if n == A] == [
        ("provision.begin", "succeeded"), ("provision.one", "succeeded"), ("provision.two", "running")]
    calls.clear()
    out_a = asyncio.run(unit(data[A], lose_in_two=False))
    out_b = asyncio.run(unit(data[B], lose_in_two=False))
    assert out_a.result is Result.READY and out_a.resumed == ["one"] and out_a.done == ["two", "three"]
    assert (A, "two", {"about_to": "act"}) in calls and (A, "one", None) not in calls  # not run twice; its note given back
    assert out_b.result is Result.READY and out_b.done == ["one", "two", "three"]
    result = PROVISION.close(ctx, run, kept, [Outcome(A, out_a), Outcome(B, out_b)], interrupted=False)
    assert [s.result for s in result.servers] == [Result.READY, Result.READY] and result.engine == "temporal"
    doc = json.loads(cli("jobs", "show", str(run.job), "--output", "json").out)
    assert doc["state"] == "succeeded" and doc["args"]["workflow"] == "fleetctl-provision-test", doc
    assert doc["args"]["owner"] == ctx.owner  # the job is the workflow's, not the process's that opened it
    with get_engine().connect() as c:  # every lock released
        assert c.execute(text("SELECT count(*) FROM server WHERE reservation IS NOT NULL")).scalar() == 0


@sqlite_only
def test_a_unit_whose_every_attempt_was_lost_fails_its_server_at_close(example_loaded, cli, fake_steps):  # type: ignore[no-untyped-def]
    from fleetctl.workflows.describe import Outcome
    from fleetctl.workflows.provision.described import PROVISION, request

    ctx = _temporal_ctx()
    opened = PROVISION.open(ctx, request([A], Options(), "test", "tester@ci"))
    result = PROVISION.close(ctx, opened.run, opened.kept, [Outcome(A, lost="heartbeat timed out")], interrupted=False)
    [row] = result.servers
    assert row.result is Result.FAILED and row.failure is not None and row.failure.kind is ErrorKind.TIMEOUT
    assert "heartbeat timed out" in (row.error or "")
    show = json.loads(cli("server", "show", A, "--output", "json").out)
    assert show["state"] == "failed" and "heartbeat timed out" in show["last_error"] and show["locked_by"] is None, show
    assert json.loads(cli("jobs", "show", str(opened.job), "--output", "json").out)["state"] == "failed"


@sqlite_only
def test_the_checks_refuse_as_the_preflight_does_with_every_sites_problems_as_values(example_loaded, cli, monkeypatch):  # type: ignore[no-untyped-def]
    from fleetctl.preflight import PreflightError
    from fleetctl.workflows.provision.described import PROVISION, request

    monkeypatch.delenv("BMC_TYO1_PASSWORD", raising=False)
    req = request([A, B], Options(), "test", "tester@ci")
    ctx = _temporal_ctx()
    assert PROVISION.sites(ctx, req) == ["tyo1"]
    problems = PROVISION.check(ctx, req, "tyo1")
    assert problems and all(set(p) == {"what", "who"} for p in problems), problems
    assert json.loads(json.dumps(problems)) == problems  # values that travel through a history
    e = PROVISION.refusal(problems + problems)  # the same problem from two sites is one, naming its servers once each
    assert isinstance(e, PreflightError) and e.exit_code == 2 and str(e).startswith("provision refused: ")
    assert len(e.problems) == len(problems)


@sqlite_only
def test_the_temporal_live_view_reads_a_running_servers_step_from_its_running_job(example_loaded, cli):  # type: ignore[no-untyped-def]
    """On Temporal the parent's status knows only that a server's unit runs: its step comes from the store, from the
    running provisioning job (an older interrupted job's row left running is not the current step)."""
    from sqlalchemy import text

    from fleetctl.cli.provision import _remote_rows
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import JobState, Journal

    engine = get_engine()
    with engine.connect() as c:
        ids = dict(c.execute(text("SELECT name, id FROM server WHERE name IN (:a, :b)"), {"a": A, "b": B}).all())
    old = Journal.open(engine, kind="provision", target="t", args={}, actor="tester@ci", prefix="provision.")
    old.start_step(ids[A], "ansible")  # left running by an interrupted run
    old.start_step(ids[B], "os")
    old.finish(JobState.INTERRUPTED, "interrupted")
    now = Journal.open(engine, kind="provision", target="t", args={}, actor="tester@ci", prefix="provision.")
    now.begin_pass(ids[A], {})
    now.start_step(ids[A], "bmc")
    units = [{"key": A, "stage": "running", "out": None, "lost": None}, {"key": B, "stage": "running", "out": None, "lost": None},
             {"key": C, "stage": "done", "out": {"server": C, "result": "ready", "state": "ready", "step": "ready", "elapsed": 3.0},
              "lost": None}]  # fmt: skip
    rows = _remote_rows(units, {})
    assert rows[A]["step"] == "bmc" and rows[A]["status"] == "running"
    # B's unit has just started: no row in this run's job yet, and the interrupted run's is not its step.
    assert rows[B]["status"] == "running" and rows[B]["step"] == ""
    assert rows[C]["result"] == "ready" and rows[C]["elapsed"] == 3.0
