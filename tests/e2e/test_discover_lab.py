"""`fleetctl discover` from the CLI against the lab's BMCs (HTTPS on their own loopback addresses).

Four lab BMCs at 127.96.0.1-4 (port 8443) and a hand-made inventory:
srv-1 declared at its address (its certificate not pinned yet), srv-2
declared at an old address with its certificate pinned (it moved), srv-3
declared with its BMC MAC only (a hand-made Kea lease gives that MAC the
address .3), and .4 nobody declared. The plan, --write then inventory import,
a second discovery that finds nothing to change, --credential (the lab's
serials) and --expect (a sheet with one server the network lacks).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

PORT = 8443
BASE = "127.96.0.1"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.daemon import lab_down, lab_up

    state = tmp_path_factory.mktemp("lab")
    st = lab_up(generate_specs(4), state, config={"tls": True, "address_mode": "address", "base_address": BASE, "port": PORT}, timeout=120)
    try:
        yield st
    finally:
        lab_down(state)


def fp(lab: dict[str, Any], i: int) -> str:
    return list(lab["servers"].values())[i]["fingerprint"].removeprefix("sha256:")


def site(lab: dict[str, Any]) -> str:
    return f"""
models:
- {{name: mn2, kind: server, vendor: Preferred Networks, model: MN-Server 2, height: 1}}
sites:
- name: lab1
  racks:
  - name: r1
    servers:
    - {{name: srv-1, serial: S1, model: mn2, position: 1, bmc: 'https://127.96.0.1:{PORT}'}}
    - {{name: srv-2, serial: S2, model: mn2, position: 2, bmc: 'https://127.96.0.200:{PORT}', fingerprint: {fp(lab, 1)}}}
    - {{name: srv-3, serial: S3, model: mn2, position: 3, nics: [{{name: bmc, mac: '02:aa:00:00:00:03'}}]}}
    - {{name: srv-5, serial: S5, model: mn2, position: 5, bmc: 'https://127.96.0.5:{PORT}'}}
"""


@pytest.fixture
def loaded(lab: dict[str, Any], cli: Any, tmp_path: Path) -> Path:
    p = tmp_path / "site.yaml"
    p.write_text(site(lab))
    r = cli("inventory", "import", str(p))
    assert r.code == 0, r.err
    leases = tmp_path / "kea-leases4.csv"
    leases.write_text("address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context,pool_id\n"
                      "127.96.0.3,02:aa:00:00:00:03,,3600,1900000000,1,0,0,,0,,0\n")  # fmt: skip
    return leases


def discover(cli: Any, leases: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    r = cli("discover", "--range", "127.96.0.0/28", "--leases", str(leases), "--port", str(PORT), "-o", "json", *extra)
    return r.code, json.loads(r.out) if r.out.strip() else {}, r.err


def test_plan_write_import_and_again(lab: dict[str, Any], loaded: Path, cli: Any, tmp_path: Path) -> None:
    frag = tmp_path / "discovered.yaml"
    code, doc, err = discover(cli, loaded, "--write", str(frag))
    assert code == 1, err  # srv-5 is declared and did not answer
    kinds = {p["address"]: (p["kind"], p["server"], p["matched_by"]) for p in doc["proposals"]}
    assert kinds == {
        "127.96.0.1": ("adopt", "srv-1", "address"),  # its certificate gets pinned
        "127.96.0.2": ("moved", "srv-2", "fingerprint"),
        "127.96.0.3": ("adopt", "srv-3", "bmc mac"),
        "127.96.0.4": ("unplaced", None, None),
    }
    assert [m["server"] for m in doc["missing"]] == ["srv-5"]
    assert doc["answers"] == {"redfish": 4, "refused": 10}  # a /28's 14 hosts, each once (.3 is in the range and the lease)
    assert cli("inventory", "import", str(frag)).code == 0
    servers = {s["name"]: s for s in yaml.safe_load(cli("inventory", "export").out)["sites"][0]["racks"][0]["servers"]}
    assert servers["srv-1"]["fingerprint"] == fp(lab, 0)
    assert servers["srv-2"]["bmc"] == f"https://127.96.0.2:{PORT}"
    assert servers["srv-3"]["bmc"] == f"https://127.96.0.3:{PORT}" and servers["srv-3"]["fingerprint"] == fp(lab, 2)
    code, doc, _ = discover(cli, loaded)
    assert {p["server"]: p["kind"] for p in doc["proposals"] if p["server"]} == {"srv-1": "unchanged", "srv-2": "unchanged",
                                                                                 "srv-3": "unchanged"}  # fmt: skip


def test_credential_and_expect(lab: dict[str, Any], loaded: Path, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBMC_USERNAME", "admin")
    monkeypatch.setenv("LABBMC_PASSWORD", "labpass")
    sheet = tmp_path / "delivery.csv"
    sheet.write_text("Asset,Serial Number,BMC MAC,Model\nA4,SN00000003,02:bb:00:00:00:04,MN-Server 2\nA9,SN-NOT-HERE,02:bb:00:00:00:09,\n")
    code, doc, err = discover(cli, loaded, "--credential", "env:LABBMC", "--expect", str(sheet))
    assert code == 1, err
    by = {p["address"]: p for p in doc["proposals"]}
    # The fourth lab BMC: its serial read by logging in, which ties it to the sheet's first row; its model matched.
    assert by["127.96.0.4"]["serial"] == "SN00000003" and by["127.96.0.4"]["sources"]["serial"] == "inspect"
    # The BMC's own MAC (its Manager's EthernetInterfaces), read by logging in: no lease needed to place it.
    assert by["127.96.0.4"]["mac"] == "02:1b:00:00:00:03" and by["127.96.0.4"]["sources"]["mac"].startswith("inspect")
    assert by["127.96.0.3"]["bmc_macs"] == ["02:aa:00:00:00:03", "02:1b:00:00:00:02"]  # the lease's first
    expected = {e["serial"]: (e["status"], e["address"]) for e in doc["expected"]}
    assert expected == {"SN00000003": ("found", "127.96.0.4"), "SN-NOT-HERE": ("not found", None)}
    assert sorted(u["address"] for u in doc["unexpected"]) == ["127.96.0.1", "127.96.0.2", "127.96.0.3"]
    # A login with the wrong password is that BMC's failure, never the pass's.
    monkeypatch.setenv("LABBMC_PASSWORD", "wrong")
    code, doc, err = discover(cli, loaded, "--credential", "env:LABBMC")
    assert len(doc["proposals"]) == 4 and all(p["serial"] is None for p in doc["proposals"])
