"""The lab's SONiC CLI (bash + sonic-utilities), driven by netmiko's edgecore_sonic (LinuxSSH) driver."""

from __future__ import annotations

import re
from typing import Any

import pytest
from swlab_helpers import IF_ADMIN, IF_ALIAS, IF_OPER, connect, snmp_get

SONIC = "lab-sonic-1"


def _status(c: Any) -> dict[str, dict[str, str]]:
    lines = c.send_command("show interfaces status").splitlines()
    head = lines[0].split()
    rows = {}
    for ln in lines[2:]:
        cells = ln.split()
        # "Type" may hold spaces ("QSFP28 or later"): take the fixed columns from both ends.
        rows[cells[0]] = dict(zip(head[:9], cells[:9], strict=False)) | {"Asym PFC": cells[-1]}
    return rows


def test_login_and_show(swlab: Any) -> None:
    c = connect(swlab, SONIC)
    try:
        assert c.find_prompt() == f"admin@{SONIC}:~$"
        ver = c.send_command("show version")
        assert "SONiC Software Version: SONiC.202311.1" in ver and "HwSKU: Mellanox-SN2700" in ver
        st = _status(c)
        assert st["Ethernet0"]["Vlan"] == "access" and st["Ethernet0"]["Oper"] == "up"
        assert st["Ethernet16"]["Oper"] == "down" and st["Ethernet16"]["Vlan"] == "routed"
        assert st["Ethernet120"]["Vlan"] == "trunk"
        lldp = c.send_command("show lldp table")
        assert "Ethernet0    srv-01" in lldp and "Total entries displayed:  5" in lldp
    finally:
        c.disconnect()


def test_vlan_membership_change_persists_and_shows(swlab: Any) -> None:
    c = connect(swlab, SONIC)
    try:
        out = c.send_config_set(["config vlan add 300", "config vlan member add -u 300 Ethernet4",
                                 "config interface description Ethernet4 'gpu-02 eth1'", "config save -y"])  # fmt: skip
        assert "Error" not in out and "Running command: /usr/local/bin/sonic-cfggen" in out
        assert c.find_prompt() == f"admin@{SONIC}:~$"  # send_config_set left the root shell
    finally:
        c.disconnect()
    c = connect(swlab, SONIC)
    try:
        brief = c.send_command("show vlan brief")
        assert re.search(r"^\|\s+300 \|", brief, re.MULTILINE)
        row = next(ln for ln in brief.splitlines() if "Ethernet4 " in ln)
        assert "untagged" in row
        cfg = c.send_command("show vlan config")
        assert any(ln.split() == ["Vlan300", "300", "Ethernet4", "untagged"] for ln in cfg.splitlines())
        assert _status(c)["Ethernet4"]["Vlan"] == "access"
        desc = c.send_command("show interfaces description")
        assert "gpu-02 eth1" in next(ln for ln in desc.splitlines() if ln.split()[0] == "Ethernet4")
        assert snmp_get(swlab, SONIC, f"{IF_ALIAS}.2")[f"{IF_ALIAS}.2"] == "gpu-02 eth1"
        # Tagged membership makes it a trunk; removing both puts it back.
        c.send_command("sudo config vlan member add 100 Ethernet4")
        assert _status(c)["Ethernet4"]["Vlan"] == "trunk"
        c.send_command("sudo config vlan member del 100 Ethernet4")
        c.send_command("sudo config vlan member del 300 Ethernet4")
        assert _status(c)["Ethernet4"]["Vlan"] == "routed"
        c.send_command("sudo config vlan del 300")
        assert "300" not in c.send_command("show vlan config")
        c.send_command("sudo config interface description Ethernet4 ''")
        c.send_command("sudo config save -y")  # leave the saved configuration as the lab started
    finally:
        c.disconnect()


def test_shutdown_and_startup_show_in_cli_and_snmp(swlab: Any) -> None:
    c = connect(swlab, SONIC)
    try:
        c.send_command("sudo config interface shutdown Ethernet8")
        st = _status(c)["Ethernet8"]
        assert (st["Oper"], st["Admin"]) == ("down", "down")
        v = snmp_get(swlab, SONIC, f"{IF_ADMIN}.3", f"{IF_OPER}.3")
        assert (v[f"{IF_ADMIN}.3"], v[f"{IF_OPER}.3"]) == (2, 2)
        c.send_command("sudo config interface startup Ethernet8")
        st = _status(c)["Ethernet8"]
        assert (st["Oper"], st["Admin"]) == ("up", "up")
        v = snmp_get(swlab, SONIC, f"{IF_ADMIN}.3", f"{IF_OPER}.3")
        assert (v[f"{IF_ADMIN}.3"], v[f"{IF_OPER}.3"]) == (1, 1)
    finally:
        c.disconnect()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("show foo", 'Usage: show [OPTIONS] COMMAND [ARGS]...\nTry "show -h" for help.\n\nError: No such command "foo".'),
        ("show interfaces frob", 'Error: No such command "frob".'),
        ("config vlan add 400", "Root privileges are required for this operation"),
        ("frobnicate", "-bash: frobnicate: command not found"),
        ("sudo config vlan member add 999 Ethernet4", "Error: Vlan999 does not exist"),
        ("sudo config vlan member add 100 Ethernet0", "Error: Ethernet0 is already a member of Vlan100"),
        ("sudo config interface shutdown Ethernet999", "Error: Interface name is invalid. Please enter a valid interface name!!"),
    ],
)
def test_bad_commands_get_click_and_bash_errors(swlab: Any, command: str, expected: str) -> None:
    c = connect(swlab, SONIC)
    try:
        assert expected in c.send_command(command)
    finally:
        c.disconnect()
