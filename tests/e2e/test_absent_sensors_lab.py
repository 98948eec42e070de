"""`fleetctl sweep` of powered-off servers whose temperatures read Absent, 0 C, thresholds 0 (issue 20, item 2).

The lab's ``ilo6`` flavour (an HPE ProLiant Gen11) reports every temperature so
while the server is off, as iLO 6 and 7 do; the ``sensors_absent`` fault makes
the NVIDIA tray do the same. Lab servers start powered off. The sweep must
find no temperature problem on either, and still judge the temperatures once
the server is on. Against lab BMCs over HTTPS, the real CLI.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from lab9_site import SITE
from tests_helpers_bmc import lab_up  # (path set in conftest)

pytestmark = [pytest.mark.slow]

FAST = ["--timeout", "20", "--request-timeout", "8"]


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


def findings(cli) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    r = cli("sweep", "show", "--output", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def health_of(cli, name: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    r = cli("server", "health", name, "--output", "json")
    assert r.out.strip(), r.err
    return json.loads(r.out)[0]["report"]


def test_powered_off_servers_absent_temperatures_are_no_finding(lab, cli):  # type: ignore[no-untyped-def]
    assert cli("lab", "fault", "gb-01", "--set", "sensors_absent=true").code == 0
    r = cli("sweep", *FAST)
    assert r.code == 0, r.out[-2000:] + r.err[-2000:]
    temps = [(f["target"], f["status"], f["message"]) for f in findings(cli) if f["check"] == "temperature"]
    assert temps == []
    # what the BMCs said: temperatures Absent, 0, thresholds 0 (so the test tests what it says)
    dl = health_of(cli, "dl-01")
    assert dl["temperatures"] and all(t["state"] == "Absent" and t["reading"] == 0 for t in dl["temperatures"]), dl
    # on, the same sensors read and are judged again (a hot one would be critical: the lab's hot_sensor fault)
    assert cli("power", "on", "dl-01", "--stagger", "0").code == 0
    deadline = time.monotonic() + 20
    while any(t["state"] == "Absent" for t in health_of(cli, "dl-01")["temperatures"]):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert cli("lab", "fault", "dl-01", "--set", "hot_sensor=true").code == 0
    cli("sweep", *FAST)
    hot = [(f["target"], f["status"]) for f in findings(cli) if f["check"] == "temperature"]
    assert hot and set(hot) == {("dl-01", "critical")}, hot
