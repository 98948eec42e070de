"""What reading one BMC costs the sweep beyond its requests (issue 24): a few readers, not a task per part,
per PCIe device or per log service; the same parts, the same requests, still two in flight."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep import collect
from fleetctl.sweep.collect import ServerReading, bmc_operation, read_parts

# ------------------------------------------------------------------ read_parts


def _part(label: str, log: list[str], busy: list[int], *, fail: bool = False) -> Any:
    async def read(**kwargs: Any) -> str:
        log.append(f"start {label} {sorted(kwargs.items())}")
        busy[0] += 1
        busy[1] = max(busy[1], busy[0])
        await asyncio.sleep(0.01)
        busy[0] -= 1
        if fail:
            raise RuntimeError("HTTP 500")
        return label

    return read


def test_read_parts_reads_every_part_a_few_at_a_time_and_a_failure_is_that_parts() -> None:
    log: list[str] = []
    busy = [0, 0]  # now, most at once
    names = ("facts", "health", "manager", "logs", "firmware")
    jobs: list[tuple[str, Any, dict[str, Any]]] = [
        (n, _part(n, log, busy, fail=n == "manager"), {"since": "c"} if n == "logs" else {}) for n in names
    ]
    r = ServerReading()
    got = asyncio.run(read_parts(jobs, r, "bmc1"))
    assert got == {n: n for n in names if n != "manager"}
    assert r.errors == {"manager": "bmc1: HTTP 500"}
    assert log[0] == "start facts []" and "start logs [('since', 'c')]" in log
    assert [e.split()[1] for e in log] == list(names)  # started in the parts' order
    assert busy[1] == collect.PART_READERS  # neither one at a time nor all five


def _slow(label: str, cancelled: list[str]) -> Any:
    """A read that waits long, and when cancelled takes a moment to end (as a request's cleanup does)."""

    async def read() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
            cancelled.append(label)
            raise

    return read


def test_read_parts_cancelled_cancels_the_other_readers_and_waits_for_them() -> None:
    cancelled: list[str] = []

    async def main() -> None:
        jobs: list[tuple[str, Any, dict[str, Any]]] = [(n, _slow(n, cancelled), {}) for n in ("facts", "health", "manager")]
        t = asyncio.ensure_future(read_parts(jobs, ServerReading(), "bmc1"))
        await asyncio.sleep(0.01)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        # every reader has ended before read_parts did: none outlives the BMC's read (and its logout)
        assert sorted(cancelled) == ["facts", "health", "manager"]

    asyncio.run(main())


# ------------------------------------------------------------- the driver's reads

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")
from fleetctl_drivers.redfish import capabilities, run_many  # noqa: E402
from fleetctl_drivers.redfish.client import RedfishClient  # noqa: E402


def test_each_keeps_the_order_and_the_bmcs_bound_and_raises_the_first_error() -> None:
    class C:
        target = BMCTarget(name="b", url="https://b", username="u", password="p", max_in_flight=2)

    busy = [0, 0]

    async def read(item: int, scale: int) -> int:
        busy[0] += 1
        busy[1] = max(busy[1], busy[0])
        await asyncio.sleep(0.001 * (7 - item))  # later items answer first
        busy[0] -= 1
        if item == 99:
            raise RuntimeError("bad member")
        return item * scale

    assert asyncio.run(capabilities._each(C(), list(range(7)), read, 10)) == [i * 10 for i in range(7)]
    assert busy[1] == 2
    with pytest.raises(RuntimeError, match="bad member"):
        asyncio.run(capabilities._each(C(), [1, 99, 2, 3], read, 1))
    assert asyncio.run(capabilities._each(C(), [], read, 1)) == []


def _recording(created: list[str], name: Any) -> Any:
    """A task factory that notes ``name(coro)`` of each task's coroutine in ``created``."""

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        created.append(name(coro))
        return asyncio.Task(coro, loop=loop, **kw)

    return factory


def test_together_cancelled_waits_for_the_reads_it_cancelled() -> None:
    cancelled: list[str] = []

    async def main() -> None:
        t = asyncio.ensure_future(capabilities._together(_slow("a", cancelled)(), _slow("b", cancelled)(), _slow("c", cancelled)()))
        await asyncio.sleep(0.01)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert sorted(cancelled) == ["a", "b", "c"]  # ended before _together did

    asyncio.run(main())


def test_together_is_gather_with_one_task_fewer() -> None:
    created: list[str] = []

    async def value(v: int) -> int:
        await asyncio.sleep(0)
        return v

    async def boom() -> int:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(_recording(created, lambda coro: coro.__name__))
        assert await capabilities._together(value(1), None, value(3)) == [1, None, 3]
        assert created == ["value"]  # the first read awaited here, not as a task
        assert await capabilities._together(None, None) == [None, None]
        with pytest.raises(ValueError, match="boom"):
            await capabilities._together(value(1), boom())
        with pytest.raises(ValueError, match="boom"):
            await capabilities._together(boom(), boom())  # the second's error retrieved, not logged as lost
        await asyncio.sleep(0.01)

    asyncio.run(main())
    gc.collect()


def _where(coro: Any) -> str:
    """``folder/module.py qualname`` of a task's coroutine (``sweep/collect.py``, ``redfish/client.py``; ``aiohttp/...`` theirs)."""
    code = getattr(coro, "cr_code", None)
    path = Path(code.co_filename) if code is not None else Path("?")
    return f"{path.parent.name}/{path.name} {getattr(coro, '__qualname__', '?')}"


def _lab(tmp_path: Path, flavour: str) -> tuple[Any, Any]:
    (spec,) = fleetctl_lab.generate_specs(1, prefix=f"rc{flavour}", flavours=(flavour,))
    return spec, fleetctl_lab.run_lab_in_thread([spec], fleetctl_lab.LabConfig(state_dir=tmp_path / "lab"))


@pytest.mark.parametrize("flavour", ["ami", "openbmc"])
def test_one_bmc_is_read_by_a_few_tasks_still_two_requests_in_flight(flavour: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The lab's AMI (deep reads: every PCIe function and log entry inline) and OpenBMC (a request per device and
    per log service): before, a task per part (5), per PCIe device (6) and per log service (3-4), 20 and 35 tasks
    per BMC; now the AMI's inline ones are parsed without a task and the rest read by two readers."""
    spec, running = _lab(tmp_path, flavour)
    real = RedfishClient._request
    clients: set[RedfishClient] = set()
    sent: list[str] = []

    async def counted(self: RedfishClient, method: str, uri: str, **kw: Any) -> Any:
        sent.append(uri)
        clients.add(self)
        return await real(self, method, uri, **kw)

    created: list[str] = []

    async def sweep(target: BMCTarget) -> Any:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(_recording(created, _where))
        (r,) = await run_many([target], bmc_operation({}), read_once=True, expand=True)
        return r

    with running as lab:
        target = BMCTarget(name=spec.name, url=lab.url_of(spec.name), username=spec.username, password=spec.password,
                           fingerprint=lab.fingerprint_of(spec.name), timeout=10, retries=0)  # fmt: skip
        monkeypatch.setattr(RedfishClient, "_request", counted)
        r = asyncio.run(sweep(target))
    assert r.ok, r.error
    reading = r.value
    assert not reading.errors and reading.facts.boards and reading.health.temperatures and reading.firmware
    assert reading.logs is not None
    ours = [c for c in created if c.startswith(("sweep/", "redfish/")) and "run_many" not in c]
    per_member = [c for c in ours if "RedfishClient.expand" in c]  # the client's own, not these reads'
    reads = [c for c in ours if c not in per_member]
    assert not any("<locals>" in c for c in reads), reads  # no closure per part or member
    assert reads.count("sweep/collect.py _read_parts") == collect.PART_READERS - 1, reads
    assert len(reads) <= 7, reads  # before: 19 (AMI) and 20 besides the client's (OpenBMC)
    # The client's task per link is left only where its members() walks a collection (Processors, firmware):
    # the PCIe devices' links are read by two readers (before: 14 on the lab's OpenBMC, 6 of them devices).
    assert len(per_member) <= {"ami": 0, "openbmc": 8}[flavour], per_member
    (client,) = clients
    assert client.max_seen_in_flight == 2  # the BMC's bound, reached: what ran two wide still does
    assert len(sent) == len(set(sent))  # every resource asked for once


def test_expand_reads_each_link_through_the_clients_expand_in_order_and_leaves_the_bound_to_it() -> None:
    class C:
        target = BMCTarget(name="b", url="https://b", username="u", password="p", max_in_flight=2)

        class bounds:  # stands for the client's Quirks
            max_collection_members = 5

        def __init__(self) -> None:
            self.calls: list[int] = []

        async def expand(self, refs: Any, *, errors: list[str] | None = None) -> list[dict]:
            refs = list(refs)
            self.calls.append(len(refs))
            if len(refs) > self.bounds.max_collection_members:
                raise RuntimeError("past the bound")
            out = []
            for r in refs:
                if r.get("@odata.id") == "/bad":
                    assert errors is not None
                    errors.append("/bad: HTTP 500")
                    continue
                await asyncio.sleep(0.001 if r.get("@odata.id") == "/a" else 0)  # the first answers last
                out.append({**r, "read": True} if len(r) == 1 else r)
            return out

    c, errors = C(), list[str]()
    refs = [{"@odata.id": "/a"}, {"@odata.id": "/x", "Name": "inline"}, {"@odata.id": "/bad"}, {"@odata.id": "/b"}]
    got = asyncio.run(capabilities._expand(c, refs, errors))
    assert [d["@odata.id"] for d in got] == ["/a", "/x", "/b"] and errors == ["/bad: HTTP 500"]
    assert c.calls == [1, 1, 1, 1]  # one ref at a time, by two readers
    with pytest.raises(RuntimeError, match="past the bound"):
        asyncio.run(capabilities._expand(c, [{"@odata.id": f"/{i}"} for i in range(6)], errors))
    c.calls.clear()
    asyncio.run(capabilities._expand(c, [{"@odata.id": "/a"}, {"@odata.id": "/x", "Name": "inline"}], errors))
    assert c.calls == [2]  # one link: the client's expand awaits it in place, no reader needed
