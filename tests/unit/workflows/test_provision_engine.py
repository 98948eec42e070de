"""The provisioning engine with a table of stand-in steps: journal, failures as typed values, resume, locks."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from fleetctl.lifecycle.states import ServerState as S
from fleetctl.workflows.provision import ErrorKind, Failure, Options, Provisioner, Result, Step, StepFailed, provision
from fleetctl.workflows.provision.steps import STEP_NAMES, STEPS

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

    monkeypatch.setattr(engine.Provisioner, "_power_states", no_bmcs)
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
    import fleetctl.workflows.provision.plan as plan
    from fleetctl.workflows.provision import engine

    planned: list[str] = []

    async def fake_plan(run: Any, name: str) -> None:
        planned.append(name)
        run.update(name, result=Result.PLANNED, plan={"boot": "one-time pxe"})

    monkeypatch.setattr(plan, "plan_server", fake_plan)
    before = json.loads(cli("jobs", "list", "--output", "json").out)
    p = Provisioner([A, B], options=Options(dry_run=True), label="test")
    results = p.run()
    assert planned == [A, B] and [r.result for r in results] == [Result.PLANNED] * 2 and "job" not in p.stats
    assert json.loads(cli("jobs", "list", "--output", "json").out) == before
    assert engine.worst_exit(results) == 0
