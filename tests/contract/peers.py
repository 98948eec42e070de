"""Start the third-party and lab peers the contract suites run against.

Plain context managers (no pytest inside, except ``pytest.skip`` where a peer
cannot run here), shared by the session fixtures of ``conftest.py`` and the
older per-peer files. Everything binds to 127.0.0.0/8 or to namespaces made
here, and every process started here is stopped by its own pid.

- :func:`sushy_emulator`: sushy-tools' ``sushy-emulator`` with its fake driver.
- :func:`fakenos_switches`: fakenos serving its recorded EOS and NX-OS output.
- :func:`netns_switch`: a Linux switch (bridges per VLAN) in a network namespace,
  reached over SSH; needs root, ``ip netns``, sshd and sudo.

The lab twins (``fleetctl_lab.bmc``, ``fleetctl_lab.switch``) have their own
``run_*_in_thread`` context managers; ``conftest.py`` calls them directly.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

# sushy-tools systems of the contract suites: one read-only, one for power
# writes, one for boot writes (sushy applies power changes 1-11 s later, so a
# power round trip on one system must not race the reads of another).
SUSHY_SYSTEMS = {
    "contract-ro": ("22222222-0000-4000-8000-000000000001", "On"),
    "contract-power": ("22222222-0000-4000-8000-000000000002", "Off"),
    "contract-boot": ("22222222-0000-4000-8000-000000000003", "On"),
}

# One lab BMC per vendor flavour the lab serves.
LAB_FLAVOURS = ("generic", "hpe", "openbmc", "ami", "dell", "ilo6", "idrac9", "nvidia")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------
# sushy-tools
# --------------------------------------------------------------------------


def sushy_executable() -> str | None:
    beside = Path(sys.executable).with_name("sushy-emulator")
    return str(beside) if beside.exists() else shutil.which("sushy-emulator")


@contextmanager
def sushy_emulator(workdir: Path, systems: dict[str, tuple[str, str]], *, mac_prefix: str = "52:54:00:00:01") -> Iterator[str]:
    """sushy-emulator (fake driver, htpasswd with bcrypt, admin/secret) serving ``systems``.

    Args:
        workdir: a folder of its own (config, htpasswd, state, log).
        systems: name -> (uuid, initial power state 'On'/'Off').
        mac_prefix: the systems' NICs are ``<mac_prefix>:<index, 2 hex digits>``.

    Yields:
        The emulator's base URL. Skips (saying why) when sushy-tools or bcrypt
        is missing or the emulator does not come up.
    """
    exe = sushy_executable()
    if exe is None:
        pytest.skip("sushy-emulator not installed (pip install sushy-tools)")
    try:
        import bcrypt
    except ImportError:
        pytest.skip("bcrypt not installed (needed for sushy's htpasswd file)")
    d = Path(workdir)
    hashed = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()
    (d / "htpasswd").write_text(f"admin:{hashed}\n")
    port = free_port()
    fake = [
        {
            "uuid": uuid,
            "name": name,
            "power_state": power,
            "external_notifier": False,
            "nics": [{"mac": f"{mac_prefix}:{i:02x}", "ip": f"10.0.1.{i + 1}"}],
        }
        for i, (name, (uuid, power)) in enumerate(systems.items())
    ]
    (d / "conf.py").write_text(
        f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
        f"SUSHY_EMULATOR_LISTEN_PORT = {port}\n"
        f"SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(d / 'htpasswd')!r}\n"
        f"SUSHY_EMULATOR_STATE_DIR = {str(d / 'state')!r}\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = {fake!r}\n"
    )
    log = open(d / "sushy.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([exe, "--config", str(d / "conf.py")], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        up = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/redfish/v1/", timeout=1) as r:
                    up = r.status == 200
                    break
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        if not up:
            pytest.skip(f"sushy-emulator did not start: {(d / 'sushy.log').read_text()[-500:]}")
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the group we started (start_new_session), by its id
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


# --------------------------------------------------------------------------
# fakenos
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class FakenosHost:
    port: int
    platform: str  # fakenos's platform name (arista_eos, cisco_nxos)


@contextmanager
def fakenos_switches(hosts: dict[str, str], *, username: str = "admin", password: str = "fleet-pw") -> Iterator[dict[str, FakenosHost]]:
    """fakenos serving its YAML recordings (not its Python EOS model, whose
    generated `show version` no real EOS prints), one SSH port per host.

    Args:
        hosts: name -> fakenos platform (``arista_eos``, ``cisco_nxos``).
    """
    try:
        import fakenos
        from fakenos import FakeNOS
    except ImportError:
        pytest.skip("fakenos not installed (pip install fakenos)")
    platforms = Path(fakenos.__file__).parent / "plugins" / "nos" / "platforms_yaml"
    out = {name: FakenosHost(free_port(), platform) for name, platform in hosts.items()}
    inventory = {
        "default": {
            "username": username,
            "password": password,
            "server": {"plugin": "ParamikoSshServer", "configuration": {"address": "127.0.0.1", "timeout": 1}},
            "shell": {"plugin": "CMDShell", "configuration": {}},
        },
        "hosts": {name: {"port": h.port, "platform": h.platform} for name, h in out.items()},
    }
    try:
        net = FakeNOS(
            inventory=inventory,
            plugins=[str(platforms / f"{p}.yaml") for p in sorted(set(hosts.values()))],
        )
        net.start()
    except Exception as e:  # noqa: BLE001 - a fakenos release that moved its files or changed its inventory
        pytest.skip(f"fakenos could not start: {type(e).__name__}: {e}")
    try:
        yield out
    finally:
        net.stop()


# --------------------------------------------------------------------------
# A Linux switch in a network namespace
# --------------------------------------------------------------------------

NETNS_SUBNET = "192.168.77"


def netns_missing(*, need_ping: bool = True) -> str | None:
    """Why the namespace switch cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd, a throwaway user)"
    tools = ["ip", "useradd", "chpasswd", "userdel", "ssh-keygen"] + (["ping"] if need_ping else [])
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if not Path("/usr/sbin/sshd").exists():
        return "sshd not found (apt-get install openssh-server)"
    if shutil.which("sudo") is None:
        return "sudo not found (apt-get install sudo)"
    probe = f"fltprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return f"`ip netns add` refused: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=20, check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def nsx(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *args, check=check)


@dataclass
class NetnsSwitch:
    """The namespace switch: its namespaces, the SSH login, sshd's pid.

    Attributes:
        host, username, password: the login (sshd on the management veth).
    """

    sw: str
    hosts: dict[str, str]  # h1 -> namespace name
    host: str
    username: str
    password: str
    sshd_pid: int

    @property
    def target(self):  # type: ignore[no-untyped-def]
        """The switch as fleetctl's driver reaches it (name ``sw1``, platform ``linux``)."""
        from fleetctl.interfaces.switch import SwitchTarget

        return SwitchTarget(name="sw1", host=self.host, platform="linux", username=self.username, password=self.password, timeout=15)

    def ping(self, src: str, dst_ip: str) -> bool:
        return nsx(self.hosts[src], "ping", "-c", "1", "-W", "1", "-q", dst_ip, check=False).returncode == 0

    def master(self, port: str) -> str | None:
        parts = nsx(self.sw, "ip", "-o", "link", "show", "dev", port).stdout.split()
        return parts[parts.index("master") + 1] if "master" in parts else None

    def reset(self) -> None:
        for port, br in (("swp1", "br100"), ("swp2", "br100"), ("swp3", "br200")):
            nsx(self.sw, "ip", "link", "set", "dev", port, "master", br, "up")
            nsx(self.sw, "ip", "link", "set", "dev", port, "alias", "")

    def kill_sessions(self) -> None:
        """Kill every process under our sshd (the sessions and their shells): the session drops."""
        todo, seen = [str(self.sshd_pid)], []
        while todo:
            children = sh("pgrep", "-P", todo.pop(), check=False).stdout.split()
            todo += children
            seen += children
        for pid in seen:
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


@contextmanager
def netns_switch(tmp: Path, *, tag: str = "") -> Iterator[NetnsSwitch]:
    """Build the namespace switch; tear everything down on the way out.

    Topology (names carry this process's pid, and ``tag``, so runs never meet)::

        root ns  fm<id> 169.254.X.1/30 ==veth== mgmt0 169.254.X.2/30  (sshd)
                                       sw<id>: br100 {swp1, swp2}, br200 {swp3}
        h1<id> eth0 192.168.77.1/24 ==veth== swp1   (h2 -> swp2, h3 -> swp3)

    The login is a throwaway user that may run ``ip`` (and ``lldpctl``) through
    sudo. sshd is killed by its pid, namespaces, user and sudoers file deleted.
    """
    pid = os.getpid()
    uid = f"{tag}{pid}"
    tmp.chmod(0o755)
    sw = f"sw{uid}"
    hosts = {f"h{i}": f"h{i}n{uid}" for i in (1, 2, 3)}
    user = f"fltsw{uid}"[:31]
    password = f"Pw-{uid}-switch"
    sudoers = Path(f"/etc/sudoers.d/fleetctl-test-{uid}")
    mgmt_root = f"fm{uid}"[:15]
    seed = pid + (7919 if tag else 0)
    x, y = (seed >> 6) % 254 + 1, (seed % 64) * 4
    root_ip, sw_ip = f"169.254.{x}.{y + 1}", f"169.254.{x}.{y + 2}"
    sshd: subprocess.Popen[bytes] | None = None
    user_made = False
    try:
        for ns in (sw, *hosts.values()):
            sh("ip", "netns", "add", ns)
            nsx(ns, "ip", "link", "set", "lo", "up")
        for vlan in (100, 200):
            nsx(sw, "ip", "link", "add", f"br{vlan}", "type", "bridge")
            nsx(sw, "ip", "link", "set", f"br{vlan}", "up")
        for i, ns in enumerate(hosts.values(), start=1):
            sh("ip", "link", "add", f"swp{i}", "netns", sw, "type", "veth", "peer", "name", "eth0", "netns", ns)
            nsx(ns, "ip", "addr", "add", f"{NETNS_SUBNET}.{i}/24", "dev", "eth0")
            nsx(ns, "ip", "link", "set", "eth0", "up")
            nsx(sw, "ip", "link", "set", f"swp{i}", "master", "br100" if i < 3 else "br200", "up")
        sh("ip", "link", "add", mgmt_root, "type", "veth", "peer", "name", "mgmt0", "netns", sw)
        sh("ip", "addr", "add", f"{root_ip}/30", "dev", mgmt_root)
        sh("ip", "link", "set", mgmt_root, "up")
        nsx(sw, "ip", "addr", "add", f"{sw_ip}/30", "dev", "mgmt0")
        nsx(sw, "ip", "link", "set", "mgmt0", "up")

        home = tmp / "home"
        sh("useradd", "-M", "-d", str(home), "-s", "/bin/bash", user)
        user_made = True
        home.mkdir()
        shutil.chown(home, user)
        subprocess.run(["chpasswd"], input=f"{user}:{password}\n", text=True, check=True, capture_output=True)
        sudoers.write_text(f"{user} ALL=(root) NOPASSWD: /usr/sbin/ip, /usr/sbin/lldpctl\nDefaults:{user} !lecture\n")
        sudoers.chmod(0o440)

        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "hostkey"))
        cfg = tmp / "sshd_config"
        cfg.write_text(
            f"ListenAddress {sw_ip}\nPort 22\nHostKey {tmp / 'hostkey'}\nPidFile {tmp / 'sshd.pid'}\n"
            f"PasswordAuthentication yes\nKbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin no\n"
            f"AllowUsers {user}\nStrictModes no\nUseDNS no\nLogLevel ERROR\n"
        )
        sshd = subprocess.Popen(
            ["ip", "netns", "exec", sw, "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "sshd.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if nsx(sw, "ss", "-ltn", check=False).stdout.count(f"{sw_ip}:22"):
                break
            if sshd.poll() is not None:
                raise RuntimeError(f"sshd exited: {(tmp / 'sshd.log').read_text()}")
            time.sleep(0.05)
        # `ip netns exec` execs sshd: the Popen pid is sshd's own, whose children are the sessions.
        yield NetnsSwitch(sw=sw, hosts=hosts, host=sw_ip, username=user, password=password, sshd_pid=sshd.pid)
    finally:
        if sshd is not None:
            sshd.kill()
            sshd.wait(timeout=5)
        for ns in (sw, *hosts.values()):
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", mgmt_root, check=False)
        sudoers.unlink(missing_ok=True)
        if user_made:
            sh("userdel", user, check=False)
