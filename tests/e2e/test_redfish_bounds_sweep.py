"""`fleetctl sweep` over a fleet where one BMC's paged collection never ends (issue 20, item 1).

Three servers of the example site are pointed at fake BMCs on loopback
(tests/unit/redfish/redfish_fake_bmc.py, served from a thread of their own):
two answer like any small BMC, one has a log whose next link comes back to a
page already read. The sweep must name that BMC and its collection as a
finding and judge the other two as it would without it. A second test lets
a BMC page forever, slowly, and stops the sweep with SIGTERM: the process
ends at once, its run journalled as interrupted (before, a sweep stuck in
such a walk could only be killed).

Hand-made cases: no public recording of such a BMC was found.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "redfish"))
from redfish_fake_bmc import SYSTEM, FakeBMC, base_resources

FLEETCTL = Path(sys.executable).parent / "fleetctl"
LOGS = f"{SYSTEM}/LogServices"
LOG = f"{LOGS}/Log"
ENTRIES = f"{LOG}/Entries"
SERVERS = ["mn-tyo1-r12-01", "mn-tyo1-r12-02", "mn-tyo1-r12-03"]
LOOPING = SERVERS[1]


def resources() -> dict[str, Any]:
    res = base_resources()
    res[SYSTEM]["LogServices"] = {"@odata.id": LOGS}
    res[LOGS] = {"@odata.id": LOGS, "Members": [{"@odata.id": LOG}]}
    res[LOG] = {"@odata.id": LOG, "Id": "Log", "Entries": {"@odata.id": ENTRIES}}
    res[ENTRIES] = {"@odata.id": ENTRIES, "Members": []}
    return res


@pytest.fixture
def fake_bmcs() -> Iterator[Callable[[FakeBMC], FakeBMC]]:
    """Start fake BMCs on an event loop in a thread (the CLI runs its own asyncio.run in this one)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started: list[FakeBMC] = []

    def start(bmc: FakeBMC) -> FakeBMC:
        asyncio.run_coroutine_threadsafe(bmc.__aenter__(), loop).result(30)
        started.append(bmc)
        return bmc

    yield start
    for bmc in started:
        asyncio.run_coroutine_threadsafe(bmc.__aexit__(None, None, None), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    loop.close()


def point(server: str, bmc: FakeBMC) -> None:
    r = run_cli("server", "set", server, "--bmc", bmc.url, "--credential", "env:FAKEBMC", "--reason", "test")
    assert r.code == 0, r.err


def looping_log(request: web.Request, bmc: FakeBMC) -> Any:
    async def page() -> web.Response:
        if request.query.get("$skip") == "1":
            return web.json_response({"@odata.id": ENTRIES, "Members": [], "Members@odata.nextLink": ENTRIES})
        return web.json_response({"@odata.id": ENTRIES, "Members": [], "Members@odata.nextLink": f"{ENTRIES}?$skip=1"})

    return page()


def test_a_bmc_whose_log_pages_loop_is_a_finding_and_the_others_are_judged_as_usual(example_loaded, fake_bmcs, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKEBMC_USERNAME", "admin")
    monkeypatch.setenv("FAKEBMC_PASSWORD", "pw")
    bmcs = {name: fake_bmcs(FakeBMC(resources())) for name in SERVERS}
    bmcs[LOOPING].hooks[("GET", ENTRIES)] = looping_log
    for name, bmc in bmcs.items():
        point(name, bmc)
    r = run_cli("sweep", *SERVERS, "--timeout", "60", "--retries", "0", "-o", "json")
    assert r.code in (4, 5), (r.code, r.err)  # fake BMCs show no PSU and the like: unknowns, criticals
    findings = json.loads(r.out)["new"]
    by: dict[str, set[tuple[str, str, str]]] = {n: set() for n in SERVERS}
    for f in findings:
        by[f["target"]].add((f["check"], f["subject"], f["status"]))
    # The two BMCs that behave are judged alike; the looping one gets what they get, and the loop.
    assert by[SERVERS[0]] == by[SERVERS[2]]
    assert by[LOOPING] == by[SERVERS[0]] | {("bmc.read", "logs", "unknown")}
    (loop,) = [f for f in findings if f["target"] == LOOPING and (f["check"], f["subject"]) == ("bmc.read", "logs")]
    assert loop["message"].startswith(
        f"logs could not be read: {LOOPING}: collection {ENTRIES}: its next link {ENTRIES} comes back to a page "
        "already read (after 2 pages, 0 members); the walk ends here"), loop["message"]  # fmt: skip
    assert bmcs[LOOPING].counts[("GET", ENTRIES)] == 2  # each page once
    assert all(b.logouts == b.logins == 1 for b in bmcs.values())  # every session closed


def test_sigterm_stops_a_sweep_walking_a_collection_that_pages_forever(example_loaded, fake_bmcs, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKEBMC_USERNAME", "admin")
    monkeypatch.setenv("FAKEBMC_PASSWORD", "pw")
    bmc = fake_bmcs(FakeBMC(resources()))

    async def forever(request: web.Request, bmc: FakeBMC) -> web.Response:
        await asyncio.sleep(0.05)  # slow: the page bound (1,000) is not met before the signal
        n = int(request.query.get("$skip", "0"))
        return web.json_response({"@odata.id": ENTRIES, "Members": [], "Members@odata.nextLink": f"{ENTRIES}?$skip={n + 1}"})

    bmc.hooks[("GET", ENTRIES)] = forever
    point(LOOPING, bmc)
    proc = subprocess.Popen([str(FLEETCTL), "sweep", LOOPING, "--timeout", "600", "--retries", "0"], env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        # A guard against a hang, not a measure of speed: wait for the walk to be well under way.
        guard = time.monotonic() + 120
        while bmc.counts[("GET", ENTRIES)] < 20 and proc.poll() is None and time.monotonic() < guard:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        pages = bmc.counts[("GET", ENTRIES)]
        assert pages >= 20
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err  # interrupted
    assert bmc.counts[("GET", ENTRIES)] < 1_000  # stopped by the signal, not by the page bound
    assert bmc.logouts == bmc.logins == 1  # the session was closed on the way out
    r = run_cli("sweep", "list", "-o", "json")
    assert r.code == 0, r.err
    assert [run["state"] for run in json.loads(r.out)] == ["interrupted"]


def test_a_sweep_of_a_bmc_paging_forever_ends_at_the_page_bound(example_loaded, fake_bmcs, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Before, this sweep never ended (its list grew until the process died); now the page bound ends the walk."""
    monkeypatch.setenv("FAKEBMC_USERNAME", "admin")
    monkeypatch.setenv("FAKEBMC_PASSWORD", "pw")
    bmc = fake_bmcs(FakeBMC(resources()))

    async def forever(request: web.Request, bmc: FakeBMC) -> web.Response:
        n = int(request.query.get("$skip", "0"))
        return web.json_response({"@odata.id": ENTRIES, "Members": [], "Members@odata.nextLink": f"{ENTRIES}?$skip={n + 1}"})

    bmc.hooks[("GET", ENTRIES)] = forever
    point(LOOPING, bmc)
    # In a process of its own, so that a sweep that never ends fails this test instead of hanging it.
    proc = subprocess.Popen([str(FLEETCTL), "sweep", LOOPING, "--timeout", "600", "--retries", "0", "-o", "json"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=120)  # a guard against a hang, not a measure of speed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (4, 5), err
    (f,) = [f for f in json.loads(out)["new"] if (f["check"], f["subject"]) == ("bmc.read", "logs")]
    assert (f["target"], f["status"]) == (LOOPING, "unknown")
    assert f"{LOOPING}: collection {ENTRIES}: more than 1,000 pages" in f["message"]
    assert "past the bound max_collection_pages" in f["message"]
    assert bmc.counts[("GET", ENTRIES)] == 1_000
