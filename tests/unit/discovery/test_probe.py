"""The service-root probe: recorded real service roots over HTTPS on loopback, the bounds, bad ranges."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from discovery_servers import Behaviour, ServiceRoots

from fleetctl.discovery import probe
from fleetctl.errors import InputError

SHARED = Path(os.environ.get("FLEETCTL_SHARED", Path(__file__).resolve().parents[4] / "shared"))
MOCKUPS = SHARED / "redfish-mockups"
recorded = pytest.mark.skipif(not MOCKUPS.is_dir(), reason="shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")

# What each recorded service root must give (read by hand from its index.json): vendor (ServiceRoot.Vendor, else the
# Oem key's vendor), product, Redfish version, UUID.
EXPECTED = {
    "hpe-dl325-ilo5": ("HPE", "ProLiant DL325 Gen10 Plus", "1.6.0", "51b90f18-5aa5-5613-a356-809a476c3dd0"),
    "hpe-xl675d-a40-ilo5": ("HPE", "ProLiant XL675d Gen10 Plus", "1.6.0", "d9b23f7c-4fa6-5805-b316-dcb04a31d52a"),
    "gigabyte-ami": ("AMI", "AMI Redfish Server", "1.7.0", "009ea76e-debf-0010-e803-b42e99bade17"),
    "openbmc-stock": (None, None, "1.17.0", "34a1c22d-3f42-4cf6-9830-1cfe1d0fdffd"),
    "dmtf-public-rackmount1": (None, None, "1.15.0", "92384634-2938-2342-8820-489239905423"),
    "dmtf-public-pdu": (None, None, "1.15.0", "92384634-2938-2342-8820-489239905423"),
}

LIMITS = probe.ProbeLimits(connect_timeout=2.0, deadline=3.0)


def run(addresses: list[str], port: int, **kw: object) -> probe.ProbeReport:
    return asyncio.run(probe.probe_addresses(addresses, port, **kw))  # type: ignore[arg-type]


@recorded
def test_every_recorded_service_root_over_https(roots: ServiceRoots) -> None:
    """Each real BMC's recorded service root, served over TLS on its own loopback address, parses to its facts."""
    addresses = {}
    for i, name in enumerate(sorted(EXPECTED), 1):
        address = f"127.91.0.{i}"
        addresses[address] = name
        roots.behaviours[address] = Behaviour(body=(MOCKUPS / name / "index.json").read_bytes())
    roots.start(list(addresses))
    report = run(list(addresses), roots.port, limits=LIMITS)
    assert report.counts["redfish"] == len(EXPECTED), report.failures
    for r in report.found:
        vendor, product, version, uuid = EXPECTED[addresses[r.address]]
        assert (r.vendor, r.product, r.redfish_version, r.uuid) == (vendor, product, version, uuid), addresses[r.address]
        assert r.fingerprint == roots.fingerprint
        assert r.url == f"https://{r.address}:{roots.port}"


def test_chunked_body_and_not_redfish(roots: ServiceRoots) -> None:
    root = {"@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "RedfishVersion": "1.5.0", "UUID": "ABCD-1", "Oem": {"Hpe": {}},
            "Name": "x" * 300}  # fmt: skip
    roots.behaviours["127.91.1.1"] = Behaviour("chunked", json.dumps(root).encode())
    roots.behaviours["127.91.1.2"] = Behaviour(body=b'{"status": "ok"}')  # a web server's JSON
    roots.behaviours["127.91.1.3"] = Behaviour(body=b"<html>login</html>")
    roots.behaviours["127.91.1.4"] = Behaviour(status=401, body=b"{}")
    roots.start(list(roots.behaviours))
    report = run(list(roots.behaviours), roots.port, limits=LIMITS)
    assert [r.address for r in report.found] == ["127.91.1.1"]
    found = report.found[0]
    assert found.vendor == "HPE"  # no Vendor: the Oem key names it (OEM_VENDORS)
    assert found.uuid == "abcd-1"
    assert found.name is not None and len(found.name) == 255
    assert report.failures == {"127.91.1.2": "not redfish", "127.91.1.3": "not redfish", "127.91.1.4": "http 401"}


def test_a_body_without_end_is_cut_at_the_cap(roots: ServiceRoots) -> None:
    roots.behaviours["127.91.2.1"] = Behaviour("endless")
    roots.start(["127.91.2.1"])
    limits = probe.ProbeLimits(connect_timeout=2.0, deadline=30.0, max_body=100_000)
    report = run(["127.91.2.1"], roots.port, limits=limits)
    assert report.found == []
    assert report.failures["127.91.2.1"] == "body larger than 100000 bytes"


def test_a_server_that_never_answers_times_out(roots: ServiceRoots) -> None:
    roots.behaviours["127.91.3.1"] = Behaviour("silent")
    roots.start(["127.91.3.1"])
    report = run(["127.91.3.1"], roots.port, limits=probe.ProbeLimits(connect_timeout=1.0, deadline=0.5))
    assert report.failures == {"127.91.3.1": "timeout"}
    assert report.counts == {"timeout": 1}


def test_closed_ports_are_counted_not_listed_unless_named(roots: ServiceRoots) -> None:
    roots.start(["127.91.4.1"])
    roots.behaviours["127.91.4.1"] = Behaviour(body=b'{"RedfishVersion": "1.0.0"}')
    addresses = [f"127.91.4.{i}" for i in range(1, 21)]
    report = run(addresses, roots.port, limits=LIMITS, named=["127.91.4.7"])
    assert report.counts == {"redfish": 1, "refused": 19}
    assert report.failures == {"127.91.4.7": "refused"}
    assert report.probed == 20


def test_failures_nobody_named_are_listed_up_to_a_cap(roots: ServiceRoots, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "MAX_FAILURES_LISTED", 2)
    addresses = [f"127.91.5.{i}" for i in range(1, 7)]
    for a in addresses:
        roots.behaviours[a] = Behaviour(body=b'{"status": "ok"}')
    roots.start(addresses)
    report = run(addresses, roots.port, limits=LIMITS, named=["127.91.5.6"])
    assert report.counts == {"not redfish": 6}
    assert len(report.failures) == 3 and report.failures["127.91.5.6"] == "not redfish"  # two unnamed, and the named one


def test_each_address_once_and_the_per_subnet_bound_holds(roots: ServiceRoots) -> None:
    """Connections into one /24 never exceed per_subnet; duplicates are probed once."""
    addresses = [f"127.92.0.{h}" for h in range(1, 41)]
    for a in addresses:
        roots.behaviours[a] = Behaviour(body=b'{"RedfishVersion": "1.6.0"}')
    roots.start(addresses)
    limits = probe.ProbeLimits(concurrency=8, per_subnet=2, connect_timeout=5.0, deadline=10.0)
    report = run(addresses + addresses[:10], roots.port, limits=limits)
    assert len(report.found) == len(addresses) == roots.connections
    assert roots.max_open == {"127.92.0": 2}  # reached, never passed


def test_the_overall_bound_holds_across_subnets(roots: ServiceRoots) -> None:
    addresses = [f"127.92.{s}.{h}" for s in range(4) for h in range(1, 11)]
    for a in addresses:
        roots.behaviours[a] = Behaviour(body=b'{"RedfishVersion": "1.6.0"}')
    roots.start(addresses)
    report = run(addresses, roots.port, limits=probe.ProbeLimits(concurrency=3, per_subnet=64, connect_timeout=5.0, deadline=10.0))
    assert len(report.found) == len(addresses)
    assert roots.max_total == 3


def test_interleave_spreads_subnets_and_drops_duplicates() -> None:
    order = probe.interleave(["10.0.0.1", "10.0.0.2", "10.0.1.1", "10.0.0.1", "10.0.1.2", "10.0.2.1"])
    assert order == ["10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.0.2", "10.0.1.2"]


@pytest.mark.parametrize("text", ["10.0.0.0/33", "10.0.0.1/24", "300.0.0.0/24", "", " ", "\u0661\u0660.0.0.0/24", "10.0.0.0/24/1", "all"])
def test_a_malformed_cidr_is_one_input_error(text: str) -> None:
    with pytest.raises(InputError) as e:
        probe.parse_range(text)
    assert e.value.field == "--range"
    assert "\n" not in str(e.value)


def test_more_than_a_slash_16_needs_yes() -> None:
    assert probe.parse_range("127.0.0.0/16").num_addresses == 65536
    with pytest.raises(InputError, match="more than a /16; give --yes"):
        probe.parse_range("127.0.0.0/15")
    assert probe.parse_range("127.0.0.0/15", yes=True).prefixlen == 15
    # Even with --yes, one pass has an end: an IPv6 /64 (or an IPv4 /8) is refused, not listed.
    for big in ("2001:db8::/64", "10.0.0.0/8"):
        with pytest.raises(InputError, match="one pass probes at most 1,048,576: split it"):
            probe.parse_range(big, yes=True)


def test_a_range_holding_an_own_address_needs_yes() -> None:
    nets = [probe.parse_range("192.0.2.0/24")]
    with pytest.raises(InputError, match=r"own address 192\.0\.2\.7; give --yes"):
        probe.check_not_own(nets, yes=False, own={"192.0.2.7", "198.51.100.1"})
    probe.check_not_own(nets, yes=True, own={"192.0.2.7"})
    probe.check_not_own([probe.parse_range("127.0.0.0/24")], yes=False)  # loopback is never an "own" address here


def test_own_addresses_are_not_loopback() -> None:
    assert not any(a.startswith("127.") or a == "::1" for a in probe.own_addresses())
