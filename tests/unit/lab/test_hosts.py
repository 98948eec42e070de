"""Lab hosts (fleetctl_lab.hosts): the OS behind each lab BMC.

The phase logic is driven directly on a SimBMC with explicit times (no
sleeping); the sandbox is synced by hand; then the SSH side is checked for
real with asyncssh's client against a lab in a thread: refused while
installing, commands with stdin once up, SFTP, refused again after a
power-off, and many hosts at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.bmc import FAULTS, LabConfig, SimBMC, generate_specs, run_lab_in_thread
from fleetctl_lab.hosts import HostSandbox, ansible_host_vars, boot_mode, host_base_address, wait_for_phase

from fleetctl.errors import FleetError

asyncssh = pytest.importorskip("asyncssh")

T0 = 1_800_000_000.0
CFG = LabConfig(power_transition_s=1.0, install_s=10.0, os_boot_s=2.0)
MN, GPU = generate_specs(2)  # lab-mncore-00000 (4 MN-Core 2 boards), lab-gpu-00001 (8 GPUs)


def _bmc(spec: Any = MN) -> SimBMC:
    return SimBMC(spec, CFG)


def _phase(b: SimBMC, at: float) -> str:
    return b.host_info(at)["phase"]


def _pxe_on(b: SimBMC, at: float) -> None:
    b.set_boot({"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"})
    b.reset("On", now=at)


# --- phases, with explicit times ---------------------------------------------------------


def test_pxe_boot_installs_then_the_host_is_up_and_disk_boots_bring_it_back() -> None:
    b = _bmc()
    assert _phase(b, T0) == "off"
    _pxe_on(b, T0)
    assert _phase(b, T0 + 0.5) == "off"  # PoweringOn: nothing runs yet
    assert _phase(b, T0 + 1.0) == "installing"  # booted at T0 + 1 from Pxe
    info = b.host_info(T0 + 10.9)
    assert info["phase"] == "installing" and info["up_at"] == T0 + 11.0 and not info["installed"]
    info = b.host_info(T0 + 11.0)
    assert info["phase"] == "up" and info["up_since"] == T0 + 11.0 and info["install_id"] == 1
    assert info["boot_source"] == "Pxe"
    assert b.counters.installs == 1 and b.counters.boots == 1

    # Off (any off phase) takes the host down at once.
    b.reset("ForceOff", now=T0 + 20)
    assert _phase(b, T0 + 20) == "off" and _phase(b, T0 + 21) == "off"
    # The one-time override was consumed: the next boot is from disk, OS kept.
    b.reset("On", now=T0 + 30)
    assert _phase(b, T0 + 31.5) == "booting"
    info = b.host_info(T0 + 33.0)
    assert info["phase"] == "up" and info["up_since"] == T0 + 33.0 and info["boot_source"] == "Hdd"
    assert info["install_id"] == 1 and b.counters.installs == 1
    # A restart is off then on: down during it, up again after the OS boots.
    b.reset("ForceRestart", now=T0 + 40)
    assert _phase(b, T0 + 40) == "off" and _phase(b, T0 + 41.5) == "off"
    assert _phase(b, T0 + 42.5) == "booting" and _phase(b, T0 + 44) == "up"
    c = b.counters_dict()
    assert c["installs"] == 1 and c["host"]["installed"] and [x["source"] for x in c["boot_log"]] == ["Pxe", "Hdd", "Hdd"]


def test_a_host_never_installed_never_comes_up_from_disk() -> None:
    b = _bmc()
    b.reset("On", now=T0)
    assert _phase(b, T0 + 1) == "no-os"
    assert _phase(b, T0 + 10_000) == "no-os"
    assert b.counters.installs == 0


def test_power_off_during_the_install_leaves_no_os() -> None:
    b = _bmc()
    _pxe_on(b, T0)
    assert _phase(b, T0 + 5) == "installing"
    b.reset("ForceOff", now=T0 + 5)
    b.reset("On", now=T0 + 100)
    assert _phase(b, T0 + 10_000) == "no-os"  # the installer had wiped the disk
    assert b.counters.installs == 0
    # A restart that cuts an install short does the same; a finished one survives it.
    b.set_boot({"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"})
    b.reset("ForceRestart", now=T0 + 20_000)  # boot at +2 s, install until +12 s
    assert _phase(b, T0 + 20_011) == "installing"
    b.reset("ForceOff", now=T0 + 20_013)  # after the end: the install completed first
    assert b.counters.installs == 1 and b.host.installed_id == 1


def test_boot_sources_map_to_install_disk_or_firmware() -> None:
    assert boot_mode("Pxe", None) == "install" and boot_mode("UefiHttp", None) == "install"
    assert boot_mode("Cd", "http://127.0.0.1/os.iso") == "install"
    assert boot_mode("Cd", None) == "disk"  # an empty drive: on to the next device
    assert boot_mode("Hdd", None) == "disk" and boot_mode("SomethingNew", None) == "disk"
    assert boot_mode("BiosSetup", None) == "firmware"

    b = _bmc()
    b.insert_media(next(iter(b.media)), "http://127.0.0.1:9/install.iso")
    b.set_boot({"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"})
    b.reset("On", now=T0)
    info = b.host_info(T0 + 2)
    assert info["phase"] == "installing" and info["boot_image"] == "http://127.0.0.1:9/install.iso"
    assert _phase(b, T0 + 11) == "up"

    b = _bmc()
    b.set_boot({"BootSourceOverrideTarget": "BiosSetup", "BootSourceOverrideEnabled": "Once"})
    b.reset("On", now=T0)
    assert _phase(b, T0 + 5) == "firmware"


def test_installs_counter_and_device_missing_are_in_the_tables() -> None:
    assert "device_missing" in FAULTS
    b = _bmc()
    assert b.set_fault(device_missing=True) == {"device_missing": True}
    assert b.set_fault(device_missing=0) == {}
    assert "installs" in b.counters_dict() and b.counters_dict()["host"]["phase"] == "off"


# --- the sandbox ------------------------------------------------------------------------


def _sh(*argv: str) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10).stdout.splitlines()


def test_sandbox_is_fresh_per_install_and_device_missing_takes_boards_away(tmp_path: Path) -> None:
    b = _bmc()
    sb = HostSandbox(tmp_path, MN)
    _pxe_on(b, T0)
    assert sb.sync(b.host_info(T0 + 11))
    v = sb.vars()
    assert sorted(p.name for p in sb.dev.iterdir()) == ["mnc2p32s0", "mnc2p48s0", "mnc2p64s0", "mnc2p80s0"]
    listing = _sh(v["fleetctl_smi_cmd"], "list")
    assert listing == [f"{i}: mnc2p{bus}s0" for i, bus in enumerate((32, 48, 64, 80))]
    from fleetctl_drivers.accel.mncore import parse_gpfn3_list

    assert [(d.name, d.pci_bus) for d in parse_gpfn3_list("\n".join(listing) + "\n")] == [(f"mnc2p{b}s0", b) for b in (32, 48, 64, 80)]
    (sb.root / "etc/marker").write_text("applied\n")
    assert not sb.sync(b.host_info(T0 + 12))  # nothing new: nothing written

    # The fault applies from the next boot; a disk boot keeps the files.
    b.set_fault(device_missing=1)
    assert b.host_info(T0 + 13)["devices_missing"] == 0
    b.reset("ForceRestart", now=T0 + 20)
    info = b.host_info(T0 + 30)
    assert info["phase"] == "up" and info["devices_missing"] == 1
    assert sb.sync(info)
    assert (sb.root / "etc/marker").exists()
    assert len(_sh(v["fleetctl_smi_cmd"], "list")) == 3 and not (sb.dev / "mnc2p80s0").exists()
    assert json.loads((sb.dir / "host.json").read_text())["devices"] == ["mnc2p32s0", "mnc2p48s0", "mnc2p64s0"]

    # Cleared: back at the next boot. A reinstall wipes what the playbooks wrote.
    b.set_fault(device_missing=None)
    b.set_boot({"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"})
    b.reset("ForceRestart", now=T0 + 40)
    info = b.host_info(T0 + 60)
    assert info["phase"] == "up" and info["install_id"] == 2 and info["devices_missing"] == 0
    sb.sync(info)
    assert not (sb.root / "etc/marker").exists()
    assert len(_sh(v["fleetctl_smi_cmd"], "list")) == 4


def test_gpu_host_stand_ins_and_the_package_tool(tmp_path: Path) -> None:
    b = SimBMC(GPU, CFG)
    b.set_fault(device_missing=2)
    _pxe_on(b, T0)
    sb = HostSandbox(tmp_path, GPU)
    sb.sync(b.host_info(T0 + 11))
    v = sb.vars()
    gpus = _sh(v["fleetctl_nvidia_smi_cmd"], "-L")
    assert len(gpus) == 6 and gpus[0].startswith("GPU 0: NVIDIA H100 PCIe (UUID: GPU-")
    assert _sh(v["fleetctl_smi_cmd"], "list") == []
    _sh(*v["fleetctl_pkg_install_cmd"], "chrony", "nvidia-driver")
    assert _sh(*v["fleetctl_pkg_query_cmd"], "chrony", "other") == ["chrony installed"]
    _sh(*v["fleetctl_kubeadm_cmd"].split(), "join", "k8s:6443")
    assert (sb.root / "etc/kubernetes/kubelet.conf").exists()
    assert (sb.dir / "calls.log").read_text() == "kubeadm join k8s:6443\n"
    assert ".invalid" not in v["fleetctl_mncore_apt_url"] and v["fleetctl_mncore_apt_key_url"].startswith("file://")
    assert v["ansible_become"] is False and v["ansible_remote_tmp"] == str(sb.tmp)


def test_host_addresses_follow_the_bmcs() -> None:
    assert host_base_address(LabConfig(base_address="127.10.0.1")) == "127.70.0.1"
    assert host_base_address(LabConfig(base_address="127.39.0.1")) == "127.99.0.1"
    assert host_base_address(LabConfig(host_base_address="127.200.0.1")) == "127.200.0.1"
    with pytest.raises(ValueError):
        LabConfig(host_base_address="10.0.0.1")


# --- over SSH, for real -------------------------------------------------------------------

SSH_CFG = dict(power_transition_s=0.1, install_s=0.8, os_boot_s=0.1, hosts=True, tls=False)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cfg = LabConfig(state_dir=tmp_path_factory.mktemp("hostlab"), **SSH_CFG)
    with run_lab_in_thread(generate_specs(4), cfg) as running:
        yield running


def _connect(entry: dict[str, Any], **kw: Any) -> Any:
    opts = dict(username=entry["user"], client_keys=[entry["key_file"]], known_hosts=entry["known_hosts"],
                agent_path=None, config=[], connect_timeout=5)  # fmt: skip
    opts.update(kw)
    return asyncssh.connect(entry["address"], entry["port"], **opts)


async def _refused(entry: dict[str, Any]) -> bool:
    try:
        async with _connect(entry) as conn:
            await conn.run("true", check=True)
    except (OSError, asyncssh.Error):
        return True
    return False


def _wait(lab: Any, name: str, phase: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = lab.host(name)
        if info["phase"] == phase:
            return info
        assert time.monotonic() < deadline, info
        time.sleep(0.05)


def _boot(lab: Any, name: str, target: str | None = "Pxe", reset: str = "On") -> None:
    def go() -> None:
        b = lab.lab.bmc(name)
        if target:
            b.set_boot({"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"})
        b.reset(reset)

    lab.call(go)


def test_lab_json_hosts_section_and_keys(lab: Any) -> None:
    hosts = lab.status()["hosts"]
    assert set(hosts) == set(lab.names())
    e = hosts["lab-mncore-00000"]
    assert set(e) >= {"address", "port", "user", "key_file", "known_hosts", "vars", "dir"}
    assert e["boards"] == {"mncore2": 4, "gpu": 0}
    assert stat.S_IMODE(os.stat(e["key_file"]).st_mode) == 0o600
    assert Path(e["key_file"] + ".pub").read_text().startswith("ssh-ed25519 ")
    known = Path(e["known_hosts"]).read_text().splitlines()
    assert f"[{e['address']}]:{e['port']} ssh-ed25519 " in "\n".join(known) and len(known) == 4
    v = ansible_host_vars(e)
    assert v["ansible_host"] == e["address"] and v["ansible_port"] == e["port"] and v["ansible_ssh_pipelining"] is True
    assert f"UserKnownHostsFile={e['known_hosts']}" in v["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in v["ansible_ssh_common_args"]
    assert v["fleetctl_root"] == e["vars"]["fleetctl_root"] == e["dir"] + "/root"


def test_ssh_refused_while_installing_then_commands_with_stdin_then_refused_after_power_off(lab: Any) -> None:
    name = "lab-mncore-00000"
    e = lab.status()["hosts"][name]

    async def scenario() -> None:
        assert await _refused(e)  # off
        _boot(lab, name, "Pxe")
        await asyncio.sleep(0.3)
        assert lab.host(name)["phase"] == "installing"
        assert await _refused(e)
        await asyncio.to_thread(_wait, lab, name, "up")
        async with _connect(e) as conn:
            blob = bytes(range(256)) * 64
            r = await conn.run("cat; echo; echo $HOME $FLEETCTL_HOST_ROOT; pwd; exit 7", input=blob, encoding=None)
            assert r.exit_status == 7
            assert r.stdout.startswith(blob)
            home, root, cwd = r.stdout[len(blob) + 1 :].decode().split()
            assert (home, root, cwd) == (e["dir"] + "/home", e["vars"]["fleetctl_root"], e["dir"])
            r = await conn.run("gpfn3-smi list; echo oops >&2", check=True)
            assert len(r.stdout.splitlines()) == 4 and r.stderr == "oops\n"
            # SFTP, as Ansible uses it to copy files.
            async with conn.start_sftp_client() as sftp, sftp.open(e["vars"]["ansible_remote_tmp"] + "/x.txt", "w") as f:
                await f.write("copied\n")
            assert Path(e["vars"]["ansible_remote_tmp"], "x.txt").read_text() == "copied\n"
            # Power off: the open connection dies at its next session; new ones are refused.
            _boot(lab, name, None, "ForceOff")
            try:
                r = await conn.run("true")
                assert r.exit_status not in (0, None) or r.exit_signal, r
            except (OSError, asyncssh.Error):
                pass
        assert await _refused(e)
        # Only the lab's key logs in.
        while lab.counters(name)["power_state"] != "Off":
            await asyncio.sleep(0.02)
        _boot(lab, name, None, "On")  # from disk: the OS is installed
        await asyncio.to_thread(_wait, lab, name, "up")
        stranger = asyncssh.generate_private_key("ssh-ed25519")
        with pytest.raises(asyncssh.PermissionDenied):
            async with _connect(e, client_keys=[stranger]):
                pass

    asyncio.run(scenario())
    info = lab.host(name)
    assert info["installs"] == 1 and info["ssh_logins"] == 1 and info["ssh_refused"] >= 3
    assert lab.counters(name)["installs"] == 1


def test_a_disk_boot_without_install_never_answers_ssh(lab: Any) -> None:
    name = "lab-gpu-00001"
    e = lab.status()["hosts"][name]
    _boot(lab, name, None, "On")
    info = wait_for_phase(lab.control_url, name, "no-os", timeout=5)  # what a test of a daemon lab calls
    assert info["boot_source"] == "Hdd" and not info["installed"]
    with pytest.raises(FleetError, match="'no-os', not 'up'"):
        wait_for_phase(lab.control_url, name, "up", timeout=0.5)
    assert asyncio.run(_refused(e))
    assert lab.counters(name)["installs"] == 0


def test_device_missing_over_ssh(lab: Any) -> None:
    name = "lab-mncore-00002"
    e = lab.status()["hosts"][name]
    lab.set_fault(name, device_missing=2)
    _boot(lab, name, "Pxe")
    _wait(lab, name, "up", timeout=10)

    async def boards() -> list[str]:
        async with _connect(e) as conn:
            return (await conn.run("gpfn3-smi list", check=True)).stdout.splitlines()

    assert len(asyncio.run(boards())) == 2
    lab.set_fault(name, device_missing=None)
    _boot(lab, name, None, "ForceRestart")
    _wait(lab, name, "off")
    _wait(lab, name, "up")
    assert len(asyncio.run(boards())) == 4


def test_forty_hosts_at_once(tmp_path: Path) -> None:
    cfg = LabConfig(state_dir=tmp_path, **SSH_CFG)
    with run_lab_in_thread(generate_specs(40), cfg) as lab40:
        names = lab40.names()
        for n in names:
            _boot(lab40, n, "Pxe")
        for n in names:
            _wait(lab40, n, "up")
        hosts = lab40.status()["hosts"]

        async def one(name: str) -> list[str]:
            async with _connect(hosts[name]) as conn:
                outs = await asyncio.gather(*(conn.run(f"echo {name} {i}", check=True) for i in range(3)))
                return [o.stdout.strip() for o in outs]

        async def every() -> list[list[str]]:
            return await asyncio.gather(*(one(n) for n in names))

        t0 = time.perf_counter()
        got = asyncio.run(every())
        assert got == [[f"{n} {i}" for i in range(3)] for n in names]
        assert time.perf_counter() - t0 < 20
