"""`fleetctl sweep --level host` against PXE-installed lab hosts, over real SSH.

An MN-Core server and a GPU server of the example site are installed by
fleetctl's own `boot set` and `power on` through their lab BMCs, marked
ready, and swept at the host level: healthy first (no host finding), then
with faults on their boards (boards.json, read by the lab's nvidia-smi and
dmesg stand-ins) and an MN-Core device node gone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.host_standins import set_board_fault
from tests_helpers_bmc import install_hosts, lab_up  # (path set in conftest)

MN, GPU = "mn-tyo1-r12-01", "gpu-tyo1-r12-19"
HOST_CHECKS = ("host.", "accel.host_boards", "gpu.")

pytestmark = [pytest.mark.slow]


@pytest.fixture
def installed(example_loaded, cli, tmp_path, monkeypatch) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    pytest.importorskip("asyncssh")
    state = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    r = lab_up(cli, monkeypatch, "--power-transition", "0.2", "--install-time", "1", "--os-boot-time", "0.2",
               "--server", MN, "--server", GPU)
    assert r.code == 0, r.err
    lab = json.loads((state / "lab.json").read_text())
    try:
        install_hosts(cli, lab, [MN, GPU])
        yield lab
    finally:
        cli("lab", "down")



def _host_findings(cli) -> set[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    r = cli("sweep", "show", "-o", "json")
    assert r.code == 0, r.err
    return {(f["target"], f["check"], f["subject"], f["status"]) for f in json.loads(r.out) if f["check"].startswith(HOST_CHECKS)}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_host_level_sees_the_boards_as_the_os_does(installed, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("sweep", MN, GPU, "--level", "host", "--timeout", "20")
    assert r.code in (0, 1), r.out + r.err  # the GPU server's vbios drift (BMC level) is a warning by design
    assert _host_findings(cli) == set(), r.out

    boards = Path(installed["hosts"][GPU]["dir"]) / "boards.json"
    set_board_fault(boards, "0", "memory_errors")  # 64 retired pages, pages pending: critical
    set_board_fault(boards, "1", "degraded_link")  # Gen3 x8 of Gen5 x16: burn-in's link_degraded, a fail, so critical
    set_board_fault(boards, "2", "xid")  # Xid 79: fallen off the bus
    set_board_fault(boards, "3", "hot")  # 92 C
    mn_nodes = sorted((Path(installed["hosts"][MN]["vars"]["fleetctl_root"]) / "dev").glob("mnc2p*"))
    assert len(mn_nodes) == 4
    mn_nodes[-1].unlink()  # a board the OS no longer sees
    # A bmc-level sweep runs no host check.
    assert cli("sweep", MN, GPU, "--timeout", "20").code in (0, 1)
    assert _host_findings(cli) == set()

    r = cli("sweep", MN, GPU, "--level", "host", "--timeout", "20")
    assert r.code == 5, r.out + r.err
    got = _host_findings(cli)
    want_checks = {
        (MN, "accel.host_boards", "gpfn3-smi", "critical"), (MN, "accel.host_boards", "device nodes", "critical"),
        (GPU, "gpu.memory", "GPU 0", "critical"), (GPU, "gpu.pcie", "GPU 1", "critical"), (GPU, "gpu.temperature", "GPU 3", "warning"),
    }  # fmt: skip
    assert want_checks <= got, got
    xid = {f for f in got if f[1] == "gpu.xid"}
    assert len(xid) == 1 and next(iter(xid))[3] == "critical", got
    # nothing else, beyond what the lost GPU makes unreadable
    assert not {f for f in got - want_checks - xid if f[1] != "host.reachable"}, got


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_host_that_does_not_answer_is_critical(installed, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("power", "off", GPU, "--force").code == 0  # its OS is gone; its BMC still answers
    r = cli("sweep", GPU, "--level", "host", "--timeout", "20", "--request-timeout", "2")
    assert r.code == 5, r.out + r.err
    got = _host_findings(cli)
    assert {(t, c, s) for t, c, s, _ in got} == {(GPU, "host.reachable", "")}, got
