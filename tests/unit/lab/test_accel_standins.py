"""The lab hosts' accelerator stand-ins, read by the drivers' own parsers.

A host's files are built as the lab builds them (``HostSandbox.sync``: the
scripts, ``boards.json``, the device nodes), faults are set in
``boards.json``, each stand-in is run as a process and its output is read
with ``fleetctl_drivers.accel`` (parse_query_gpu_csv, parse_smi_xml,
parse_dcgmi_diag, parse_gpu_burn, parse_xid, parse_gpfn3_list and the
MN-Core burn-in's result pattern from mncore.yaml). No lab daemon; time runs
1000x faster through FLEETCTL_LAB_TIME_SCALE.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.accel.mncore import mncore_config, parse_gpfn3_list
from fleetctl_drivers.accel.nvidia import DiagStatus, parse_dcgmi_diag, parse_gpu_burn, parse_query_gpu_csv, parse_smi_xml, parse_xid
from fleetctl_lab import host_standins as st
from fleetctl_lab.bmc import generate_specs
from fleetctl_lab.hosts import HostSandbox

MN, GPU = generate_specs(2)  # lab-mncore-00000 (4 MN-Core 2 boards), lab-gpu-00001 (8 GPUs)
SCALE = 0.001
FIELDS = [
    "index", "name", "uuid", "serial", "pci.bus_id", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.mem",
    "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total", "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count", "retired_pages.pending", "pcie.link.gen.current", "pcie.link.gen.max",
    "pcie.link.width.current", "pcie.link.width.max", "utilization.gpu", "clocks_event_reasons.active",
]  # fmt: skip


def make_host(tmp_path: Path, spec: Any, faults: dict[str, str] | None = None, *, install_id: int = 1) -> HostSandbox:
    """A host's folder as the lab makes it at an install: scripts, boards.json, device nodes; then ``faults`` by device."""
    sb = HostSandbox(tmp_path, spec)
    sb.sync({"install_id": install_id, "boot_id": install_id, "devices_missing": 0})
    for device, fault in (faults or {}).items():
        st.set_board_fault(sb.boards_file, device, fault)
    return sb


def run(sb: HostSandbox, tool: str, *args: str, rc: int | None = 0, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, st.TIME_SCALE_ENV: str(SCALE)}
    raw = subprocess.run([str(sb.bin / tool), *args], capture_output=True, timeout=timeout, env=env)
    # Decoded by hand: text mode would turn gpu-burn's carriage returns into newlines.
    r = subprocess.CompletedProcess(raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode())
    if rc is not None:
        assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    return r


def hangs(sb: HostSandbox, tool: str, *args: str) -> str:
    """Runs a stand-in that must not end; kills it after a while; returns what it printed."""
    env = {**os.environ, st.TIME_SCALE_ENV: str(SCALE)}
    proc = subprocess.Popen([str(sb.bin / tool), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=5)
    return out


# --- the board state -----------------------------------------------------------------------


def test_boards_json_names_every_board_and_faults_survive_a_reinstall(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU)
    doc = json.loads(sb.boards_file.read_text())
    assert doc["server"] == GPU.name and doc["time_scale"] == 1.0
    b0 = doc["boards"][0]
    assert set(b0) == {"slot", "kind", "device", "serial", "model", "uuid", "pci_address", "pcie_gen", "max_lanes", "firmware", "fault"}
    assert [b["device"] for b in doc["boards"]] == [f"nvidia{i}" for i in range(8)]
    assert {b["kind"] for b in doc["boards"]} == {"gpu"} and {b["fault"] for b in doc["boards"]} == {"healthy"}
    assert b0["serial"] == GPU.boards[0].serial and b0["pci_address"] == GPU.boards[0].pci_address and b0["uuid"].startswith("GPU-")
    mn = json.loads(make_host(tmp_path, MN).boards_file.read_text())["boards"]
    assert [(b["kind"], b["device"], b["pcie_gen"]) for b in mn] == [("mncore2", f"mnc2p{n}s0", 4) for n in (32, 48, 64, 80)]

    st.set_board_fault(sb.boards_file, GPU.boards[3].serial, "hot")  # by serial too
    sb2 = make_host(tmp_path, GPU, install_id=2)  # a reinstall: the tree is new, the boards keep their faults
    assert sb2.board_faults()[GPU.boards[3].serial] == "hot"
    with pytest.raises(ValueError, match="not one of"):
        st.set_board_fault(sb.boards_file, "nvidia0", "melted")
    with pytest.raises(ValueError, match="GPUs only"):
        st.set_board_fault(make_host(tmp_path, MN).boards_file, "mnc2p32s0", "xid")
    assert set(st.BOARD_FAULTS) == {"healthy", "slow", "hot", "memory_errors", "degraded_link", "checksum", "vanish", "hang", "xid"}


def test_a_broken_board_state_is_an_error_not_a_healthy_board(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU)
    doc = json.loads(sb.boards_file.read_text())
    doc["boards"][0]["fault"] = "melted"
    sb.boards_file.write_text(json.dumps(doc))
    assert "unknown fault 'melted'" in run(sb, "nvidia-smi", "-L", rc=3).stderr
    sb.boards_file.write_text("{not json")
    assert "cannot read the board state" in run(sb, "nvidia-smi", "-L", rc=3).stderr


# --- nvidia-smi ------------------------------------------------------------------------------


def test_query_gpu_csv_reads_like_the_real_one(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU)
    t0 = time.monotonic()
    out = run(sb, "nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv").stdout
    assert time.monotonic() - t0 < 1.0
    header = out.splitlines()[0]
    # Header names and units as nvidia-smi prints them: aliases under their long name, units where it has them.
    assert header.startswith("index, name, uuid, serial, pci.bus_id, temperature.gpu, power.draw [W], power.limit [W], "
                             "clocks.current.sm [MHz], clocks.current.memory [MHz], ecc.errors.corrected.volatile.total")  # fmt: skip
    assert "utilization.gpu [%]" in header
    rows = parse_query_gpu_csv(out)
    assert len(rows) == 8
    g = rows[0]
    uuid0 = json.loads(sb.boards_file.read_text())["boards"][0]["uuid"]
    assert (g.index, g.name, g.serial, g.uuid) == (0, "NVIDIA H100 PCIe", GPU.boards[0].serial, uuid0)
    assert g.pci_bus_id == "00000000:" + GPU.boards[0].pci_address.split(":", 1)[1].upper()
    assert (g.temperature_gpu_c, g.power_draw_w, g.power_limit_w, g.clocks_sm_mhz, g.clocks_memory_mhz) == (34, 71.15, 350.0, 345, 2619)
    assert (g.ecc_corrected_volatile_total, g.ecc_uncorrected_volatile_total) == (0, 0)
    assert (g.retired_pages_single_bit, g.retired_pages_double_bit) == (0, 0)
    assert g.retired_pages_pending is False and g.utilization_gpu_pct == 0 and g.clocks_event_reasons_active == 1
    assert (g.pcie_link_gen_current, g.pcie_link_gen_max, g.pcie_link_width_current, g.pcie_link_width_max) == (5, 5, 16, 16)

    # nounits: the header keeps [W], the values lose " W"; noheader: the caller names the fields.
    nounits = run(sb, "nvidia-smi", "--query-gpu=index,power.draw,clocks.sm", "--format=csv,nounits").stdout
    assert nounits.splitlines()[:2] == ["index, power.draw [W], clocks.current.sm [MHz]", "0, 71.15, 345"]
    assert parse_query_gpu_csv(nounits)[0].power_draw_w == 71.15
    bare = run(sb, "nvidia-smi", "--query-gpu=index,gpu_serial,clocks.sm", "--format=csv,noheader,nounits").stdout
    assert [r.serial for r in parse_query_gpu_csv(bare, fields=["index", "gpu_serial", "clocks.sm"])] == [b.serial for b in GPU.boards]


@pytest.mark.parametrize(("fault", "expect"), [
    ("hot", {"temperature_gpu_c": 92, "clocks_event_reasons_active": 0x60}),
    ("slow", {"power_limit_w": 150.0, "clocks_event_reasons_active": 0x4}),
    ("memory_errors", {"ecc_corrected_volatile_total": 1523, "retired_pages_single_bit": 64, "retired_pages_double_bit": 1,
                       "retired_pages_pending": True}),
    ("degraded_link", {"pcie_link_gen_current": 3, "pcie_link_gen_max": 5, "pcie_link_width_current": 8, "pcie_link_width_max": 16}),
    ("xid", {"temperature_gpu_c": None, "power_draw_w": None, "retired_pages_single_bit": None, "serial": GPU.boards[2].serial}),
])  # fmt: skip
def test_query_gpu_shows_each_fault_on_its_board_only(tmp_path: Path, fault: str, expect: dict[str, Any]) -> None:
    sb = make_host(tmp_path, GPU, {"nvidia2": fault})
    rows = parse_query_gpu_csv(run(sb, "nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv").stdout)
    assert {k: getattr(rows[2], k) for k in expect} == expect
    assert rows[1].temperature_gpu_c == 34 and rows[1].retired_pages_single_bit == 0 and rows[1].pcie_link_width_current == 16
    if fault == "xid":
        assert rows[2].unreadable["temperature.gpu"] == "[GPU is lost]"


def test_query_gpu_refuses_an_unknown_field_and_bad_arguments(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU)
    r = run(sb, "nvidia-smi", "--query-gpu=index,bogus.field", "--format=csv", rc=2)
    assert r.stdout == "" and 'Field "bogus.field" is not a valid field to query.' in r.stderr
    assert "--format" in run(sb, "nvidia-smi", "--query-gpu=index", rc=2).stderr
    run(sb, "nvidia-smi", "--query-gpu=index", "--format=xml", rc=2)
    run(sb, "nvidia-smi", "--bogus", rc=2)


def test_smi_xml_reads_like_the_real_one(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU, {"nvidia1": "memory_errors", "nvidia2": "degraded_link", "nvidia3": "xid", "nvidia4": "hot"})
    gpus = parse_smi_xml(run(sb, "nvidia-smi", "-q", "-x").stdout)
    assert len(gpus) == 8
    g = gpus[0]
    assert (g.name, g.serial, g.minor_number, g.driver_version, g.vbios_version) == ("NVIDIA H100 PCIe", GPU.boards[0].serial, 0,
                                                                                       st.LAB_DRIVER_VERSION, "96.00.74.00.01")  # fmt: skip
    assert (g.temperature_gpu_c, g.temperature_slowdown_c, g.power_draw_w, g.power_limit_w, g.clocks_sm_mhz) == (34, 89, 71.15, 350.0, 345)
    assert (g.memory_total_mib, g.ecc_mode_current, g.pcie_replay_counter) == (81559, "Enabled", 0)
    assert (g.pcie_link_width_current, g.pcie_link_gen_max) == (16, 5)
    assert g.ecc_volatile is not None and g.ecc_volatile.correctable == 0 and g.retired_pages_pending is False
    assert g.remapped_rows_failure is False
    assert gpus[1].ecc_volatile is not None and gpus[1].ecc_volatile.correctable == 1523
    assert (gpus[1].retired_pages_single_bit, gpus[1].retired_pages_double_bit, gpus[1].retired_pages_pending) == (64, 1, True)
    assert (gpus[2].pcie_link_gen_current, gpus[2].pcie_link_width_current, gpus[2].pcie_link_width_max) == (3, 8, 16)
    assert gpus[3].temperature_gpu_c is None and "temperature/gpu_temp" in gpus[3].unreadable and gpus[3].serial == GPU.boards[3].serial
    assert gpus[4].temperature_gpu_c == 92


def test_no_gpu_and_the_list_still_works(tmp_path: Path) -> None:
    sb = make_host(tmp_path, MN)
    assert run(sb, "nvidia-smi", "-L").stdout == ""
    assert run(sb, "nvidia-smi", "--query-gpu=index", "--format=csv", rc=6).stderr.startswith("No devices were found")


# --- dcgmi diag ------------------------------------------------------------------------------


def test_dcgmi_r1_passes_a_healthy_host_in_the_recorded_shape(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU)
    out = run(sb, "dcgmi", "diag", "-r", "1", "-j").stdout
    assert list(json.loads(out)) == ["DCGM GPU Diagnostic"]
    rep = parse_dcgmi_diag(out)
    assert rep.legacy and [c.name for c in rep.categories] == ["Deployment"] and not rep.failures
    assert {t.name for c in rep.categories for t in c.tests} >= {"Denylist", "Page Retirement/Row Remap", "Inforom"}
    rep3 = parse_dcgmi_diag(run(sb, "dcgmi", "diag", "-r", "3", "-j").stdout)
    assert [c.name for c in rep3.categories] == ["Deployment", "Integration", "Hardware", "Stress"]
    pcie = [r for cat, test, r in rep3.results if test == "PCIe"]
    assert [r.entity_id for r in pcie] == list(range(8)) and {r.status for r in pcie} == {DiagStatus.PASS}


@pytest.mark.parametrize(("fault", "level", "test", "error_id", "error_name"), [
    ("memory_errors", 1, "Page Retirement/Row Remap", 7, "DCGM_FR_RETIRED_PAGES_LIMIT"),
    ("degraded_link", 2, "PCIe", 46, "DCGM_FR_PCIE_WIDTH"),
    ("xid", 2, "PCIe", 101, "DCGM_FR_XID_ERROR"),
    ("checksum", 2, "GPU Memory", 58, "DCGM_FR_MEMORY_MISMATCH"),
    ("vanish", 2, "PCIe", 20, "DCGM_FR_DEVICE_COUNT_MISMATCH"),
    ("hot", 3, "Targeted Power", 42, "DCGM_FR_TEMP_VIOLATION"),
    ("slow", 3, "Targeted Stress", 50, "DCGM_FR_STRESS_LEVEL"),
])  # fmt: skip
def test_dcgmi_fails_the_faulty_board_with_a_dcgm_error_id(tmp_path: Path, fault: str, level: int, test: str, error_id: int,
                                                          error_name: str) -> None:  # fmt: skip
    sb = make_host(tmp_path, GPU, {"nvidia5": fault})
    if level > 1:  # below its level the fault does not show
        assert not parse_dcgmi_diag(run(sb, "dcgmi", "diag", "-r", str(level - 1), "-j").stdout).failures
        (sb.dev / "nvidia5").touch()  # a vanished board back, as after a reboot
    r = run(sb, "dcgmi", "diag", "-r", str(level), "-j", rc=1)
    rep = parse_dcgmi_diag(r.stdout)
    assert [(t, res.entity_id) for _, t, res in rep.failures] == [(test, 5)]
    w = rep.failures[0][2].warnings[0]
    assert (w.error_id, w.error_name, w.setup_error) == (error_id, error_name, False)
    assert st.DCGM_ERROR_NAMES[error_id] == error_name
    assert (sb.dev / "nvidia5").exists() == (fault != "vanish")


def test_dcgmi_hangs_from_r2_and_refuses_bad_arguments(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU, {"nvidia0": "hang"})
    assert not parse_dcgmi_diag(run(sb, "dcgmi", "diag", "-r", "1", "-j").stdout).failures
    assert hangs(sb, "dcgmi", "diag", "-r", "2", "-j") == ""
    assert "invalid run level" in run(sb, "dcgmi", "diag", "-r", "7", "-j", rc=2).stderr
    run(sb, "dcgmi", "diag", "-r", "1", rc=2)  # the lab answers JSON only
    run(sb, "dcgmi", "discovery", "-l", rc=2)
    assert parse_dcgmi_diag(run(make_host(tmp_path, MN), "dcgmi", "diag", "-r", "1", "-j", rc=1).stdout).runtime_error


# --- gpu-burn --------------------------------------------------------------------------------


def test_gpu_burn_healthy_runs_its_duration_and_says_ok(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU)
    t0 = time.monotonic()
    r = run(sb, "gpu-burn", "300")
    assert time.monotonic() - t0 >= 300 * SCALE
    assert r.stdout.startswith("GPU 0: NVIDIA H100 PCIe (UUID: GPU-") and "\r" in r.stdout and "Summary at:" in r.stdout
    res = parse_gpu_burn(r.stdout)
    assert res.ok and len(res.gpus) == 8
    assert res.gpus[0].gflops_last == st.GPU_BURN_GFLOPS and res.gpus[0].max_temp_c == 65 and res.gpus[0].max_errors == 0
    assert parse_gpu_burn(run(sb, "gpu-burn", "-d", "10").stdout).gpus[0].gflops_last == st.GPU_BURN_GFLOPS / 2
    assert [g.index for g in parse_gpu_burn(run(sb, "gpu-burn", "-i", "3", "10").stdout).gpus] == [0]
    assert "bad argument" in run(sb, "gpu-burn", "--frobnicate", rc=1).stderr


def test_gpu_burn_faults_show_in_its_text_and_it_still_exits_0(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU, {"nvidia1": "checksum", "nvidia2": "slow", "nvidia3": "hot", "nvidia4": "vanish", "nvidia5": "xid",
                                   "nvidia6": "memory_errors", "nvidia7": "degraded_link"})  # fmt: skip
    res = parse_gpu_burn(run(sb, "gpu-burn", "60", rc=0).stdout)
    g = res.gpus
    assert not res.ok and [x.ok for x in g] == [True, False, True, True, False, False, True, True]
    assert g[1].max_errors and g[1].max_errors > 0 and not g[1].died
    assert g[2].gflops_last == st.GPU_BURN_GFLOPS / 2 and g[3].max_temp_c == 97
    assert g[4].died and not (sb.dev / "nvidia4").exists()  # fell off the bus when the workload started
    assert g[5].died and (sb.dev / "nvidia5").exists()
    assert len(parse_query_gpu_csv(run(sb, "nvidia-smi", "--query-gpu=index", "--format=csv").stdout)) == 7


def test_gpu_burn_hang_never_ends(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU, {"nvidia0": "hang"})
    out = hangs(sb, "gpu-burn", "1")
    assert "GPU 7:" in out and "Tested" not in out


def test_dmesg_has_an_xid_79_line_per_xid_board(tmp_path: Path) -> None:
    sb = make_host(tmp_path, GPU, {"nvidia6": "xid"})
    events = parse_xid(run(sb, "dmesg").stdout)
    assert [(e.xid, e.pci) for e in events] == [(79, GPU.boards[6].pci_address.rsplit(".", 1)[0])]
    assert "fallen off the bus" in events[0].message
    assert parse_xid(run(make_host(tmp_path, MN), "dmesg").stdout) == []


# --- MN-Core ---------------------------------------------------------------------------------


def burnin_args(device: str, seconds: int) -> list[str]:
    """The burn-in's arguments as mncore.yaml writes them."""
    return [a.format(device=device, seconds=seconds) for a in mncore_config().burnin.args]


def test_gpfn3_smi_list_reset_and_clear_with_the_semaphore(tmp_path: Path) -> None:
    sb = make_host(tmp_path, MN)
    devs = parse_gpfn3_list(run(sb, "gpfn3-smi", "list").stdout)
    assert [d.name for d in devs] == ["mnc2p32s0", "mnc2p48s0", "mnc2p64s0", "mnc2p80s0"] and [d.index for d in devs] == [0, 1, 2, 3]
    run(sb, "gpfn3-smi", "reset", "1")  # by index
    run(sb, "gpfn3-smi", "clear", "mnc2p64s0", "-pattern", "0", "-seed", "7")  # by name
    assert sb.calls_log.read_text().splitlines() == ["gpfn3-smi reset mnc2p48s0", "gpfn3-smi clear mnc2p64s0 -pattern 0 -seed 7"]
    assert "no such device" in run(sb, "gpfn3-smi", "reset", "mnc2p99s0", rc=1).stderr
    assert "no such device" in run(sb, "gpfn3-smi", "reset", "9", rc=1).stderr
    run(sb, "gpfn3-smi", "frob", rc=2)
    run(sb, "gpfn3-smi", "clear", "0", "-bogus", "1", rc=2)

    # A board locked by another program: clear refuses it; reset breaks the lock (public: reset breaks a lock).
    sb.semaphore_dir.mkdir(parents=True, exist_ok=True)
    (sb.semaphore_dir / "mnc2p32s0").write_text("someone pid 1\n")
    assert "in use" in run(sb, "gpfn3-smi", "clear", "0", rc=1).stderr
    assert "lock is broken" in run(sb, "gpfn3-smi", "reset", "mnc2p32s0").stderr
    assert not (sb.semaphore_dir / "mnc2p32s0").exists()
    run(sb, "gpfn3-smi", "clear", "0")
    assert sb.vars()["fleetctl_mncore_semaphore_dir"] == str(sb.semaphore_dir)


def test_mncore_burnin_prints_the_result_line_mncore_yaml_expects(tmp_path: Path) -> None:
    cfg = mncore_config().burnin
    pattern = cfg.result_regex()
    assert pattern is not None
    sb = make_host(tmp_path, MN, {"mnc2p48s0": "slow", "mnc2p64s0": "hot", "mnc2p80s0": "checksum"})
    t0 = time.monotonic()
    healthy = run(sb, "mncore-burnin", *burnin_args("mnc2p32s0", 200)).stdout
    assert time.monotonic() - t0 >= 200 * SCALE
    [m] = [m for m in map(pattern.match, healthy.splitlines()) if m]
    assert m.groupdict() == {"device": "mnc2p32s0", "throughput": "393.2", "unit": "TFLOPS", "checksum": st.MNCORE_CHECKSUM,
                             "verdict": "PASS"}  # fmt: skip

    r = run(sb, "mncore-burnin", *[a for d in ("mnc2p48s0", "mnc2p64s0", "mnc2p80s0") for a in ("--device", d)], "--seconds", "10", rc=1)
    got = {m["device"]: m.groupdict() for m in map(pattern.match, r.stdout.splitlines()) if m}
    assert float(got["mnc2p48s0"]["throughput"]) == pytest.approx(st.MNCORE_THROUGHPUT * 0.5) and got["mnc2p48s0"]["verdict"] == "PASS"
    assert float(got["mnc2p64s0"]["throughput"]) < st.MNCORE_THROUGHPUT and "mnc2p64s0: progress 100% temperature 97 C" in r.stdout
    assert got["mnc2p80s0"]["checksum"] != st.MNCORE_CHECKSUM and got["mnc2p80s0"]["verdict"] == "FAIL"
    assert not any(sb.semaphore_dir.iterdir())  # its locks are released at the end
    run(sb, "mncore-burnin", "--device", "mnc2p32s0", rc=2)
    run(sb, "mncore-burnin", "--seconds", "x", rc=2)
    assert "no such device" in run(sb, "mncore-burnin", *burnin_args("mnc2p99s0", 1), rc=1).stderr


def test_mncore_burnin_vanish_and_hang(tmp_path: Path) -> None:
    pattern = mncore_config().burnin.result_regex()
    assert pattern is not None
    sb = make_host(tmp_path, MN, {"mnc2p48s0": "vanish", "mnc2p64s0": "hang"})
    r = run(sb, "mncore-burnin", *burnin_args("mnc2p48s0", 5), rc=1)
    assert "device lost" in r.stderr and not any(map(pattern.match, r.stdout.splitlines()))
    assert [d.name for d in parse_gpfn3_list(run(sb, "gpfn3-smi", "list").stdout)] == ["mnc2p32s0", "mnc2p64s0", "mnc2p80s0"]

    out = hangs(sb, "mncore-burnin", *burnin_args("mnc2p64s0", 1))
    assert "mnc2p64s0: progress 0%" in out and not any(map(pattern.match, out.splitlines()))
    # Killed, it leaves a stale lock: the board is busy until a reset breaks it.
    assert (sb.semaphore_dir / "mnc2p64s0").exists()
    assert "in use" in run(sb, "mncore-burnin", *burnin_args("mnc2p64s0", 1), rc=1).stderr
    run(sb, "gpfn3-smi", "reset", "mnc2p64s0")
    assert not (sb.semaphore_dir / "mnc2p64s0").exists()
