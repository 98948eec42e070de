"""The lab's Arista EOS CLI, driven by netmiko's own arista_eos driver."""

from __future__ import annotations

from typing import Any

import pytest
from swlab_helpers import connect

EOS = "lab-eos-1"


def test_login_show_version_parses_with_ntc_templates(swlab: Any) -> None:
    c = connect(swlab, EOS)
    try:
        assert c.find_prompt() == f"{EOS}>"
        c.enable()
        assert c.find_prompt() == f"{EOS}#"
        facts = c.send_command("show version", use_textfsm=True)
        assert facts[0]["model"] == "DCS-7050SX3-48YC8"
        assert facts[0]["image"] == "4.30.2F"
        assert facts[0]["serial_number"].startswith("LAB")
        ports = {r["port"]: r for r in c.send_command("show interfaces status", use_textfsm=True)}
        assert ports["Et1"]["status"] == "connected" and ports["Et1"]["vlan_id"] == "100"
        assert ports["Et5"]["status"] == "notconnect"  # nothing cabled
        assert ports["Et49/1"]["vlan_id"] == "trunk" and ports["Et49/1"]["speed"] == "100G"
    finally:
        c.disconnect()


def test_vlan_change_persists_shows_and_survives_a_reboot_only_when_saved(swlab: Any) -> None:
    c = connect(swlab, EOS)
    try:
        c.enable()
        out = c.send_config_set(["interface Ethernet2", "switchport access vlan 300", "description db-02"])
        assert "Creating vlan 300" in out  # EOS creates a missing access VLAN and says so
        sp = c.send_command("show interfaces Ethernet2 switchport")
        assert "Access Mode VLAN: 300 (VLAN0300)" in sp and "Operational Mode: static access" in sp
        assert c.send_command("show running-config interfaces Ethernet2").splitlines() == [
            "interface Ethernet2", "   description db-02", "   switchport access vlan 300"]  # fmt: skip
    finally:
        c.disconnect()
    # A new session sees it.
    c = connect(swlab, EOS)
    try:
        c.enable()
        vlans = {v["vlan_id"]: v for v in c.send_command("show vlan", use_textfsm=True)}
        assert vlans["300"]["interfaces"] == ["Et2"]
        assert "Et2" not in vlans["1"]["interfaces"]
        # Unsaved: a reboot loses it.
        swlab.switch_fault(EOS, None, "reboot")
    finally:
        c.disconnect()
    c = connect(swlab, EOS)
    try:
        c.enable()
        assert "Access Mode VLAN: 1 " in c.send_command("show interfaces Ethernet2 switchport")
        c.send_config_set(["interface Ethernet2", "switchport access vlan 300"])
        assert "Copy completed successfully." in c.save_config()
        swlab.switch_fault(EOS, None, "reboot")
    finally:
        c.disconnect()
    c = connect(swlab, EOS)
    try:
        c.enable()
        assert "Access Mode VLAN: 300 " in c.send_command("show interfaces Ethernet2 switchport")
        assert "switchport access vlan 300" in c.send_command("show startup-config")
        c.send_config_set(["interface Ethernet2", "no switchport access vlan", "no description"])
        c.send_command("write memory")
    finally:
        c.disconnect()


def test_trunk_allowed_vlans(swlab: Any) -> None:
    c = connect(swlab, EOS)
    try:
        c.enable()
        c.send_config_set(["interface Ethernet4", "switchport mode trunk", "switchport trunk allowed vlan 10,100",
                           "switchport trunk allowed vlan add 200-202", "switchport trunk allowed vlan remove 201"])  # fmt: skip
        sp = c.send_command("show interfaces Ethernet4 switchport")
        assert "Operational Mode: trunk" in sp and "Trunking VLANs Enabled: 10,100,200,202" in sp
        st = {r["port"]: r for r in c.send_command("show interfaces status", use_textfsm=True)}
        assert st["Et4"]["vlan_id"] == "trunk"
        c.send_config_set(["interface Ethernet4", "no switchport trunk allowed vlan", "switchport mode access"])
        assert "Operational Mode: static access" in c.send_command("show interfaces Ethernet4 switchport")
    finally:
        c.disconnect()


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("show foo", "% Invalid input"),
        ("show", "% Incomplete command"),
        ("sh int s", "% Ambiguous command"),
        ("show interfaces Ethernet99 switchport", "% Invalid input"),
        ("show interfaces Et1 frobnicate", "% Invalid input"),
    ],
)
def test_bad_commands_get_eos_errors(swlab: Any, command: str, error: str) -> None:
    c = connect(swlab, EOS)
    try:
        c.enable()
        assert c.send_command(command).strip() == error
    finally:
        c.disconnect()


def test_privileged_commands_need_enable_and_abbreviations_work(swlab: Any) -> None:
    c = connect(swlab, EOS)
    try:
        assert c.send_command("configure terminal", expect_string=r"[>#]").strip() == "% Invalid input (privileged mode required)"
        assert "Hostname: lab-eos-1" in c.send_command("sh hostn")
        c.enable()
        out = c.send_config_set(["int et5", "desc spare port", "shut"])
        assert "%" not in out
        st = {r["port"]: r for r in c.send_command("sh int status", use_textfsm=True)}
        assert st["Et5"]["status"] == "disabled" and st["Et5"]["name"] == "spare port"
        c.send_config_set(["interface Ethernet5", "no shutdown", "no description"])
        st = {r["port"]: r for r in c.send_command("show interfaces status", use_textfsm=True)}
        assert st["Et5"]["status"] == "notconnect"
        assert "Et1" in c.send_command("show interfaces status | include Et1")
        assert "Et2" not in c.send_command("show interfaces status | include Et1")
    finally:
        c.disconnect()


def test_wrong_password_is_refused(swlab: Any) -> None:
    from netmiko.exceptions import NetmikoAuthenticationException

    before = swlab.counters(EOS)["auth_failures"]
    with pytest.raises(NetmikoAuthenticationException):
        connect(swlab, EOS, password="nope")
    assert swlab.counters(EOS)["auth_failures"] > before


def test_every_show_command_parses_with_its_ntc_template(swlab: Any) -> None:
    """The lab's EOS output goes through the same TextFSM templates as a real switch's."""
    c = connect(swlab, EOS)
    try:
        c.enable()
        for command, key in [("show version", "model"), ("show interfaces", "interface"), ("show interfaces status", "port"),
                             ("show interfaces description", "port"), ("show vlan", "vlan_id"),
                             ("show lldp neighbors", "neighbor_name"), ("show lldp neighbors detail", "neighbor_name"),
                             ("show inventory", "pid"), ("show hostname", "hostname")]:  # fmt: skip
            parsed = c.send_command(command, use_textfsm=True)
            assert isinstance(parsed, list) and parsed and all(key in r for r in parsed), (command, parsed)
    finally:
        c.disconnect()
