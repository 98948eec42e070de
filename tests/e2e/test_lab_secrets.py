"""The lab keeps its secrets owner-only and never prints them (issue #25, item 10).

lab.json holds each lab switch's SNMP community (a v2c password): mode 0600,
as the lab's credential files are. `lab status -o json` names where the
community is (its credential file), never the community. The lab's fleet.db
is mode 0600 (it names the lab's credential files and holds its journal).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from tests_helpers_bmc import lab_db_of  # (path set in conftest)

REPO = Path(__file__).resolve().parents[2]
FLEETCTL = str(Path(sys.executable).with_name("fleetctl"))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):  # type: ignore[no-untyped-def]
    pytest.importorskip("asyncssh", reason="the switch lab needs asyncssh")
    pytest.importorskip("snmpsim", reason="the switch lab's SNMP agents need snmpsim")
    tmp = tmp_path_factory.mktemp("labsecrets")
    env = {**os.environ, "FLEETCTL_DB": str(tmp / "inv.db"), "FLEETCTL_LAB_DIR": str(tmp / "lab"),
           "FLEETCTL_DATA_DIR": str(tmp / "data"), "FLEETCTL_ACTOR": "tester@ci"}  # fmt: skip
    subprocess.run([FLEETCTL, "inventory", "import", str(REPO / "inventory")], env=env, check=True, capture_output=True)
    up = subprocess.run([FLEETCTL, "lab", "up", "--server", "mn-tyo1-r12-01"], env=env, capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    env["FLEETCTL_DB"] = lab_db_of(up.stdout)
    doc = json.loads((tmp / "lab" / "lab.json").read_text())
    if not doc.get("switches"):
        subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)
        pytest.skip("the lab serves no switches here (asyncssh or snmpsim missing)")
    yield env, tmp / "lab", doc
    subprocess.run([FLEETCTL, "lab", "down"], env=env, capture_output=True)


def test_lab_json_is_owner_only(lab) -> None:  # type: ignore[no-untyped-def]
    _env, folder, doc = lab
    assert any(sw.get("community") for sw in doc["switches"].values())  # what makes it a secrets file
    assert _mode(folder / "lab.json") == 0o600


def test_the_labs_database_is_owner_only(lab) -> None:  # type: ignore[no-untyped-def]
    _env, folder, _doc = lab
    db = folder / "fleet.db"
    assert _mode(db) == 0o600
    for suffix in ("-wal", "-shm"):  # SQLite gives them the database file's mode
        side = Path(f"{db}{suffix}")
        if side.exists():
            assert _mode(side) == 0o600, side


def test_lab_status_never_prints_a_community(lab) -> None:  # type: ignore[no-untyped-def]
    env, folder, doc = lab
    communities = {sw["community"] for sw in doc["switches"].values() if sw.get("community")}
    assert communities
    for output in ("json", "yaml", "table"):
        r = subprocess.run([FLEETCTL, "lab", "status", "-o", output], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        for community in communities:
            assert community not in r.stdout and community not in r.stderr, output
    r = subprocess.run([FLEETCTL, "lab", "status", "-o", "json"], env=env, capture_output=True, text=True)
    endpoints = json.loads(r.stdout)["switch_endpoints"]
    for name, sw in endpoints.items():
        if doc["switches"][name].get("community") is None:
            assert sw["community"] is None
            continue
        ref = sw["community"]
        assert ref == "set" or ref == f"file:{folder / 'snmp' / name}", ref
        if ref.startswith("file:"):
            assert _mode(Path(ref.removeprefix("file:"))) == 0o600
