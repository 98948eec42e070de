"""Issue #24 item 3: the in-process engine's worker processes (``run_local(processes=N)``), and `sweep --processes`.

A toy description (process_safe) shows what the engine promises any description: its units run in other processes,
each as a Temporal activity would (data as JSON values, a session of one); a worker that dies under a unit (SIGKILL)
has that unit run again, in a new pool, with the next attempt; a description that is not process_safe is refused.
The sweep's own shards against the lab are tests/e2e/test_sweep_processes.py's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fleetctl.sweep.workflow import SERVERS_PER_PROCESS, processes_for
from fleetctl.workflows.describe import Context, Description, Opened, Outcome, Unit, default_processes, register, run_local


@dataclass
class ToyRequest:
    units: int
    kill_once: list[str] = field(default_factory=list)  # units whose worker dies (SIGKILL) at their first attempt


@dataclass
class ToyRun:
    kill_once: list[str]
    parent: int


@dataclass
class ToyIn:
    key: str


@dataclass
class ToyOut:
    key: str
    pid: int
    attempt: int
    in_session: bool


class Toy(Description[ToyRequest, ToyRun, ToyIn, ToyOut, list[Any]]):
    name = "test.processes-toy"
    process_safe = True

    def open(self, ctx: Context, request: ToyRequest) -> Opened[ToyRun, ToyIn]:
        units = [Unit(f"u{i}", "", ToyIn(f"u{i}")) for i in range(request.units)]
        return Opened(ToyRun(request.kill_once, os.getpid()), units, concurrency=len(units), attempts=2)

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: ToyRun, units: list[ToyIn]) -> AsyncIterator[Any]:
        yield ("session", [u.key for u in units])

    async def unit(self, ctx: Context, run: ToyRun, data: ToyIn) -> ToyOut:
        if data.key in run.kill_once and ctx.attempt == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return ToyOut(data.key, os.getpid(), ctx.attempt, ctx.shared == ("session", [data.key]))

    def close(self, ctx: Context, run: ToyRun, kept: Any, outcomes: list[Outcome[ToyOut]], *, interrupted: bool) -> list[Any]:
        return outcomes


class NotSafe(Toy):
    name = "test.processes-not-safe"
    process_safe = False


class AlwaysKilled(Toy):
    name = "test.processes-always-killed"

    async def unit(self, ctx: Context, run: ToyRun, data: ToyIn) -> ToyOut:
        if data.key in run.kill_once:  # every attempt
            os.kill(os.getpid(), signal.SIGKILL)
        return await super().unit(ctx, run, data)


TOY = register(Toy())
NOT_SAFE = register(NotSafe())
ALWAYS = register(AlwaysKilled())


def test_units_run_in_worker_processes_each_in_a_session_of_its_own() -> None:
    outcomes = run_local(TOY, ToyRequest(4), processes=2)
    assert [o.key for o in outcomes] == ["u0", "u1", "u2", "u3"] and all(o.lost is None for o in outcomes), outcomes
    outs = [o.out for o in outcomes]
    assert all(isinstance(o, ToyOut) for o in outs)  # typed back from JSON values
    pids = {o.pid for o in outs if o is not None}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert all(o is not None and o.in_session and o.attempt == 1 for o in outs)


def test_a_worker_killed_under_a_unit_has_it_run_again_in_a_new_pool() -> None:
    outcomes = run_local(TOY, ToyRequest(3, kill_once=["u1"]), processes=2)
    by = {o.key: o for o in outcomes}
    assert all(o.lost is None for o in outcomes), [(o.key, o.lost) for o in outcomes]
    killed = by["u1"].out
    assert killed is not None and killed.attempt == 2  # read again, by a new worker
    # (a unit running beside it when the pool broke runs again too: the executor ends every worker of a broken pool)


def test_a_unit_whose_every_attempt_is_killed_is_lost_not_the_run() -> None:
    outcomes = run_local(TOY, ToyRequest(1, kill_once=["u0"]), processes=2)
    assert outcomes[0].out is not None and outcomes[0].out.attempt == 2
    outcomes = run_local(ALWAYS, ToyRequest(1, kill_once=["u0"]), processes=2)
    assert [(o.key, o.out) for o in outcomes] == [("u0", None)]
    assert outcomes[0].lost and "BrokenProcessPool" in outcomes[0].lost, outcomes


def test_a_description_that_is_not_process_safe_is_refused_before_it_opens() -> None:
    with pytest.raises(ValueError, match="not process_safe"):
        run_local(NOT_SAFE, ToyRequest(1), processes=2)
    assert [o.out.pid for o in run_local(NOT_SAFE, ToyRequest(1), processes=1) if o.out] == [os.getpid()]  # in process


def test_how_many_processes_a_sweep_runs_in() -> None:
    cores = default_processes()
    assert processes_for(31, None) == 1  # a small sweep is not worth a process's start
    assert processes_for(SERVERS_PER_PROCESS * 64, None) == cores
    assert processes_for(3, 8) == 3  # never more than one per server
    assert processes_for(0, 4) == 1  # switches only: this process
    assert processes_for(1000, 2) == 2


@pytest.mark.parametrize("value", ["0", "-1", "²", "٣", "1.5", "", "99999999999999999999999", "257"])
def test_bad_processes_is_one_line_and_exit_2(cli: Any, value: str) -> None:
    r = cli("sweep", "--processes", value)
    assert r.code == 2, (r.code, r.out, r.err)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--processes" in lines[0], r.err


def test_a_shard_reads_its_own_targets_expectations_and_cursors_not_the_fleets(example_loaded: str, cli: Any) -> None:
    """A worker's shard of a 10,000-server fleet must not hold the fleet: its queries name its servers (item 4)."""
    import json
    import re

    from sqlalchemy import event, insert

    from fleetctl.store import get_engine
    from fleetctl.store import tables as T
    from fleetctl.sweep.collect import server_expectations
    from fleetctl.sweep.history import baseline_cursors

    servers = [s["name"] for s in json.loads(cli("server", "list", "-o", "json").out)]
    mine, others = servers[:2], servers[2:]
    assert len(others) > 10
    engine = get_engine()
    with engine.begin() as c:
        now = dt.datetime.now(dt.UTC)
        rows = [{"kind": "server", "target": n, "value": {"log_cursor": "1"}, "updated_at": now} for n in servers]
        c.execute(insert(T.sweep_cursor), rows)
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        with engine.connect() as c:
            got = server_expectations(c, mine, {}, max_skew_s=30)
            cursors = baseline_cursors(c, {"server": mine, "switch": []})
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert sorted(got) == sorted(mine) and all(e.boards for e in got.values() if e.board_count)
    assert sorted(t for _, t in cursors) == sorted(mine) or cursors == {}  # (a cursor counts once its run finished)
    tables = re.compile(r"\bFROM (server|accelerator_board|sweep_cursor)\b")
    reads = [(s, p) for s, p in seen if tables.search(s)]
    assert len(reads) >= 3 and all(" IN (" in s for s, _ in reads), [s for s, _ in reads if " IN (" not in s]
    named = {v for _, p in reads for v in (p.values() if isinstance(p, dict) else p or ()) if isinstance(v, str)}
    assert not named & set(others), named & set(others)
