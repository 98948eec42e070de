"""What the scale-out engine's activities share: heartbeating, the store check, a job owned by its workflow.

The activities themselves are the described workflows' (:mod:`.run_act`:
provisioning, burn-in, the sweep's reading, the firmware campaign).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleetctl.config import database_url
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.workflows.journal import OWNER_ARG


@asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while the body runs (a third of the activity's heartbeat timeout apart)."""
    timeout = activity.info().heartbeat_timeout
    every = max(0.2, timeout.total_seconds() / 3) if timeout else 10.0

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def store_id(url: str) -> str:
    """The store's URL without its password: which database a command and a worker use, safe to put in a history."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def shared_store(req: dict[str, Any]) -> Any:
    """This worker's store (an engine), refusing one that is not the command's (``req["store"]``, from ``store_id``).

    A worker on another database would write the run where nobody reads it; the refusal is not retried.
    """
    url = database_url()
    if store_id(url) != req["store"]:
        raise ApplicationError(f"this worker's store is {store_id(url)}, the command's {req['store']}: "
                               "workers and commands must share one database", type="StoreMismatch", non_retryable=True)  # fmt: skip
    return get_engine()


def _own(engine: Any, job_id: int, owner: str) -> None:
    """Record the job's owner as the Temporal run, not the worker process that opened it."""
    from sqlalchemy import select, update

    with immediate(engine) as c:
        args = c.execute(select(T.job.c.args).where(T.job.c.id == job_id)).scalar_one()
        c.execute(update(T.job).where(T.job.c.id == job_id).values(args={**(args or {}), OWNER_ARG: owner}))
