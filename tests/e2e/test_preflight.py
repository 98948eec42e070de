"""Preflight against the lab (issue #13): provision without the join token touches nothing.

Before, `fleetctl provision` without ``FLEETCTL_K8S_TOKEN`` flashed, set the
BIOS, moved the VLANs, booted and installed every server, then failed each one
at the Ansible step. Now it refuses with one line and exit 2 before the first
request to a device: the lab's counters and switch ports say nothing happened.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests_helpers_bmc import counters, lab_doc, lab_up, serve  # (path set in conftest)

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]

NAMES = ["mn-tyo1-r12-01", "gpu-tyo1-r12-17"]  # one MN-Core server, one GPU server whose vbios is below the baseline


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.delenv("FLEETCTL_K8S_TOKEN", raising=False)
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.3", "--firmware-time", "0.3", "--install-time", "2",
               "--os-boot-time", "0.5", *serve(NAMES))  # fmt: skip
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def _devices(lab: dict[str, Any], cli) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    out: dict[str, Any] = {}
    for n in NAMES:
        c = counters(lab, n)
        out[n] = {k: c[k] for k in ("power_state", "power_on", "power_cycle", "firmware", "firmware_flashes", "bios_pending", "boot_log")}
    r = cli("switch", "ports", "leaf-tyo1-r12-a", "--output", "json")
    out["ports"] = {p["port"]: p["vlans"] for p in json.loads(r.out)} if r.out.strip() else r.err
    return out


def test_provision_without_the_join_token_is_refused_and_touches_no_device(lab, cli) -> None:  # type: ignore[no-untyped-def]
    before = _devices(lab, cli)
    r = cli("provision", *NAMES, "--poll", "0.3", "--stagger", "0.3", "--output", "json")
    assert r.code == 2, (r.out, r.err)
    err = [x for x in r.err.strip().splitlines() if not x.startswith("fleet: ")]
    assert err == ["error: provision refused: site tyo1: provisioning.k8s.token: secret env:FLEETCTL_K8S_TOKEN: "
                   "set FLEETCTL_K8S_TOKEN (nothing was touched)"], r.err  # fmt: skip
    assert _devices(lab, cli) == before
    assert all(c["firmware_flashes"] == 0 and c["power_on"] == 0 and not c["boot_log"] for c in (before[n] for n in NAMES))
    jobs = json.loads(cli("jobs", "list", "--output", "json").out)
    assert not [j for j in jobs if j["kind"] == "provision"]
    states = {s["name"]: s["state"] for s in json.loads(cli("server", "list", "--output", "json").out) if s["name"] in NAMES}
    assert states == dict.fromkeys(NAMES, "registered"), states
