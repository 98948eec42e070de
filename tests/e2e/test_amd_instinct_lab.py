"""`fleetctl burnin --kind amd-instinct` and `fleetctl sweep --level host` on an AMD MI300X-like lab server.

The third accelerator kind, end to end through the CLI: a site whose model
carries eight `amd-instinct` boards is served by the lab (its BMC, and its host
over SSH with the amd-smi and rvs stand-ins), installed by fleetctl's own
`boot set` + `power on`, marked ready, burned in and swept healthy, then with
board faults set (boards.json). Nothing of fleetctl/ names the kind: the
driver (fleetctl_drivers.accel.amd) brings its parsers, stages and criteria.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.host_standins import set_board_fault
from tests_helpers_bmc import install_hosts, lab_up  # (path set in conftest)

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]

SERVER = "amd-01"
FAST = ("--duration", "2", "--grace", "5")
# The PCI addresses of an eight-GPU MI300X node (the topology tables in ROCm/amdsmi's CHANGELOG.md).
BDFS = ["0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"]
BOARDS = "\n".join(f"      - {{serial: PCB-MI300X-{n:04d}, slot: {n}, pci: '{bdf}', model: AMD Instinct MI300X}}"
                   for n, bdf in enumerate(BDFS))
SITE = f"""\
models:
- name: amd-8x-mi300x
  kind: server
  vendor: Supermicro
  model: AS-8125GS-TNMR2
  height: 8
  boards:
    kind: amd-instinct
    count: 8
sites:
- name: lab10
  # The lab puts its SSH user, key and known_hosts into the site's provisioning settings (the hosts' targets).
  provisioning:
    vlan: 200
    boot: pxe
  racks:
  - name: r1
    height: 42
    servers:
    - name: {SERVER}
      serial: SYS-AMD-01
      model: amd-8x-mi300x
      position: 1
      bmc: https://{SERVER}-bmc.lab10.example
      credential: env:BMC_LAB10
      boards:
{BOARDS}
"""


@pytest.fixture
def lab(db_url, cli, tmp_path, monkeypatch, lab_db_args) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    pytest.importorskip("asyncssh")
    state = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    site = tmp_path / "lab10.yaml"
    site.write_text(SITE)
    r = lab_up(cli, monkeypatch, *lab_db_args, "--site", str(site), "--power-transition", "0.2", "--install-time", "1",
               "--os-boot-time", "0.2")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads((state / "lab.json").read_text())
    try:
        install_hosts(cli, doc, [SERVER])
        yield doc
    finally:
        cli("lab", "down")


def _json(r: Any) -> Any:
    assert r.out.strip(), r.err
    return json.loads(r.out)


def _verdicts(r: Any) -> dict[int, tuple[str, set[str]]]:
    return {b["slot"]: (b["verdict"], {x["criterion"] for x in b["reasons"] if x["severity"] in ("fail", "degraded")})
            for b in _json(r)["boards"]}  # fmt: skip


def _host_findings(cli) -> set[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    r = cli("sweep", "show", "-o", "json")
    assert r.code == 0, r.err
    return {(f["check"], f["subject"], f["status"]) for f in json.loads(r.out)
            if f["target"] == SERVER and f["check"].startswith(("host.", "accel.host_boards", "gpu."))}  # fmt: skip


def test_amd_instinct_boards_are_inspected_as_their_kind(lab, cli) -> None:  # type: ignore[no-untyped-def]
    # The BMC lists the boards as PCIe functions of vendor 0x1002 (class 0x12): the Redfish driver's accelerator rules
    # (drivers data) give them the kind the inventory declares, so inspect finds no drift and the boards keep it.
    r = cli("server", "inspect", SERVER, "--output", "json")
    assert r.code == 0, r.err + r.out
    [row] = json.loads(r.out)
    assert row["drift"] == [] and row["boards"] == "8/8", row
    assert {b["kind"] for b in row["facts"]["boards"]} == {"amd-instinct"}, row["facts"]["boards"]
    boards = json.loads(cli("board", "list", "--server", SERVER, "--output", "json").out)
    assert len(boards) == 8 and {b["kind"] for b in boards} == {"amd-instinct"}


def test_amd_instinct_burns_in_and_sweeps_in_the_lab(lab, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("burnin", "--kind", "amd-instinct", SERVER, "--level", "quick", *FAST, "-o", "json")
    assert r.code == 0, r.out + r.err
    assert _verdicts(r) == {n: ("pass", set()) for n in range(8)}
    r = cli("sweep", SERVER, "--level", "host", "--timeout", "20")
    assert r.code in (0, 1), r.out + r.err
    assert _host_findings(cli) == set(), r.out

    boards = Path(lab["hosts"][SERVER]["dir"]) / "boards.json"
    for slot, fault in enumerate(["healthy", "slow", "hot", "memory_errors", "degraded_link", "checksum", "vanish", "healthy"]):
        set_board_fault(boards, str(slot), fault)
    r = cli("burnin", "--kind", "amd-instinct", SERVER, "--level", "quick", *FAST, "--restart", "-o", "json")
    assert r.code == 5, r.out + r.err
    assert _verdicts(r) == {
        0: ("pass", set()),
        1: ("fail", {"throughput"}),
        2: ("degraded", {"throughput", "temperature"}),
        3: ("fail", {"memory_retired", "retired_pending", "uncorrected_errors"}),
        4: ("fail", {"link_degraded"}),
        5: ("fail", {"checksum"}),
        6: ("fail", {"device_lost"}),
        7: ("pass", set()),
    }, r.out
    r = cli("sweep", SERVER, "--level", "host", "--timeout", "20")
    assert r.code == 5, r.out + r.err
    assert _host_findings(cli) == {
        ("accel.host_boards", "amd-smi", "critical"),  # amd-smi lists 7 of 8: the vanished board is gone until a reboot
        ("gpu.memory", "GPU 3", "critical"),
        ("gpu.pcie", "GPU 4", "critical"),
        ("gpu.temperature", "GPU 2", "warning"),
    }
