"""`fleetctl server inspect` then `fleetctl sweep` on a GB200-like tray (issue 20, items 3 and 4).

The lab's ``nvidia`` flavour shows one serial per processor module, shared by
its two GPUs, as GB200/GB300 trays do. The tray's boards are first dropped
from the lab's inventory (a tray racked, its boards never recorded), then:
inspection (dry run, then for real) records the four boards as (serial,
position) where it refused the whole server before (exit 2, boards' serials
not unique); the sweep finds no board missing; the lab's ``board_no_serial``
fault then hides one GPU's serial, and neither inspection nor the sweep call
any board missing. Against lab BMCs over HTTPS, the real CLI.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from lab9_site import SITE
from tests_helpers_bmc import lab_up  # (path set in conftest)

pytestmark = [pytest.mark.slow]

FAST = ["--timeout", "20", "--request-timeout", "8"]
TRAY = "gb-01"


@pytest.fixture
def lab(db_url, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    site = tmp_path / "lab9.yaml"
    site.write_text(SITE)
    r = lab_up(cli, monkeypatch, *lab_db_args, "--site", str(site), "--no-hosts", "--power-transition", "0.1")
    assert r.code == 0, r.err
    yield
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def json_of(cli, *args: str) -> Any:  # type: ignore[no-untyped-def]
    r = cli(*args, "--output", "json")
    assert r.out.strip(), (args, r.code, r.err[-2000:])
    return json.loads(r.out)


def forget_boards(cli, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    """The lab's inventory without the server's boards (the lab BMC still serves them)."""
    doc = yaml.safe_load(cli("inventory", "export").out)
    for site in doc["sites"]:
        for rack in site["racks"]:
            for s in rack.get("servers", []):
                if s["name"] == name:
                    s.pop("boards", None)
    path = tmp_path / "without-boards.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = cli("inventory", "import", str(path))
    assert r.code == 0, r.err
    assert json_of(cli, "server", "show", name)["boards"] == []


def accel_findings(cli, name: str) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return [(f["check"], f["status"], f["message"]) for f in json_of(cli, "sweep", "show")
            if f["target"] == name and f["check"].startswith(("accel", "inventory"))]  # fmt: skip


def test_a_tray_whose_gpus_share_serials_is_inspected_and_swept(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    forget_boards(cli, tmp_path, TRAY)
    dry = json_of(cli, "server", "inspect", TRAY, "--dry-run")
    assert dry[0]["ok"] and dry[0]["drift"] == [] and dry[0]["filled"] == ["4 boards"], dry
    assert json_of(cli, "server", "show", TRAY)["boards"] == []  # a dry run writes nothing
    r = cli("server", "inspect", TRAY)
    assert r.code == 0, r.out + r.err
    boards = json_of(cli, "server", "show", TRAY)["boards"]
    assert len(boards) == 4
    exported = yaml.safe_load(cli("inventory", "export").out)
    tray = next(s for s in exported["sites"][0]["racks"][0]["servers"] if s["name"] == TRAY)
    assert sorted((b["serial"], b["position"]) for b in tray["boards"]) == [
        ("GB-MOD-A", 1), ("GB-MOD-A", 2), ("GB-MOD-B", 1), ("GB-MOD-B", 2)]  # fmt: skip
    r = cli("sweep", *FAST)
    assert r.code == 0, r.out[-2000:] + r.err[-2000:]
    assert accel_findings(cli, TRAY) == []
    # A second inspection agrees with the first.
    again = json_of(cli, "server", "inspect", TRAY)
    assert again[0]["drift"] == [] and again[0]["filled"] == []


def test_a_gpu_shown_without_a_serial_is_no_false_critical(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    forget_boards(cli, tmp_path, TRAY)
    assert cli("lab", "fault", TRAY, "--set", "board_no_serial=true").code == 0  # the last GPU: no SerialNumber
    r = cli("server", "inspect", TRAY)
    assert r.code == 0, r.out + r.err
    exported = yaml.safe_load(cli("inventory", "export").out)
    tray = next(s for s in exported["sites"][0]["racks"][0]["servers"] if s["name"] == TRAY)
    got = sorted((b["serial"], b.get("position"), b["slot"]) for b in tray["boards"])
    assert got == [("GB-MOD-A", 1, 0), ("GB-MOD-A", 2, 1), ("GB-MOD-B", None, 2), (f"UNKNOWN-{TRAY}-3", None, 3)], got
    r = cli("sweep", *FAST)
    assert r.code == 0, r.out[-2000:] + r.err[-2000:]
    assert accel_findings(cli, TRAY) == []
    # the BMC reports the serial again: the sweep finds every board, inspection fills the serial in (no drift)
    assert cli("lab", "fault", TRAY, "--clear").code == 0
    r = cli("sweep", *FAST)
    assert r.code == 0, r.out[-2000:] + r.err[-2000:]
    assert accel_findings(cli, TRAY) == []
    back = json_of(cli, "server", "inspect", TRAY)
    assert back[0]["drift"] == [] and back[0]["filled"] == ["board in slot 2: GB-MOD-B #1", "board in slot 3: GB-MOD-B #2"], back
    exported = yaml.safe_load(cli("inventory", "export").out)
    tray = next(s for s in exported["sites"][0]["racks"][0]["servers"] if s["name"] == TRAY)
    assert sorted((b["serial"], b.get("position")) for b in tray["boards"]) == [
        ("GB-MOD-A", 1), ("GB-MOD-A", 2), ("GB-MOD-B", 1), ("GB-MOD-B", 2)]  # fmt: skip
