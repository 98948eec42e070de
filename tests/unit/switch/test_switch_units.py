"""Pure parts of the switch driver: value tables, parsers of our own, command plans."""

from __future__ import annotations

import json

import pytest
from fleetctl_drivers.switch import (
    NetmikoSwitch,
    load_platform,
    parse,
    platform_names,
    run_many,
)
from fleetctl_drivers.switch.driver import fill

from fleetctl.errors import InputError, SwitchError
from fleetctl.interfaces.switch import (
    PortConfig,
    PortMode,
    SwitchTarget,
    config_diff,
    map_mode,
    map_status,
    parse_vlan_list,
    vlan_list_str,
)


def test_unknown_vendor_words_map_to_unknown() -> None:
    assert map_mode("static access") == PortMode.ACCESS
    assert map_mode("dot1q-tunnel") == PortMode.UNKNOWN
    assert map_mode(None) == PortMode.UNKNOWN
    assert map_status("connected") == (True, True)
    assert map_status("disabled") == (False, False)
    assert map_status("weird-new-state") == (None, None)


def test_vlan_lists_round_trip() -> None:
    assert parse_vlan_list("1,10-12, 20") == [1, 10, 11, 12, 20]
    assert parse_vlan_list("ALL")[-1] == 4094
    assert parse_vlan_list("none") == []
    assert vlan_list_str([20, 1, 10, 11, 12]) == "1,10-12,20"
    with pytest.raises(ValueError):
        parse_vlan_list("1,x")


@pytest.mark.parametrize(
    ("text", "mbps"),
    [
        ("a-40G", 40000),
        ("1000", 1000),
        ("a-100M", 100),
        ("10G", 10000),
        ("auto", None),
        ("unconf", None),
        ("", None),
    ],
)
def test_speed(text: str, mbps: int | None) -> None:
    assert parse.speed_mbps(text) == mbps


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1 hour and 5 minutes", 3900),
        ("2 days, 15 hours and 56 minutes", 2 * 86400 + 15 * 3600 + 56 * 60),
        (
            "123 day(s), 5 hour(s), 15 minute(s), 19 second(s)",
            123 * 86400 + 5 * 3600 + 15 * 60 + 19,
        ),
        ("8123.45 16000.1", 8123),
        ("10:33:08 up 12 min,  0 users,  load average: 0.35", None),
        (
            "10:33:08 up 3 days,  4:05,  1 user,  load average: 0.1",
            3 * 86400 + 4 * 3600 + 5 * 60,
        ),
        ("soon", None),
    ],
)
def test_uptime(text: str, seconds: int | None) -> None:
    got = parse.uptime_seconds(text)
    if text.startswith("10:33:08 up 12"):
        assert got == 12 * 60
    else:
        assert got == seconds


def test_linux_links_and_facts() -> None:
    links = [
        {"ifname": "lo", "flags": ["LOOPBACK", "UP"], "operstate": "UNKNOWN"},
        {"ifname": "br100", "flags": ["UP", "LOWER_UP"], "operstate": "UP", "linkinfo": {"info_kind": "bridge"}},
        {"ifname": "swp1", "flags": ["BROADCAST", "UP", "LOWER_UP"], "operstate": "UP", "master": "br100",
         "ifalias": "srv01 eth0", "linkinfo": {"info_kind": "veth", "info_slave_kind": "bridge"}},
        {"ifname": "swp2", "flags": ["BROADCAST"], "operstate": "DOWN"},
    ]  # fmt: skip
    text = json.dumps(links) + "\n\n@@speed\nswp1 10000\nswp2\nlo\n"
    recs = {r["name"]: r for r in parse.linux_links(text)}
    assert (
        recs["swp1"]["master"] == "br100"
        and recs["swp1"]["description"] == "srv01 eth0"
    )
    assert recs["swp1"]["speed"] == "10000" and recs["swp2"]["speed"] is None
    assert recs["swp2"]["admin_up"] is False and recs["swp2"]["oper_up"] is False
    facts = parse.linux_facts(
        '@@kernel\n6.1.0\n@@os\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n@@host\nsw1\n'
        "@@uptime\n100.5 10.0\n@@serial\n\n@@model\n\n@@end\n"
    )[0]
    f = parse.to_facts("linux", [facts])
    assert (f.os_version, f.hostname, f.uptime_s, f.serial) == (
        "Debian GNU/Linux 12 (bookworm) 6.1.0",
        "sw1",
        100,
        None,
    )


def test_lldpctl_keyvalue() -> None:
    text = (
        "lldp.swp1.via=LLDP\nlldp.swp1.chassis.mac=52:54:00:aa:bb:cc\nlldp.swp1.chassis.name=srv01\n"
        "lldp.swp1.port.mac=52:54:00:aa:bb:cd\nlldp.swp1.port.ifname=eth0\nlldp.swp2.chassis.name=srv02\n"
    )
    ns = [parse.to_neighbor(r) for r in parse.lldpctl_keyvalue(text)]
    assert (ns[0].local_port, ns[0].remote_system, ns[0].remote_port, ns[0].remote_chassis_id) == (
        "swp1", "srv01", "eth0", "52:54:00:aa:bb:cc",
    )  # fmt: skip
    assert ns[1].remote_system == "srv02" and ns[1].remote_port is None


def test_fill_leaves_shell_braces() -> None:
    assert fill("echo ${f##*/} {port}", port="swp1") == "echo ${f##*/} swp1"


def test_every_platform_loads() -> None:
    assert platform_names() == ["eos", "linux", "nxos", "sonic"]
    for name in platform_names():
        p = load_platform(name)
        assert {"version", "interfaces"} <= set(p.show)


def test_diff_only_counts_fields_of_the_mode() -> None:
    before = PortConfig(
        admin_up=True,
        mode=PortMode.TRUNK,
        access_vlan=None,
        trunk_vlans=[10, 20],
        description="",
    )
    assert config_diff(before, PortConfig(trunk_vlans="10,20")) == {}
    assert config_diff(before, PortConfig(mode=PortMode.ACCESS, access_vlan=10)) == {
        "mode": ["trunk", "access"],
        "access_vlan": [None, 10],
    }


class _Fake:
    """A netmiko connection stand-in that answers from a dict and records config lines."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.sent = answers, []

    def send_command(self, command: str, **_: object) -> str:
        return self.answers[command]

    def send_config_set(self, lines: list[str], **_: object) -> str:
        self.sent.append(lines)
        return "\n".join(lines)

    def enable(self) -> str:
        return ""

    def disconnect(self) -> None:
        pass


def _eos(answers: dict[str, str]) -> tuple[NetmikoSwitch, _Fake]:
    fake = _Fake(answers)
    sw = NetmikoSwitch(
        SwitchTarget("leaf1", "192.0.2.1", platform="eos"), connect=lambda **_: fake
    )
    return sw, fake


EOS_STATUS = (
    "Port       Name   Status       Vlan     Duplex Speed  Type\n"
    "Et4        srv04  connected    100      full   10G    10GBASE-SR\n"
)
EOS_SWITCHPORT = (
    "Name: Et4\nSwitchport: Enabled\nAdministrative Mode: static access\nOperational Mode: static access\n"
    "Access Mode VLAN: 100 (VLAN0100)\nTrunking Native Mode VLAN: 1 (default)\nTrunking VLANs Enabled: ALL\n"
)
EOS_VLANS = (
    "VLAN  Name                             Status    Ports\n"
    "----- -------------------------------- --------- -------------------------------\n"
    "1     default                          active    \n"
    "100   VLAN0100                         active    Et4\n"
    "200   VLAN0200                         active    \n"
)


def test_eos_plan_names_only_the_port() -> None:
    sw, fake = _eos(
        {
            "show interfaces Ethernet4 status": EOS_STATUS,
            "show interfaces Ethernet4 switchport": EOS_SWITCHPORT,
            "show vlan": EOS_VLANS,
        }
    )
    change = sw.plan_port_change(
        "Et4", PortConfig(access_vlan=200, description="srv04 eth0")
    )
    assert change.port == "Ethernet4" and change.dry_run and not change.applied
    assert change.before.access_vlan == 100 and change.before.admin_up is True
    assert change.diff == {
        "access_vlan": [100, 200],
        "description": ["srv04", "srv04 eth0"],
    }
    assert change.commands == [
        "interface Ethernet4",
        "switchport mode access",
        "switchport access vlan 200",
        "description srv04 eth0",
    ]
    assert fake.sent == []  # a dry run sends nothing


def test_refusals() -> None:
    sw, fake = _eos(
        {
            "show interfaces Ethernet4 status": EOS_STATUS,
            "show interfaces Ethernet4 switchport": EOS_SWITCHPORT,
            "show vlan": EOS_VLANS,
        }
    )
    with pytest.raises(InputError):
        sw.apply_port_change("Vlan100", PortConfig(admin_up=False))
    with pytest.raises(SwitchError, match="protected"):
        sw.apply_port_change("Et4", PortConfig(admin_up=False), protected=["Ethernet4"])
    with pytest.raises(SwitchError, match="VLAN 300 does not exist"):
        sw.apply_port_change("Et4", PortConfig(access_vlan=300))
    with pytest.raises(InputError, match="description"):
        sw.apply_port_change("Et4", PortConfig(description='x"; reload'))
    with pytest.raises(SwitchError, match="names Ethernet5"):
        sw.ports._guard("Ethernet4", ["interface Ethernet4", "interface Ethernet5"])
    assert fake.sent == []


def test_eos_apply_that_does_not_stick_is_rolled_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The switch accepts the lines but reads back the old VLAN (a quirk, a race):
    # verification fails and the driver sends the rollback.
    sw, fake = _eos(
        {
            "show interfaces Ethernet4 status": EOS_STATUS,
            "show interfaces Ethernet4 switchport": EOS_SWITCHPORT,
            "show vlan": EOS_VLANS,
        }
    )
    change = sw.apply_port_change("Ethernet4", PortConfig(access_vlan=200))
    assert change.applied and not change.verified
    assert "read back differs: access_vlan 100 -> 200" in change.message
    assert change.rolled_back and "put back as it was" in change.message
    # The rollback is the inverse of what was asked, sent whatever the read-back said.
    assert fake.sent == [
        ["interface Ethernet4", "switchport mode access", "switchport access vlan 200"],
        ["interface Ethernet4", "switchport mode access", "switchport access vlan 100"],
    ]


def test_run_many_records_failures_per_switch() -> None:
    targets = [
        SwitchTarget("ok", "192.0.2.1", platform="eos"),
        SwitchTarget("bad", "192.0.2.2", platform="eos"),
    ]

    def factory(t: SwitchTarget) -> NetmikoSwitch:
        if t.name == "bad":

            def refuse(**_: object) -> None:
                raise RuntimeError("NetmikoAuthenticationException-like")

            return NetmikoSwitch(t, connect=refuse)
        return _eos(
            {
                "show version": (
                    "Arista vEOS\nHardware version:    \nSerial number:       SN1\nSystem MAC address:  2803.829a.1347\n\n"
                    "Software image version: 4.14.7M\nArchitecture:           i386\n"
                    "Internal build version: 4.14.7M-2384414.4147M\nInternal build ID:      92a53fad\n\n"
                    "Uptime:                 1 hour and 5 minutes\nTotal memory:           2028860 kB\nFree memory:            301240 kB\n"
                ),
                "show hostname": "Hostname: leaf1\nFQDN:     leaf1.example\n",
            }
        )[0]

    seen = []
    results = run_many(
        targets,
        lambda sw: sw.get_facts(),
        concurrency=2,
        driver_factory=factory,
        progress=lambda d, t, r: seen.append(d),
    )
    assert [r.target for r in results] == ["ok", "bad"]
    assert (
        results[0].ok
        and results[0].value.os_version == "4.14.7M"
        and results[0].value.hostname == "leaf1"
    )
    assert results[0].value.serial == "SN1"
    assert (
        not results[1].ok
        and results[1].error_type == "SwitchError"
        and "could not log in" in results[1].error
    )
    assert sorted(seen) == [1, 2]
