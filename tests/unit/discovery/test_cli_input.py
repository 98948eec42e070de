"""`fleetctl discover` bad input: one line, exit 2, nothing probed (a loopback server counts the connections)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from discovery_servers import Behaviour, ServiceRoots

DATA = Path(__file__).resolve().parents[2] / "data" / "discovery" / "leases"


@pytest.fixture
def one_bmc(roots: ServiceRoots) -> ServiceRoots:
    roots.behaviours["127.95.0.1"] = Behaviour(body=b'{"RedfishVersion": "1.6.0", "UUID": "u-1", "Vendor": "Lab"}')
    roots.start(["127.95.0.1"])
    return roots


def bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    other = tmp_path / "site.yaml"
    other.write_text("sites:\n- name: tyo1\n")
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("serial,model\nSN1,X\n")
    bad_line = tmp_path / "kea.csv"
    bad_line.write_text("address,hwaddr,client_id,valid_lifetime\n127.95.0.1,aa:bb:cc:dd:ee:ff,,60\n127.95.0.999,,,60\n")
    return [
        (["--range", "127.95.0.0/33"], "--range: '127.95.0.0/33' is not a CIDR range"),
        (["--range", "127.0.0.0/15"], "more than a /16; give --yes"),
        (["--range", "127.0.0.0/8", "--yes"], "one pass probes at most 1,048,576: split it"),
        (["--range", "127.0.0.0/12", "--range", "127.16.0.0/12", "--yes"], "the ranges hold 2,097,152 addresses"),
        (["--leases", str(other)], f"{other}: not a lease file"),
        (["--leases", str(DATA / "metal-bmc-kea-leases4.csv"), "--leases-format", "dhcpd"], "is a kea lease file, not dhcpd"),
        (["--leases", str(bad_line)], f"{bad_line}:3: address: '127.95.0.999' is not an IP address"),
        (["--expect", str(sheet)], f"{sheet}:1: the header has no bmc_mac column"),
        (["--leases-format", "isc"], "--leases-format: 'isc' is not a lease format"),
        (["--credential", "password123"], "--credential:"),
        ([], "nothing to discover"),
    ]


def test_bad_input_is_one_line_exit_2_and_nothing_probed(one_bmc: ServiceRoots, cli: Any, tmp_path: Path) -> None:
    for extra, message in bad_inputs(tmp_path):
        # A good range beside the bad input: were anything probed, the server would count it.
        args = ["discover", *(["--range", "127.95.0.1/32"] if extra and extra[0] != "--range" else []), *extra,
                "--port", str(one_bmc.port)]  # fmt: skip
        if not extra:
            args = ["discover", "--port", str(one_bmc.port)]
        r = cli(*args)
        assert r.code == 2, (extra, r.out, r.err)
        assert message in r.err, (extra, r.err)
        assert len(r.err.strip().splitlines()) == 1, r.err
        assert "password123" not in r.err  # a credential given by mistake is never repeated
    assert one_bmc.connections == 0


def test_a_range_holding_this_machines_address_is_refused(one_bmc: ServiceRoots, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl.discovery import probe

    monkeypatch.setattr(probe, "own_addresses", lambda: {"192.0.2.10"})
    r = cli("discover", "--range", "127.95.0.1/32", "--range", "192.0.2.0/28", "--port", str(one_bmc.port))
    assert r.code == 2 and "192.0.2.0/28 holds this machine's own address 192.0.2.10; give --yes" in r.err
    assert one_bmc.connections == 0


def test_a_good_run_finds_it(one_bmc: ServiceRoots, cli: Any) -> None:
    import json

    r = cli("discover", "--range", "127.95.0.0/30", "--port", str(one_bmc.port), "-o", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["answers"] == {"redfish": 1, "refused": 1}
    assert [(p["kind"], p["uuid"], p["fingerprint"]) for p in doc["proposals"]] == [("unplaced", "u-1", one_bmc.fingerprint)]
