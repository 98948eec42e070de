"""The garbage collector's thresholds are raised while a sweep runs, and given back after (issue 24).

At Python's default (700, 10, 10) the collector took a third of a sweep's CPU (docs/sweep.md, "Where the
time goes"); ``run_many`` raises them (:data:`SWEEP_GC_THRESHOLDS`) for its own duration only.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest
from fleetctl_drivers.redfish import run_many
from fleetctl_drivers.redfish.sweep import SWEEP_GC_THRESHOLDS, sweep_gc
from redfish_fake_bmc import FakeBMC

from fleetctl.interfaces.bmc import BMCTarget


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield (700, 10, 10)
    finally:
        gc.set_threshold(*saved)


def test_a_sweep_raises_the_thresholds_and_gives_them_back(default_thresholds: tuple[int, int, int]) -> None:
    seen: list[tuple[int, int, int]] = []

    async def op(bmc: Any) -> str:
        seen.append(gc.get_threshold())
        return bmc.target.name

    async def body() -> list[Any]:
        async with FakeBMC() as bmc:
            targets = [BMCTarget(name=f"bmc{i}", url=bmc.url, username="admin", password="pw") for i in range(3)]
            return await run_many(targets, op, concurrency=2, backoff=0.01)

    results = asyncio.run(body())
    assert [r.ok for r in results] == [True, True, True]
    assert seen == [SWEEP_GC_THRESHOLDS] * 3
    assert gc.get_threshold() == default_thresholds


def test_overlapping_sweeps_give_them_back_when_the_last_ends(default_thresholds: tuple[int, int, int]) -> None:
    with sweep_gc():
        with sweep_gc():
            assert gc.get_threshold() == SWEEP_GC_THRESHOLDS
        assert gc.get_threshold() == SWEEP_GC_THRESHOLDS  # the first sweep still runs
    assert gc.get_threshold() == default_thresholds


def test_higher_thresholds_of_the_process_are_kept(default_thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(50_000, 10, 1_000)
    with sweep_gc():
        assert gc.get_threshold() == (50_000, max(10, SWEEP_GC_THRESHOLDS[1]), 1_000)
    assert gc.get_threshold() == (50_000, 10, 1_000)


def test_a_failing_sweep_gives_them_back(default_thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError), sweep_gc():
        raise RuntimeError("interrupted")
    assert gc.get_threshold() == default_thresholds
