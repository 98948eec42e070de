"""``auth="basic"`` (``$FLEETCTL_BMC_AUTH=basic``): HTTP Basic on every request, no session (issue 24).

Two requests fewer per BMC (the login POST and the logout DELETE); the credentials are proven on the Systems
collection the driver reads anyway. A BMC that refuses Basic is logged in to with a session, as by default.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from fleetctl_drivers.redfish import RedfishDriver
from fleetctl_drivers.redfish.client import auth_choice
from redfish_fake_bmc import FakeBMC

from fleetctl.errors import AuthError, DriverError
from fleetctl.interfaces.bmc import BMCTarget, PowerState

SESSIONS = "/redfish/v1/SessionService/Sessions"


def driver(url: str, *, password: str = "pw", **kw: Any) -> RedfishDriver:
    t = BMCTarget(name="bmc1", url=url, username="admin", password=password, timeout=5.0)
    return RedfishDriver(t, backoff=0.01, task_poll_interval=0.01, **kw)


def test_basic_sends_no_login_nor_logout_and_reads_the_systems_once() -> None:
    async def body() -> None:
        async with FakeBMC() as bmc:
            async with driver(bmc.url, auth="basic", read_once=True) as d:
                assert d.client.auth_mode == "basic"
                assert await d.power.state() == PowerState.ON
            assert bmc.logins == 0 and bmc.logouts == 0
            assert bmc.counts[("POST", SESSIONS)] == 0
            assert set(bmc.auth_seen) == {"basic"}
            # the credentials' proof is the driver's own read of the Systems collection (read_once)
            assert bmc.counts[("GET", "/redfish/v1/Systems")] == 1

    asyncio.run(body())


def test_the_environment_chooses_basic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETCTL_BMC_AUTH", "basic")

    async def body() -> None:
        async with FakeBMC() as bmc:
            async with driver(bmc.url) as d:
                assert d.client.auth_mode == "basic"
            assert bmc.logins == 0

    asyncio.run(body())


def test_session_stays_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEETCTL_BMC_AUTH", raising=False)

    async def body() -> None:
        async with FakeBMC() as bmc:
            async with driver(bmc.url) as d:
                assert d.client.auth_mode == "session"
            assert bmc.logins == 1 and bmc.logouts == 1

    asyncio.run(body())


def test_a_bmc_that_refuses_basic_gets_a_session() -> None:
    """NOTE: OpenBMC's bmcweb can switch Basic off (AuthMethods.BasicAuth false): 401 to Basic, sessions work."""

    async def body() -> None:
        async with FakeBMC() as bmc:

            async def no_basic(request: web.Request, b: FakeBMC) -> web.StreamResponse | None:
                if request.headers.get("Authorization", "").startswith("Basic "):
                    return b.error(401, "Base.1.8.NoValidSession", "basic authentication is disabled")
                return None

            bmc.hooks[("GET", "/redfish/v1/Systems")] = no_basic
            async with driver(bmc.url, auth="basic", read_once=True) as d:
                assert d.client.auth_mode == "session"
                assert await d.power.state() == PowerState.ON
            assert bmc.logins == 1 and bmc.logouts == 1
            # the refused answer was not remembered as the Systems collection
            assert bmc.counts[("GET", "/redfish/v1/Systems")] == 2

    asyncio.run(body())


def test_a_wrong_password_is_still_an_auth_error() -> None:
    async def body() -> None:
        async with FakeBMC() as bmc:
            with pytest.raises(AuthError, match="login refused"):
                async with driver(bmc.url, auth="basic", password="wrong"):
                    pass

    asyncio.run(body())


def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DriverError, match="not one of session, basic"):
        auth_choice("kerberos")
    monkeypatch.setenv("FLEETCTL_BMC_AUTH", "digest")
    with pytest.raises(DriverError, match="FLEETCTL_BMC_AUTH"):
        auth_choice(None)
    monkeypatch.setenv("FLEETCTL_BMC_AUTH", " Basic ")
    assert auth_choice(None) == "basic"
