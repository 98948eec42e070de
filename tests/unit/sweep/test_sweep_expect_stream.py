"""A sweep holds the expectations of the servers it is reading, not a fleet's (issue 24, item 4).

The servers' expectations, cursors and BMC targets are loaded from the store a chunk (``EXPECT_CHUNK``) at a time, as
the BMC sweep takes their BMCs, and each server's are let go at its verdict: what a sweep holds is the servers in
flight and one chunk ahead, whatever the fleet's size. Here the BMC part is a stand-in that takes the streams as the
Redfish driver's ``run_many`` does (``concurrency`` BMCs at once, one shared iterator) and answers each BMC with a
failure; the expectations actually loaded are counted through ``server_expectations``. Then ``run_many`` itself is
shown to take a sized stream as it goes, never listing it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import weakref
from typing import Any

import pytest

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.interfaces.sweep import BMCSweepResult
from fleetctl.plugins import Stream
from fleetctl.store import get_engine
from fleetctl.sweep import engine as E

CHUNK = 4
AT_ONCE = 3


def _servers() -> list[Any]:
    from fleetctl.cli.sweep import resolve_both

    with get_engine().connect() as c:
        servers, _switches = resolve_both(c, ["all"])
    return servers


def test_the_expectations_are_loaded_a_chunk_at_a_time_and_let_go_at_each_verdict(example_loaded: Any,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # the example's BMCs have a credential (env:BMC_TYO1): every server gets a target
    monkeypatch.setenv("BMC_TYO1_USERNAME", "admin")
    monkeypatch.setenv("BMC_TYO1_PASSWORD", "secret")
    eng = get_engine()
    servers = _servers()
    assert len(servers) > 3 * CHUNK, "the example site has enough servers for several chunks"
    rec = E.Recorder(eng, 1, dt.datetime.now(dt.UTC))
    monkeypatch.setattr(rec, "flush", lambda: None)  # no run is opened: the verdicts stay in the buffer, looked at here
    monkeypatch.setattr(E, "EXPECT_CHUNK", CHUNK)

    loaded: list[str] = []  # every server whose expectations were loaded, in order
    held_at_load: list[int] = []  # loaded and not yet judged, as each chunk is loaded
    real = E.server_expectations

    alive: list[weakref.ref[Any]] = []  # every expectation loaded: alive while the sweep holds it

    def server_expectations(conn: Any, names: list[str], *a: Any, **kw: Any) -> Any:
        judged = sum(1 for v, _ in rec.buffer if v.kind == "server")
        held_at_load.append(len(loaded) - judged)
        loaded.extend(names)
        out = real(conn, names, *a, **kw)
        alive.extend(weakref.ref(e) for e in out.values())
        return out

    most_alive = [0]

    taken: list[str] = []
    first_taken_after: list[int] = []  # servers loaded when the first BMC was taken

    async def sweep_streams(kind: str, streams: list[Any], op: Any, *, progress: Any, concurrency: int, **_kw: Any) -> None:
        # run_many's shape: `concurrency` workers drawing from one shared iterator, each BMC answered in turn
        assert kind == "bmc" and len(streams) == 1 and len(streams[0]) == len(servers)
        pending = iter(streams[0])

        async def worker() -> None:
            for t in pending:
                if not taken:
                    first_taken_after.append(len(loaded))
                taken.append(t.name)
                await asyncio.sleep(0)  # the others take theirs: AT_ONCE BMCs in flight
                r = BMCSweepResult(target=t.name, ok=False, error=f"{t.name}: refused", error_type="BMCError")
                progress(len(taken), len(servers), r)
                most_alive[0] = max(most_alive[0], sum(1 for w in alive if w() is not None))

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    monkeypatch.setattr(E, "server_expectations", server_expectations)
    monkeypatch.setattr(E, "sweep_streams", sweep_streams)
    asyncio.run(E.sweep_targets(eng, rec, servers, [], E.SweepOptions(concurrency=AT_ONCE), None))

    verdicts = [v.name for v, _ in rec.buffer if v.kind == "server"]
    assert sorted(verdicts) == sorted(s.name for s in servers)  # one verdict per server
    assert sorted(taken) == sorted(s.name for s in servers) and sorted(loaded) == sorted(taken)
    assert first_taken_after == [CHUNK]  # the first BMC was read with one chunk loaded, not the fleet
    assert len(held_at_load) == -(-len(servers) // CHUNK)  # a load per chunk
    # At each load, what is held is at most the BMCs in flight and the chunk not yet taken: never the fleet.
    assert max(held_at_load) <= AT_ONCE, held_at_load
    # And each server's expectation is let go at its verdict: alive, at most a chunk and the BMCs in flight.
    assert 0 < most_alive[0] <= CHUNK + AT_ONCE, most_alive
    assert not any(w() for w in alive)
    # The verdicts say what the expectations say (site, rack, position), so each was found when judged.
    assert all(v.rack and v.site for v, _ in rec.buffer)


def test_a_server_the_inventory_cannot_reach_is_judged_when_its_chunk_is_loaded(example_loaded: Any,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.delenv("BMC_TYO1_USERNAME", raising=False)  # no credential: no server can be reached, none is a target
    eng = get_engine()
    servers = _servers()
    rec = E.Recorder(eng, 1, dt.datetime.now(dt.UTC))
    monkeypatch.setattr(rec, "flush", lambda: None)
    monkeypatch.setattr(E, "EXPECT_CHUNK", CHUNK)
    given: list[Any] = []

    async def sweep_streams(kind: str, streams: list[Any], *_a: Any, **_kw: Any) -> None:
        given.extend(t for s in streams for t in s)

    monkeypatch.setattr(E, "sweep_streams", sweep_streams)
    asyncio.run(E.sweep_targets(eng, rec, servers, [], E.SweepOptions(), None))
    assert given == []
    assert sorted(v.name for v, _ in rec.buffer) == sorted(s.name for s in servers)
    assert all(v.status.value == "unknown" and "BMC_TYO1" in (v.error or "") for v, _ in rec.buffer), rec.buffer[0]


def test_a_server_deleted_since_the_command_resolved_it_is_not_swept(example_loaded: Any, monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    monkeypatch.delenv("BMC_TYO1_USERNAME", raising=False)
    eng = get_engine()
    servers = _servers()
    rec = E.Recorder(eng, 1, dt.datetime.now(dt.UTC))
    monkeypatch.setattr(rec, "flush", lambda: None)
    real = E.server_expectations
    gone = servers[-1].name

    def server_expectations(conn: Any, names: list[str], *a: Any, **kw: Any) -> Any:
        out = real(conn, names, *a, **kw)
        out.pop(gone, None)  # as if deleted from the inventory while the sweep ran
        return out

    async def sweep_streams(kind: str, streams: list[Any], *_a: Any, **_kw: Any) -> None:
        for s in streams:
            list(s)

    monkeypatch.setattr(E, "server_expectations", server_expectations)
    monkeypatch.setattr(E, "sweep_streams", sweep_streams)
    asyncio.run(E.sweep_targets(eng, rec, servers, [], E.SweepOptions(), None))
    assert sorted(v.name for v, _ in rec.buffer) == sorted(s.name for s in servers[:-1])
    assert f"no longer in the inventory, not swept: {gone}" in caplog.text


def test_run_many_takes_a_sized_stream_as_it_goes() -> None:
    from fleetctl_drivers.redfish.sweep import run_many

    n = 12
    made: list[int] = []

    def items() -> Any:
        for i in range(n):
            made.append(i)
            # port 1 on the loopback: refused at once, no retry (a failure is this BMC's result)
            yield BMCTarget(name=f"b{i}", url="https://127.0.0.1:1", username="u", password="p", timeout=2, retries=0)

    made_at_first_result: list[int] = []

    def progress(_done: int, _total: int, r: Any) -> None:
        if not made_at_first_result:
            made_at_first_result.append(len(made))

    results = asyncio.run(run_many(Stream("redfish", n + 3, items()), lambda bmc: asyncio.sleep(0), concurrency=2,
                                   progress=progress))  # fmt: skip
    assert [r.target for r in results] == [f"b{i}" for i in range(n)]  # a len above what it gives: the ones given
    assert all(not r.ok for r in results)
    assert made_at_first_result and made_at_first_result[0] <= 3  # taken as the workers went, not listed first
