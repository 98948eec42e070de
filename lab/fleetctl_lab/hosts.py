"""Lab hosts: the operating system behind each lab BMC, reachable over SSH.

A lab server that boots from the network (``Pxe``, ``UefiHttp``) or from
virtual media with an image inserted (``Cd``, ``Usb``, ...) *installs*: for
``LabConfig.install_s`` seconds it is ``installing``, then it is ``up`` with
a fresh OS. A boot from disk (``Hdd``, the default) brings an installed host
``up`` after ``LabConfig.os_boot_s``; a host that was never installed (or
whose install was cut short by a power-off) has ``no-os`` and never comes
up. Any power-off phase takes the host down. Like the BMC's power phases,
the host's phase is computed from the boot time and the durations when
asked, with no timer per host.

Host phases (``HostState.describe``):

  off         the server is not On (Off, PoweringOn, PoweringOff)
  installing  booted an installer; up at ``installing_until``
  booting     booted an installed OS from disk; up at ``up_since``
  up          the OS runs: SSH logins are accepted
  no-os       booted from disk with nothing installed
  firmware    booted into BiosSetup / UefiShell / Utilities / Diags

Each host is an SSH server (asyncssh, in the lab daemon) on its own loopback
address, ``127.<BMC second octet + 60>.0.1 + index`` port 2222 by default
(``LabConfig.host_base_address`` / ``host_ssh_port``; an ephemeral port
when that cannot be bound, and always in the lab's port mode). While the
host is not ``up`` a connection is closed before authentication, so a
"wait for the OS" poll sees it down. Logins: public key only, the lab's
client key ``<state>/ssh/id_ed25519`` (mode 0600), as the lab daemon's own
user; one host key for every host, listed per host in
``<state>/ssh/known_hosts``. Commands run through ``/bin/sh -c`` as the
daemon's user, in the host folder, with ``HOME=<host>/home``,
``FLEETCTL_HOST_ROOT=<host>/root`` and ``<host>/bin`` first on ``PATH``;
SFTP is served too (Ansible copies files with it). Neither is a jail: the
lab is a test bench on one machine, for one user.

The host's files, ``<state>/hosts/<server>/`` (wiped and made afresh by each
install, on the first look at the host once it is up):

  root/             the sandbox the playbooks write into (``fleetctl_root``)
  root/dev/         ``mnc2p<bus>s<n>`` per MN-Core board, ``nvidia<i>`` per GPU,
                    ``renderD<128+i>`` per AMD Instinct GPU (plain files); the
                    fault ``device_missing`` leaves out the last n at the next boot
  bin/              stand-ins: fake-pkg, gpfn3-smi, nvidia-smi, dcgmi, gpu-burn,
                    mncore-burnin, dmesg, amd-smi, rvs, sysctl, kubeadm
                    (``fleetctl_lab.host_standins``)
  boards.json       the boards and their faults, read by the accelerator
                    stand-ins at run time (kept across installs)
  root/opt/mncore_shared_semaphore/  MN-Core board locks (a file per device)
  root/sys/bus/pci/devices/<pci address>/  each board's PCIe link, the four
                    sysfs files ``{current,max}_link_{speed,width}``, rewritten
                    with boards.json (a ``degraded_link`` board: lower current)
  home/, tmp/       ``HOME``; ``ansible_remote_tmp``
  pkg/installed/    one file per package the fake package tool installed;
  pkg/installs.log  one line per install call
  calls.log         sysctl, package list updates, kubeadm joins
  host.json         install and boot ids, boot source, devices present

``lab.json`` gains a ``"hosts"`` section (``HostLab.status``)::

  "hosts": {"mn-tyo1-r12-01": {"address": "127.70.0.5", "port": 2222,
             "user": "alice", "key_file": "<state>/ssh/id_ed25519",
             "known_hosts": "<state>/ssh/known_hosts",
             "dir": "<state>/hosts/mn-tyo1-r12-01",
             "boards": {"mncore2": 4, "gpu": 0},
             "vars": {"fleetctl_root": ..., ...}}}

``vars`` are the Ansible host variables that point the playbooks at the
host's sandbox and stand-ins; :func:`ansible_host_vars` adds the SSH
connection variables to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import ipaddress
import json
import logging
import os
import shutil
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetctl.errors import FleetError
from fleetctl_lab import host_standins as standins
from fleetctl_lab.k8s.daemon import JOINS_DIR, K8S_DIR
from fleetctl_lab.sshserve import close_all, serve_ssh

if TYPE_CHECKING:
    from fleetctl_lab.bmc.server import BMCLab
    from fleetctl_lab.bmc.spec import LabConfig, LabServerSpec

log = logging.getLogger("fleetctl_lab.hosts")

SSH_DIR = "ssh"
HOSTS_DIR = "hosts"
APT_DIR = "apt"
CLIENT_KEY = "id_ed25519"
HOST_KEY = "host_ed25519"
KNOWN_HOSTS = "known_hosts"
HOST_OCTET_OFFSET = 60  # hosts at 127.<BMC second octet + 60>.0.1 + index

PHASES = ("off", "installing", "booting", "up", "no-os", "firmware")

# What a boot source does to the host (Redfish BootSourceOverrideTarget ->
# how the host boots). "media" installs when an image is inserted and
# otherwise falls through to the disk, as firmware does with an empty drive.
# Unknown sources boot from disk.
BOOT_MODES: dict[str, str] = {
    "Pxe": "install",
    "UefiHttp": "install",
    "Cd": "media",
    "Usb": "media",
    "Floppy": "media",
    "RemoteDrive": "media",
    "Hdd": "disk",
    "SDCard": "disk",
    "UefiTarget": "disk",
    "None": "disk",
    "BiosSetup": "firmware",
    "UefiShell": "firmware",
    "Utilities": "firmware",
    "Diags": "firmware",
}


def boot_mode(source: str, image: str | None) -> str:
    """``install``, ``disk`` or ``firmware`` for a boot from ``source``."""
    mode = BOOT_MODES.get(source, "disk")
    if mode == "media":
        return "install" if image else "disk"
    return mode


def fault_count(value: Any) -> int:
    """A count-like fault value: True = 1, a number = itself, anything else 0."""
    if value is True:
        return 1
    if isinstance(value, bool) or value is None:
        return 0
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


# --- the host's state, computed lazily ------------------------------------------------


@dataclass
class HostState:
    """What runs on a lab server, driven by its BMC's boots and power-offs.

    ``SimBMC`` calls :meth:`boot` at the end of each PoweringOn, :meth:`down`
    when a power-off phase starts, and :meth:`settle` whenever it settles.
    """

    installed_id: int = 0  # id of the OS on the disk; 0: none
    installs: int = 0  # completed installs
    boot_id: int = 0  # boots so far
    boot_at: float | None = None  # None while the server is off
    mode: str | None = None  # installing | os | no-os | firmware
    up_at: float | None = None  # when the OS is (or will be) up
    source: str | None = None
    image: str | None = None
    devices_missing: int = 0  # fixed at boot from the device_missing fault
    installed_at: float | None = None

    def boot(self, at: float, source: str, image: str | None, *, install_s: float, os_boot_s: float,
             devices_missing: int = 0) -> None:  # fmt: skip
        self.boot_id += 1
        self.boot_at, self.source, self.image = at, source, image
        self.devices_missing = devices_missing
        mode = boot_mode(source, image)
        if mode == "install":
            # The installer wipes the disk first: cut short, nothing is left.
            self.installed_id = 0
            self.mode, self.up_at = "installing", at + install_s
        elif mode == "disk" and self.installed_id:
            self.mode, self.up_at = "os", at + os_boot_s
        elif mode == "disk":
            self.mode, self.up_at = "no-os", None
        else:
            self.mode, self.up_at = "firmware", None

    def settle(self, now: float) -> float | None:
        """Finish an install that ended by ``now``; returns its end time, else None."""
        if self.mode == "installing" and self.up_at is not None and now >= self.up_at:
            self.installs += 1
            self.installed_id = self.installs
            self.installed_at = self.up_at
            self.mode = "os"
            return self.up_at
        return None

    def down(self, at: float) -> float | None:
        """The server's power goes off at ``at``; returns the end of an install that finished first."""
        done = self.settle(at)
        self.boot_at = self.mode = self.up_at = None
        return done

    def phase(self, now: float, powered: bool) -> str:
        if not powered:
            return "off"
        if self.boot_at is None or self.mode is None:
            return "no-os"  # on since the lab started: never booted anything
        if self.mode == "installing":
            return "installing"
        if self.mode == "os":
            assert self.up_at is not None
            return "up" if now >= self.up_at else "booting"
        return self.mode

    def describe(self, now: float, powered: bool) -> dict[str, Any]:
        ph = self.phase(now, powered)
        return {
            "phase": ph,
            "up_since": self.up_at if ph == "up" else None,
            "up_at": self.up_at if ph in ("installing", "booting") else None,
            "installed": bool(self.installed_id),
            "install_id": self.installed_id,
            "installed_at": self.installed_at if self.installed_id else None,
            "installs": self.installs,
            "boot_id": self.boot_id,
            "boot_source": self.source if powered else None,
            "boot_image": self.image if powered else None,
            "devices_missing": self.devices_missing,
        }


# --- the host's files -----------------------------------------------------------------


def mncore_device_names(spec: LabServerSpec) -> list[str]:
    """``mnc2p<bus>s<n>`` per MN-Core board, in slot order (bus from the PCI address)."""
    names: list[str] = []
    per_bus: dict[int, int] = {}
    for b in sorted((b for b in spec.boards if b.kind == "mncore2"), key=lambda b: b.slot):
        try:
            bus = int(b.pci_address.split(":")[1], 16)
        except (IndexError, ValueError):
            bus = b.slot
        n = per_bus.get(bus, 0)
        per_bus[bus] = n + 1
        names.append(f"mnc2p{bus}s{n}")
    return names


def gpu_table(spec: LabServerSpec) -> list[tuple[int, str, str]]:
    """(node index, model, UUID) per GPU board, in slot order; the UUID is stable per serial."""
    gpus = sorted((b for b in spec.boards if b.kind == "gpu"), key=lambda b: b.slot)
    return [(i, b.model, f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, 'fleetctl-lab-gpu:' + b.serial)}") for i, b in enumerate(gpus)]


def amd_table(spec: LabServerSpec) -> list[tuple[str, str]]:
    """(device node, UUID) per AMD Instinct board, in slot order: ``renderD<128+i>`` (the DRM render node amdgpu makes
    for each GPU; a plain file here) and a UUID stable per serial."""
    boards = sorted((b for b in spec.boards if b.kind == "amd-instinct"), key=lambda b: b.slot)
    return [(f"renderD{128 + i}", str(uuid.uuid5(uuid.NAMESPACE_OID, "fleetctl-lab-amd:" + b.serial))) for i, b in enumerate(boards)]


def board_records(spec: LabServerSpec, faults: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The boards of ``boards.json`` (``host_standins.board_record``), in slot order; ``faults`` by serial, else healthy."""
    faults = faults or {}
    mn = sorted((b for b in spec.boards if b.kind == "mncore2"), key=lambda b: b.slot)
    gpus = sorted((b for b in spec.boards if b.kind == "gpu"), key=lambda b: b.slot)
    devices = list(zip(mn, mncore_device_names(spec), strict=True))
    devices += [(b, f"nvidia{i}") for b, (i, _, _) in zip(gpus, gpu_table(spec), strict=True)]
    uuids = {f"nvidia{i}": u for i, _, u in gpu_table(spec)}
    amd = sorted((b for b in spec.boards if b.kind == "amd-instinct"), key=lambda b: b.slot)
    devices += [(b, dev) for b, (dev, _) in zip(amd, amd_table(spec), strict=True)]
    uuids.update(amd_table(spec))
    out = []
    for b, device in sorted(devices, key=lambda x: x[0].slot):
        gen = "".join(c for c in b.pcie_gen if c.isdigit())
        out.append(standins.board_record(kind=b.kind, device=device, serial=b.serial, model=b.model, pci_address=b.pci_address,
                                         slot=b.slot, uuid=uuids.get(device, ""), pcie_gen=int(gen or 4), max_lanes=b.max_lanes,
                                         firmware=b.firmware, fault=faults.get(b.serial, "healthy")))  # fmt: skip
    return out


class HostSandbox:
    """The folder of one lab host (layout in the module docstring)."""

    def __init__(self, state_dir: Path, spec: LabServerSpec) -> None:
        self.spec = spec
        self.state_dir = Path(state_dir)
        self.dir = self.state_dir / HOSTS_DIR / spec.name
        self.root = self.dir / "root"
        self.dev = self.root / "dev"
        self.bin = self.dir / "bin"
        self.home = self.dir / "home"
        self.tmp = self.dir / "tmp"
        self.pkg = self.dir / "pkg"
        self.calls_log = self.dir / "calls.log"
        self.boards_file = self.dir / standins.BOARDS_FILE
        self.semaphore_dir = self.root / "opt/mncore_shared_semaphore"
        self.sysfs_pci_dir = standins.sysfs_pci_dir(self.boards_file)  # root/sys/bus/pci/devices
        self._synced: tuple[int, int] | None = None  # (install_id, boot_id) the files match

    # What the playbooks need to know about this host.
    def vars(self) -> dict[str, Any]:
        apt = self.state_dir / APT_DIR
        pkg = str(self.bin / "fake-pkg")
        return {
            "fleetctl_root": str(self.root),
            "fleetctl_pkg_install_cmd": [pkg, "install", str(self.pkg / "installed"), str(self.pkg / "installs.log")],
            "fleetctl_pkg_query_cmd": [pkg, "query", str(self.pkg / "installed")],
            "fleetctl_pkg_update_cmd": [pkg, "update", str(self.calls_log)],
            "fleetctl_dev_glob": str(self.dev / "mnc2p*"),
            "fleetctl_smi_cmd": str(self.bin / "gpfn3-smi"),
            "fleetctl_nvidia_smi_cmd": str(self.bin / "nvidia-smi"),
            "fleetctl_dcgmi_cmd": str(self.bin / "dcgmi"),
            "fleetctl_gpu_burn_cmd": str(self.bin / "gpu-burn"),
            "fleetctl_mncore_burnin_cmd": str(self.bin / "mncore-burnin"),
            "fleetctl_dmesg_cmd": str(self.bin / "dmesg"),
            "fleetctl_amd_smi_cmd": str(self.bin / "amd-smi"),
            "fleetctl_rvs_cmd": str(self.bin / "rvs"),
            "fleetctl_mncore_semaphore_dir": str(self.semaphore_dir),
            "fleetctl_sysfs_pci_dir": str(self.sysfs_pci_dir),
            "fleetctl_sysctl_apply_cmd": [str(self.bin / "sysctl"), "-p"],
            "fleetctl_kubeadm_cmd": str(self.bin / "kubeadm"),
            "fleetctl_mncore_apt_url": (apt / "mncore-packages").as_uri(),
            "fleetctl_mncore_apt_key_url": (apt / "mncore-packages.asc").as_uri(),
            "ansible_remote_tmp": str(self.tmp),
            "ansible_become": False,
            "ansible_python_interpreter": sys.executable,
        }

    def env(self, user: str) -> dict[str, str]:
        path = os.pathsep.join([str(self.bin), str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        return {
            "PATH": path, "HOME": str(self.home), "USER": user, "LOGNAME": user, "SHELL": "/bin/sh",
            "LANG": "C.UTF-8", "TMPDIR": str(self.tmp), "FLEETCTL_HOST": self.spec.name,
            "FLEETCTL_HOST_ROOT": str(self.root),
        }  # fmt: skip

    def sync(self, info: dict[str, Any]) -> bool:
        """Make the files match the host: a fresh tree after an install, device nodes after a boot.

        ``info`` is ``HostState.describe``'s dict of a host that is up.
        Returns True when something was written.
        """
        key = (int(info["install_id"]), int(info["boot_id"]))
        if key == self._synced and self.dir.is_dir():
            return False
        if self._synced is None or self._synced[0] != key[0] or not self.dir.is_dir():
            self._fresh()
        self._devices(int(info.get("devices_missing") or 0))
        doc = {"server": self.spec.name, **{k: info.get(k) for k in ("install_id", "installed_at", "boot_id", "boot_source",
                                                                      "boot_image", "devices_missing")},
               "devices": sorted(p.name for p in self.dev.iterdir())}  # fmt: skip
        (self.dir / "host.json").write_text(json.dumps(doc, indent=1) + "\n")
        self._synced = key
        return True

    def board_faults(self) -> dict[str, str]:
        """The faults in ``boards.json`` by board serial (empty when there is none yet)."""
        try:
            doc = json.loads(self.boards_file.read_text())
            return {b["serial"]: b["fault"] for b in doc["boards"]}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def _fresh(self) -> None:
        """A freshly installed OS: the old tree is gone; the boards keep their faults (they are hardware)."""
        faults = self.board_faults()
        shutil.rmtree(self.dir, ignore_errors=True)
        for d in (self.root / "etc", self.dev, self.sysfs_pci_dir, self.bin, self.home, self.pkg / "installed"):
            d.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.root / "etc/os-release").write_text('NAME="fleetctl lab OS"\nID=fleetctl-lab\nPRETTY_NAME="fleetctl lab OS"\n')
        (self.root / "etc/hosts").write_text("127.0.0.1 localhost\n")
        standins.write_script(self.bin / "fake-pkg", standins.FAKE_PKG)
        standins.write_boards(self.boards_file, self.spec.name, board_records(self.spec, faults))
        accel = {"boards_file": self.boards_file, "semaphore_dir": self.semaphore_dir, "calls_log": self.calls_log}
        standins.write_script(self.bin / "gpfn3-smi", standins.gpfn3_smi(self.dev, **accel))
        standins.write_script(self.bin / "nvidia-smi", standins.nvidia_smi(self.dev, (), **accel))
        standins.write_script(self.bin / "dcgmi", standins.dcgmi(self.dev, **accel))
        standins.write_script(self.bin / "gpu-burn", standins.gpu_burn(self.dev, **accel))
        standins.write_script(self.bin / "mncore-burnin", standins.mncore_burnin(self.dev, **accel))
        standins.write_script(self.bin / "dmesg", standins.dmesg(self.dev, **accel))
        standins.write_script(self.bin / "amd-smi", standins.amd_smi(self.dev, **accel))
        standins.write_script(self.bin / "rvs", standins.rvs(self.dev, **accel))
        standins.write_script(self.bin / "sysctl", standins.sysctl(self.calls_log))
        # The join also tells the lab's Kubernetes stand-in (its state folder beside the hosts') that this node registered.
        standins.write_script(self.bin / "kubeadm", standins.kubeadm(self.calls_log, self.root, self.state_dir / K8S_DIR / JOINS_DIR,
                                                                     self.spec.name))  # fmt: skip

    def device_nodes(self) -> list[str]:
        """Every accelerator device node this host has when nothing is missing, in slot order."""
        return mncore_device_names(self.spec) + [f"nvidia{i}" for i, _, _ in gpu_table(self.spec)] + [d for d, _ in amd_table(self.spec)]

    def _devices(self, missing: int) -> None:
        want = self.device_nodes()
        keep = want[: max(0, len(want) - missing)]
        self.dev.mkdir(parents=True, exist_ok=True)
        for p in self.dev.iterdir():
            if p.name in want and p.name not in keep:
                p.unlink()
        for name in keep:
            (self.dev / name).touch()


def ensure_apt_repo(state_dir: Path) -> Path:
    """The lab's stand-in ``mncore-packages`` repository folder and signing key (file:// URLs)."""
    apt = Path(state_dir) / APT_DIR
    (apt / "mncore-packages").mkdir(parents=True, exist_ok=True)
    key = apt / "mncore-packages.asc"
    if not key.exists():
        key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\nfleetctl lab stand-in, not a key\n-----END PGP PUBLIC KEY BLOCK-----\n")
    return apt


def ensure_keys(state_dir: Path) -> tuple[Any, Any]:
    """(host key, client public key): generated once in ``<state>/ssh``, then reused."""
    import asyncssh

    ssh = Path(state_dir) / SSH_DIR
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = []
    for name in (HOST_KEY, CLIENT_KEY):
        path = ssh / name
        if path.exists():
            key = asyncssh.read_private_key(str(path))
        else:
            key = asyncssh.generate_private_key("ssh-ed25519", comment=f"fleetctl-lab-{name}")
            tmp = path.with_name(f".{name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(key.export_private_key())
            os.replace(tmp, path)
            path.with_name(name + ".pub").write_bytes(key.export_public_key())
        path.chmod(0o600)
        out.append(key)
    return out[0], out[1].convert_to_public()


def host_base_address(config: LabConfig) -> str:
    """Where the hosts' addresses start: the configured one, or the BMCs' second octet + 60."""
    if config.host_base_address:
        return config.host_base_address
    a, b, _, _ = (int(x) for x in config.base_address.split("."))
    return f"{a}.{(b + HOST_OCTET_OFFSET) % 256}.0.1"


# --- the SSH side ---------------------------------------------------------------------


class HostLab:
    """The SSH servers of every lab host, beside a running ``BMCLab`` (which starts it
    when ``LabConfig.hosts`` is set). Call its methods on the lab's event loop.
    """

    def __init__(self, lab: BMCLab) -> None:
        self.lab = lab
        self.config = lab.config
        self.user = getpass.getuser()
        self.sandboxes: dict[str, HostSandbox] = {}
        self.endpoints: dict[str, tuple[str, int]] = {}
        self.stats: dict[str, dict[str, int]] = {}
        self._servers: list[Any] = []
        self._conns: dict[Any, tuple[str, int]] = {}  # connection -> (host, boot id it logged in to)
        self._procs: set[asyncio.subprocess.Process] = set()
        self.client_key: Any = None
        self.ssh_dir: Path | None = None

    async def start(self) -> None:
        logging.getLogger("asyncssh").setLevel(logging.WARNING)
        sd = self.lab.state_dir
        assert sd is not None
        self.ssh_dir = sd / SSH_DIR
        loop = asyncio.get_running_loop()
        host_key, self.client_key = await loop.run_in_executor(None, ensure_keys, sd)
        # A lab that starts knows of no installed host: the files of an earlier run go.
        await loop.run_in_executor(None, partial(shutil.rmtree, sd / HOSTS_DIR, ignore_errors=True))
        ensure_apt_repo(sd)
        for name, bmc in self.lab.bmcs.items():
            self.sandboxes[name] = HostSandbox(sd, bmc.spec)
            self.stats[name] = {"ssh_logins": 0, "ssh_refused": 0, "ssh_commands": 0}
            bmc.on_host_down = partial(self._drop, name)
        try:
            for name, (host, port) in self._address_plan().items():
                srv = await serve_ssh(
                    partial(_server_class(), self, name), host, port, what=f"host {name}", log=log, server_host_keys=[host_key],
                    process_factory=partial(self._run, name), sftp_factory=partial(self._sftp, name),
                    encoding=None, allow_scp=True, reuse_address=True, keepalive_interval=0, backlog=self.config.backlog,
                )  # fmt: skip
                self._servers.append(srv)
                self.endpoints[name] = (host, srv.sockets[0].getsockname()[1])
        except OSError as e:
            await self.stop()
            raise FleetError(f"lab: cannot bind a host SSH socket ({e}); is another lab running on these addresses?") from e
        pub = host_key.export_public_key().decode().split()
        lines = [f"{_known_hosts_name(h, p)} {pub[0]} {pub[1]}\n" for h, p in self.endpoints.values()]
        (self.ssh_dir / KNOWN_HOSTS).write_text("".join(lines))
        log.info("lab: %d hosts serve SSH", len(self.endpoints))

    async def stop(self) -> None:
        for bmc in self.lab.bmcs.values():
            bmc.on_host_down = None
        for conn in list(self._conns):
            with contextlib.suppress(Exception):
                conn.abort()
        for proc in list(self._procs):
            _kill(proc)
        await close_all(self._servers)

    def _address_plan(self) -> dict[str, tuple[str, int]]:
        cfg = self.config
        plan: dict[str, tuple[str, int]] = {}
        if cfg.address_mode == "address" or cfg.host_base_address:
            base = ipaddress.IPv4Address(host_base_address(cfg))
            for i, name in enumerate(self.lab.bmcs):
                addr = base + i
                if not addr.is_loopback:
                    raise FleetError(f"lab host {name}: address {addr} is not in 127.0.0.0/8")
                plan[name] = (str(addr), cfg.host_ssh_port)
        else:  # every BMC on one address: every host on it too, each on its own port
            for name in self.lab.bmcs:
                plan[name] = (cfg.host, 0)
        return plan

    # --- what the lab publishes ------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """lab.json's ``hosts`` section."""
        assert self.ssh_dir is not None
        out = {}
        for name, (host, port) in self.endpoints.items():
            sb = self.sandboxes[name]
            kinds = [b.kind for b in sb.spec.boards]
            out[name] = {
                "address": host,
                "port": port,
                "user": self.user,
                "key_file": str(self.ssh_dir / CLIENT_KEY),
                "known_hosts": str(self.ssh_dir / KNOWN_HOSTS),
                "dir": str(sb.dir),
                "boards": {k: kinds.count(k) for k in ("mncore2", "gpu", "amd-instinct") if k != "amd-instinct" or k in kinds},
                "vars": sb.vars(),
            }
        return out

    def observe(self, name: str, info: dict[str, Any]) -> dict[str, Any]:
        """Bring the host's files up to date when it is up; add its SSH figures to ``info``."""
        sb = self.sandboxes.get(name)
        if sb is None:
            return info
        if info["phase"] == "up":
            sb.sync(info)
        ep = self.endpoints.get(name)
        return {**info, "ssh": f"{ep[0]}:{ep[1]}" if ep else None, **self.stats[name]}

    def admit(self, name: str) -> int | None:
        """The boot id of a host that is up (its files in line), else None."""
        info = self.lab.host(name)
        return int(info["boot_id"]) if info["phase"] == "up" else None

    def _drop(self, name: str) -> None:
        """The host lost power: its SSH connections go with it (an ssh ControlPersist
        master exits, so the next run connects afresh)."""
        for conn, (host, _) in list(self._conns.items()):
            if host == name:
                with contextlib.suppress(Exception):
                    conn.close()

    def _still_up(self, name: str, conn: Any) -> bool:
        """A session on ``conn`` may start: the host is up, in the boot it logged in to."""
        held = self._conns.get(conn)
        if held is not None and self.admit(name) == held[1]:
            return True
        self.stats[name]["ssh_refused"] += 1
        return False

    # --- sessions ----------------------------------------------------------------------

    async def _run(self, name: str, process: Any) -> None:
        """One command (or a shell without one) through /bin/sh, stdin forwarded, binary-safe."""
        import asyncssh

        conn = process.channel.get_connection()
        if not self._still_up(name, conn):
            # The host went down under this connection: 255, as ssh reports a
            # lost connection, and the connection goes.
            with contextlib.suppress(Exception):
                process.stderr.write(f"lab host {name} is down\n".encode())
                process.exit(255)
            conn.close()
            return
        self.stats[name]["ssh_commands"] += 1
        sb = self.sandboxes[name]
        argv = ["/bin/sh", "-c", process.command] if process.command is not None else ["/bin/sh"]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=str(sb.dir), env=sb.env(self.user), start_new_session=True,
            )  # fmt: skip
        except OSError as e:
            process.stderr.write(f"lab host {name}: cannot run /bin/sh: {e}\n".encode())
            process.exit(127)
            return
        self._procs.add(proc)
        try:
            await process.redirect(stdin=proc.stdin)
            # Output is pumped here, not redirected: the exit status must
            # follow the last byte of output, never overtake it.
            assert proc.stdout is not None and proc.stderr is not None
            await asyncio.gather(_pump(proc.stdout, process.stdout), _pump(proc.stderr, process.stderr))
            rc = await proc.wait()
            process.exit(rc if rc >= 0 else 128 - rc)
            # Lets the stdin forwarding finish its clean-up (the client has its answer).
            await asyncio.wait_for(process.wait_closed(), 5)
        except (TimeoutError, asyncssh.Error, OSError, ConnectionError):
            pass
        finally:
            if proc.returncode is None:
                _kill(proc)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 5)
            self._procs.discard(proc)

    def _sftp(self, name: str, chan: Any) -> Any:
        import asyncssh

        conn = chan.get_connection()
        if not self._still_up(name, conn):
            conn.close()
        return asyncssh.SFTPServer(chan)


async def _pump(src: asyncio.StreamReader, dst: Any) -> None:
    while True:
        data = await src.read(65536)
        if not data:
            return
        dst.write(data)
        await dst.drain()


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


_SERVER_CLASS: list[type] = []


def _server_class() -> type:
    """asyncssh server callbacks for a lab host (built on first use: asyncssh is imported lazily)."""
    if _SERVER_CLASS:
        return _SERVER_CLASS[0]
    import asyncssh

    class HostServer(asyncssh.SSHServer):
        def __init__(self, hosts: HostLab, name: str) -> None:
            self.hosts = hosts
            self.name = name
            self.conn: Any = None
            self.boot_id: int | None = None

        def connection_made(self, conn: Any) -> None:
            self.conn = conn
            self.boot_id = self.hosts.admit(self.name)
            if self.boot_id is None:
                # No OS running: nothing answers. Closed before any authentication.
                self.hosts.stats[self.name]["ssh_refused"] += 1
                asyncio.get_running_loop().call_soon(conn.abort)

        def connection_lost(self, exc: Exception | None) -> None:
            self.hosts._conns.pop(self.conn, None)

        def begin_auth(self, username: str) -> bool:
            if self.hosts.admit(self.name) != self.boot_id:
                self.hosts.stats[self.name]["ssh_refused"] += 1
                self.conn.abort()
            return True

        def password_auth_supported(self) -> bool:
            return False

        def public_key_auth_supported(self) -> bool:
            return True

        def validate_public_key(self, username: str, key: Any) -> bool:
            ck = self.hosts.client_key
            return bool(username == self.hosts.user and ck is not None and key.public_data == ck.public_data
                        and self.hosts.admit(self.name) == self.boot_id)  # fmt: skip

        def auth_completed(self) -> None:
            assert self.boot_id is not None
            self.hosts._conns[self.conn] = (self.name, self.boot_id)
            self.hosts.stats[self.name]["ssh_logins"] += 1

    _SERVER_CLASS.append(HostServer)
    return HostServer


# --- for clients ----------------------------------------------------------------------


def ansible_host_vars(entry: dict[str, Any]) -> dict[str, Any]:
    """Every Ansible variable for one host of lab.json's ``hosts`` section: the SSH
    connection (strict host key checking against the lab's known_hosts, pipelining)
    plus the entry's ``vars``.
    """
    common = " ".join([
        f"-o UserKnownHostsFile={entry['known_hosts']}", "-o StrictHostKeyChecking=yes",
        "-o GlobalKnownHostsFile=/dev/null", "-o IdentitiesOnly=yes",
    ])  # fmt: skip
    return {
        "ansible_connection": "ssh",
        "ansible_host": entry["address"],
        "ansible_port": int(entry["port"]),
        "ansible_user": entry["user"],
        "ansible_ssh_private_key_file": entry["key_file"],
        "ansible_ssh_common_args": common,
        "ansible_ssh_pipelining": True,
        **entry["vars"],
    }


def wait_for_phase(control_url: str, name: str, phase: str = "up", *, timeout: float = 60.0) -> dict[str, Any]:
    """Poll ``GET /lab/v1/hosts/{name}`` until the host is in ``phase``; returns its info.

    Raises FleetError on timeout (with the last phase seen).
    """
    import urllib.request

    deadline = time.monotonic() + timeout
    info: dict[str, Any] = {}
    while True:
        with urllib.request.urlopen(f"{control_url}/lab/v1/hosts/{name}", timeout=10) as r:
            info = json.loads(r.read())
        if info.get("phase") == phase:
            return info
        if time.monotonic() > deadline:
            raise FleetError(f"lab host {name} is {info.get('phase')!r}, not {phase!r}, after {timeout:.0f}s")
        time.sleep(0.1)
