"""Issue #13: sessions left open on BMCs after failed logouts are closed or reused (real BMCs run out of sessions).

Against a lab BMC (over TLS, pinned), which counts the sessions it holds open.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

from fleetctl.errors import DriverError
from fleetctl.interfaces.bmc import BMCTarget


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from fleetctl_lab.bmc import LabConfig, generate_specs, run_lab_in_thread
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.bmc not available: {e}")
    specs = generate_specs(1, prefix="sess")
    with run_lab_in_thread(specs, LabConfig(state_dir=tmp_path_factory.mktemp("lab-sessions"), max_sessions=4)) as running:
        running.spec = specs[0]
        yield running


def _target(lab: Any) -> BMCTarget:
    s = lab.spec
    return BMCTarget(name=s.name, url=lab.url_of(s.name), username=s.username, password=s.password,
                     fingerprint=lab.fingerprint_of(s.name), timeout=5)  # fmt: skip


def _open(lab: Any) -> int:
    return int(lab.counters(lab.spec.name)["sessions_open"])


def test_a_failed_logout_is_reused_by_the_next_client_then_logged_out(lab: Any) -> None:
    from fleetctl_drivers.redfish.client import FleetSession, RedfishClient, parked_sessions

    name = lab.spec.name

    async def run() -> None:
        async with FleetSession() as fleet:
            c1 = RedfishClient(_target(lab), fleet=fleet, backoff=0.01)
            await c1.open()
            await c1.get("/redfish/v1/Systems")
            lab.set_fault(name, error_rate=1)  # every answer a 5xx: the logout fails, and its retry
            await c1.close()
            assert _open(lab) == 1 and parked_sessions() == 1
            lab.set_fault(name, error_rate=None)
            created = lab.counters(name)["sessions_created"]
            c2 = RedfishClient(_target(lab), fleet=fleet, backoff=0.01)
            await c2.open()  # takes the parked session back: no new one on the BMC
            assert lab.counters(name)["sessions_created"] == created and parked_sessions() == 0
            await c2.get("/redfish/v1/Systems")
            await c2.close()
            assert _open(lab) == 0
            # Parked again; this time the fleet session's close logs it out.
            c3 = RedfishClient(_target(lab), fleet=fleet, backoff=0.01)
            await c3.open()
            lab.set_fault(name, error_rate=1)
            await c3.close()
            assert _open(lab) == 1
            lab.set_fault(name, error_rate=None)
        assert _open(lab) == 0 and parked_sessions() == 0

    asyncio.run(run())


def test_a_flaky_run_leaves_no_session_open(lab: Any) -> None:
    from fleetctl_drivers.redfish.client import FleetSession, RedfishClient, parked_sessions

    name = lab.spec.name
    rng = random.Random(13)
    failed_logouts = 0

    async def run() -> None:
        nonlocal failed_logouts
        async with FleetSession() as fleet:
            for _ in range(20):
                c = RedfishClient(_target(lab), fleet=fleet, backoff=0.01)
                lab.set_fault(name, error_rate=0.5)
                try:
                    await c.open()
                    await c.get("/redfish/v1/Systems")
                except DriverError:
                    pass
                if rng.random() < 0.5:
                    lab.set_fault(name, error_rate=1)  # a logout that fails, retry included
                before = parked_sessions()
                await c.close()
                failed_logouts += parked_sessions() > before
                # No session is lost track of: every one still open on the BMC is parked, to be reused or logged out.
                assert _open(lab) == parked_sessions(), lab.counters(name)
            lab.set_fault(name, error_rate=None)  # the BMC answers again by the end of the run
        assert parked_sessions() == 0

    asyncio.run(run())
    assert failed_logouts >= 5  # the faults did make logouts fail
    assert _open(lab) == 0, lab.counters(name)


# --- sessions a killed process left open (fleetctl_drivers.redfish.session_log) ----------------------------

_HOLDER = """
import asyncio, json, os, sys
from fleetctl.interfaces.bmc import BMCTarget
from fleetctl_drivers.redfish.client import FleetSession, RedfishClient

async def main():
    t = BMCTarget(**json.loads(os.environ["T"]))
    fleet = FleetSession()
    clients = [RedfishClient(t, fleet=fleet) for _ in range(int(sys.argv[1]))]
    for c in clients:
        await c.open()
    print("ready", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def _holder(lab: Any, n: int) -> Any:
    """A process holding ``n`` sessions on the lab BMC (the caller kills it)."""
    import json
    import os
    import subprocess
    import sys

    s = lab.spec
    t = {"name": s.name, "url": lab.url_of(s.name), "username": s.username, "password": s.password,
         "fingerprint": lab.fingerprint_of(s.name), "timeout": 5}  # fmt: skip
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, str(n)], env={**os.environ, "T": json.dumps(t)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.communicate(timeout=10)
    return p


def test_sessions_a_killed_process_left_are_closed_by_the_next_client(lab: Any, tmp_path: Any, monkeypatch: Any) -> None:
    """A BMC with 4 session slots, all 4 held by a process killed with SIGKILL: without the session log, the next
    run is refused a session ("session limit reached") until the BMC times them out (30 minutes here)."""
    from fleetctl_drivers.redfish import session_log
    from fleetctl_drivers.redfish.client import FleetSession, RedfishClient

    monkeypatch.setenv("FLEETCTL_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(session_log, "RESCAN_S", 0.0)  # look again at each login: the holders die within the test
    folder = tmp_path / "bmc-sessions"
    dead = _holder(lab, 4)
    dead.kill()
    dead.wait()
    assert _open(lab) == 4
    [log_file] = list(folder.glob("*.sessions"))
    text = log_file.read_text()
    assert text.count("open https://") == 4 and lab.spec.password not in text, text  # URLs only, never a token
    assert all(re.fullmatch(r"open https://[\w.:-]+/redfish/v1/SessionService/Sessions/\w+", ln) for ln in text.splitlines()), text
    assert (folder.stat().st_mode & 0o777, log_file.stat().st_mode & 0o777) == (0o700, 0o600)
    alive = None
    try:

        async def run(others: int = 0) -> None:
            async with FleetSession() as fleet:
                c = RedfishClient(_target(lab), fleet=fleet, backoff=0.01)
                await c.open()  # the stale sessions go first (Basic auth: no slot needed), then its own
                assert _open(lab) == others + 1
                await c.get("/redfish/v1/Systems")
                await c.close()

        asyncio.run(run())
        assert _open(lab) == 0 and not log_file.exists()
        # A live process's sessions are its own: never closed by another.
        alive = _holder(lab, 1)
        asyncio.run(run(others=1))
        assert _open(lab) == 1
    finally:
        if alive is not None:
            alive.kill()
            alive.wait()
    # Killed in turn: the next client closes its session too.
    asyncio.run(run())
    import os

    others = [f for f in folder.glob("*.sessions") if not f.name.startswith(f"{os.getpid()}-")]  # ours goes at exit
    assert _open(lab) == 0 and others == [], others


def test_the_session_log_tells_a_reused_pid_and_drops_old_files(tmp_path: Any) -> None:
    import os
    import time

    from fleetctl_drivers.redfish import session_log as sl

    from fleetctl.procs import start_ticks

    base = "https://10.0.0.9:443"
    me = os.getpid()
    mine = start_ticks(me)
    assert mine is not None
    (tmp_path / f"{me}-{mine}.sessions").write_text(f"open {base}/redfish/v1/SessionService/Sessions/1\n")  # alive
    (tmp_path / f"{me}-{mine - 1}.sessions").write_text(  # this pid, an earlier process: gone
        f"open {base}/redfish/v1/SessionService/Sessions/2\nopen {base}/redfish/v1/SessionService/Sessions/3\n"
        f"closed {base}/redfish/v1/SessionService/Sessions/3\nopen https://10.0.0.8:443/redfish/v1/SessionService/Sessions/4\n"
    )
    old = tmp_path / "999999999-5.sessions"
    old.write_text(f"open {base}/redfish/v1/SessionService/Sessions/5\n")
    os.utime(old, (time.time() - sl.MAX_AGE_S - 60,) * 2)
    log = sl.SessionLog(tmp_path)
    stale = log.stale(base)
    assert [u for _, u in stale] == [f"{base}/redfish/v1/SessionService/Sessions/2"], stale
    assert not old.exists()
    [(file, url)] = stale
    log.settled(file, url)
    assert file.exists()  # it still lists the session on the other BMC
    assert log.stale(base) == []
    [(_, other)] = log.stale("https://10.0.0.8:443")
    log.settled(file, other)
    assert not file.exists()
