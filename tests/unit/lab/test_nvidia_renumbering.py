"""An NVIDIA GPU falling off the bus mid burn-in renumbers the GPUs after it in nvidia-smi: the burn-in's samples and
post-checks must still be each GPU's own (found by PCI bus id), never its neighbour's.

The lab host's nvidia-smi lists the GPUs present in order, as the real one does after an Xid 79; the core's stage runner
(``fleetctl.burnin.host.burn``) reaches the host through its shell in the sandbox (``local_host.LocalHost``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fleetctl_lab.bmc.spec import LabBoard, LabServerSpec
from fleetctl_lab.host_standins import set_board_fault
from fleetctl_lab.hosts import HostSandbox
from local_host import sandboxed

from fleetctl.burnin.host import burn
from fleetctl.interfaces.accel import BurninJob, InvBoard
from fleetctl.interfaces.host import HostTarget

SERVER, MODEL = "gpu-lab-01", "gpu-8x-a100"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[HostSandbox, HostTarget]:
    boards = [LabBoard(kind="gpu", serial=f"GPU-RN-{n:04d}", slot=n, model="NVIDIA A100-SXM4-80GB") for n in range(8)]
    spec = LabServerSpec(name=SERVER, serial="GPUS-0001", model="DGX-A100", manufacturer="NVIDIA", boards=boards)
    return sandboxed(tmp_path, monkeypatch, spec)


def test_a_gpu_lost_mid_run_leaves_the_others_their_own_samples_and_checks(host: tuple[HostSandbox, HostTarget]) -> None:
    sb, target = host
    set_board_fault(sb.boards_file, "4", "hot")
    set_board_fault(sb.boards_file, "5", "degraded_link")
    doc = json.loads(sb.boards_file.read_text())
    gone = sb.dev / next(b["device"] for b in doc["boards"] if b["slot"] == 3)
    real = sb.bin / "nvidia-smi"
    (sb.bin / "nvidia-smi.lab").write_bytes(real.read_bytes())
    (sb.bin / "nvidia-smi.lab").chmod(0o755)
    # The first sample's query (the only one asking clocks.sm) takes GPU 3 off the bus just before it answers.
    real.write_text(f'#!/bin/sh\ncase "$*" in *clocks.sm*) rm -f "{gone}";; esac\nexec "{sb.bin}/nvidia-smi.lab" "$@"\n')
    job = BurninJob(server=SERVER, target=target, hostvars=sb.vars(), kind="gpu", model=MODEL, seconds=20.0, grace=20.0, interval=0.05,
                    boards=[InvBoard(serial=f"GPU-RN-{n:04d}", kind="gpu", slot=n) for n in range(8)], board_kind="gpu")  # fmt: skip
    out = asyncio.run(burn(job))
    assert out.error is None, out.error
    by_slot = {o.slot: o for o in out.observations}
    assert by_slot[4].telemetry and all(s["temp_c"] > 80 for s in by_slot[4].telemetry)  # GPU 4's own, hot, every sample
    assert all(s["temp_c"] < 80 for n in (0, 1, 2, 3, 5, 6, 7) for s in by_slot[n].telemetry)
    assert by_slot[3].lost  # gone, and not given GPU 4's post-checks
    # After the workload each GPU's link is its own: GPU 4 at x16, GPU 5 (a degraded link) at x8, not the other way.
    assert [(by_slot[n].link_after or {}).get("width") for n in (4, 5)] == [16, 8]
