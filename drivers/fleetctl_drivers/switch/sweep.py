"""Run one operation over many switches at once; results are data, never raised.

    results = run_many(targets, lambda sw: sw.get_facts(), concurrency=16)
    for r in results:
        print(r.target, r.ok, r.value if r.ok else r.error)

netmiko is synchronous, so switches are worked on in a thread pool bounded by
``concurrency``. A failure on one switch (refused login, timeout, a dropped
session, a parser meeting new output) is recorded in its
:class:`TargetResult`; the others go on. The shape mirrors the BMC sweep's
(``fleetctl_drivers.redfish.sweep``). ``NetmikoSwitch.sweep`` is this function.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fleetctl.interfaces.sweep import SwitchSweepResult
from fleetctl.interfaces.switch import SwitchTarget

from .driver import NetmikoSwitch

# The verdict for one switch is the interface's; the old name stays for
# callers that import it from here.
TargetResult = SwitchSweepResult

ProgressFn = Callable[[int, int, TargetResult], Any]


def run_many(
    targets: Iterable[SwitchTarget],
    operation: Callable[[NetmikoSwitch], Any],
    *,
    concurrency: int = 16,
    progress: ProgressFn | None = None,
    driver_factory: Callable[[SwitchTarget], NetmikoSwitch] = NetmikoSwitch,
) -> list[TargetResult]:
    """Run ``operation(switch)`` on every target; one :class:`TargetResult` each, in order.

    Args:
        targets: the switches.
        operation: a function of an opened :class:`NetmikoSwitch`.
        concurrency: switches worked on at once (threads; each holds one SSH session).
        progress: called as ``progress(done, total, result)`` after each switch
            (from worker threads, one call at a time).
        driver_factory: builds the driver for a target (tests, other drivers).
    """
    targets = list(targets)
    total = len(targets)
    results: list[TargetResult | None] = [None] * total
    lock = threading.Lock()
    done = 0

    def one(i: int, target: SwitchTarget) -> None:
        nonlocal done
        t0 = time.perf_counter()
        result = TargetResult(target=target.name, ok=False, platform=target.platform)
        try:
            with driver_factory(target) as sw:
                result.value = operation(sw)
                result.ok = True
        except Exception as e:  # noqa: BLE001 - one switch's failure, or a bug, is recorded; the sweep goes on
            result.failed(e)
        result.elapsed = time.perf_counter() - t0
        results[i] = result
        with lock:
            done += 1
            if progress is not None:
                progress(done, total, result)

    if total:
        with ThreadPoolExecutor(
            max_workers=max(1, min(concurrency, total)), thread_name_prefix="switch"
        ) as pool:
            for f in [pool.submit(one, i, t) for i, t in enumerate(targets)]:
                f.result()
    return [r for r in results if r is not None]
