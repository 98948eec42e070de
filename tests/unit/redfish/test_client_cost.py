"""What a sweep's reads cost the event loop beyond the requests themselves (issue 24, item 2).

Counted, not timed (the machine is too noisy for a timing to fail a test): a 300-BMC AMI sweep made 61 asyncio
tasks per BMC where the bare aiohttp floor replaying the same 16 requests made 15; 41 of them were
``RedfishClient.expand`` wrapping each member already in an ``$expand`` answer in a task of its own (about
three event-loop callbacks each: 202 -> 108 ``call_soon`` per BMC). Members in the answer are now taken as they
are; only links are read, concurrently, and one link is awaited without a task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.redfish.client import RedfishClient, RedfishError

from fleetctl.interfaces.bmc import BMCTarget


def _client() -> RedfishClient:
    return RedfishClient(BMCTarget(name="bmc1", url="https://192.0.2.1", username="u", password="p"))


def _counting_tasks(loop: asyncio.AbstractEventLoop) -> list[str]:
    made: list[str] = []

    def factory(lp: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", "?"))
        return asyncio.Task(coro, loop=lp, **kw)

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    return made


def _run(coro_fn: Any) -> tuple[Any, list[str]]:
    loop = asyncio.new_event_loop()
    try:
        made = _counting_tasks(loop)

        async def main() -> Any:
            return await coro_fn()

        result = loop.run_until_complete(main())
        return result, [m for m in made if not m.endswith("main")]
    finally:
        loop.close()


def test_members_in_the_answer_cost_no_task() -> None:
    c = _client()
    inline = [{"@odata.id": f"/redfish/v1/Chassis/1/Sensors/t{i}", "Reading": i} for i in range(12)]
    refs = [*inline, {"error": {"code": "x"}}, "not a dict", {}]
    got, tasks = _run(lambda: c.expand(refs))
    assert got == [*inline, {}]  # an error body and a non-dict are skipped, as before
    assert tasks == []


def test_one_link_is_awaited_without_a_task_and_many_are_read_concurrently_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = _client()
    asked: list[str] = []

    async def get(uri: str) -> Any:
        asked.append(uri)
        await asyncio.sleep(0.01 if uri.endswith("/a") else 0)  # /a answers last: the order is the refs'
        if uri.endswith("/missing"):
            raise RedfishError(f"{uri}: HTTP 404", status=404, method="GET", uri=uri, message_ids=[])
        if uri.endswith("/err"):
            return {"error": {"message": "broken"}}
        return {"@odata.id": uri, "Name": uri[-1]}

    monkeypatch.setattr(c, "get", get)
    inline = {"@odata.id": "/r/in", "Name": "in"}

    got, tasks = _run(lambda: c.expand([inline, {"@odata.id": "/r/one", "@odata.type": "#X"}]))
    assert got == [inline, {"@odata.id": "/r/one", "Name": "e"}]
    assert tasks == []

    errors: list[str] = []
    refs = [{"@odata.id": "/r/a"}, inline, {"@odata.id": "/r/b"}, {"@odata.id": "/r/missing"}, {"@odata.id": "/r/err"}]
    got, tasks = _run(lambda: c.expand(refs, errors=errors))
    assert [g["Name"] for g in got] == ["a", "in", "b"]
    assert len(tasks) == 4  # the links only, concurrently
    assert sorted(errors) == ["/r/err: answered an error body: broken", "/r/missing: HTTP 404"]


def test_the_session_log_is_found_without_asking_platformdirs_each_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A client asks for the session log three times per BMC; the data folder is worked out once per environment."""
    from fleetctl_drivers.redfish import session_log as sl

    import fleetctl.config as config

    asked: list[str] = []
    real = config.data_dir

    def counted() -> Any:
        asked.append("data_dir")
        return real()

    monkeypatch.setattr(config, "data_dir", counted)
    monkeypatch.setenv("FLEETCTL_DATA_DIR", str(tmp_path / "a"))
    first = sl.session_log()
    assert all(sl.session_log() is first for _ in range(5))
    assert asked == ["data_dir"]
    monkeypatch.setenv("FLEETCTL_DATA_DIR", str(tmp_path / "b"))  # a test (or a caller) that moves the data folder
    moved = sl.session_log()
    assert moved is not first and moved.folder == tmp_path / "b" / "bmc-sessions"
    assert asked == ["data_dir", "data_dir"]
    monkeypatch.setenv("FLEETCTL_DATA_DIR", str(tmp_path / "a"))
    assert sl.session_log() is first


def test_fleet_sessions_share_the_ca_store_until_the_ca_file_changes(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Loading the CA store was 20-30 ms of CPU for every FleetSession (a sweep opens one per shard)."""
    import os
    import ssl

    import fleetctl_drivers.redfish.client as client_mod
    from fleetctl_drivers.redfish.client import FleetSession

    made: list[str | None] = []
    real = ssl.create_default_context

    def counted(*a: Any, cafile: str | None = None, **kw: Any) -> ssl.SSLContext:
        made.append(cafile)
        return real(*a, cafile=cafile, **kw)

    monkeypatch.setattr(client_mod.ssl, "create_default_context", counted)
    monkeypatch.setattr(client_mod, "_CONTEXTS", {})
    certifi = pytest.importorskip("certifi")  # a CA bundle to copy
    cafile = tmp_path / "ca.pem"
    cafile.write_bytes(Path(certifi.where()).read_bytes())

    async def main() -> list[ssl.SSLContext | None]:
        out = []
        for _ in range(3):
            async with FleetSession() as fs:
                out.append(fs.ssl_context)
        for _ in range(2):
            async with FleetSession(cafile=str(cafile)) as fs:
                out.append(fs.ssl_context)
        st = os.stat(cafile)
        os.utime(cafile, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the CA file rewritten
        async with FleetSession(cafile=str(cafile)) as fs:
            out.append(fs.ssl_context)
        return out

    ctxs = asyncio.run(main())
    assert ctxs[0] is ctxs[1] is ctxs[2] and ctxs[3] is ctxs[4] and ctxs[5] is not ctxs[4]
    assert made == [None, str(cafile), str(cafile)]
