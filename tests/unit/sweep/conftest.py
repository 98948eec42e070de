"""Fixtures the sweep's request-count tests share."""

from __future__ import annotations

from typing import Any

import pytest

#: (method, path, status, conditional: sent with If-None-Match) of each request, in the order sent.
Sent = list[tuple[str, str, int, bool]]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every request the Redfish driver sends, as :data:`Sent`."""
    from fleetctl_drivers.redfish.client import RedfishClient

    seen: Sent = []
    orig = RedfishClient._send

    async def record(self: RedfishClient, method: str, url: str, headers: dict, data: bytes | None) -> Any:
        answer = await orig(self, method, url, headers, data)
        seen.append((method, url.removeprefix(self.base), answer[0], "If-None-Match" in headers))
        return answer

    monkeypatch.setattr(RedfishClient, "_send", record)
    return seen
