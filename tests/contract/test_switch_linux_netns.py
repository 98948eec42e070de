"""The switch driver against a real Linux switch: namespaces, bridges, sshd, ping.

Topology (names suffixed with this process's pid so parallel runs never meet):

    root ns  fm<pid> 169.254.X.1/30 ==veth== mgmt0 169.254.X.2/30  (sshd listens here)
                                              sw<pid>: br100 {swp1, swp2}, br200 {swp3}
    h1<pid> eth0 192.168.77.1/24 ==veth== swp1
    h2<pid> eth0 192.168.77.2/24 ==veth== swp2
    h3<pid> eth0 192.168.77.3/24 ==veth== swp3

The driver logs in over SSH (netmiko ``linux``) as a throwaway user that may
run ``ip`` through sudo, moves h2's port from br100 to br200, and pings prove
it: h1<->h2 stops, h2<->h3 starts. Needs root, ``ip netns``, sshd and sudo;
skips and says which is missing otherwise. Everything is torn down in the
fixture's finally: sshd killed by its pid, namespaces, user and sudoers file
deleted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fleetctl_drivers.switch import NetmikoSwitch, SessionDropped
from fleetctl_drivers.switch.driver import _Ports

from fleetctl.interfaces.switch import PortConfig, PortMode, SwitchTarget

PID = os.getpid()
SUBNET = "192.168.77"


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd, a throwaway user)"
    for tool in ("ip", "ping", "useradd", "chpasswd", "userdel", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if not Path("/usr/sbin/sshd").exists():
        return "sshd not found (apt-get install openssh-server)"
    if shutil.which("sudo") is None:
        return "sudo not found (apt-get install sudo)"
    probe = subprocess.run(
        ["ip", "netns", "add", f"fltprobe{PID}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"`ip netns add` refused: {probe.stderr.strip()}"
    subprocess.run(
        ["ip", "netns", "del", f"fltprobe{PID}"], capture_output=True, check=False
    )
    return None


_WHY = _missing()
pytestmark = pytest.mark.skipif(
    _WHY is not None, reason=f"Linux switch in a namespace: {_WHY}"
)


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        list(args), capture_output=True, text=True, timeout=20, check=False
    )
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def nsx(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *args, check=check)


@dataclass
class Lab:
    sw: str
    hosts: dict[str, str]  # h1 -> namespace name
    target: SwitchTarget
    sshd_pid: int

    def ping(self, src: str, dst_ip: str) -> bool:
        return (
            nsx(
                self.hosts[src], "ping", "-c", "1", "-W", "1", "-q", dst_ip, check=False
            ).returncode
            == 0
        )

    def master(self, port: str) -> str | None:
        out = nsx(self.sw, "ip", "-o", "link", "show", "dev", port).stdout
        parts = out.split()
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
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("switchlab")
    tmp.chmod(0o755)
    sw = f"sw{PID}"
    hosts = {f"h{i}": f"h{i}n{PID}" for i in (1, 2, 3)}
    user = f"fltsw{PID}"
    password = f"Pw-{PID}-switch"
    sudoers = Path(f"/etc/sudoers.d/fleetctl-test-{PID}")
    mgmt_root = f"fm{PID}"
    x, y = (PID >> 6) % 254 + 1, (PID % 64) * 4
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
        for i, (h, ns) in enumerate(hosts.items(), start=1):
            sh(
                "ip",
                "link",
                "add",
                f"swp{i}",
                "netns",
                sw,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns,
            )
            nsx(ns, "ip", "addr", "add", f"{SUBNET}.{i}/24", "dev", "eth0")
            nsx(ns, "ip", "link", "set", "eth0", "up")
            nsx(
                sw,
                "ip",
                "link",
                "set",
                f"swp{i}",
                "master",
                "br100" if i < 3 else "br200",
                "up",
            )
        sh(
            "ip",
            "link",
            "add",
            mgmt_root,
            "type",
            "veth",
            "peer",
            "name",
            "mgmt0",
            "netns",
            sw,
        )
        sh("ip", "addr", "add", f"{root_ip}/30", "dev", mgmt_root)
        sh("ip", "link", "set", mgmt_root, "up")
        nsx(sw, "ip", "addr", "add", f"{sw_ip}/30", "dev", "mgmt0")
        nsx(sw, "ip", "link", "set", "mgmt0", "up")

        home = tmp / "home"
        sh("useradd", "-M", "-d", str(home), "-s", "/bin/bash", user)
        user_made = True
        home.mkdir()
        shutil.chown(home, user)
        subprocess.run(
            ["chpasswd"],
            input=f"{user}:{password}\n",
            text=True,
            check=True,
            capture_output=True,
        )
        sudoers.write_text(
            f"{user} ALL=(root) NOPASSWD: /usr/sbin/ip, /usr/sbin/lldpctl\nDefaults:{user} !lecture\n"
        )
        sudoers.chmod(0o440)

        Path("/run/sshd").mkdir(
            mode=0o755, exist_ok=True
        )  # sshd's privilege separation directory
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
        target = SwitchTarget(
            name="sw1",
            host=sw_ip,
            platform="linux",
            username=user,
            password=password,
            timeout=15,
        )
        # `ip netns exec` execs sshd: the Popen pid is sshd's own, whose children are the sessions.
        yield Lab(sw=sw, hosts=hosts, target=target, sshd_pid=sshd.pid)
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


@pytest.fixture
def switch(lab: Lab) -> Iterator[NetmikoSwitch]:
    lab.reset()
    sw = NetmikoSwitch(lab.target)
    try:
        yield sw.open()
    finally:
        sw.close()


def test_facts_and_interfaces(lab: Lab, switch: NetmikoSwitch) -> None:
    facts = switch.get_facts()
    assert facts.platform == "linux"
    assert facts.os_version and os.uname().release in facts.os_version
    assert facts.hostname == os.uname().nodename
    assert facts.uptime_s and facts.uptime_s > 0
    ports = {i.name: i for i in switch.get_interfaces()}
    assert sorted(ports) == ["swp1", "swp2", "swp3"]  # not lo, mgmt0 or the bridges
    assert (ports["swp2"].mode, ports["swp2"].access_vlan) == (PortMode.ACCESS, 100)
    assert ports["swp3"].access_vlan == 200
    assert (
        ports["swp1"].admin_up
        and ports["swp1"].oper_up
        and ports["swp1"].speed_mbps == 10000
    )
    assert switch.save_config().startswith("nothing saved")


def test_move_port_to_other_vlan_proven_by_ping(
    lab: Lab, switch: NetmikoSwitch
) -> None:
    assert lab.ping("h1", f"{SUBNET}.2") and not lab.ping("h2", f"{SUBNET}.3")

    plan = switch.apply_port_change(
        "swp2", PortConfig(access_vlan=200, description="srv02 eth0"), dry_run=True
    )
    assert plan.diff == {"access_vlan": [100, 200], "description": ["", "srv02 eth0"]}
    assert lab.master("swp2") == "br100"  # a dry run changes nothing

    change = switch.apply_port_change(
        "swp2", PortConfig(access_vlan=200, description="srv02 eth0")
    )
    assert change.applied and change.verified and not change.rolled_back, change.message
    assert (
        change.after is not None
        and change.after.access_vlan == 200
        and change.after.description == "srv02 eth0"
    )
    assert lab.master("swp2") == "br200"
    assert not lab.ping("h1", f"{SUBNET}.2")
    assert lab.ping("h2", f"{SUBNET}.3")
    # The same wish again is nothing to do.
    again = switch.apply_port_change("swp2", PortConfig(access_vlan=200))
    assert again.diff == {} and again.verified and not again.commands


def test_only_the_named_port_and_existing_vlans(
    lab: Lab, switch: NetmikoSwitch
) -> None:
    from fleetctl.errors import InputError, SwitchError

    with pytest.raises(InputError):
        switch.apply_port_change("br100", PortConfig(admin_up=False))
    with pytest.raises(InputError):
        switch.apply_port_change("mgmt0", PortConfig(admin_up=False))
    with pytest.raises(SwitchError, match="VLAN 300 does not exist"):
        switch.apply_port_change("swp2", PortConfig(access_vlan=300))
    with pytest.raises(SwitchError, match="protected"):
        switch.apply_port_change(
            "swp1", PortConfig(access_vlan=200), protected=["swp1"]
        )
    with pytest.raises(SwitchError, match="trunk ports are not supported"):
        switch.apply_port_change("swp2", PortConfig(trunk_vlans=[100, 200]))
    with pytest.raises(SwitchError, match="no port"):
        switch.get_port_config("swp9")
    assert [lab.master(p) for p in ("swp1", "swp2", "swp3")] == [
        "br100",
        "br100",
        "br200",
    ]


def test_failed_verification_puts_the_port_back(
    lab: Lab, switch: NetmikoSwitch, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_get = _Ports.get
    calls = {"n": 0}

    def flaky_get(self: _Ports, port: str) -> PortConfig:
        calls["n"] += 1
        got = real_get(self, port)
        if calls["n"] == 2:  # the read-back right after the change lies about the VLAN
            got.access_vlan = 100
        return got

    monkeypatch.setattr(_Ports, "get", flaky_get)
    change = switch.apply_port_change("swp2", PortConfig(access_vlan=200))
    assert change.applied and not change.verified and change.rolled_back, change.message
    assert "put back as it was" in change.message
    assert change.after is not None and change.after.access_vlan == 100
    assert lab.master("swp2") == "br100"
    assert lab.ping("h1", f"{SUBNET}.2") and not lab.ping("h2", f"{SUBNET}.3")


def test_session_dropped_mid_change_is_reported(
    lab: Lab, switch: NetmikoSwitch, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_run = NetmikoSwitch.run
    sent: list[str] = []

    def run_then_drop(self: NetmikoSwitch, command: str, *, check: bool = True) -> str:
        if "ip link set" in command and sent:
            lab.kill_sessions()  # the second configuration line meets a dead session
        out = real_run(self, command, check=check)
        if "ip link set" in command:
            sent.append(command)
        return out

    monkeypatch.setattr(NetmikoSwitch, "run", run_then_drop)
    change = switch.apply_port_change(
        "swp2", PortConfig(access_vlan=200, description="srv02 eth0")
    )
    assert change.session_dropped and not change.verified and not change.rolled_back, (
        change.message
    )
    assert (
        "session dropped mid-change" in change.message
        and "part-changed" in change.message
    )
    # Read back over a new session: the VLAN took, the description did not.
    assert (
        change.after is not None
        and change.after.access_vlan == 200
        and change.after.description == ""
    )
    assert lab.master("swp2") == "br200"


def test_lldp_without_lldpd_says_so(lab: Lab, switch: NetmikoSwitch) -> None:
    from fleetctl.errors import SwitchError

    # lldpctl is installed but no lldpd runs in the switch namespace.
    with pytest.raises(SwitchError):
        switch.get_lldp_neighbors()


def test_bad_password_is_an_auth_error(lab: Lab) -> None:
    from dataclasses import replace

    from fleetctl.errors import AuthError

    with pytest.raises(AuthError):
        NetmikoSwitch(replace(lab.target, password="wrong", timeout=5)).open()


def test_dead_session_is_detected(lab: Lab, switch: NetmikoSwitch) -> None:
    lab.kill_sessions()
    time.sleep(0.2)
    with pytest.raises(SessionDropped):
        switch.get_port_config("swp2")


SITE = """\
models:
- {{name: lnx-srv, kind: server, vendor: Test, model: Linux host}}
- {{name: lnx-sw, kind: switch, vendor: Test, model: Linux bridge switch, ports: ['swp[1-3]', mgmt0]}}
sites:
- name: nslab
  racks:
  - name: rack-ns
    switches:
    - {{name: sw-ns, model: lnx-sw, platform: linux, role: leaf, address: {address}, position: 40, credential: env:NSSW}}
    servers:
    - {{name: srv-ns-1, serial: NS1, model: lnx-srv, position: 1, nics: [{{name: eth0}}]}}
    - {{name: srv-ns-2, serial: NS2, model: lnx-srv, position: 2, nics: [{{name: eth0}}]}}
    - {{name: srv-ns-3, serial: NS3, model: lnx-srv, position: 3, nics: [{{name: eth0}}]}}
  cabling:
  - {{switch: sw-ns, port: swp1, server: srv-ns-1, nic: eth0, vlans: [100]}}
  - {{switch: sw-ns, port: swp2, server: srv-ns-2, nic: eth0, vlans: [{vlan2}]}}
  - {{switch: sw-ns, port: swp3, server: srv-ns-3, nic: eth0, vlans: [200]}}
"""


def test_cli_end_to_end_against_the_namespace_switch(lab: Lab, tmp_path: Path) -> None:
    """The real `fleetctl` against the real Linux switch: the inventory's plan moves a port, pings prove it.

    The plan cables srv-ns-2 on VLAN 200 while its port sits on 100:
    apply-plan --dry-run shows that and changes nothing; apply-plan moves it
    (h2 now reaches h3, not h1); a second run has nothing to do; `vlan set`
    puts it back by hand; the switch's password appears in no output.
    """
    import json
    import sys

    lab.reset()
    fleetctl = str(Path(sys.executable).with_name("fleetctl"))
    env = {
        **os.environ,
        "FLEETCTL_DB": str(tmp_path / "inv.db"),
        "FLEETCTL_DATA_DIR": str(tmp_path / "data"),
        "FLEETCTL_LAB_DIR": str(tmp_path / "no-lab"),  # no lab: the inventory's address is used
        "NSSW_USERNAME": lab.target.username,
        "NSSW_PASSWORD": lab.target.secret(),
    }
    password = lab.target.secret()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([fleetctl, *args], env=env, capture_output=True, text=True, timeout=120, check=False)
        assert password not in r.stdout + r.stderr
        return r

    site = tmp_path / "site.yaml"
    site.write_text(SITE.format(address=lab.target.host, vlan2=200))
    r = run("inventory", "import", str(site))
    assert r.returncode == 0, r.stderr

    r = run("switch", "facts", "sw-ns", "-o", "json")
    assert r.returncode == 0, r.stderr
    [facts] = json.loads(r.stdout)
    assert facts["platform"] == "linux" and os.uname().release in facts["os_version"]

    r = run("switch", "apply-plan", "rack-ns", "--dry-run", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {x["port"]: x for x in json.loads(r.stdout)}
    assert rows["swp2"]["result"] == "would change", rows
    assert lab.master("swp2") == "br100"  # the dry run changed nothing

    r = run("switch", "apply-plan", "rack-ns", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {x["port"]: x for x in json.loads(r.stdout)}
    assert rows["swp2"]["result"] == "changed", rows
    assert [lab.master(p) for p in ("swp1", "swp2", "swp3")] == ["br100", "br200", "br200"]
    assert not lab.ping("h1", f"{SUBNET}.2") and lab.ping("h2", f"{SUBNET}.3")

    r = run("switch", "apply-plan", "rack-ns", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(x["result"] != "changed" for x in json.loads(r.stdout)), r.stdout

    r = run("switch", "vlan", "set", "sw-ns", "swp2", "--access", "100", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert lab.master("swp2") == "br100"
    assert lab.ping("h1", f"{SUBNET}.2") and not lab.ping("h2", f"{SUBNET}.3")

    r = run("switch", "vlan", "set", "sw-ns", "swp2", "--access", "300")
    assert r.returncode != 0 and "300" in (r.stdout + r.stderr)
    assert lab.master("swp2") == "br100"
