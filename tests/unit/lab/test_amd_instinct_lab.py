"""A third accelerator kind, AMD Instinct (``amd-instinct``), burned in and swept by the core's own code in the lab.

An eight-board MI300X-like lab host (its amd-smi and rvs stand-ins, boards.json
faults) is reached through the core's burn-in stage runner
(``fleetctl.burnin.host.burn``) and the sweep's host reader and checks
(``fleetctl.sweep.host.read_host``, the ``host`` level of the check registry),
judged by ``fleetctl.burnin.verdict`` on the criteria the driver ships. Only the
SSH transport is replaced: the host's commands run in its sandbox here, as the
lab's SSH server would run them (tests/e2e/test_amd_instinct_lab.py runs the
same through the CLI, the inventory and SSH).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fleetctl_lab.bmc.spec import LabBoard, LabServerSpec
from fleetctl_lab.host_standins import set_board_fault
from fleetctl_lab.hosts import HostSandbox
from local_host import sandboxed

from fleetctl.burnin import criteria as criteria_mod
from fleetctl.burnin.host import burn
from fleetctl.burnin.verdict import evaluate
from fleetctl.interfaces.accel import BurninJob, InvBoard
from fleetctl.interfaces.host import HostRef, HostTarget
from fleetctl.sweep import host as sweep_host
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.registry import checks

KIND, MODEL, SERVER = "amd-instinct", "amd-8x-mi300x", "amd-lab-01"
# The PCI addresses of an eight-GPU MI300X node (the topology tables in ROCm/amdsmi's CHANGELOG.md).
BDFS = ["0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[HostSandbox, HostTarget]:
    boards = [LabBoard(kind=KIND, serial=f"PCB-MI300X-{n:04d}", slot=n, pci_address=bdf) for n, bdf in enumerate(BDFS)]
    spec = LabServerSpec(name=SERVER, serial="AMDS-0001", model="AS-8125GS-TNMR2", manufacturer="Supermicro", boards=boards)
    return sandboxed(tmp_path, monkeypatch, spec)


def _burn(sb: HostSandbox, target: HostTarget, *, force: bool = False, seconds: float = 2.0) -> dict[int | None, tuple[str, set[str]]]:
    # At the lab's time scale (0.05) RVS runs seconds/20 of real time; each sample is two amd-smi runs in one shell.
    job = BurninJob(server=SERVER, target=target, hostvars=sb.vars(), kind=KIND, model=MODEL, seconds=seconds, grace=20.0, interval=0.05,
                    boards=[InvBoard(serial=f"PCB-MI300X-{n:04d}", kind=KIND, slot=n, pci_address=bdf) for n, bdf in enumerate(BDFS)],
                    board_kind=KIND, force=force, command_timeout=30.0)  # fmt: skip
    out = asyncio.run(burn(job))
    assert out.error is None, out.error
    crit = criteria_mod.load().for_board(KIND, MODEL)
    got = {}
    for o in out.observations:
        v = evaluate(o, crit)
        got[o.slot] = (v.verdict, {r.criterion for r in v.reasons if r.severity in ("fail", "degraded")})
        if o.present and not o.lost:
            assert o.telemetry, f"slot {o.slot}: no amd-smi sample during the workload"
    return got


def _sweep(sb: HostSandbox, target: HostTarget) -> set[tuple[str, str, str]]:
    ref = HostRef(target=target, hostvars=sb.vars(), board_kind=KIND, model=MODEL)
    reading = asyncio.run(sweep_host.read_host(ref, timeout=20))
    assert reading.error is None and not reading.errors, reading
    expect = ServerExpect(name=SERVER, serial="AMDS-0001", model=MODEL, site="lab", rack="r1", position=1, board_kind=KIND, board_count=8)
    found = set()
    for spec in checks("server", "host"):
        if spec.level == "host":
            found |= {(spec.name, p.subject, p.status.value) for p in spec.fn(ServerReading(host=reading), expect)}
    return found


def test_a_healthy_amd_server_burns_in_and_sweeps_clean(host: tuple[HostSandbox, HostTarget]) -> None:
    sb, target = host
    ref = HostRef(target=target, hostvars=sb.vars(), board_kind=KIND, model=MODEL)
    reading = asyncio.run(sweep_host.read_host(ref, timeout=20))
    assert reading.tool == "amd-smi" and reading.boards is not None and len(reading.boards) == 8
    b0 = reading.boards[0]
    assert (b0.device, b0.serial, b0.pci_address, b0.model) == ("GPU 0", "PCB-MI300X-0000", "0000:0c:00.0", "AMD Instinct MI300X")
    assert (b0.temp_c, b0.link_gen, b0.link_gen_max, b0.link_width, b0.link_width_max, b0.retired_pages, b0.ecc_uncorrected) == (
        46.0, 5, 5, 16, 16, 0, 0)  # fmt: skip
    assert _sweep(sb, target) == set()
    assert _burn(sb, target) == {n: ("pass", set()) for n in range(8)}


def test_faults_fail_burn_in_and_the_sweep_names_them(host: tuple[HostSandbox, HostTarget]) -> None:
    sb, target = host
    for slot, fault in enumerate(["healthy", "slow", "hot", "memory_errors", "degraded_link", "checksum", "vanish", "healthy"]):
        set_board_fault(sb.boards_file, str(slot), fault)
    # A GPU falling off the bus when RVS starts renumbers the rest, so a sample whose listing and metric straddle
    # that moment is dropped: the workload runs 1 s of real time, long enough for consistent samples on a loaded
    # machine (at 0.1 s, CI under load saw none for slot 7).
    got = _burn(sb, target, seconds=20.0)
    assert got == {
        0: ("pass", set()),
        1: ("fail", {"throughput"}),  # RVS GFLOPS halved: below the fail fraction of the golden figure
        2: ("degraded", {"throughput", "temperature"}),  # x0.7, hotspot 92 C
        3: ("fail", {"memory_retired", "retired_pending", "uncorrected_errors"}),  # 65 bad pages, one pending, 1 uncorrectable
        4: ("fail", {"link_degraded"}),  # Gen3 x8 of Gen5 x16
        5: ("fail", {"checksum"}),  # RVS: met: FALSE
        6: ("fail", {"device_lost"}),  # fell off the bus when RVS started: amd-smi lists it no more
        7: ("pass", set()),
    }
    assert _sweep(sb, target) == {
        ("accel.host_boards", "amd-smi", "critical"),  # amd-smi lists 7 of 8
        ("gpu.memory", "GPU 3", "critical"),
        ("gpu.pcie", "GPU 4", "critical"),
        ("gpu.temperature", "GPU 2", "warning"),
    }


def test_a_gpu_another_program_holds_is_not_taken_without_force(host: tuple[HostSandbox, HostTarget]) -> None:
    sb, target = host
    # The lab's amd-smi lists no process; a GPU in use is a stand-in that says so (the recorded shape).
    real = sb.bin / "amd-smi"
    (sb.bin / "amd-smi.lab").write_bytes(real.read_bytes())
    (sb.bin / "amd-smi.lab").chmod(0o755)
    busy = '[{"gpu": 0, "process_list": [{"process_info": {"name": "pt_main_thread", "pid": 207590}}]}]'
    real.write_text(f'#!/bin/sh\nif [ "$1" = process ]; then echo \'{busy}\'; else exec "{sb.bin}/amd-smi.lab" "$@"; fi\n')
    job = BurninJob(server=SERVER, target=target, hostvars=sb.vars(), kind=KIND, model=MODEL, seconds=1.0, grace=20.0, interval=0.2,
                    boards=[InvBoard(serial=f"PCB-MI300X-{n:04d}", kind=KIND, slot=n) for n in range(8)], board_kind=KIND)  # fmt: skip
    out = asyncio.run(burn(job))
    assert out.error is not None and "GPU 0 (pt_main_thread pid 207590)" in out.error and "--force" in out.error
    assert "reset" not in (sb.calls_log.read_text() if sb.calls_log.exists() else "")
    assert _burn(sb, target, force=True) == {n: ("pass", set()) for n in range(8)}
    assert sb.calls_log.read_text().count("amd-smi reset --gpureset -g") == 8


def test_a_hung_workload_is_stopped_and_its_boards_are_hung(host: tuple[HostSandbox, HostTarget]) -> None:
    sb, target = host
    set_board_fault(sb.boards_file, "3", "hang")  # RVS runs all GPUs in one process: it never ends for any of them
    job = BurninJob(server=SERVER, target=target, hostvars=sb.vars(), kind=KIND, model=MODEL, seconds=0.5, grace=1.5, interval=0.2,
                    boards=[InvBoard(serial=f"PCB-MI300X-{n:04d}", kind=KIND, slot=n) for n in range(8)], board_kind=KIND)  # fmt: skip
    out = asyncio.run(burn(job))
    assert out.error is None, out.error
    crit = criteria_mod.load().for_board(KIND, MODEL)
    assert {o.slot: evaluate(o, crit).verdict for o in out.observations} == {n: "fail" for n in range(8)}
    assert all(o.hung and not o.lost for o in out.observations)
    # The session was killed whole (its id file gone), so the next run starts clean.
    assert not (Path(sb.vars()["fleetctl_root"]) / "var/tmp/fleetctl-burnin/pgid").exists()


def test_a_sample_taken_across_a_renumbering_is_not_given_to_another_gpu(host: tuple[HostSandbox, HostTarget]) -> None:
    """GPU 6 falls off the bus between a sample's listing and its metric, so the metric's index 6 is then GPU 7's:
    that sample is dropped, never read as GPU 6's (GPU 7 is hot, GPU 6 is not)."""
    sb, target = host
    set_board_fault(sb.boards_file, "7", "hot")
    gone = next(p for p in sb.dev.iterdir() if json.loads(sb.boards_file.read_text())["boards"][6]["device"] == p.name)
    real = sb.bin / "amd-smi"
    (sb.bin / "amd-smi.lab").write_bytes(real.read_bytes())
    (sb.bin / "amd-smi.lab").chmod(0o755)
    # The second metric read (the first sample's; the pre-checks read the first) takes GPU 6 away just before it answers.
    n = sb.dir / "metric-reads"
    real.write_text(f'#!/bin/sh\nif [ "$1" = metric ]; then echo >> "{n}"; [ "$(wc -l < "{n}")" -eq 2 ] && rm -f "{gone}"; fi\n'
                    f'exec "{sb.bin}/amd-smi.lab" "$@"\n')  # fmt: skip
    job = BurninJob(server=SERVER, target=target, hostvars=sb.vars(), kind=KIND, model=MODEL, seconds=20.0, grace=20.0, interval=0.05,
                    boards=[InvBoard(serial=f"PCB-MI300X-{n:04d}", kind=KIND, slot=n, pci_address=bdf) for n, bdf in enumerate(BDFS)],
                    board_kind=KIND)  # fmt: skip
    out = asyncio.run(burn(job))
    assert out.error is None, out.error
    by_slot = {o.slot: o for o in out.observations}
    hot = {s.get("temp_c") for s in by_slot[7].telemetry}
    assert hot and min(t for t in hot if t is not None) > 80, hot  # GPU 7 was sampled, hot, after the renumbering
    assert all((s.get("temp_c") or 0) < 80 for s in by_slot[6].telemetry), by_slot[6].telemetry
