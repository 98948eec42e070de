"""`fleetctl worker --site SITE`: a Temporal worker for one site.

It polls two task queues: its site's (every described workflow's units and
checks that reach the site's BMCs, switches and hosts, and the child workflows
of units that have an id of their own) and the control
queue (the parent workflows and the activities that touch only the store).
Several workers per site share the site's queue; a site's work never runs on
another site's worker.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from fleetctl.config import database_url

# A worker's activities judge locks Temporal runs hold (fleetctl.holders): the engine's check is registered here too.
from fleetctl.scaleout import liveness as _liveness  # noqa: F401
from fleetctl.scaleout.client import check_store, connect
from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue


async def run_worker(site: str, address: str, namespace: str, *, activities: int = 500,
                     ready: Callable[[str], None] | None = None) -> None:  # fmt: skip
    """Run until SIGTERM or SIGINT; then finish what runs (Temporal gives what does not finish to another worker)."""
    from temporalio.worker import Worker

    # (the activities import the Temporal SDK, an optional extra: not for a command that never reaches Temporal)
    from fleetctl.scaleout.run_act import RunActivities
    from fleetctl.scaleout.run_wf import RunUnit, RunWorkflow

    check_store(database_url())
    client = await connect(address, namespace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    described = RunActivities()  # every described workflow (provisioning, burn-in, the sweep ...): fleetctl.workflows.describe
    site_worker = Worker(client, task_queue=site_queue(site), workflows=[RunUnit],
                         activities=[*described.site()],
                         max_concurrent_activities=activities)  # fmt: skip
    control = Worker(client, task_queue=CONTROL_QUEUE, workflows=[RunWorkflow],
                     activities=[*described.control()])  # fmt: skip
    tasks = [asyncio.create_task(site_worker.run()), asyncio.create_task(control.run())]
    if ready is not None:
        ready(f"worker for site {site}: task queues {site_queue(site)} and {CONTROL_QUEUE} on {address} (namespace {namespace})")
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    await asyncio.gather(site_worker.shutdown(), control.shutdown(), return_exceptions=True)
    for t in tasks:
        if t.done() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    await described.aclose()  # the run-scoped sessions (a site's coordinators) this worker kept
