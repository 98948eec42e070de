"""Host-side parsers: ``lspci -vv``, sysfs link files, ``gpfn3-smi list``, mncore.yaml.

The lspci expectations were read by hand from the recorded Azure NDv4 capture
(shared/accel-outputs/lspci, 8x A100, 6 NVSwitch bridges, ConnectX VFs whose
links lspci reports as downgraded). The gpfn3-smi inputs are the public
format from the MN-Core SDK documentation (see docs/accelerators.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetctl_drivers.accel.mncore import (
    MnCoreDevice,
    mncore_config,
    parse_device_name,
    parse_gpfn3_list,
    parse_sysfs_link,
)
from fleetctl_drivers.accel.pcie import (
    ParseError,
    normalise_address,
    parse_lspci_vv,
    speed_to_gen,
)

from fleetctl.errors import DriverError


def _shared() -> Path | None:
    here = Path(__file__).resolve()
    for base in [*here.parents]:
        cand = base.parent / "shared" / "accel-outputs"
        if cand.is_dir():
            return cand
    return None


ACCEL = _shared()
AZURE = ACCEL / "lspci" / "a100-x8-nvswitch-cx6vf_azure-ndv4_lspci-vvv.txt" if ACCEL else None
needs_capture = pytest.mark.skipif(AZURE is None or not AZURE.is_file(), reason="shared/accel-outputs not found beside the repository")


# ------------------------------------------------------------------ lspci


@pytest.fixture(scope="module")
def azure() -> dict:
    assert AZURE is not None
    return {d.address: d for d in parse_lspci_vv(AZURE.read_text())}


@needs_capture
def test_azure_capture_devices(azure):
    assert len(azure) == 31
    gpus = [d for d in azure.values() if d.class_name == "3D controller"]
    assert [d.address for d in gpus] == [
        "0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0004:00:00.0",
        "000b:00:00.0", "000c:00:00.0", "000d:00:00.0", "000e:00:00.0",
    ]  # fmt: skip
    for d in gpus:
        assert d.vendor == "NVIDIA Corporation"
        assert d.device_id == "20b0"  # lspci printed "Device 20b0": no name in its pci.ids
        assert d.vendor_id is None  # no -nn
        assert d.kernel_driver == "nvidia"
        assert d.link is not None
        assert (d.link.speed_gts, d.link.width, d.link.max_speed_gts, d.link.max_width) == (16.0, 16, 16.0, 16)
        assert (d.link.gen, d.link.max_gen) == (4, 4)
        assert d.downgraded is False


@needs_capture
def test_azure_capture_single_device_details(azure):
    gpu = azure["0001:00:00.0"]
    assert gpu.revision == "a1"
    assert gpu.physical_slot == "110169529"
    assert gpu.numa_node == 1
    assert gpu.subsystem == "NVIDIA Corporation Device 134f"
    nvswitch = azure["0005:00:00.0"]
    assert nvswitch.class_name == "Bridge"
    assert nvswitch.kernel_driver == "nvidia-nvswitch"
    assert nvswitch.link is not None
    assert (nvswitch.link.gen, nvswitch.link.width, nvswitch.link.max_gen, nvswitch.link.max_width) == (3, 2, 3, 2)
    assert not nvswitch.downgraded
    nvme = azure["3f9f:00:00.0"]
    assert nvme.description == "Microsoft Corporation Device b111"  # "(prog-if 02 [NVM Express])" dropped
    assert nvme.link is not None and (nvme.link.gen, nvme.link.width) == (3, 4)


@needs_capture
def test_azure_capture_downgraded_links(azure):
    down = sorted(a for a, d in azure.items() if d.downgraded)
    # the eight ConnectX-6 VFs and the ConnectX-4 Lx VF: "Speed unknown (downgraded), Width x0 (downgraded)"
    assert down == [f"0{n}:00:00.0" for n in range(101, 109)] + ["0e58:00:02.0"]
    ib = azure["0101:00:00.0"]
    assert ib.class_name == "Infiniband controller"
    assert ib.vendor == "Mellanox Technologies"
    assert ib.device == "MT28908 Family [ConnectX-6 Virtual Function]"
    assert ib.link is not None
    assert ib.link.speed_gts is None and ib.link.gen is None  # "Speed unknown": not invented
    assert ib.link.width == 0
    assert (ib.link.max_speed_gts, ib.link.max_gen, ib.link.max_width) == (16.0, 4, 16)
    eth = azure["0e58:00:02.0"]
    assert eth.revision == "80"
    assert eth.link is not None and (eth.link.max_gen, eth.link.max_width) == (3, 8)


LSPCI_NN = """\
00:00.0 Host bridge [0600]: Intel Corporation Sky Lake-E DMI3 Registers [8086:2020] (rev 04)
\tSubsystem: Intel Corporation Device [8086:0000]
\tControl: I/O- Mem- BusMaster- SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx-
\tCapabilities: [90] Express (v2) Root Port (Slot-), MSI 00
\t\tLnkCap:\tPort #0, Speed 2.5GT/s, Width x4, ASPM L1, Exit Latency L1 <16us
\t\tLnkSta:\tSpeed 2.5GT/s (ok), Width x4 (ok)

3b:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 PCIe 40GB] [10de:20f1] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:145f]
\tPhysical Slot: 4
\tCapabilities: [60] Power Management version 3
\t\tStatus: D0 NoSoftRst+ PME-Enable- DSel=0 DScale=0 PME-
\tCapabilities: [78] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\t\tLnkSta:\tSpeed 8GT/s, Width x8
\tKernel driver in use: nvidia

5e:00.0 Ethernet controller [0200]: Intel Corporation Ethernet Controller X710 for 10GbE SFP+ [8086:1572] (rev 02)
\tLnkSta: Speed 8GT/s (ok), Width x8 (ok)

d8:00.0 Processing accelerators [1200]: Preferred Networks, Inc. Device [f1ee:0002]
\tCapabilities: [78] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported
\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)

00:1f.2 SATA controller [0106]: Intel Corporation C620 SATA Controller [AHCI mode] [8086:a182] (rev 09) (prog-if 01 [AHCI 1.0])
\tSubsystem: Super Micro Computer Inc Device [15d9:095d]
"""


def test_lspci_nn_ids_and_old_format_without_the_word_downgraded():
    devs = {d.address: d for d in parse_lspci_vv(LSPCI_NN)}
    bridge = devs["0000:00:00.0"]  # domain added
    assert (bridge.class_id, bridge.vendor_id, bridge.device_id) == ("0600", "8086", "2020")
    assert bridge.link is not None and (bridge.link.gen, bridge.link.width) == (1, 4)
    gpu = devs["0000:3b:00.0"]
    assert gpu.description == "NVIDIA Corporation GA100 [A100 PCIe 40GB]"
    assert (gpu.vendor, gpu.device) == ("NVIDIA Corporation", "GA100 [A100 PCIe 40GB]")
    assert (gpu.vendor_id, gpu.device_id, gpu.class_id) == ("10de", "20f1", "0302")
    assert gpu.physical_slot == "4"
    # an older lspci prints no "(downgraded)": the numbers say Gen3 x8 of Gen4 x16
    assert gpu.link is not None
    assert (gpu.link.gen, gpu.link.width, gpu.link.max_gen, gpu.link.max_width) == (3, 8, 4, 16)
    assert gpu.downgraded and gpu.link.degraded
    # a LnkSta outside an Express capability is not a link of this device's
    assert devs["0000:5e:00.0"].link is None and devs["0000:5e:00.0"].downgraded is False
    mnc = devs["0000:d8:00.0"]
    assert (mnc.vendor, mnc.vendor_id, mnc.device_id, mnc.class_name) == (
        "Preferred Networks, Inc.",
        "f1ee",
        "0002",
        "Processing accelerators",
    )
    assert mnc.link is not None and mnc.link.gen == 5 and not mnc.downgraded
    sata = devs["0000:00:1f.2"]
    assert sata.link is None
    assert sata.description == "Intel Corporation C620 SATA Controller [AHCI mode]"
    assert (sata.vendor_id, sata.device_id, sata.revision) == ("8086", "a182", "09")


def test_lspci_block_cut_mid_way_does_not_invent_values():
    text = (
        "0000:3b:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
        "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n"
        "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
        "\t\tLnkSta:\tSpeed 32GT/s (ok), Wid"
    )
    (d,) = parse_lspci_vv(text)
    assert d.link is not None
    assert (d.link.speed_gts, d.link.width, d.link.max_speed_gts, d.link.max_width) == (32.0, None, 32.0, 16)
    assert d.downgraded is False
    (cut,) = parse_lspci_vv(
        "0000:3b:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
        "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n"
        "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
    )
    assert cut.link is not None and cut.link.speed_gts is None and cut.link.width is None
    assert cut.downgraded is False
    (bare,) = parse_lspci_vv("0000:3b:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n")
    assert bare.link is None and bare.kernel_driver is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "pcilib: Cannot open /proc/bus/pci\n",
        "bash: lspci: command not found\n",
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\n",
        "\tLnkSta: Speed 8GT/s (ok), Width x8 (ok)\n",
        "0000:3b:00.0 3D controller: NVIDIA\nGarbage line\n",
        "\x00\x01\x02 binary",
    ],
)
def test_lspci_garbage_is_a_clear_error(text):
    with pytest.raises(ParseError) as e:
        parse_lspci_vv(text)
    assert isinstance(e.value, DriverError)
    assert "lspci" in str(e.value)


def test_address_and_speed_helpers():
    assert normalise_address("3B:00.0") == "0000:3b:00.0"
    assert normalise_address("10000:e1:00.7") == "10000:e1:00.7"
    with pytest.raises(ParseError):
        normalise_address("3b:00")
    assert [speed_to_gen(s) for s in (2.5, 5, 8, 16, 32, 64, 4.0, None)] == [1, 2, 3, 4, 5, 6, None, None]


# ------------------------------------------------------------------ sysfs


def test_sysfs_link_full_and_degraded():
    ok = parse_sysfs_link("16.0 GT/s PCIe\n", "16\n", "16.0 GT/s PCIe\n", "16\n")
    assert (ok.gen, ok.width, ok.max_gen, ok.max_width, ok.degraded) == (4, 16, 4, 16, False)
    slow = parse_sysfs_link("8.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16")
    assert (slow.gen, slow.max_gen, slow.degraded) == (3, 5, True)
    narrow = parse_sysfs_link("2.5 GT/s", "8", "2.5 GT/s", "16")  # kernels before 4.17 print no "PCIe"
    assert (narrow.gen, narrow.width, narrow.degraded) == (1, 8, True)
    down = parse_sysfs_link("Unknown", "0", "16.0 GT/s PCIe", "16")
    assert down.speed_gts is None and down.width == 0 and down.degraded
    unknown = parse_sysfs_link("", "", "16.0 GT/s PCIe", "16")
    assert unknown.speed_gts is None and unknown.width is None and unknown.degraded is False


@pytest.mark.parametrize("args", [("fast", "16", "16 GT/s", "16"), ("16 GT/s", "wide", "16 GT/s", "16")])
def test_sysfs_garbage(args):
    with pytest.raises(ParseError, match="not a PCIe link"):
        parse_sysfs_link(*args)


# -------------------------------------------------------------- gpfn3-smi

PUBLIC_LIST = """\
0: mnc2p27s0
1: mnc2p28s0
2: mnc2p59s0
3: mnc2p60s0
4: mnc2p155s0
5: mnc2p156s0
6: mnc2p187s0
7: mnc2p188s0
"""


def test_gpfn3_list_public_format():
    boards = parse_gpfn3_list(PUBLIC_LIST)
    assert [b.index for b in boards] == list(range(8))
    assert boards[0] == MnCoreDevice(index=0, name="mnc2p27s0", pci_bus=27, slot=0, device_node="/dev/mnc2p27s0")
    last = boards[-1]
    assert (last.name, last.pci_bus, last.slot, last.device_node, last.pci_bus_hex) == (
        "mnc2p188s0",
        188,
        0,
        "/dev/mnc2p188s0",
        "bc",
    )


def test_gpfn3_list_order_is_not_identity():
    # the platform may list a subset, in another order: names stay the key
    boards = parse_gpfn3_list("0: mnc2p188s0\n1: mnc2p27s0\n\n", device_dir="/srv/dev/")
    assert {b.name: b.index for b in boards} == {"mnc2p188s0": 0, "mnc2p27s0": 1}
    assert boards[0].device_node == "/srv/dev/mnc2p188s0"


@pytest.mark.parametrize("text", ["", "\n", "  \n\n"])
def test_gpfn3_list_empty_is_no_boards(text):
    assert parse_gpfn3_list(text) == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("board 0: mnc2p27s0 MN-Core 2\n", "line 1"),  # what the lab's stand-in printed before the public format
        ("0: mnc2p27s0\n1: mnc2p28s0 (busy)\n", "line 2"),
        ("0: mnc2p27s0\n0: mnc2p28s0\n", "index 0 already listed on line 1"),
        ("0: mnc2p27s0\n1: mnc2p27s0\n", "device mnc2p27s0 already listed"),
        ("0: nvidia0\n", "not an MN-Core 2 device name"),
        ("0: mnc2p999s0\n", "beyond 255"),
        ("No devices found.\n", "line 1"),
        ("gpfn3-smi: error while loading shared libraries: libgpfn3.so.0\n", "line 1"),
        ("Traceback (most recent call last):\n", "line 1"),
    ],
)
def test_gpfn3_list_unexpected_lines(text, where):
    with pytest.raises(ParseError, match="gpfn3-smi list") as e:
        parse_gpfn3_list(text)
    assert where in str(e.value)


def test_device_name_helper():
    assert parse_device_name("mnc2p59s1") == (59, 1, "/dev/mnc2p59s1")
    with pytest.raises(ParseError):
        parse_device_name("/dev/mnc2p59s1")


# ------------------------------------------------------------ mncore.yaml


def test_mncore_config_bundled_file():
    cfg = mncore_config()
    assert cfg.semaphore_dir == "/opt/mncore_shared_semaphore"
    assert cfg.smi == "gpfn3-smi"
    assert {p.generation for p in cfg.pci_ids} == {"mncore", "mncore2"}
    assert cfg.firmware_components
    rx = cfg.burnin.result_regex()
    assert rx is not None
    m = rx.match("mnc2p27s0: throughput 123.5 TFLOPS checksum 0x1f2e PASS")
    assert m and m.group("device") == "mnc2p27s0" and m.group("verdict") == "PASS"
    assert cfg.clock.core_mhz == 750


def test_mncore_config_env_override_and_errors(tmp_path, monkeypatch):
    site = tmp_path / "mncore.yaml"
    site.write_text("semaphore_dir: /run/mnc-locks\nburnin:\n  program: /usr/local/bin/site-burnin\n")
    monkeypatch.setenv("FLEETCTL_MNCORE_CONFIG", str(site))
    cfg = mncore_config()
    assert cfg.semaphore_dir == "/run/mnc-locks"
    assert cfg.burnin.program == "/usr/local/bin/site-burnin"
    assert cfg.smi == "gpfn3-smi"  # a key left out keeps its default
    assert cfg.source == str(site)
    typo = tmp_path / "typo.yaml"
    typo.write_text("semaphore_folder: /x\n")
    with pytest.raises(ParseError, match="semaphore_folder"):
        mncore_config(typo)
    with pytest.raises(ParseError, match="cannot read"):
        mncore_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("burnin:\n  result_pattern: '(unclosed'\n")
    with pytest.raises(ParseError, match="result_pattern"):
        mncore_config(bad)
