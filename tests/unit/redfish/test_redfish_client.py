"""The Redfish transport and capabilities against a scriptable fake BMC."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from fleetctl_drivers.redfish import RedfishDriver, RedfishError
from redfish_fake_bmc import MANAGER, SYSTEM, FakeBMC, base_resources

from fleetctl.errors import AuthError, BMCError, DriverError, Timeout
from fleetctl.interfaces.bmc import BMCTarget, BootDevice, PowerState


def target(url: str, **kw) -> BMCTarget:
    kw.setdefault("username", "admin")
    kw.setdefault("password", "pw")
    kw.setdefault("timeout", 5.0)
    return BMCTarget(name="bmc1", url=url, **kw)


def driver(url: str, **kw) -> RedfishDriver:
    return RedfishDriver(target(url, **kw), backoff=0.01, task_poll_interval=0.01)


def run(coro):
    return asyncio.run(coro)


# ----------------------------------------------------------------- sessions


def test_one_session_reused_and_logged_out():
    async def body():
        async with FakeBMC() as bmc:
            async with driver(bmc.url) as d:
                for _ in range(5):
                    assert await d.power.state() == PowerState.ON
                assert d.client.auth_mode == "session"
            assert bmc.logins == 1
            assert bmc.logouts == 1
            assert set(bmc.auth_seen) == {"token"}

    run(body())


def test_basic_auth_when_login_answers_401_like_sushy():
    async def body():
        async with FakeBMC(login_status=401) as bmc:
            async with driver(bmc.url) as d:
                assert d.client.auth_mode == "basic"
                assert await d.power.state() == PowerState.ON
            assert bmc.logins == 0
            assert "basic" in bmc.auth_seen and "token" not in bmc.auth_seen

    run(body())


def test_basic_auth_when_no_session_service():
    async def body():
        async with FakeBMC(base_resources(sessions=False)) as bmc:
            async with driver(bmc.url) as d:
                assert d.client.auth_mode == "basic"
            assert bmc.counts[("POST", "/redfish/v1/SessionService/Sessions")] == 0

    run(body())


def test_wrong_password_is_auth_error_in_both_modes():
    async def body():
        for login_status in (None, 401):
            async with FakeBMC(login_status=login_status) as bmc:
                with pytest.raises(AuthError, match="login refused"):
                    async with driver(bmc.url, password="wrong"):
                        pass

    run(body())


def test_expired_session_logs_in_again_once():
    async def body():
        async with FakeBMC() as bmc:
            async with driver(bmc.url) as d:
                bmc.tokens.clear()  # the BMC forgot every session
                assert await d.power.state() == PowerState.ON
            assert bmc.logins == 2

    run(body())


# ---------------------------------------------------------- limits, retries


def test_never_more_than_max_in_flight():
    async def body():
        async with FakeBMC(delay=0.02) as bmc:
            async with driver(bmc.url, max_in_flight=2) as d:
                await asyncio.gather(*(d.client.get(SYSTEM) for _ in range(12)))
            assert bmc.max_in_flight == 2  # reached, never exceeded
            async with driver(bmc.url, max_in_flight=1) as d:
                bmc.max_in_flight = 0
                await asyncio.gather(*(d.client.get(SYSTEM) for _ in range(6)))
            assert bmc.max_in_flight == 1

    run(body())


def test_get_retried_on_503_then_succeeds():
    async def body():
        async with FakeBMC() as bmc:
            calls = []

            async def flaky(request, b):
                calls.append(1)
                return FakeBMC.error(503, "Base.1.8.ServiceTemporarilyUnavailable", "busy") if len(calls) <= 2 else None

            async with driver(bmc.url, retries=2) as d:
                bmc.hooks[("GET", SYSTEM)] = flaky
                assert await d.power.state() == PowerState.ON
            assert len(calls) == 3

    run(body())


def test_retries_are_bounded():
    async def body():
        async with FakeBMC() as bmc:

            async def broken(request, b):
                return FakeBMC.error(500, "Base.1.8.InternalError", "kaputt")

            async with driver(bmc.url, retries=2) as d:
                bmc.hooks[("GET", SYSTEM)] = broken
                with pytest.raises(RedfishError, match="kaputt") as ei:
                    await d.power.state()
                assert ei.value.status == 500
            assert bmc.counts[("GET", SYSTEM)] == 3

    run(body())


def test_actions_not_retried_on_500_but_on_503():
    async def body():
        async with FakeBMC(base_resources(power="Off")) as bmc:
            reset = f"{SYSTEM}/Actions/ComputerSystem.Reset"

            async def fail500(request, b):
                return FakeBMC.error(500, "Base.1.8.InternalError", "maybe done")

            async with driver(bmc.url, retries=2) as d:
                bmc.hooks[("POST", reset)] = fail500
                with pytest.raises(RedfishError):
                    await d.power.on()
                assert bmc.counts[("POST", reset)] == 1
                n = []

                async def busy_once(request, b):
                    n.append(1)
                    return FakeBMC.error(503) if len(n) == 1 else None

                bmc.hooks[("POST", reset)] = busy_once
                assert await d.power.on() is True
                assert bmc.counts[("POST", reset)] == 3

    run(body())


def test_dropped_connection_is_retried():
    async def body():
        async with FakeBMC() as bmc:
            n = []

            async def drop(request, b):
                n.append(1)
                if len(n) == 1:
                    request.transport.close()  # hang up without an answer
                    await asyncio.sleep(0.05)
                    return web.Response(status=500)
                return None

            async with driver(bmc.url, retries=2) as d:
                bmc.hooks[("GET", SYSTEM)] = drop
                assert await d.power.state() == PowerState.ON
            assert len(n) == 2

    run(body())


def test_timeout_is_a_timeout_error():
    async def body():
        async with FakeBMC() as bmc:

            async def slow(request, b):
                await asyncio.sleep(2)
                return None

            async with driver(bmc.url, retries=0, timeout=0.3) as d:
                bmc.hooks[("GET", SYSTEM)] = slow
                with pytest.raises(Timeout, match=r"within 0\.3 s"):
                    await d.power.state()

    run(body())


def test_unreachable_bmc_is_bmc_error():
    async def body():
        with pytest.raises(BMCError, match="cannot connect"):
            async with driver("http://127.0.0.1:9", retries=1):
                pass

    run(body())


# ------------------------------------------------------------ error bodies


def test_extended_info_becomes_the_operators_message():
    async def body():
        async with FakeBMC() as bmc:

            async def refuse(request, b):
                return web.json_response(
                    {
                        "error": {
                            "code": "Base.1.8.GeneralError",
                            "message": "A general error has occurred.",
                            "@Message.ExtendedInfo": [
                                {
                                    "MessageId": "Base.1.8.PropertyValueNotInList",
                                    "Message": "The value Floppy for BootSourceOverrideTarget is not in the list.",
                                    "Resolution": "Choose a value from the enumeration list.",
                                }
                            ],
                        }
                    },
                    status=400,
                )

            async with driver(bmc.url) as d:
                bmc.hooks[("PATCH", SYSTEM)] = refuse
                with pytest.raises(RedfishError) as ei:
                    await d.boot.set(BootDevice.PXE)
            msg = str(ei.value)
            assert "PATCH /redfish/v1/Systems/1: HTTP 400" in msg
            assert "The value Floppy for BootSourceOverrideTarget is not in the list." in msg
            assert "Base.1.8.PropertyValueNotInList" in msg
            assert "Choose a value" in msg
            assert ei.value.message_ids == ["Base.1.8.PropertyValueNotInList"]

    run(body())


# ------------------------------------------------------------------ tasks


def test_simple_update_follows_the_task_with_progress():
    async def body():
        async with FakeBMC() as bmc:
            polls = []

            async def accept(request, b):
                return web.json_response({}, status=202, headers={"Location": "/redfish/v1/TaskService/TaskMonitors/7"})

            async def monitor(request, b):
                polls.append(1)
                if len(polls) < 3:
                    return web.json_response({"TaskState": "Running", "PercentComplete": 40 * len(polls)}, status=202)
                return web.json_response(
                    {
                        "@odata.id": "/redfish/v1/TaskService/Tasks/7",
                        "TaskState": "Completed",
                        "PercentComplete": 100,
                        "Messages": [{"Message": "Update done"}],
                    }
                )

            bmc.hooks[("POST", "/redfish/v1/UpdateService/Actions/SimpleUpdate")] = accept
            bmc.hooks[("GET", "/redfish/v1/TaskService/TaskMonitors/7")] = monitor
            seen = []
            async with driver(bmc.url) as d:
                result = await d.firmware.simple_update(
                    "http://repo/bmc.bin", progress=lambda p: seen.append(p.percent)
                )
            assert result.state == "Completed"
            assert result.task_uri == "/redfish/v1/TaskService/Tasks/7"
            assert seen == [40, 80, 100]
            assert bmc.posts[-1][1]["ImageURI"] == "http://repo/bmc.bin"

    run(body())


def test_failed_task_raises_with_its_messages():
    async def body():
        async with FakeBMC() as bmc:

            async def accept(request, b):
                return web.json_response({}, status=202, headers={"Location": "/redfish/v1/TaskService/Tasks/9"})

            async def monitor(request, b):
                return web.json_response(
                    {
                        "TaskState": "Exception",
                        "PercentComplete": 10,
                        "Messages": [{"Message": "Image signature invalid"}],
                    }
                )

            bmc.hooks[("POST", "/redfish/v1/UpdateService/Actions/SimpleUpdate")] = accept
            bmc.hooks[("GET", "/redfish/v1/TaskService/Tasks/9")] = monitor
            async with driver(bmc.url) as d:
                with pytest.raises(BMCError, match="ended Exception: Image signature invalid"):
                    await d.firmware.simple_update("http://repo/bad.bin")

    run(body())


# ------------------------------------------------------------ capabilities


def test_power_on_never_cycles_a_server_already_on():
    async def body():
        async with FakeBMC(base_resources(power="On")) as bmc:
            async with driver(bmc.url) as d:
                assert await d.power.on() is False
            assert not [p for p in bmc.posts if p[0].endswith("Reset")]

    run(body())


def test_power_on_and_off_send_the_right_reset():
    async def body():
        async with FakeBMC(base_resources(power="Off")) as bmc:
            async with driver(bmc.url) as d:
                assert await d.power.on() is True
                assert await d.power.off() is True
                assert await d.power.off(force=True) is False  # already off
            resets = [p[1]["ResetType"] for p in bmc.posts if p[0].endswith("Reset")]
            assert resets == ["On", "GracefulShutdown"]

    run(body())


def test_power_cycle_emulated_when_not_offered():
    async def body():
        res = base_resources(power="On", allowable=["On", "ForceOff", "GracefulShutdown", "ForceRestart"])
        async with FakeBMC(res) as bmc:
            async with driver(bmc.url) as d:
                await d.power.cycle()
            resets = [p[1]["ResetType"] for p in bmc.posts if p[0].endswith("Reset")]
            assert resets == ["ForceOff", "On"]

    run(body())


def test_reset_type_not_offered_is_refused_before_sending():
    async def body():
        res = base_resources(power="On", allowable=["On", "ForceOff"])
        async with FakeBMC(res) as bmc:
            async with driver(bmc.url) as d:
                with pytest.raises(DriverError, match="not offered"):
                    await d.power.restart()
            assert not bmc.posts

    run(body())


def test_unknown_power_state_maps_to_unknown():
    async def body():
        res = base_resources()
        res[SYSTEM]["PowerState"] = "Standby-ish"
        async with FakeBMC(res) as bmc, driver(bmc.url) as d:
            assert await d.power.state() == PowerState.UNKNOWN

    run(body())


def test_boot_override_once_and_continuous_and_refused_device():
    async def body():
        async with FakeBMC() as bmc, driver(bmc.url) as d:
            await d.boot.set(BootDevice.PXE)
            assert bmc.patches[-1][1] == {
                "Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
            }
            got = await d.boot.get()
            assert got.device == BootDevice.PXE and got.persistent is False
            await d.boot.set(BootDevice.HDD, persistent=True)
            assert (await d.boot.get()).persistent is True
            with pytest.raises(DriverError, match="not offered"):
                await d.boot.set(BootDevice.USB)

    run(body())


def test_media_named_slots_under_managers_lenovo():
    async def body():
        res = base_resources()
        res["/redfish/v1"]["Vendor"] = "Lenovo"
        res[MANAGER]["VirtualMedia"] = {"@odata.id": f"{MANAGER}/VirtualMedia"}
        res[f"{MANAGER}/VirtualMedia"] = {
            "Members": [{"@odata.id": f"{MANAGER}/VirtualMedia/Remote1"}, {"@odata.id": f"{MANAGER}/VirtualMedia/EXT1"}]
        }
        for slot in ("Remote1", "EXT1"):
            res[f"{MANAGER}/VirtualMedia/{slot}"] = {
                "@odata.id": f"{MANAGER}/VirtualMedia/{slot}",
                "Id": slot,
                "MediaTypes": ["CD", "DVD"],
                "Inserted": False,
                "Image": None,
                "Actions": {
                    "#VirtualMedia.InsertMedia": {
                        "target": f"{MANAGER}/VirtualMedia/{slot}/Actions/VirtualMedia.InsertMedia"
                    }
                },
            }
        async with FakeBMC(res) as bmc:
            async with driver(bmc.url) as d:
                await d.media.insert("http://x/os.iso")
                assert d.vendor == "lenovo"
            assert bmc.posts[-1][0] == f"{MANAGER}/VirtualMedia/EXT1/Actions/VirtualMedia.InsertMedia"
            assert bmc.posts[-1][1]["Image"] == "http://x/os.iso"

    run(body())


def test_patch_retried_with_etag_after_412():
    async def body():
        res = base_resources()
        res[SYSTEM]["@odata.etag"] = 'W/"abc"'
        async with FakeBMC(res) as bmc:

            async def need_etag(request, b):
                if request.headers.get("If-Match") != 'W/"abc"':
                    return FakeBMC.error(412, "Base.1.8.PreconditionFailed", "ETag required")
                return None

            bmc.hooks[("PATCH", SYSTEM)] = need_etag
            async with driver(bmc.url) as d:
                await d.boot.set(BootDevice.CD)
            assert bmc.counts[("PATCH", SYSTEM)] == 2
            assert bmc.resources[SYSTEM]["Boot"]["BootSourceOverrideTarget"] == "Cd"

    run(body())


def test_system_id_selects_and_unknown_id_is_clear():
    async def body():
        async with FakeBMC() as bmc:
            async with driver(bmc.url, system_id="1") as d:
                assert d.system_uri == SYSTEM
            with pytest.raises(DriverError, match="no system 'nope'"):
                async with driver(bmc.url, system_id="nope"):
                    pass

    run(body())


def test_bad_url_scheme_refused():
    with pytest.raises(DriverError, match="http:// or https://"):
        RedfishDriver(target("ftp://10.0.0.1"))


def test_password_from_a_secret_and_never_in_repr():
    secrets = pytest.importorskip("fleetctl.secrets")

    async def body():
        async with FakeBMC() as bmc:
            t = target(bmc.url, password=secrets.Secret("pw"))
            assert "pw" not in repr(t)
            async with RedfishDriver(t) as d:
                assert d.client.auth_mode == "session"

    run(body())
