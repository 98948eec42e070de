"""What one request costs fleetctl beyond aiohttp's own work (issue 24): nothing parsed twice.

cProfile of a 300-BMC OpenBMC sweep: every answer's URL went through ``urllib.parse.urlsplit`` again to name
the path in a bound's message (14,100 calls, 0.3-0.6 ms of CPU per BMC); the path is cut from the URL the
client built instead. The bounds' messages still name it (tests/unit/redfish/test_redfish_bounds.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import fleetctl_drivers.redfish.client as client_mod
import pytest
from fleetctl_drivers.redfish import RedfishDriver
from fleetctl_drivers.redfish.client import AnswerOutOfBounds
from fleetctl_drivers.redfish.quirks import Quirks
from redfish_fake_bmc import SYSTEM, FakeBMC

from fleetctl.interfaces.bmc import BMCTarget, PowerState


def test_an_answer_is_read_without_parsing_its_url_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = client_mod.urlsplit

    def counted(url: str, *a: Any, **kw: Any) -> Any:
        calls.append(url)
        return real(url, *a, **kw)

    async def body() -> None:
        async with FakeBMC() as bmc:
            t = BMCTarget(name="bmc1", url=bmc.url, username="admin", password="pw", timeout=5.0)
            async with RedfishDriver(t, backoff=0.01) as d:
                monkeypatch.setattr(client_mod, "urlsplit", counted)
                for _ in range(5):
                    assert await d.power.state() == PowerState.ON
                assert calls == []
                # a bound's message still names the path
                d.client.set_bounds(Quirks(max_body_bytes=10))
                with pytest.raises(AnswerOutOfBounds, match=f"GET {SYSTEM}: the answer is larger than 10 bytes"):
                    await d.client.get(SYSTEM)

    asyncio.run(body())
