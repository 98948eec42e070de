"""Issue 21 item 8: a lock holder's liveness is asked through the check each engine registers (fleetctl.holders);
the store and the lock know no engine. A holder nobody can judge is unknown, never gone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from fleetctl import holders
from fleetctl.errors import FleetError, Locked
from fleetctl.holders import TEMPORAL, Holder, register_liveness, unregister_liveness

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
HELD = "op@y:temporal:fleetctl-provision-0123456789ab"


@pytest.fixture
def engine_check() -> Iterator[dict[str, bool | None]]:
    """A stand-in engine registered for Temporal holders: answers by workflow id from a dict (absent: unknown)."""
    saved = holders._CHECKS.get(TEMPORAL)
    answers: dict[str, bool | None] = {}

    def check(workflow: str) -> bool | None:
        return answers.get(workflow)

    unregister_liveness(TEMPORAL)
    register_liveness(TEMPORAL, check)
    try:
        yield answers
    finally:
        unregister_liveness(TEMPORAL)
        if saved is not None:
            register_liveness(TEMPORAL, saved)


def test_a_temporal_holder_is_asked_through_the_registered_check(engine_check: dict[str, bool | None]) -> None:
    h = Holder.parse(HELD)
    for answer in (True, False, None):
        engine_check[h.workflow or ""] = answer
        assert h.alive() is answer


def test_without_a_registered_check_a_temporal_holder_is_unknown_never_gone() -> None:
    saved = holders._CHECKS.get(TEMPORAL)
    unregister_liveness(TEMPORAL)
    try:
        assert Holder.parse(HELD).alive() is None
    finally:
        if saved is not None:
            register_liveness(TEMPORAL, saved)


def test_a_second_check_for_one_engine_is_refused(engine_check: dict[str, bool | None]) -> None:
    with pytest.raises(FleetError, match="already registered"):
        register_liveness(TEMPORAL, lambda workflow: True)
    register_liveness(TEMPORAL, holders._CHECKS[TEMPORAL])  # the same one again: harmless


@sqlite_only
def test_a_closed_workflow_s_lock_is_recovered_a_running_one_s_kept(example_loaded, engine_check) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from fleetctl.lifecycle.locks import acquire_recovering, try_lock
    from fleetctl.store import get_engine

    engine = get_engine()
    workflow = Holder.parse(HELD).workflow or ""
    try_lock(engine, ["mn-tyo1-r12-06"], purpose="provision rack-12", owner=HELD)
    engine_check[workflow] = True
    with pytest.raises(Locked) as e, acquire_recovering(engine, ["mn-tyo1-r12-06"], purpose="burnin", reason="t"):
        pass
    assert "its workflow is running" in str(e.value) and "--force" not in str(e.value), str(e.value)
    engine_check[workflow] = False
    with acquire_recovering(engine, ["mn-tyo1-r12-06"], purpose="burnin", reason="t") as got:
        assert got == ["mn-tyo1-r12-06"]
    with engine.connect() as conn:
        detail = conn.execute(text("SELECT detail FROM event WHERE action = 'server.unlock' ORDER BY id DESC")).scalar()
    assert detail == f"stale lock of {HELD} (workflow closed) recovered", detail


@sqlite_only
def test_a_gone_process_s_lock_is_recovered_a_live_one_s_kept(example_loaded) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from fleetctl.lifecycle.locks import acquire_recovering, try_lock
    from fleetctl.store import get_engine

    engine = get_engine()
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = f"op@y:{socket.gethostname()}:{int(done.stdout)}"  # a pid of this host whose process has exited
    live = f"op@y:{socket.gethostname()}:{os.getpid()}"
    try_lock(engine, ["mn-tyo1-r12-06"], purpose="provision rack-12", owner=live)
    try_lock(engine, ["mn-tyo1-r12-07"], purpose="provision rack-12", owner=gone)
    with pytest.raises(Locked), acquire_recovering(engine, ["mn-tyo1-r12-06"], purpose="burnin", reason="t"):
        pass
    with acquire_recovering(engine, ["mn-tyo1-r12-07"], purpose="burnin", reason="t") as got:
        assert got == ["mn-tyo1-r12-07"]
    with engine.connect() as conn:
        detail = conn.execute(text("SELECT detail FROM event WHERE action = 'server.unlock' ORDER BY id DESC")).scalar()
    assert detail == f"stale lock of {gone} (process gone) recovered", detail


def test_the_cli_wiring_registers_the_temporal_check_without_importing_the_sdk() -> None:
    """A command that never touched the scale-out package can still judge a Temporal run's lock; `--help` stays light."""
    code = ("import json, sys; import fleetctl.cli.app; from fleetctl import holders; "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('temporalio', 'asyncio')); "
            "print(json.dumps([holders.liveness_engines(), heavy]))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    engines, heavy = json.loads(out)
    assert engines == [TEMPORAL] and heavy == [], out


def test_the_store_and_the_lock_know_no_engine() -> None:
    """No chain of imports (function-level ones included) leads from the lock or the store to an engine."""
    import grimp

    graph = grimp.build_graph("fleetctl", include_external_packages=False, cache_dir=None)
    for low in ("fleetctl.lifecycle.locks", "fleetctl.store", "fleetctl.holders"):
        assert not graph.chain_exists(importer=low, imported="fleetctl.scaleout", as_packages=True), low
