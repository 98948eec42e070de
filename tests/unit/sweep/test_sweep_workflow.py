"""The sweep's description (``fleetctl.sweep.workflow``): its shards, and a shard never read is never a finished sweep."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from fleetctl.errors import FleetError
from fleetctl.sweep.engine import SweepOptions
from fleetctl.sweep.workflow import SHARD_TARGETS, SWEEP, Shard, ShardSummary, SweepRequest, SweepRunData, merge, shard_size
from fleetctl.workflows.describe import Context, Outcome

CTX = Context("process", "alice@h:1")


class Rec:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {"ok": 1}
        self.new: list[Any] = []
        self.resolved: list[Any] = []
        self.persisting: list[Any] = []
        self.findings: list[Any] = []


def _request(servers: list[str], switches: list[str], shard: int) -> SweepRequest:
    return SweepRequest(1, dt.datetime.now(dt.UTC).isoformat(), SweepOptions(), servers, switches, shard)


RUN = SweepRunData(1, dt.datetime.now(dt.UTC).isoformat(), SweepOptions())


def test_in_process_one_shard_reads_every_target() -> None:
    opened = SWEEP.open(CTX, _request(["a", "b"], ["sw"], 0))
    assert [(u.key, u.site, u.data) for u in opened.units] == [("all", "", Shard(["a", "b"], ["sw"]))]


def test_on_temporal_shards_are_by_site_with_the_switches_in_the_first(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    import json

    servers = [s["name"] for s in json.loads(cli("server", "list", "-o", "json").out)][:3]
    switches = [s["name"] for s in json.loads(cli("switch", "list", "-o", "json").out)][:1]
    opened = SWEEP.open(CTX, _request(servers, switches, 2))
    assert opened.run == SweepRunData(1, opened.run.started, SweepOptions())  # the targets travel with their shards only
    assert [(u.site, u.data) for u in opened.units] == [("tyo1", Shard(servers[:2], switches)), ("tyo1", Shard(servers[2:], []))]
    assert opened.concurrency == 2 and all(u.timeout_s > 300 for u in opened.units)


def test_worker_processes_get_shards_of_at_most_shard_targets_as_on_temporal() -> None:
    # Even shares of 10,000 servers over 2 processes were 5,000 each: cut within sites of 6,000 and 4,000 that made
    # shards of 5,000, 1,000 and 4,000, one worker reading twice what the other did (issue 24).
    assert shard_size(10_000, 2) == SHARD_TARGETS == 1000
    assert shard_size(1_500, 2) == 750  # an even share where it is smaller
    assert shard_size(3, 8) == 1 and shard_size(0, 2) == 1


def test_the_process_pool_is_given_those_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    from types import SimpleNamespace

    from fleetctl.sweep import workflow

    asked: list[tuple[SweepRequest, int | None]] = []

    async def arun_local(_d: Any, request: SweepRequest, *, ctx: Any, processes: int | None = None) -> ShardSummary:
        asked.append((request, processes))
        return ShardSummary()

    monkeypatch.setattr(workflow, "arun_local", arun_local)
    servers = [SimpleNamespace(name=f"s{i}") for i in range(10_000)]
    rec = SimpleNamespace(run_id=1, now=dt.datetime.now(dt.UTC), counts={}, new=[], resolved=[], persisting=[], findings=[])
    asyncio.run(workflow.local_collector(servers, [], SweepOptions(concurrency=250), processes=2)(rec))  # type: ignore[arg-type]
    ((request, processes),) = asked
    assert processes == 2 and request.shard == SHARD_TARGETS and request.options.concurrency == 125


def test_a_shard_never_read_ends_the_sweep_with_an_error_after_the_others_are_counted() -> None:
    read = ShardSummary({"ok": 2, "critical": 1}, findings=[{"first_seen": "2026-12-03T00:00:00+00:00"}])
    summary = SWEEP.close(CTX, RUN, None, [Outcome("tyo1/0", read), Outcome("osa1/0", lost="the unit did not complete")],
                          interrupted=False)  # fmt: skip
    rec = Rec()
    with pytest.raises(FleetError, match="could not read 1 shard"):
        merge(rec, summary)
    assert rec.counts == {"ok": 3, "critical": 1} and isinstance(rec.findings[0]["first_seen"], dt.datetime)
    merge(rec2 := Rec(), SWEEP.close(CTX, RUN, None, [Outcome("tyo1/0", read)], interrupted=False))
    assert rec2.counts == {"ok": 3, "critical": 1}
