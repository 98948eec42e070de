"""The health sweep on the scale-out engine: the run sharded into activities of many targets each.

The command opens and closes the sweep run exactly as in process
(:func:`fleetctl.sweep.engine.run`, through its ``collect`` hook); in
between, a workflow splits the targets by site into shards of up to
``SHARD_TARGETS`` and runs each shard as one activity on a worker of its
site. A shard is the embedded engine's own reading and judging
(``fleetctl.sweep.engine._sweep``) of its targets, journaled with its own
recorder into the same run; it returns the run's summary of its targets (counts,
new, resolved, persisting), which the command merges. One activity per BMC
would cost the engine more than reading the BMC: a shard costs it one
activity for hundreds of targets.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any

from temporalio import activity

from fleetctl.config import database_url
from fleetctl.scaleout.activities import heartbeating
from fleetctl.scaleout.client import ENV_HEARTBEAT, check_store, connect
from fleetctl.scaleout.queues import CONTROL_QUEUE, HEARTBEAT_S
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.sweep.engine import SweepOptions, _Recorder, _sweep
from fleetctl.targets import resolve, resolve_switches

SHARD_TARGETS = 1000  # targets per activity
SHARDS_AT_ONCE = 1  # shards a worker reads at once (each with the sweep's own concurrency)


def _plain(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value, default=str))


class SweepActivities:
    """The sweep's activities of one worker."""

    def __init__(self) -> None:
        self.gate = asyncio.Semaphore(SHARDS_AT_ONCE)

    @activity.defn(name="fleetctl.sweep.plan")
    async def plan(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        """The shards: each site's servers in runs of ``shard`` (its switches with its first shard)."""
        return await asyncio.to_thread(self._plan, req)

    def _plan(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        from sqlalchemy import select

        size = max(1, int(req.get("shard") or SHARD_TARGETS))
        site_of: dict[tuple[str, str], str] = {}
        with get_engine().connect() as c:
            for kind, table, names in (("server", T.server, req["servers"]), ("switch", T.switch, req["switches"])):
                for i in range(0, len(names), 1000):
                    q = (select(table.c.name, T.site.c.name.label("site")).join(T.rack, T.rack.c.id == table.c.rack_id)
                         .join(T.site, T.site.c.id == T.rack.c.site_id).where(table.c.name.in_(names[i : i + 1000])))  # fmt: skip
                    site_of.update({(kind, r.name): r.site for r in c.execute(q)})
        by_site: dict[str, dict[str, list[str]]] = {}
        for kind, names in (("server", req["servers"]), ("switch", req["switches"])):
            for n in names:
                by_site.setdefault(site_of[(kind, n)], {"server": [], "switch": []})[kind].append(n)
        shards = []
        for site, got in sorted(by_site.items()):
            servers = got["server"]
            for k in range(max(1, math.ceil(len(servers) / size))):
                shards.append({"site": site, "servers": servers[k * size : (k + 1) * size], "switches": got["switch"] if k == 0 else []})
        return shards

    @activity.defn(name="fleetctl.sweep.shard")
    async def shard(self, req: dict[str, Any]) -> dict[str, Any]:
        """Read and judge a shard's targets into the run; the run's summary of them."""
        from sqlalchemy import delete

        async with heartbeating(), self.gate:
            engine = get_engine()
            run_id = int(req["run_id"])
            with engine.connect() as c:
                servers = resolve(c, req["servers"]) if req["servers"] else []
                switches = resolve_switches(c, req["switches"]) if req["switches"] else []
            names = [*req["servers"], *req["switches"]]
            if activity.info().attempt > 1:  # a lost worker's attempt: its rows of this run are replaced
                with immediate(engine) as c:
                    for i in range(0, len(names), 500):
                        chunk = names[i : i + 500]
                        c.execute(delete(T.sweep_target).where(T.sweep_target.c.run_id == run_id, T.sweep_target.c.name.in_(chunk)))
                        c.execute(delete(T.finding).where(T.finding.c.run_id == run_id, T.finding.c.target.in_(chunk)))
            rec = _Recorder(engine, run_id, dt.datetime.fromisoformat(req["started"]))
            try:
                await _sweep(engine, rec, servers, switches, SweepOptions(**req["options"]), None)
            finally:  # cancelled with the run (the command interrupted), what was read stays, as in process
                rec.flush()
            return _plain({"counts": rec.counts, "new": rec.new, "resolved": rec.resolved, "persisting": rec.persisting,
                           "findings": rec.findings})  # fmt: skip

    def control(self) -> list[Any]:
        return [self.plan]

    def site(self) -> list[Any]:
        return [self.shard]


def _dated(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        if isinstance(r.get("first_seen"), str):
            r["first_seen"] = dt.datetime.fromisoformat(r["first_seen"])
    return rows


def collector(servers: list[Any], switches: list[Any], options: Any, address: str, namespace: str,
              shard: int = SHARD_TARGETS) -> Callable[[Any], Coroutine[Any, Any, None]]:  # fmt: skip
    """``collect`` for :func:`fleetctl.sweep.engine.run`: the targets read by the workers, merged into the run's recorder."""
    import os

    from fleetctl.scaleout.activities import store_id

    check_store(database_url())

    async def collect(rec: Any) -> None:
        req = {"run_id": rec.run_id, "started": rec.now.isoformat(), "options": asdict(options), "shard": shard,
               "servers": [s.name for s in servers], "switches": [w.name for w in switches], "store": store_id(database_url()),
               "heartbeat_s": float(os.environ.get(ENV_HEARTBEAT) or HEARTBEAT_S)}  # fmt: skip
        client = await connect(address, namespace)
        handle = await client.start_workflow("fleetctl.sweep", req, id=f"fleetctl-sweep-{rec.run_id}", task_queue=CONTROL_QUEUE)
        try:
            out = await handle.result()
        except asyncio.CancelledError:
            # Ctrl-C (or SIGTERM): unlike a provisioning run, a sweep is closed by this command, which marks it
            # interrupted; its shards are cancelled and waited for, so no worker writes into a run said to be over.
            # A sweep only reads: nothing is left half done.
            with contextlib.suppress(Exception):
                await handle.cancel()
                await asyncio.wait_for(handle.result(), timeout=60)
            raise
        for part in out["shards"]:
            for k, v in part["counts"].items():
                rec.counts[k] = rec.counts.get(k, 0) + v
            for key in ("new", "resolved", "persisting", "findings"):
                getattr(rec, key).extend(_dated(part[key]))

    return collect
