"""The switch driver against a real Linux switch: namespaces, bridges, sshd, ping.

The switch is ``peers.netns_switch`` (built once per session by conftest's
``netns_peer`` and shared with the switch contract): bridges br100 {swp1,
swp2} and br200 {swp3} in a namespace, hosts h1-h3 in namespaces of their own
behind swp1-swp3 (192.168.77.1-3), sshd on a management veth.

The driver logs in over SSH (netmiko ``linux``) as a throwaway user that may
run ``ip`` through sudo, moves h2's port from br100 to br200, and pings prove
it: h1<->h2 stops, h2<->h3 starts. What every switch must do (facts, ports,
VLANs, a change read back) is in test_switch_contract.py; here what needs the
pings, a failed verification, a dropped session and the CLI. Needs root,
``ip netns``, sshd, sudo and ping; skips and says which is missing otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetctl_drivers.switch import NetmikoSwitch, SessionDropped
from fleetctl_drivers.switch.driver import _Ports
from peers import NETNS_SUBNET as SUBNET
from peers import NetnsSwitch, netns_missing

from fleetctl.interfaces.switch import PortConfig

_WHY = netns_missing()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=f"Linux switch in a namespace: {_WHY}")

Lab = NetnsSwitch  # the namespace switch, built once per session (conftest ``netns_peer``)


@pytest.fixture(scope="module")
def lab(netns_peer: NetnsSwitch) -> NetnsSwitch:
    return netns_peer


@pytest.fixture
def switch(lab: Lab) -> Iterator[NetmikoSwitch]:
    lab.reset()
    sw = NetmikoSwitch(lab.target)
    try:
        yield sw.open()
    finally:
        sw.close()


def test_uptime_and_nothing_to_save(lab: Lab, switch: NetmikoSwitch) -> None:
    # Facts, ports, VLANs and a port change read back: the switch contract
    # (test_switch_contract.py, peer linux-netns). Here what only Linux says.
    facts = switch.get_facts()
    assert facts.uptime_s and facts.uptime_s > 0
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
