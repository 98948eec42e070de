"""The health sweep on the scale-out engine, from the command: its reading as the sweep's description
(:mod:`fleetctl.sweep.workflow`: a unit per shard of targets, by site) run by the generic workflow ``fleetctl.run``.

The command opens and closes the sweep run exactly as in process
(:func:`fleetctl.sweep.engine.run`, through its ``collect`` hook); in between,
the workers of each site read their shards into the run, and the shards'
summaries are merged into the command's recorder. The criteria the host checks
judge by are read here, once, and carried to every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from fleetctl.config import database_url
from fleetctl.errors import InputError
from fleetctl.scaleout.client import check_store, connect, described_call
from fleetctl.scaleout.queues import CONTROL_QUEUE
from fleetctl.sweep.workflow import SHARD_TARGETS, ShardSummary, SweepRequest, merge
from fleetctl.workflows.describe import typed


def site_criteria() -> dict[str, Any] | None:
    """The criteria in force for this command (``$FLEETCTL_BURNIN_CRITERIA`` or the bundled file), as JSON values; None when
    they cannot be read (each worker then reads its own, and a copy it cannot read makes its host checks unknown)."""
    from fleetctl.burnin.criteria import current

    try:
        return current().model_dump(mode="json")
    except InputError:
        return None


def collector(servers: list[Any], switches: list[Any], options: Any, address: str, namespace: str,
              shard: int = SHARD_TARGETS) -> Callable[[Any], Coroutine[Any, Any, None]]:  # fmt: skip
    """``collect`` for :func:`fleetctl.sweep.engine.run`: the targets read by the workers, merged into the run's recorder."""
    check_store(database_url())
    criteria = site_criteria() if options.level == "host" else None

    async def collect(rec: Any) -> None:
        req = SweepRequest(rec.run_id, rec.now.isoformat(), options, [s.name for s in servers], [w.name for w in switches], shard,
                           criteria)  # fmt: skip
        client = await connect(address, namespace)
        handle = await client.start_workflow("fleetctl.run", described_call("sweep", req), id=f"fleetctl-sweep-{rec.run_id}",
                                             task_queue=CONTROL_QUEUE)  # fmt: skip
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
        merge(rec, typed(ShardSummary, out["result"]))

    return collect
