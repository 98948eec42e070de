"""A scriptable in-process Redfish BMC for the driver's unit tests (aiohttp).

Resources are a dict {path: json}; ``hooks`` map (method, path) to a
coroutine ``hook(request, bmc) -> web.Response | None`` (None: carry on with
the default behaviour). It counts requests, logins and logouts and the most
requests in flight.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

Hook = Callable[[web.Request, "FakeBMC"], Awaitable[web.StreamResponse | None]]

SYSTEM = "/redfish/v1/Systems/1"
MANAGER = "/redfish/v1/Managers/1"
CHASSIS = "/redfish/v1/Chassis/1"


def base_resources(*, power: str = "On", allowable: list[str] | None = None, sessions: bool = True) -> dict[str, Any]:
    root: dict[str, Any] = {
        "@odata.id": "/redfish/v1",
        "Systems": {"@odata.id": "/redfish/v1/Systems"},
        "Managers": {"@odata.id": "/redfish/v1/Managers"},
        "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
        "UpdateService": {"@odata.id": "/redfish/v1/UpdateService"},
    }
    if sessions:
        root["SessionService"] = {"@odata.id": "/redfish/v1/SessionService"}
        root["Links"] = {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}
    reset: dict[str, Any] = {"target": f"{SYSTEM}/Actions/ComputerSystem.Reset"}
    if allowable is not None:
        reset["ResetType@Redfish.AllowableValues"] = allowable
    return {
        "/redfish/v1": root,
        "/redfish/v1/Systems": {"Members": [{"@odata.id": SYSTEM}]},
        SYSTEM: {
            "@odata.id": SYSTEM,
            "Id": "1",
            "PowerState": power,
            "SerialNumber": "SN1",
            "Boot": {
                "BootSourceOverrideTarget": "None",
                "BootSourceOverrideEnabled": "Disabled",
                "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Cd", "Hdd"],
            },
            "Actions": {"#ComputerSystem.Reset": reset},
            "Links": {"ManagedBy": [{"@odata.id": MANAGER}], "Chassis": [{"@odata.id": CHASSIS}]},
        },
        "/redfish/v1/Managers": {"Members": [{"@odata.id": MANAGER}]},
        MANAGER: {"@odata.id": MANAGER, "Id": "1", "Model": "Fake", "FirmwareVersion": "1.0"},
        "/redfish/v1/Chassis": {"Members": [{"@odata.id": CHASSIS}]},
        CHASSIS: {"@odata.id": CHASSIS, "Id": "1", "Status": {"Health": "OK"}},
        "/redfish/v1/UpdateService": {
            "@odata.id": "/redfish/v1/UpdateService",
            "Actions": {"#UpdateService.SimpleUpdate": {"target": "/redfish/v1/UpdateService/Actions/SimpleUpdate"}},
        },
    }


class FakeBMC:
    def __init__(
        self,
        resources: dict[str, Any] | None = None,
        *,
        username: str = "admin",
        password: str = "pw",
        login_status: int | None = None,
        delay: float = 0.0,
    ) -> None:
        self.resources = copy.deepcopy(resources if resources is not None else base_resources())
        self.username = username
        self.password = password
        self.login_status = login_status  # force the login POST to answer this (e.g. 401, like sushy)
        self.delay = delay
        self.hooks: dict[tuple[str, str], Hook] = {}
        self.tokens: set[str] = set()
        self.logins = 0
        self.logouts = 0
        self.counts: Counter[tuple[str, str]] = Counter()
        self.posts: list[tuple[str, Any]] = []
        self.patches: list[tuple[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.auth_seen: list[str] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> FakeBMC:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    @staticmethod
    def error(status: int, message_id: str = "Base.1.8.GeneralError", message: str = "failed") -> web.Response:
        body = {
            "error": {
                "code": message_id,
                "message": "See ExtendedInfo",
                "@Message.ExtendedInfo": [{"MessageId": message_id, "Message": message}],
            }
        }
        return web.json_response(body, status=status)

    def _authorised(self, request: web.Request) -> bool:
        token = request.headers.get("X-Auth-Token")
        if token:
            self.auth_seen.append("token")
            return token in self.tokens
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            self.auth_seen.append("basic")
            user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            return user == self.username and pw == self.password
        return False

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            return await self._route(request)
        finally:
            self.in_flight -= 1

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        method = request.method
        self.counts[(method, path)] += 1
        body = await request.json() if request.can_read_body else None
        if method == "POST" and not path.startswith("/redfish/v1/SessionService"):
            self.posts.append((path, body))
        if method == "PATCH":
            self.patches.append((path, body))
        hook = self.hooks.get((method, path))
        if hook is not None:
            resp = await hook(request, self)
            if resp is not None:
                return resp
        if method == "POST" and path == "/redfish/v1/SessionService/Sessions":
            if self.login_status:
                return self.error(self.login_status, "Base.1.8.NoValidSession", "no sessions here")
            if body.get("UserName") != self.username or body.get("Password") != self.password:
                return self.error(401, "Base.1.8.NoValidSession", "bad credentials")
            token = secrets.token_hex(8)
            self.tokens.add(token)
            self.logins += 1
            uri = f"/redfish/v1/SessionService/Sessions/{self.logins}"
            return web.json_response({"@odata.id": uri}, status=201, headers={"X-Auth-Token": token, "Location": uri})
        if path != "/redfish/v1" and not self._authorised(request):
            return self.error(401, "Base.1.8.NoValidSession", "auth required")
        if method == "DELETE" and path.startswith("/redfish/v1/SessionService/Sessions/"):
            self.logouts += 1
            self.tokens.discard(request.headers.get("X-Auth-Token", ""))
            return web.Response(status=204)
        if method == "GET":
            if path not in self.resources:
                return self.error(404, "Base.1.8.ResourceMissingAtURI", f"{path} missing")
            return web.Response(body=json.dumps(self.resources[path]), content_type="application/json")
        if method == "POST":
            if path.endswith("ComputerSystem.Reset"):
                rt = (body or {}).get("ResetType")
                state = {"On": "On", "ForceOff": "Off", "GracefulShutdown": "Off"}.get(rt)
                if state:
                    self.resources[SYSTEM]["PowerState"] = state
                return web.Response(status=204)
            return web.Response(status=204)
        if method == "PATCH":
            if path in self.resources and isinstance(body, dict):
                for k, v in body.items():
                    if isinstance(v, dict) and isinstance(self.resources[path].get(k), dict):
                        self.resources[path][k].update(v)
                    else:
                        self.resources[path][k] = v
            return web.Response(status=204)
        return self.error(405, "Base.1.8.OperationNotAllowed", "no")
