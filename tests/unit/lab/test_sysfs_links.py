"""The lab hosts' sysfs PCIe link files, read by the driver's own parser.

A host's folder is built as the lab builds it (``HostSandbox.sync``), the four
``{current,max}_link_{speed,width}`` files of each board are read from the
folder the host variable ``fleetctl_sysfs_pci_dir`` names, and parsed with
``fleetctl_drivers.accel.pcie.parse_sysfs_link``. No lab daemon.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from fleetctl_drivers.accel.nvidia import parse_query_gpu_csv
from fleetctl_drivers.accel.pcie import PcieLink, parse_sysfs_link
from fleetctl_lab import host_standins as st
from fleetctl_lab.bmc import generate_specs
from fleetctl_lab.hosts import HostSandbox

MN, GPU = generate_specs(2)  # lab-mncore-00000 (4 MN-Core 2 boards, Gen4 x16), lab-gpu-00001 (8 GPUs, Gen5 x16)


def make_host(tmp_path: Path, spec: Any, *, install_id: int = 1) -> HostSandbox:
    sb = HostSandbox(tmp_path, spec)
    sb.sync({"install_id": install_id, "boot_id": install_id, "devices_missing": 0})
    return sb


def read_link(sb: HostSandbox, pci_address: str) -> PcieLink:
    """The link as a driver reads it: the four files under the folder the host variable names."""
    folder = Path(sb.vars()["fleetctl_sysfs_pci_dir"]) / pci_address
    return parse_sysfs_link(*((folder / name).read_text() for name in st.SYSFS_LINK_FILES))


def test_every_board_has_its_link_in_kernel_format_at_its_capability(tmp_path: Path) -> None:
    sb = make_host(tmp_path, MN)
    assert sb.sysfs_pci_dir == sb.root / "sys/bus/pci/devices"  # beside root/dev, as on a real host
    assert sorted(p.name for p in sb.sysfs_pci_dir.iterdir()) == sorted(b.pci_address for b in MN.boards)
    b0 = MN.boards[0].pci_address
    # the kernel's text, byte for byte (drivers/pci/pci-sysfs.c), not only what the parser accepts
    assert [(sb.sysfs_pci_dir / b0 / n).read_text() for n in st.SYSFS_LINK_FILES] == [
        "16.0 GT/s PCIe\n", "16\n", "16.0 GT/s PCIe\n", "16\n"]  # fmt: skip
    for b in MN.boards:
        link = read_link(sb, b.pci_address)
        assert (link.gen, link.width, link.max_gen, link.max_width, link.degraded) == (4, 16, 4, 16, False)
    gpu = read_link(make_host(tmp_path, GPU), GPU.boards[0].pci_address)
    assert (gpu.speed_gts, gpu.gen, gpu.width, gpu.degraded) == (32.0, 5, 16, False)


def test_degraded_link_shows_at_once_and_survives_a_reinstall(tmp_path: Path) -> None:
    sb = make_host(tmp_path, MN)
    addr, other = MN.boards[1].pci_address, MN.boards[2].pci_address
    assert not read_link(sb, addr).degraded

    st.set_board_fault(sb.boards_file, "mnc2p48s0", "degraded_link")  # while the host is up: no stand-in runs
    link = read_link(sb, addr)
    # two generations and half the lanes down, the capability unchanged (Gen4 board: Gen2 x8 of Gen4 x16)
    assert (link.gen, link.width, link.max_gen, link.max_width, link.degraded) == (2, 8, 4, 16, True)
    assert not read_link(sb, other).degraded
    assert not list(sb.sysfs_pci_dir.glob("*/.*.tmp"))  # written through a temporary file, none left behind

    sb2 = make_host(tmp_path, MN, install_id=2)  # a fresh tree: the board keeps its fault, the files follow it
    assert read_link(sb2, addr).degraded
    st.set_board_fault(sb2.boards_file, "mnc2p48s0", "healthy")
    assert not read_link(sb2, addr).degraded


def test_a_gpus_sysfs_link_agrees_with_nvidia_smi(tmp_path: Path) -> None:
    """The same fault, two ways to look at it on one host: they must not drift apart."""
    sb = make_host(tmp_path, GPU)
    st.set_board_fault(sb.boards_file, "nvidia2", "degraded_link")
    link = read_link(sb, GPU.boards[2].pci_address)
    assert (link.gen, link.width, link.max_gen, link.max_width) == (3, 8, 5, 16)  # Gen3 x8 of Gen5 x16
    fields = ["pci.bus_id", "pcie.link.gen.current", "pcie.link.width.current", "pcie.link.gen.max", "pcie.link.width.max"]
    out = subprocess.run([str(sb.bin / "nvidia-smi"), f"--query-gpu={','.join(fields)}", "--format=csv"],
                         capture_output=True, text=True, timeout=10, env=dict(os.environ), check=True).stdout  # fmt: skip
    rows = parse_query_gpu_csv(out)
    assert len(rows) == len(GPU.boards)
    for row in rows:  # every GPU, the healthy ones and the degraded one
        assert row.pci_bus_id
        _, bus = row.pci_bus_id.split(":", 1)  # 00000000:3B:00.0 -> the sysfs folder 0000:3b:00.0
        sys_link = read_link(sb, f"0000:{bus.lower()}")
        smi = (row.pcie_link_gen_current, row.pcie_link_width_current, row.pcie_link_gen_max, row.pcie_link_width_max)
        assert (sys_link.gen, sys_link.width, sys_link.max_gen, sys_link.max_width) == smi
    assert sum(read_link(sb, b.pci_address).degraded for b in GPU.boards) == 1
