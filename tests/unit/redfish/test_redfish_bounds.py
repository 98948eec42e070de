"""What a hostile BMC can make the Redfish client read is bounded (issue 20, item 1).

A fake BMC on loopback (redfish_fake_bmc.FakeBMC, with hooks) plays the broken
firmware seen on real fleets: a ``Members@odata.nextLink`` that comes back to a
page already read, a collection that pages forever with a new link each time
(a BMC that ignores ``$skip``), a collection of hundreds of thousands of
members, a body far larger than any real one. These cases are hand-made: no
public recording of such a BMC was found; the sizes are 100 times and more
what real BMCs answer (quirks.py says what that is).

Each test asserts the error (BMC, collection or URI, and bound named) and that
the walk stopped at the bound (the requests the BMC served), and, where memory
is the point, the peak of what Python allocated (tracemalloc).
"""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
from dataclasses import replace
from typing import Any

import pytest
from aiohttp import web
from fleetctl_drivers.redfish import RedfishDriver, run_many
from fleetctl_drivers.redfish.client import AnswerOutOfBounds, RedfishClient
from fleetctl_drivers.redfish.quirks import Quirks
from redfish_fake_bmc import SYSTEM, FakeBMC, base_resources

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep.collect import bmc_operation
from tests.alone import in_child

LOGS = f"{SYSTEM}/LogServices"
LOG = f"{LOGS}/Log"
ENTRIES = f"{LOG}/Entries"
MiB = 1024 * 1024


def resources() -> dict[str, Any]:
    """The fake BMC's resources with one log service (whose entries the hooks below answer)."""
    res = base_resources()
    res[SYSTEM]["LogServices"] = {"@odata.id": LOGS}
    res[LOGS] = {"@odata.id": LOGS, "Members": [{"@odata.id": LOG}]}
    res[LOG] = {"@odata.id": LOG, "Id": "Log", "Entries": {"@odata.id": ENTRIES}}
    res[ENTRIES] = {"@odata.id": ENTRIES, "Members": []}
    return res


def target(url: str, name: str = "bmc-hostile") -> BMCTarget:
    return BMCTarget(name=name, url=url, username="admin", password="pw", timeout=10.0, retries=0)


def entry(n: int) -> dict[str, Any]:
    return {"@odata.id": f"{ENTRIES}/{n}", "Id": str(n), "Created": "2026-01-01T00:00:00Z", "Severity": "OK",
            "Message": f"entry {n}"}  # fmt: skip


def entries_served(bmc: FakeBMC) -> int:
    return bmc.counts[("GET", ENTRIES)]


async def client(bmc: FakeBMC, *, read_once: bool = True, **bounds: int) -> RedfishClient:
    c = RedfishClient(target(bmc.url), read_once=read_once, backoff=0.01)
    if bounds:
        c.set_bounds(replace(Quirks(), **bounds))
    await c.open()
    return c


# ------------------------------------------------------------------ paging


def looping(back_to: str) -> Any:
    """Entries in two pages; the second names ``back_to`` as its next page."""

    async def hook(request: web.Request, bmc: FakeBMC) -> web.Response:
        if request.query.get("$skip") == "1":
            return web.json_response({"@odata.id": ENTRIES, "Members": [entry(1)], "Members@odata.nextLink": back_to})
        return web.json_response({"@odata.id": ENTRIES, "Members": [entry(0)], "Members@odata.nextLink": f"{ENTRIES}?$skip=1"})

    return hook


@pytest.mark.parametrize("read_once", [True, False], ids=["read_once", "plain"])
@pytest.mark.parametrize("back_to", [ENTRIES, f"{ENTRIES}?$skip=1", f"http://bmc.example{ENTRIES}/?$skip=1"],
                         ids=["to-the-collection", "to-the-same-page", "same-page-absolute"])  # fmt: skip
def test_a_next_link_back_to_a_page_read_ends_the_walk(read_once: bool, back_to: str) -> None:
    """Before: the link was followed forever; with read_once the repeated page came from memory without
    yielding, so neither the sweep's deadline nor SIGTERM could stop it (18 GB in four minutes)."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:
            bmc.hooks[("GET", ENTRIES)] = looping(back_to)
            c = await client(bmc, read_once=read_once)
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.members(ENTRIES)
            finally:
                await c.close()
            assert e.value.bound == "page loop"
            assert str(e.value).startswith("bmc-hostile: collection /redfish/v1/Systems/1/LogServices/Log/Entries:")
            assert "comes back to a page already read (after 2 pages, 2 members)" in str(e.value)
            assert entries_served(bmc) == 2  # each page once, and the walk ended

    asyncio.run(body())


def forever(request: web.Request, bmc: FakeBMC, *, per_page: int = 1) -> web.Response:
    """A BMC that ignores $skip's end: every page names a next page never seen."""
    n = int(request.query.get("$skip", "0"))
    members = [entry(n + i) for i in range(per_page)]
    return web.json_response({"@odata.id": ENTRIES, "Members": members, "Members@odata.nextLink": f"{ENTRIES}?$skip={n + per_page}"})


def test_a_collection_paging_forever_stops_at_the_page_bound() -> None:
    async def body() -> None:
        async with FakeBMC(resources()) as bmc:

            async def hook(request: web.Request, bmc: FakeBMC) -> web.Response:
                return forever(request, bmc)

            bmc.hooks[("GET", ENTRIES)] = hook
            c = await client(bmc)  # the generic bounds, as a sweep has them
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.members(ENTRIES)
            finally:
                await c.close()
            pages = Quirks().max_collection_pages
            assert e.value.bound == "max_collection_pages"
            assert str(e.value) == (f"bmc-hostile: collection {ENTRIES}: more than {pages:,} pages ({pages:,} members so far), "
                                    "past the bound max_collection_pages; the walk ends here")  # fmt: skip
            assert entries_served(bmc) == pages

    asyncio.run(body())


def test_a_collection_paging_forever_with_many_members_stops_at_the_member_bound() -> None:
    async def body() -> None:
        async with FakeBMC(resources()) as bmc:

            async def hook(request: web.Request, bmc: FakeBMC) -> web.Response:
                return forever(request, bmc, per_page=1_000)

            bmc.hooks[("GET", ENTRIES)] = hook
            c = await client(bmc)
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.members(ENTRIES)
            finally:
                await c.close()
            limit = Quirks().max_collection_members
            assert e.value.bound == "max_collection_members"
            assert f"collection {ENTRIES}: more than {limit:,} members ({limit + 1_000:,} read)" in str(e.value)
            assert entries_served(bmc) == limit // 1_000 + 1

    asyncio.run(body())


def test_a_collection_of_hundreds_of_thousands_of_members_is_not_read_a_request_each() -> None:
    """One page with 200,000 links (12 MB, within the body bound): refused before any member is asked for."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:
            bmc.resources[ENTRIES]["Members"] = [{"@odata.id": f"{ENTRIES}/{i}"} for i in range(200_000)]
            c = await client(bmc)
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.members(ENTRIES)
            finally:
                await c.close()
            assert e.value.bound == "max_collection_members"
            assert "(200,000 read)" in str(e.value)
            member_gets = sum(n for (m, p), n in bmc.counts.items() if m == "GET" and p.startswith(ENTRIES + "/"))
            assert member_gets == 0

    asyncio.run(body())


def test_a_real_sized_paged_log_is_read_whole_under_the_generic_bounds() -> None:
    """The bounds must not cut a real log: iDRAC 9 pages its Lifecycle log 50 entries at a time with ``$skip``.

    Hand-made in the shape of public recordings: an iDRAC Lclog page with ``Members@odata.count`` 1735 and
    ``Members@odata.nextLink`` ``.../Lclog/Entries?$skip=50`` (wikimedia/operations-software-spicerack,
    spicerack/tests/unit/test_redfish.py, LCLOG_RESPONSE), and Dell's word that iDRAC returns 50 members a
    page (dell/iDRAC-Redfish-Scripting issue #270). Newest first, as there.
    """
    total = 1_735

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:

            async def hook(request: web.Request, bmc: FakeBMC) -> web.Response:
                skip = int(request.query.get("$skip", "0"))
                page: dict[str, Any] = {"@odata.id": ENTRIES, "Members@odata.count": total,
                                        "Members": [entry(total - i) for i in range(skip, min(skip + 50, total))]}  # fmt: skip
                if skip + 50 < total:
                    page["Members@odata.nextLink"] = f"{ENTRIES}?$skip={skip + 50}"
                return web.json_response(page)

            bmc.hooks[("GET", ENTRIES)] = hook
            c = await client(bmc)
            try:
                got = await c.members(ENTRIES)
            finally:
                await c.close()
            assert [e["Id"] for e in got] == [str(total - i) for i in range(total)]
            assert entries_served(bmc) == 35

    asyncio.run(body())


# ------------------------------------------------------------------ bodies


def streaming(total: int, *, content_length: bool = False, gzipped: bytes | None = None) -> Any:
    """A hook answering a JSON body of ``total`` bytes, written 1 MiB at a time (the server holds 1 MiB)."""
    sent = {"bytes": 0}

    async def hook(request: web.Request, bmc: FakeBMC) -> web.StreamResponse:
        headers = {"Content-Type": "application/json"}
        if gzipped is not None:
            resp = web.Response(body=gzipped, headers={**headers, "Content-Encoding": "gzip"})
            return resp
        resp = web.StreamResponse(headers=headers)
        if content_length:
            resp.content_length = total
        await resp.prepare(request)
        head = b'{"@odata.id": "' + ENTRIES.encode() + b'", "Members": [], "Pad": "'
        chunk = b"x" * MiB
        try:
            await resp.write(head)
            sent["bytes"] += len(head)
            while sent["bytes"] + MiB < total:
                await resp.write(chunk)
                sent["bytes"] += MiB
            await resp.write(b'"}')
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client hung up: what it wanted
        return resp

    hook.sent = sent  # type: ignore[attr-defined]
    return hook


@pytest.mark.parametrize("content_length", [False, True], ids=["chunked", "announced"])
def test_a_body_far_larger_than_any_real_one_is_dropped_past_the_bound(content_length: bool) -> None:
    """64 MB of JSON (real answers are a few MB at most): refused past 16 MiB, with no more than that held."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:
            hook = streaming(64 * MiB, content_length=content_length)
            bmc.hooks[("GET", ENTRIES)] = hook
            c = await client(bmc)
            tracemalloc.start()
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.get(ENTRIES)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
                await c.close()
            limit = Quirks().max_body_bytes
            assert e.value.bound == "max_body_bytes" and e.value.uri == ENTRIES
            assert str(e.value).startswith(f"bmc-hostile: GET {ENTRIES}: the answer is larger than {limit:,} bytes")
            # What was held: at most the bound and a chunk (the server's 1 MiB and the test's own counted too).
            assert peak < limit + 4 * MiB, peak
            if content_length:
                assert "Content-Length 67,108,864" in str(e.value)
                assert peak < 4 * MiB, peak  # refused on the header: nothing of the body was held
            # The client hung up: the server did not get to send it all (socket buffers take a few MB).
            assert hook.sent["bytes"] < 64 * MiB - MiB

    in_child(lambda: asyncio.run(body()))  # tests/alone.py: the peak is this test's, not the worker's threads'


def test_a_compressed_body_is_bounded_by_what_it_decompresses_to() -> None:
    """A gzip bomb: 64 KiB on the wire, 64 MiB once decompressed (aiohttp decompresses for us)."""

    async def body() -> None:
        bomb = gzip.compress(b'{"Pad": "' + b"0" * (64 * MiB) + b'"}')
        assert len(bomb) < MiB
        async with FakeBMC(resources()) as bmc:
            bmc.hooks[("GET", ENTRIES)] = streaming(0, gzipped=bomb)
            c = await client(bmc, max_body_bytes=4 * MiB)
            tracemalloc.start()
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.get(ENTRIES)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
                await c.close()
            assert e.value.bound == "max_body_bytes"
            assert peak < 12 * MiB, peak

    in_child(lambda: asyncio.run(body()))  # tests/alone.py: the peak is this test's, not the worker's threads'


def test_what_one_bmc_sends_in_all_is_bounded_and_past_it_nothing_more_is_asked() -> None:
    """Many members, each of a fair size: within every other bound, past the BMC's budget in all."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:
            for i in range(200):
                bmc.resources[f"{ENTRIES}/{i}"] = {**entry(i), "Pad": "y" * 10_000}
            bmc.resources[ENTRIES]["Members"] = [{"@odata.id": f"{ENTRIES}/{i}"} for i in range(200)]
            c = await client(bmc, max_bytes_per_bmc=MiB)
            try:
                with pytest.raises(AnswerOutOfBounds) as e:
                    await c.members(ENTRIES)
                served = sum(bmc.counts.values())
                with pytest.raises(AnswerOutOfBounds):
                    await c.get(SYSTEM)  # not asked: the BMC is past its budget
                assert sum(bmc.counts.values()) == served
            finally:
                await c.close()
            assert e.value.bound == "max_bytes_per_bmc"
            assert "bmc-hostile: GET " in str(e.value) and "passed 1,048,576 bytes in all" in str(e.value)
            assert bmc.logouts == 1  # the session is still closed: the budget bounds reads, not the logout

    asyncio.run(body())


def test_json_nested_past_the_parser_s_depth_is_no_answer_not_a_crash() -> None:
    async def body() -> None:
        async with FakeBMC(resources()) as bmc:

            async def deep(request: web.Request, bmc: FakeBMC) -> web.Response:
                return web.Response(body=b"[" * 200_000 + b"]" * 200_000, content_type="application/json")

            bmc.hooks[("GET", LOGS)] = deep
            c = await client(bmc)
            try:
                assert await c.get_optional(LOGS) is None
                assert await c.members(LOGS, errors=(errors := [])) == []
            finally:
                await c.close()
            assert errors == [f"{LOGS}: missing"]

    asyncio.run(body())


# ------------------------------------------------------- yields, deadlines


def test_a_remembered_answer_still_yields_to_the_event_loop() -> None:
    """The heart of the runaway: read_once answered a repeated page from memory without ever yielding."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:
            c = await client(bmc)
            try:
                await c.get(SYSTEM)  # remembered from now on
                ran_at: list[int] = []
                done = 0
                asyncio.get_running_loop().call_soon(lambda: ran_at.append(done))
                for _ in range(100):
                    await c.get(SYSTEM)
                    done += 1
            finally:
                await c.close()
            assert bmc.counts[("GET", SYSTEM)] == 1
            assert ran_at == [0]  # the loop ran other work at the first remembered answer, not after all 100

    asyncio.run(body())


def test_a_sweep_style_client_is_cancelled_by_its_per_bmc_deadline() -> None:
    """Bounds so high they never end the walk: the sweep's deadline (asyncio.wait_for) still does."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc:

            async def hook(request: web.Request, bmc: FakeBMC) -> web.Response:
                return forever(request, bmc)

            bmc.hooks[("GET", ENTRIES)] = hook
            c = await client(bmc, max_collection_pages=10**9, max_collection_members=10**9, max_bytes_per_bmc=10**15)
            try:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(c.members(ENTRIES), 0.5)
                served = entries_served(bmc)
                await asyncio.sleep(0.2)
                # cancelled: nothing more is asked (a request already on the wire may still arrive)
                assert entries_served(bmc) <= served + 1
            finally:
                await c.close()
            assert served > 0

    asyncio.run(body())


# ------------------------------------------------------------------- sweep


def test_a_sweep_names_the_looping_bmc_and_its_collection_and_reads_the_others() -> None:
    """The sweep's own operation and options (read_once, $expand, a per-BMC deadline) over three BMCs."""

    async def body() -> None:
        async with FakeBMC(resources()) as good1, FakeBMC(resources()) as bad, FakeBMC(resources()) as good2:
            bad.hooks[("GET", ENTRIES)] = looping(ENTRIES)
            for g in (good1, good2):
                g.resources[ENTRIES]["Members"] = [entry(0)]
            targets = [target(good1.url, "bmc-a"), target(bad.url, "bmc-loop"), target(good2.url, "bmc-c")]
            results = await run_many(targets, bmc_operation({}), concurrency=3, per_target_timeout=30.0,
                                     read_once=True, expand=True)  # fmt: skip
            assert [r.target for r in results] == ["bmc-a", "bmc-loop", "bmc-c"]
            assert all(r.ok for r in results), [r.error for r in results]
            by = {r.target: r.value for r in results}
            # (the fake BMCs have no firmware inventory: that part is unknown on all three alike)
            assert set(by["bmc-loop"].errors) == set(by["bmc-a"].errors) | {"logs"}
            msg = by["bmc-loop"].errors["logs"]
            assert msg.startswith(f"bmc-loop: collection {ENTRIES}: its next link {ENTRIES} comes back to a page already read")
            for name in ("bmc-a", "bmc-c"):
                assert "logs" not in by[name].errors and len(by[name].logs) == 1
            assert by["bmc-loop"].facts is not None and by["bmc-loop"].manager is not None  # the other parts were read
            assert entries_served(bad) == 2

    asyncio.run(body())


def test_a_vendor_s_quirks_carry_the_bounds_to_its_client() -> None:
    """Bounds are quirk data: the driver hands its vendor's to the client once the vendor is known."""

    async def body() -> None:
        async with FakeBMC(resources()) as bmc, RedfishDriver(target(bmc.url)) as d:
            q = await d.quirks()
            assert d.client.bounds is q
            assert (q.max_body_bytes, q.max_collection_pages, q.max_collection_members, q.max_bytes_per_bmc) == (
                16 * MiB, 1_000, 20_000, 64 * MiB)

    asyncio.run(body())

