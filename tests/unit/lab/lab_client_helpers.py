"""A plain urllib Redfish client for the lab tests (not fleetctl's driver)."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from typing import Any


class RF:
    """Tiny Redfish client: basic auth or a session token, JSON in and out."""

    def __init__(self, base: str, user: str = "admin", password: str = "labpass", *, timeout: float = 5.0) -> None:
        self.base = base
        self.auth: str | None = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.token: str | None = None
        self.timeout = timeout
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def req(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
        h = {"Content-Type": "application/json", **(headers or {})}
        if self.token:
            h["X-Auth-Token"] = self.token
        elif self.auth:
            h["Authorization"] = self.auth
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(self.base + path, method=method, data=data, headers=h)
        try:
            with urllib.request.urlopen(r, context=self.ctx, timeout=self.timeout) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None, dict(resp.headers)
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, json.loads(raw) if raw else None, dict(e.headers)

    def get(self, path: str) -> Any:
        status, doc, _ = self.req("GET", path)
        assert status == 200, (path, status, doc)
        return doc

    def system_path(self) -> str:
        return self.get("/redfish/v1/Systems")["Members"][0]["@odata.id"]

    def chassis_path(self) -> str:
        return self.get("/redfish/v1/Chassis")["Members"][0]["@odata.id"]

    def manager_path(self) -> str:
        return self.get("/redfish/v1/Managers")["Members"][0]["@odata.id"]


def assert_redfish_error(doc: Any, message_id_part: str = "") -> None:
    assert isinstance(doc, dict) and "error" in doc, doc
    info = doc["error"]["@Message.ExtendedInfo"]
    assert info and "MessageId" in info[0] and "Message" in info[0]
    if message_id_part:
        assert message_id_part in info[0]["MessageId"], info
