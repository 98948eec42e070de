"""`fleetctl server inspect` and `fleetctl sweep` against the lab's newer BMC dialects (issue 20).

One lab serves a small site of GPU servers whose BMCs speak iLO 6 (HPE
ProLiant Gen11), iDRAC 9 (Dell PowerEdge XE9680) and NVIDIA's OpenBMC on a
GB200-like tray (two ComputerSystems, GPUs as Processors, two GPUs of a
processor module sharing one serial). The lab starts every server powered
off, so the iLO 6 servers report their temperatures Absent at 0 with
thresholds 0. Then the lab's faults of issue 20, each on a server of its own:
a board without a serial, a collection whose next link loops back, one that
pages forever.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests_helpers_bmc import lab_up  # (path set in conftest)

from tests.conftest import Result, run_cli

pytestmark = pytest.mark.slow

FAST = ["--timeout", "60", "--request-timeout", "10"]
FLEETCTL = Path(sys.executable).parent / "fleetctl"
# A guard against a sweep that never ends (what a paging BMC did to fleetctl before issue 20), not a measure of speed.
GUARD_S = 240


def _gpus(prefix: str, n: int, model: str, *, modules: bool = False) -> list[dict[str, Any]]:
    boards = []
    for i in range(n):
        b: dict[str, Any] = {"serial": f"{prefix}-{i}", "slot": i, "pci": f"0000:{0x18 + 0x10 * i:02x}:00.0", "model": model}
        if modules:  # GB200/GB300: one serial per processor module, its two GPUs at positions 1 and 2
            b.update(serial=f"{prefix}-M{i // 2}", position=i % 2 + 1)
        boards.append(b)
    return boards


def _server(name: str, model: str, pos: int, boards: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "serial": f"SRV-{name.upper()}", "model": model, "position": pos, "bmc": f"https://{name}-bmc.oob.example",
            "credential": "env:BMC_LAB", "nics": [{"name": "eth0", "mac": f"02:fd:00:00:{pos:02x}:01"}], "boards": boards}  # fmt: skip


SERVERS = {
    # name: (model, boards)
    "dl380a-01": ("dl380a-gen11", _gpus("HPE01", 4, "NVIDIA H100 NVL")),
    "dl380a-02": ("dl380a-gen11", _gpus("HPE02", 4, "NVIDIA H100 NVL")),  # nextlink_loop
    "dl380a-03": ("dl380a-gen11", _gpus("HPE03", 4, "NVIDIA H100 NVL")),  # nextlink_forever
    "xe9680-01": ("xe9680", _gpus("DELL01", 8, "NVIDIA H100 SXM5 80GB")),
    "xe9680-02": ("xe9680", _gpus("DELL02", 8, "NVIDIA H100 SXM5 80GB")),  # board_no_serial
    "gb200-01": ("gb200-tray", _gpus("GB01", 4, "NVIDIA GB200", modules=True)),
    "gb200-02": ("gb200-tray", _gpus("GB02", 4, "NVIDIA GB200", modules=True)),  # board_no_serial
}
FLAVOUR = {"dl380a": "ilo6", "xe9680": "idrac9", "gb200": "nvidia"}


def site() -> dict[str, Any]:
    models = [
        {"name": "dl380a-gen11", "kind": "server", "vendor": "HPE", "model": "ProLiant DL380a Gen11", "height": 4,
         "boards": {"kind": "gpu", "count": 4}, "firmware": {"BMC": "1.64", "BIOS": "2.30"}},
        {"name": "xe9680", "kind": "server", "vendor": "Dell Inc.", "model": "PowerEdge XE9680", "height": 6,
         "boards": {"kind": "gpu", "count": 8}, "firmware": {"BMC": "7.10.70.00", "BIOS": "2.3.5"}},
        {"name": "gb200-tray", "kind": "server", "vendor": "NVIDIA", "model": "GB200 NVL Compute Tray", "height": 1,
         "boards": {"kind": "gpu", "count": 4}, "firmware": {"BMC": "GB200Nvl-25.06-1", "BIOS": "1.0"}},
    ]  # fmt: skip
    servers, pos = [], 1
    for name, (model, boards) in SERVERS.items():
        servers.append(_server(name, model, pos, boards))
        pos += 6
    return {"models": models, "sites": [{"name": "dia1", "racks": [{"name": "rack-01", "height": 48, "servers": servers}]}]}


def cli(*args: str) -> Result:
    return run_cli(*args)


def cli_json(*args: str) -> Any:
    r = cli(*args, "-o", "json")
    assert r.code in (0, 1, 4, 5) and r.out.strip(), (args, r.code, r.err[-2000:])
    return json.loads(r.out)


@dataclass
class Lab:
    env: dict[str, str]
    status: dict[str, Any]


def _use(env: dict[str, str], mp: pytest.MonkeyPatch) -> None:
    from fleetctl.store import reset_engines

    for k, v in env.items():
        mp.setenv(k, v)
    reset_engines()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("lab-dialects")
    site_file = root / "dialects.yaml"
    site_file.write_text(yaml.safe_dump(site(), sort_keys=False))
    env = {"FLEETCTL_LAB_DIR": str(root / "lab"), "FLEETCTL_DATA_DIR": str(root / "data"),
           "FLEETCTL_DB": str(root / "fleet.db"), "FLEETCTL_ACTOR": "tester@ci"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        _use(env, mp)
        r = lab_up(cli, mp, "--site", str(site_file), "--no-hosts")
        assert r.code == 0, r.err
        env["FLEETCTL_DB"] = os.environ["FLEETCTL_DB"]
        status = json.loads((Path(env["FLEETCTL_LAB_DIR"]) / "lab.json").read_text())
        try:
            yield Lab(env, status)
        finally:
            _use(env, mp)
            cli("lab", "down")


@pytest.fixture
def on_lab(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Lab:
    _use(lab.env, monkeypatch)
    return lab


def sweep_guarded(*args: str) -> Result:
    """`fleetctl sweep ARGS -o json` in a process of its own, killed (and the test failed) past GUARD_S."""
    try:
        p = subprocess.run([str(FLEETCTL), "sweep", *args, "-o", "json"], env=dict(os.environ), capture_output=True, text=True,
                           timeout=GUARD_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sweep of {args} did not end within {GUARD_S} s: a paged collection walked without end")
    return Result(p.returncode, p.stdout, p.stderr)


def _findings(result: Result) -> list[dict[str, Any]]:
    doc = json.loads(result.out)
    return list(doc["new"]) + list(doc.get("persisting") or [])


def test_each_server_speaks_the_dialect_of_its_vendor_and_model(on_lab: Lab) -> None:
    servers = on_lab.status["servers"]
    for name in SERVERS:
        assert servers[name]["flavour"] == FLAVOUR[name.split("-")[0]], (name, servers[name])
    assert servers["gb200-01"]["system_id"] == "System_0"
    assert servers["xe9680-01"]["system_id"] == "System.Embedded.1"


def test_inspect_reads_every_dialect_the_tray_included(on_lab: Lab) -> None:
    names = ["dl380a-01", "xe9680-01", "gb200-01"]
    r = cli("server", "inspect", *names, "-o", "json")
    assert r.code == 0, (r.code, r.out[-3000:], r.err[-3000:])
    shown = {n: json.loads(cli("server", "show", n, "-o", "json").out) for n in names}
    for name in names:
        boards = shown[name]["boards"]
        want = sorted((b["serial"], b["slot"]) for b in SERVERS[name][1])
        assert sorted((b["serial"], b["slot"]) for b in boards) == want, (name, boards)


def test_a_sweep_of_the_powered_off_dialects_raises_no_critical(on_lab: Lab) -> None:
    """iLO 6's Absent temperatures at 0 (thresholds 0) and the tray's shared serials are no problem."""
    names = ["dl380a-01", "xe9680-01", "gb200-01"]
    assert cli("server", "inspect", *names).code == 0
    r = cli("sweep", *names, *FAST, "-o", "json")
    assert r.code in (0, 1), (r.code, r.err[-3000:])
    findings = _findings(r)
    bad = [(f["target"], f["check"], f["subject"], f["message"]) for f in findings if f["status"] == "critical"]
    assert bad == []
    assert not [f for f in findings if f["check"] == "temperature"], "an Absent sensor is not a reading"
    assert not [f for f in findings if "not seen by the BMC" in f["message"]]


def test_a_board_without_a_serial_is_inspected_and_swept_without_a_false_critical(on_lab: Lab) -> None:
    names = ["xe9680-02", "gb200-02"]
    assert cli("server", "inspect", *names).code == 0  # recorded with their serials first
    for name in names:
        assert cli("lab", "fault", name, "--set", "board_no_serial=true").code == 0  # the last board's serial is gone
    r = cli("server", "inspect", *names, "-o", "json")
    assert r.code == 0, (r.code, r.out[-3000:], r.err[-3000:])
    r = cli("sweep", *names, *FAST, "-o", "json")
    assert r.code in (0, 1), (r.code, r.err[-3000:])
    findings = _findings(r)
    assert not [f for f in findings if f["status"] == "critical"], findings
    assert not [f for f in findings if "not seen by the BMC" in f["message"]]


def test_a_next_link_that_loops_back_ends_the_walk_with_a_finding_naming_the_bmc(on_lab: Lab) -> None:
    name = "dl380a-02"
    assert cli("lab", "fault", name, "--set", "nextlink_loop=true").code == 0
    r = sweep_guarded(name, *FAST)
    assert r.code in (1, 4, 5), (r.code, r.err[-3000:])
    loops = [f for f in _findings(r) if "comes back to a page already read" in f["message"]]
    assert loops, [f["message"] for f in _findings(r)]
    assert all(f["target"] == name and f"{name}: collection " in f["message"] for f in loops)


def test_a_collection_that_pages_forever_ends_at_the_bound_with_a_finding(on_lab: Lab) -> None:
    name = "dl380a-03"
    assert cli("lab", "fault", name, "--set", "nextlink_forever=Sensors").code == 0
    r = sweep_guarded(name, *FAST)
    assert r.code in (1, 4, 5), (r.code, r.err[-3000:])
    ended = [f for f in _findings(r) if "the walk ends here" in f["message"] and "/Sensors" in f["message"]]
    assert ended and all(f["target"] == name for f in ended), [f["message"] for f in _findings(r)]
