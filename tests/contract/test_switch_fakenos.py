"""The switch driver through netmiko against fakenos (canned real `show` output over SSH).

fakenos serves what real Arista EOS and Cisco NX-OS switches printed; the
driver logs in with netmiko's real device types (``arista_eos``,
``cisco_nxos``) and parses through the platform files. fakenos keeps no
state and takes no configuration, so only reading is tested here. We load
fakenos's YAML platforms (its recorded outputs) rather than its Python EOS
model, whose generated `show version` no real EOS prints.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetctl_drivers.switch import NetmikoSwitch, load_platform, run_many

from fleetctl.errors import AuthError, SwitchError
from fleetctl.interfaces.switch import PortMode, SwitchTarget

fakenos = pytest.importorskip(
    "fakenos", reason="fakenos not installed (pip install fakenos)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def fake() -> Iterator[dict[str, SwitchTarget]]:
    from fakenos import FakeNOS

    platforms = Path(fakenos.__file__).parent / "plugins" / "nos" / "platforms_yaml"
    ports = {"eos1": _free_port(), "nx1": _free_port()}
    inventory = {
        "default": {
            "username": "admin",
            "password": "fleet-pw",
            "server": {
                "plugin": "ParamikoSshServer",
                "configuration": {"address": "127.0.0.1", "timeout": 1},
            },
            "shell": {"plugin": "CMDShell", "configuration": {}},
        },
        "hosts": {
            "eos1": {"port": ports["eos1"], "platform": "arista_eos"},
            "nx1": {"port": ports["nx1"], "platform": "cisco_nxos"},
        },
    }
    try:
        net = FakeNOS(
            inventory=inventory,
            plugins=[
                str(platforms / "arista_eos.yaml"),
                str(platforms / "cisco_nxos.yaml"),
            ],
        )
        net.start()
    except Exception as e:  # noqa: BLE001 - a fakenos release that moved its files or changed its inventory
        pytest.skip(f"fakenos could not start: {type(e).__name__}: {e}")
    try:
        yield {
            "eos1": SwitchTarget(
                "eos1",
                "127.0.0.1",
                ports["eos1"],
                "eos",
                "admin",
                "fleet-pw",
                timeout=10,
            ),
            "nx1": SwitchTarget(
                "nx1",
                "127.0.0.1",
                ports["nx1"],
                "nxos",
                "admin",
                "fleet-pw",
                timeout=10,
            ),
        }
    finally:
        net.stop()


def _nxos() -> object:
    # NOTE(fakenos 1.2): its NX-OS recording answers `show interfaces switchport`
    # (the plural, which NX-OS also takes), not `show interface switchport`.
    return load_platform("nxos").with_commands(switchport="show interfaces switchport")


def test_eos_facts_and_lldp(fake: dict[str, SwitchTarget]) -> None:
    with NetmikoSwitch(fake["eos1"]) as sw:
        facts = sw.get_facts()
        assert (facts.platform, facts.os_version, facts.model) == (
            "eos",
            "4.14.7M",
            "vEOS",
        )
        assert facts.hostname == "spine1"
        assert facts.uptime_s == 3900  # "1 hour and 5 minutes"
        assert (
            facts.serial == "JPE13120702"
        )  # vEOS prints none: read from `show inventory`
        neighbors = sw.get_lldp_neighbors()
        assert len(neighbors) == 20
        first = neighbors[0]
        assert (first.local_port, first.remote_system, first.remote_port, first.remote_chassis_id) == (
            "Ethernet1", "spine2.company.com", "Ethernet1", "2cc2.6081.eaf9",
        )  # fmt: skip


def test_eos_unparseable_output_is_a_switch_error(
    fake: dict[str, SwitchTarget],
) -> None:
    # fakenos's EOS `show interfaces status` has its columns squeezed to one
    # space: the template cannot follow it, and that must be an error that
    # says so, never a crash or a silently empty list.
    with (
        NetmikoSwitch(fake["eos1"]) as sw,
        pytest.raises(SwitchError, match="could not parse 'show interfaces status'"),
    ):
        sw.get_interfaces()


def test_nxos_facts_interfaces_lldp(fake: dict[str, SwitchTarget]) -> None:
    with NetmikoSwitch(fake["nx1"], platform=_nxos()) as sw:  # type: ignore[arg-type]
        facts = sw.get_facts()
        assert (facts.os_version, facts.serial, facts.model, facts.hostname) == (
            "7.1(4)N1(1)", "FOC17153X08", "5596", "IEDP02-N5K-SW01",
        )  # fmt: skip
        assert facts.uptime_s == 749 * 86400 + 15 * 3600 + 17 * 60 + 48
        ports = {i.name: i for i in sw.get_interfaces()}
        assert "mgmt0" not in ports and len(ports) == 54
        e11 = ports["Ethernet1/1"]  # status: connected, 1000; switchport: access VLAN 3
        assert (
            e11.admin_up,
            e11.oper_up,
            e11.speed_mbps,
            e11.mode,
            e11.access_vlan,
        ) == (True, True, 1000, PortMode.ACCESS, 3)
        e12 = ports["Ethernet1/2"]  # xcvrAbsen; trunk, all VLANs allowed
        assert (e12.admin_up, e12.oper_up, e12.mode) == (True, False, PortMode.TRUNK)
        assert e12.trunk_vlans[0] == 1 and e12.trunk_vlans[-1] == 4094
        neighbors = {n.local_port: n for n in sw.get_lldp_neighbors()}
        assert neighbors["Ethernet1/1"].remote_system == "n9k2.company.com"
        assert neighbors["Ethernet1/1"].remote_chassis_id == "5087.89a1.d8d6"
        assert neighbors["mgmt0"].remote_port == "Fa1/0/9"


# fakenos's server thread trips over the refused login after netmiko hangs up.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_sweep_with_one_bad_password(fake: dict[str, SwitchTarget]) -> None:
    from dataclasses import replace

    targets = [
        fake["eos1"],
        replace(fake["eos1"], name="eos-bad", password="wrong", timeout=5),
    ]
    results = run_many(targets, lambda sw: sw.get_facts().os_version, concurrency=2)
    assert results[0].ok and results[0].value == "4.14.7M"
    assert not results[1].ok and results[1].error_type == AuthError.__name__
