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
from asyncio import sslproto
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sized
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

#: Python's TLS transport (``asyncio.sslproto.SSLProtocol``) gives every connection a read buffer of
#: ``max_size`` bytes, 256 KiB by default, allocated and zeroed at the handshake, so resident for the
#: connection's life. A sweep holds 2 connections per BMC it reads (and the idle ones until the
#: keep-alive ends): at ``--concurrency`` 250 that was 500-750 buffers, about half of the sweep's peak RSS
#: (1,500 lab BMCs, 50 ms per request: 372 MB). A TLS record carries at most 16 KiB, and one ``SSL_read``
#: returns at most one record, so 32 KiB (two records per socket read) reads every answer in as many calls
#: as before: peak RSS 372 -> 211 MB, CPU per BMC the same within the noise (10.4 / 10.7 / 10.5 ms at 256 /
#: 32 / 16 KiB; docs/sweep.md, "Memory").
SWEEP_TLS_READ_BUFFER = 32 * 1024


class _WhileSweeping:
    """A process-wide setting changed while at least one sweep runs, given back when the last one ends.

    Sweeps may overlap (several fleets, threads), so users are counted; a value the process set beyond
    ours is left as it is (``want`` sees the saved value).
    """

    def __init__(self, get: Callable[[], Any], put: Callable[[Any], None], want: Callable[[Any], Any]) -> None:
        self._get, self._put, self._want = get, put, want
        self._lock = threading.Lock()
        self._users = 0
        self._saved: Any = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._saved = self._get()
                self._put(self._want(self._saved))
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._put(self._saved)
                    self._saved = None


def _set_tls_read_buffer(size: int) -> None:
    sslproto.SSLProtocol.max_size = size  # a class attribute of CPython's asyncio


#: ``with sweep_gc():`` raises the collector's thresholds to :data:`SWEEP_GC_THRESHOLDS` (never lowers one).
sweep_gc = _WhileSweeping(
    gc.get_threshold,
    lambda t: gc.set_threshold(*t),
    lambda saved: tuple(max(a, b) for a, b in zip(saved, SWEEP_GC_THRESHOLDS, strict=True)),
)

#: ``with sweep_tls_buffers():`` gives the TLS connections opened meanwhile :data:`SWEEP_TLS_READ_BUFFER`
#: (never a larger buffer than the process's own setting).
sweep_tls_buffers = _WhileSweeping(
    lambda: getattr(sslproto.SSLProtocol, "max_size", None),
    lambda size: None if size is None else _set_tls_read_buffer(size),
    lambda saved: None if saved is None else min(saved, SWEEP_TLS_READ_BUFFER),
)


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
        targets: the BMCs. A list, or a sized iterable taken as the BMCs are worked on and never listed (the sweep's
            stream: its targets made from the store a chunk at a time); its ``len`` is then at least the number it
            gives, and the results are those of the targets it gave.
        operation: an async function of an opened :class:`RedfishDriver`.
        concurrency: BMCs worked on at once.
        progress: called as ``progress(done, total, result)`` after each BMC.
        per_target_timeout: an overall bound per BMC (login to logout), seconds.
        fleet: an open FleetSession to reuse; None opens one for this call.
        driver_cls: the driver class to open each BMC with (a subclass of
            :class:`RedfishDriver`; ``RedfishDriver.sweep`` passes its own class).
        driver_kwargs: passed to the driver's constructor.
    """
    if not isinstance(targets, Sized):
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
        with sweep_gc(), sweep_tls_buffers():
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
