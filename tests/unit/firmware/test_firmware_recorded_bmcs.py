"""The firmware driver against recorded real BMCs (shared/redfish-mockups): what their UpdateServices
offer, how the campaign chooses pull or push and whether it may stage, and that a push is sent once.

Expectations were read from the recorded JSON by hand: OpenBMC's bmcweb has
no SimpleUpdate but a MultipartHttpPushUri whose HttpPushUriApplyTime is
OnReset; iLO 5 pulls (SimpleUpdate, HTTP/HTTPS) and lists no apply time; the
DMTF reference lists OnReset among the HttpPushUri apply times but has no
multipart push URI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetctl.errors import BMCError
from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.workflows.firmware_campaign import Campaign, CampaignOptions, Flash, ServerRun

_path = Path(__file__).resolve().parents[2] / "contract" / "mockup_server.py"
if "mockup_server" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("mockup_server", _path)
    assert _spec and _spec.loader
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["mockup_server"] = _mod
    _spec.loader.exec_module(_mod)
from mockup_server import MockupServer, mockups_dir  # noqa: E402 - registered by path just above

MOCKUPS = mockups_dir()
pytestmark = pytest.mark.skipif(MOCKUPS is None, reason="shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")


def _target(url: str) -> BMCTarget:
    return BMCTarget(name="rec", url=url, username="admin", password="secret", timeout=10)


async def _info_and_method(url: str, opts: CampaignOptions) -> tuple[Any, Any, tuple[str, str | None, str | None]]:
    from fleetctl_drivers.redfish import RedfishDriver

    async with RedfishDriver(_target(url)) as bmc:
        info = await bmc.firmware.update_service_info()
        inv = await bmc.firmware.inventory()
        campaign = Campaign(None, None, opts, {}, {"rec": 1}, actor="test")
        campaign.results["rec"] = ServerRun("rec", [Flash("BIOS", "BIOS", "1", "2", None, f"{opts.base}/BIOS-2.bin", "update")])
        return info, inv, await campaign._method(bmc)


@pytest.fixture(scope="module")
def served() -> Any:
    started: dict[str, MockupServer] = {}

    def get(name: str) -> MockupServer:
        if name not in started:
            started[name] = MockupServer(MOCKUPS / name)  # type: ignore[operator]
            started[name].start()
        return started[name]

    yield get
    for s in started.values():
        s.stop()


def test_openbmc_is_push_only_and_stages_on_reset(served: Any) -> None:
    srv = served("openbmc-stock")
    opts = CampaignOptions(template="{base}/{id}-{version}.bin", base="http://img", apply_time="on-reset")
    info, inv, method = asyncio.run(_info_and_method(srv.url, opts))
    assert not info.simple_update
    assert info.multipart_push_uri == "/redfish/v1/UpdateService/update"
    assert info.push_apply_times == ["OnReset"]
    assert method == ("push", "OnReset", None)  # pulled images are fetched by fleetctl and pushed
    assert inv and all(c.uri and c.uri.startswith("/redfish/v1/UpdateService/FirmwareInventory/") for c in inv)


def test_ilo5_pulls_and_refuses_on_reset_it_does_not_offer(served: Any) -> None:
    srv = served("hpe-dl325-ilo5")
    opts = CampaignOptions(template="{base}/{id}-{version}.bin", base="http://img", apply_time="on-reset")
    info, _, method = asyncio.run(_info_and_method(srv.url, opts))
    assert info.simple_update and info.transfer_protocols == ["HTTP", "HTTPS"]
    assert info.multipart_push_uri is None and info.simple_update_apply_times == []
    assert method[2] == "--apply-time on-reset: this BMC's SimpleUpdate offers no apply time, not OnReset"
    opts = CampaignOptions(template="{base}/{id}-{version}.bin", base="/srv/fw")  # local images: nowhere to push them
    _, _, method = asyncio.run(_info_and_method(srv.url, opts))
    assert method[2] == "the images are local files and this BMC offers no MultipartHttpPushUri to push them to"


def test_dmtf_reference_lists_push_apply_times_but_pulls(served: Any) -> None:
    srv = served("dmtf-public-rackmount1")
    info, _, method = asyncio.run(_info_and_method(srv.url, CampaignOptions(template="{base}/x", base="http://img")))
    assert info.simple_update and info.multipart_push_uri is None
    assert "OnReset" in info.push_apply_times
    assert method == ("SimpleUpdate", None, None)


def test_a_refused_push_is_sent_once_and_reported(served: Any) -> None:
    from fleetctl_drivers.redfish import RedfishDriver

    srv = served("openbmc-stock")

    async def push() -> None:
        async with RedfishDriver(_target(srv.url)) as bmc:
            await bmc.firmware.start_push(b"\x00" * 1024, "bmc-2.14.0.tar", targets=["/redfish/v1/UpdateService/FirmwareInventory/bmc"])

    before = [p for p in srv.paths if p[0] == "POST" and p[1].startswith("/redfish/v1/UpdateService/update")]
    with pytest.raises(BMCError, match="405"):
        asyncio.run(push())
    after = [p for p in srv.paths if p[0] == "POST" and p[1].startswith("/redfish/v1/UpdateService/update")]
    assert len(after) - len(before) == 1  # the recording is read-only: refused, and never sent a second time
