"""Adoption end to end: `fleetctl lab up --unregistered 3`, then the real `fleetctl discover` with the lab's
leases, its credential and its switches, `--write`, `inventory import`, and a second discovery.

The lab's fleet plans two of the unregistered BMCs (a leased one and one on a
fixed address) as a delivery's servers: declared at a unit, cabled, without a
BMC address or MAC. The third sits on a port the plan cables to nothing.
Discovery must adopt the two at their planned units (the fixed one placed by
the MAC its Manager reports, read by logging in, there being no lease), leave the served
servers unchanged, and say the third is a problem; the fragment must import,
after which the two are unchanged too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests_helpers_bmc import lab_db_of  # (path set in conftest)

REPO = Path(__file__).resolve().parents[2]
FLEETCTL = str(Path(sys.executable).with_name("fleetctl"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("asyncssh", reason="the switch lab needs asyncssh")
    pytest.importorskip("snmpsim", reason="the switch lab's SNMP agents need snmpsim")
    tmp = tmp_path_factory.mktemp("adoptlab")
    env = {**os.environ, "FLEETCTL_DB": str(tmp / "inv.db"), "FLEETCTL_LAB_DIR": str(tmp / "lab"),
           "FLEETCTL_DATA_DIR": str(tmp / "data"), "FLEETCTL_ACTOR": "tester@ci"}  # fmt: skip
    subprocess.run([FLEETCTL, "inventory", "import", str(REPO / "inventory")], env=env, check=True, capture_output=True)
    serve = [arg for i in (1, 2, 3) for arg in ("--server", f"mn-tyo1-r12-0{i}")]
    up = subprocess.run([FLEETCTL, "lab", "up", *serve, "--no-hosts", "--unregistered", "3"], env=env, capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    env["FLEETCTL_DB"] = lab_db_of(up.stdout)
    if not json.loads((tmp / "lab" / "lab.json").read_text()).get("switches"):
        subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)
        pytest.skip("the lab serves no switches here (asyncssh or snmpsim missing)")
    yield env, tmp / "lab", tmp
    subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)


def discover(env: dict[str, str], lab_dir: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    doc = json.loads((lab_dir / "lab.json").read_text())
    urls = [s["url"] for s in doc["servers"].values()]
    port = urls[0].rsplit(":", 1)[1]
    ranges = [arg for u in urls for arg in ("--range", u.split("//")[1].rsplit(":", 1)[0] + "/32")]
    r = subprocess.run([FLEETCTL, "discover", *ranges, "--port", port, "--leases", str(lab_dir / "leases" / "kea-leases4.csv"),
                        "--credential", f"file:{lab_dir / 'credential'}", "--switches", "rack-12", "-o", "json", *extra],
                       env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}, r.stderr


def test_adopt_the_unregistered_write_import_and_again(lab: Any) -> None:
    env, lab_dir, tmp = lab
    note = {b["name"]: b for b in json.loads((lab_dir / "leases" / "unregistered.json").read_text())["bmcs"]}
    frag = tmp / "adopt.yaml"
    code, doc, err = discover(env, lab_dir, "--write", str(frag))
    assert doc, err
    assert doc["switch_errors"] == []
    by_addr = {p["address"]: p for p in doc["proposals"]}
    for name, b in note.items():
        p = by_addr[b["address"]]
        if b["kind"] == "unplanned":
            assert p["kind"] == "problem" and "port-not-in-plan" in p["detail"], p
            continue
        assert (p["kind"], p["server"], p["site"], p["rack"], p["position"]) == ("adopt", name, "tyo1", b["rack"], b["position"]), p
        assert p["matched_by"] == "serial"  # read by logging in: the planned server's serial
        assert p["sources"]["mac"].startswith("lease" if b["kind"] == "lease" else "inspect")
        # Both placed at their planned unit by the MAC their switch port learns: the leased one by the lease's, the
        # fixed one (no lease) by the MAC its Manager's EthernetInterface reports, read by logging in.
        assert p["changes"]["nics.bmc.mac"]["to"] == b["mac"], p
        assert p["sources"]["position"] == f"switch {b['switch']}:{b['port']}", p
    served = [p for p in doc["proposals"] if p["server"] and p["server"].startswith("mn-tyo1-r12-0")]
    assert sorted((p["server"], p["kind"]) for p in served) == [(f"mn-tyo1-r12-0{i}", "unchanged") for i in (1, 2, 3)]
    assert code == 1  # the unplanned BMC is a problem for a person

    imp = subprocess.run([FLEETCTL, "inventory", "import", str(frag)], env=env, capture_output=True, text=True)
    assert imp.returncode == 0, imp.stderr
    out = yaml.safe_load(subprocess.run([FLEETCTL, "inventory", "export", "--site", "tyo1"], env=env, capture_output=True,
                                        text=True, check=True).stdout)  # fmt: skip
    servers = {s["name"]: s for r in out["sites"][0]["racks"] for s in r["servers"]}
    for name, b in note.items():
        if b["kind"] != "unplanned":
            assert servers[name]["bmc"].startswith(f"https://{b['address']}:")
            assert {"name": "bmc", "mac": b["mac"]} in servers[name]["nics"]
    _, again, _ = discover(env, lab_dir)
    assert {p["server"]: p["kind"] for p in again["proposals"] if p["server"] in note} == {
        n: "unchanged" for n, b in note.items() if b["kind"] != "unplanned"}
