"""run_many: one verdict per BMC, failures recorded, never raised."""

from __future__ import annotations

import asyncio

from fleetctl_drivers.redfish import TargetResult, run_many
from redfish_fake_bmc import SYSTEM, FakeBMC, base_resources

from fleetctl.interfaces.bmc import BMCTarget, PowerState


def test_sweep_records_each_failure_and_keeps_order():
    async def body():
        async with FakeBMC() as good, FakeBMC(base_resources(power="Off")) as good_off, FakeBMC() as bad_pw:
            targets = [
                BMCTarget(name="n1", url=good.url, username="admin", password="pw"),
                BMCTarget(name="n2", url="http://127.0.0.1:9", username="admin", password="pw", retries=0),
                BMCTarget(name="n3", url=bad_pw.url, username="admin", password="nope"),
                BMCTarget(name="n4", url=good_off.url, username="admin", password="pw"),
            ]
            seen: list[tuple[int, int, str]] = []
            results = await run_many(
                targets,
                lambda bmc: bmc.power.state(),
                concurrency=2,
                progress=lambda done, total, r: seen.append((done, total, r.target)),
            )
            assert [r.target for r in results] == ["n1", "n2", "n3", "n4"]
            assert all(isinstance(r, TargetResult) for r in results)
            assert (results[0].ok, results[0].value) == (True, PowerState.ON)
            assert (results[3].ok, results[3].value) == (True, PowerState.OFF)
            assert not results[1].ok and results[1].error_type == "BMCError" and "cannot connect" in results[1].error
            assert not results[2].ok and results[2].error_type == "AuthError"
            assert sorted(s[0] for s in seen) == [1, 2, 3, 4] and {s[1] for s in seen} == {4}
            assert good.logouts == 1 and good_off.logouts == 1

    asyncio.run(body())


def test_sweep_concurrency_bound_and_bug_in_operation_is_recorded():
    async def body():
        async with FakeBMC(delay=0.05) as bmc:
            active = 0
            peak = 0

            async def op(d):
                nonlocal active, peak
                active += 1
                peak = max(peak, active)
                try:
                    if d.target.name == "n3":
                        raise KeyError("Members")  # a parser bug on one BMC
                    return await d.power.state()
                finally:
                    active -= 1

            targets = [BMCTarget(name=f"n{i}", url=bmc.url, username="admin", password="pw") for i in range(6)]
            results = await run_many(targets, op, concurrency=3)
            assert peak <= 3
            assert [r.ok for r in results] == [True, True, True, False, True, True]
            assert results[3].error_type == "KeyError" and "Members" in results[3].error

    asyncio.run(body())


def test_sweep_per_target_timeout():
    async def body():
        async with FakeBMC() as bmc:

            async def slow(request, b):
                await asyncio.sleep(1.0)
                return None

            bmc.hooks[("GET", SYSTEM)] = slow
            t = BMCTarget(name="slow", url=bmc.url, username="admin", password="pw")
            (r,) = await run_many([t], lambda d: d.power.state(), per_target_timeout=0.3)
            assert not r.ok and r.error_type == "Timeout"

    asyncio.run(body())


def test_sweep_timeout_inside_operation_without_a_bound_is_recorded():
    """A TimeoutError the operation raises itself (no per_target_timeout) is one BMC's failure, not a crash."""

    async def body():
        async with FakeBMC() as bmc:

            async def op(d):
                if d.target.name == "n1":
                    raise TimeoutError("firmware task did not finish")
                return await d.power.state()

            targets = [BMCTarget(name=f"n{i}", url=bmc.url, username="admin", password="pw") for i in range(3)]
            results = await run_many(targets, op)
            assert [r.ok for r in results] == [True, False, True]
            assert results[1].error_type == "TimeoutError"
            assert results[1].error == "n1: unexpected TimeoutError: firmware task did not finish"

    asyncio.run(body())
