"""Run one operation over many BMCs at once; results are data, never raised.

    results = await run_many(targets, lambda bmc: bmc.power.state(), concurrency=200)
    for r in results:
        print(r.target, r.ok, r.value if r.ok else r.error)

A failure on one BMC (timeout, refused login, TLS mismatch, a bug in a
parser) is recorded in that BMC's :class:`TargetResult`; the sweep goes on.
All BMCs share one :class:`FleetSession` (one aiohttp ``ClientSession``);
``concurrency`` bounds the BMCs worked on at once and each BMC's own
``max_in_flight`` bounds the requests to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.interfaces.sweep import BMCSweepResult

from .client import FleetSession
from .driver import RedfishDriver

# The verdict for one BMC (fingerprint pinned on first use, vendor detected)
# is the interface's; the old name stays for callers that import it from here.
TargetResult = BMCSweepResult

ProgressFn = Callable[[int, int, TargetResult], Any]

#: Python's cyclic garbage collector during a sweep: (gen-0, gen-1, gen-2) thresholds, in place of the default
#: (700, 10, 10). A sweep allocates about a thousand container objects per BMC that outlive a few requests
#: (aiohttp's requests and responses, asyncio's futures and handles, the parsed documents) and frees them by
#: reference counting; at the default gen-0 threshold the collector ran 1,900 times per 1,000 BMCs and took a
#: third to a half of the sweep's CPU (5.0-7.9 of 13.9-16.7 ms per BMC, the lab's AMI dialect; docs/sweep.md,
#: "Where the time goes"). With gen-0 at 10,000 it runs about 90 times (2.0-2.3 ms per BMC). Only gen-0 is
#: raised: the older generations keep their ratios (a full collection about once per 1,000 BMCs, where the
#: default made 16), and what a full collection then freed was nothing the sweep had not already given back:
#: peak RSS at 1,000 BMCs 401 -> 407 MB ((10000, 50, 100) gave 436 MB for no CPU beyond the noise).
SWEEP_GC_THRESHOLDS = (10_000, 10, 10)

_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def sweep_gc() -> Iterator[None]:
    """Raise the garbage collector's thresholds (:data:`SWEEP_GC_THRESHOLDS`) while at least one sweep runs.

    The process's own thresholds come back when the last sweep ends (sweeps may overlap: fleets, threads);
    thresholds set higher than ours are left as they are.
    """
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(_gc_saved, SWEEP_GC_THRESHOLDS, strict=True)))
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_saved is not None:
                gc.set_threshold(*_gc_saved)
                _gc_saved = None


async def run_many(
    targets: Iterable[BMCTarget],
    operation: Callable[[RedfishDriver], Awaitable[Any]],
    *,
    concurrency: int = 200,
    progress: ProgressFn | None = None,
    per_target_timeout: float | None = None,
    fleet: FleetSession | None = None,
    driver_cls: type[RedfishDriver] = RedfishDriver,
    **driver_kwargs: Any,
) -> list[TargetResult]:
    """Run ``operation(bmc)`` on every target; one :class:`TargetResult` each, in order.

    Args:
        targets: the BMCs.
        operation: an async function of an opened :class:`RedfishDriver`.
        concurrency: BMCs worked on at once.
        progress: called as ``progress(done, total, result)`` after each BMC.
        per_target_timeout: an overall bound per BMC (login to logout), seconds.
        fleet: an open FleetSession to reuse; None opens one for this call.
        driver_cls: the driver class to open each BMC with (a subclass of
            :class:`RedfishDriver`; ``RedfishDriver.sweep`` passes its own class).
        driver_kwargs: passed to the driver's constructor.
    """
    targets = list(targets)
    total = len(targets)
    results: list[TargetResult | None] = [None] * total
    done = 0
    own = fleet is None
    fleet = fleet or FleetSession()
    await fleet.open()

    async def one(i: int, target: BMCTarget) -> None:
        nonlocal done
        t0 = time.perf_counter()
        driver = driver_cls(target, fleet=fleet, **driver_kwargs)
        result = TargetResult(target=target.name, ok=False)
        try:
            coro = _run_one(driver, operation)
            value = await (asyncio.wait_for(coro, per_target_timeout) if per_target_timeout else coro)
            result.ok, result.value = True, value
        except TimeoutError as e:
            if per_target_timeout is None:  # not our bound: something inside timed out
                result.failed(e)
            else:
                result.error = f"{target.name}: no result within {per_target_timeout:g} s"
                result.error_type = "Timeout"
        except Exception as e:  # noqa: BLE001 - one BMC's failure, or a bug, is recorded; the sweep goes on
            result.failed(e)
        result.elapsed = time.perf_counter() - t0
        result.vendor = driver.vendor
        if driver.fingerprint_first_seen:
            result.fingerprint = driver.fingerprint
        results[i] = result
        done += 1
        if progress is not None:
            r = progress(done, total, result)
            if asyncio.iscoroutine(r):
                await r

    # ``concurrency`` workers take the BMCs in order, rather than a task per BMC waiting on a
    # semaphore: 10,000 parked tasks cost memory and scheduling for nothing.
    pending = iter(enumerate(targets))

    async def worker() -> None:
        for i, t in pending:  # one shared iterator: each BMC is taken by one worker
            await one(i, t)

    try:
        with sweep_gc():
            await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, total)))))
    finally:
        if own:
            await fleet.close()
    return [r for r in results if r is not None]


async def _run_one(driver: RedfishDriver, operation: Callable[[RedfishDriver], Awaitable[Any]]) -> Any:
    async with driver:
        return await operation(driver)


def run_many_sync(
    targets: Iterable[BMCTarget],
    operation: Callable[[RedfishDriver], Awaitable[Any]],
    **kwargs: Any,
) -> list[TargetResult]:
    """:func:`run_many` for synchronous callers (the CLI)."""
    return asyncio.run(run_many(targets, operation, **kwargs))
