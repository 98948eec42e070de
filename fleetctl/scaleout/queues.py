"""Task queues, timeouts and retry policies of the scale-out engine.

Standard library only: the workflow sandbox re-imports this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

# Parent workflows and the activities that touch only the store (open a job, lock, close) run here;
# every worker polls it besides its site's queue.
CONTROL_QUEUE = "fleetctl-control"

# Heartbeat of a long activity: a worker that dies is noticed within this (its activity then runs again
# elsewhere, after the step's check). Tests shorten it through the run's options.
HEARTBEAT_S = 30.0

# How often an activity lost with its worker (heartbeat timeout) is started again. A step's failure is not
# an exception but a value (the server fails, as in process), so only a lost worker leads to a retry; and
# every step checks before it acts (a firmware component at the baseline is never flashed again; a boot
# whose one-time override was consumed powers nothing again).
STEP_ATTEMPTS = 6


def site_queue(site: str) -> str:
    """The task queue of a site: every unit and check that reaches its devices (and a unit's own child workflow)."""
    return f"fleetctl-site-{site}"


async def settled(*aws: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather`` that raises only once every awaitable has ended.

    A plain gather raises as soon as one child ends cancelled or with an error,
    even while the run is being cancelled, and the others run on: the parent
    then closed the job and released the locks while another server's child
    workflow was still stopping its step. Here the first cancellation (else
    the first error) is raised after all have ended.
    """
    results = await asyncio.gather(*aws, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors:
        if isinstance(e, asyncio.CancelledError):
            raise e
    if errors:
        raise errors[0]
    return results
