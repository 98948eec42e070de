"""The BMC's own MACs (Managers' EthernetInterfaces) read with --credential, from recorded real BMCs over HTTPS.

The recordings are served by the contract tests' mockup server (basic
authentication, TLS on loopback); the MACs expected are read by hand from the
recordings' index.json files.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import sys
from pathlib import Path

import pytest
from discovery_servers import make_cert

from fleetctl.discovery.inspect import manager_macs
from fleetctl.discovery.probe import ProbeFailed, ProbeLimits, client_context

_MOCKUP_SERVER = Path(__file__).resolve().parents[2] / "contract" / "mockup_server.py"
_spec = importlib.util.spec_from_file_location("discovery_mockup_server", _MOCKUP_SERVER)
assert _spec and _spec.loader
mockup_server = importlib.util.module_from_spec(_spec)
sys.modules["discovery_mockup_server"] = mockup_server
_spec.loader.exec_module(mockup_server)
MOCKUPS = mockup_server.mockups_dir()
recorded = pytest.mark.skipif(MOCKUPS is None, reason="shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")

EXPECTED = {
    # iLO 5: the dedicated port, its disabled shared port left out, and the enabled virtual host interface.
    "hpe-dl325-ilo5": ["94:40:c9:37:d3:fc", "0a:ca:fe:f0:0d:04"],
    "openbmc-stock": ["ae:0d:e8:39:69:bb"],  # MACAddress only, no PermanentMACAddress
    "gigabyte-ami": ["b4:2e:99:ba:de:17", "46:d5:fa:9a:bf:1a"],  # bond0, usb0 (AMI names its manager Self)
}
AUTH = "Basic " + base64.b64encode(b"admin:secret").decode()


@recorded
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_manager_macs(name: str, tmp_path: Path) -> None:
    cert, key, fp = make_cert(tmp_path)
    with mockup_server.MockupServer(MOCKUPS / name, certfile=str(cert), keyfile=str(key), sessions=False) as srv:  # type: ignore[operator]
        port = int(srv.url.rsplit(":", 1)[1])
        limits = ProbeLimits(connect_timeout=5, deadline=10)
        macs = asyncio.run(manager_macs("127.0.0.1", port, AUTH, limits=limits, ctx=client_context(), pinned=fp))
        assert macs == EXPECTED[name]
        # Another certificate than the one probed: refused before the credential is sent.
        with pytest.raises(ProbeFailed, match="tls: the certificate is"):
            asyncio.run(manager_macs("127.0.0.1", port, AUTH, limits=limits, ctx=client_context(), pinned="0" * 64))
        # A wrong password is that BMC's failure, said as the BMC said it.
        bad = "Basic " + base64.b64encode(b"admin:wrong").decode()
        with pytest.raises(ProbeFailed, match="http 401"):
            asyncio.run(manager_macs("127.0.0.1", port, bad, limits=limits, ctx=client_context(), pinned=fp))
