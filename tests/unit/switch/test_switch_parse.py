"""Every recorded switch output of ../shared/switch-outputs through the platform parsers.

For EOS and NX-OS each ``.raw`` has a ``.yml`` beside it with what the
ntc-templates TextFSM template extracts: the records must match it, and the
typed models built from them must carry the same values. SONiC's recordings
have no ``.yml``: the values asserted are read off the ``.raw`` tables.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from fleetctl_drivers.switch import load_platform, parse

from fleetctl.interfaces.switch import PortMode

SHARED = Path(
    os.environ.get(
        "FLEETCTL_SHARED", Path(__file__).resolve().parents[3].parent / "shared"
    )
)
OUTPUTS = SHARED / "switch-outputs"
FOLDERS = {"arista_eos": "eos", "cisco_nxos": "nxos"}

pytestmark = pytest.mark.skipif(
    not OUTPUTS.is_dir(),
    reason=f"no recorded switch outputs at {OUTPUTS} (set FLEETCTL_SHARED)",
)


def _recordings() -> list[Path]:
    if not OUTPUTS.is_dir():
        return []
    return sorted(p for folder in FOLDERS for p in (OUTPUTS / folder).rglob("*.raw"))


def _show_keys(raw: Path) -> tuple[str, list[str]]:
    """The platform and its show keys whose TextFSM template is the one this recording is for."""
    vendor = raw.relative_to(OUTPUTS).parts[0]
    command = raw.parent.name.replace("_", " ")
    platform = load_platform(FOLDERS[vendor])
    keys = [
        k
        for k, s in platform.show.items()
        # ntc-templates' template, or ours where theirs is too strict (`replaces` names it)
        if [vendor, command] in (s.parser.get("textfsm"), s.parser.get("replaces"))
    ]
    return FOLDERS[vendor], keys


def test_every_recorded_command_has_a_platform_parser() -> None:
    for raw in _recordings():
        _, keys = _show_keys(raw)
        assert keys, f"no platform show command parses {raw.relative_to(OUTPUTS)}"


@pytest.mark.parametrize("raw", _recordings(), ids=lambda p: p.stem)
def test_recording_parses_like_ntc_templates(raw: Path) -> None:
    platform_name, keys = _show_keys(raw)
    platform = load_platform(platform_name)
    expected = yaml.safe_load(raw.with_suffix(".yml").read_text())["parsed_sample"]
    text = raw.read_text()
    for key in keys:
        show = platform.show[key]
        records = parse.run_parser(show.parser, text)
        assert len(records) == len(expected)
        for got, want in zip(records, expected, strict=True):
            for field, value in want.items():
                assert str(got[field]).strip() == str(value).strip(), (key, field)
        renamed = parse.rename(records, show.fields)
        _check_models(platform_name, key, renamed, expected)


def _check_models(
    platform_name: str, key: str, renamed: list[dict], expected: list[dict]
) -> None:
    platform = load_platform(platform_name)
    names = platform.interface_names
    f = platform.show[key].fields
    if key == "version":
        facts = parse.to_facts(platform_name, renamed)
        want = expected[0]
        assert facts.os_version == (want[f["os_version"]] or None)
        assert facts.serial == (want[f["serial"]] or None)
        assert facts.model == (want[f["model"]] or None)
        assert facts.uptime_s is not None and facts.uptime_s > 0
        if "hostname" in f:
            assert facts.hostname == want[f["hostname"]]
    elif key in ("interfaces", "port_status"):
        merged = parse.merge_by_name(renamed, abbreviations=names)
        firsts: dict[str, dict] = {}
        for want in (
            expected
        ):  # a recording can list a port twice (two tables pasted): the first counts
            firsts.setdefault(parse.canonical_name(want["port"], names), want)
        for rec, want in zip(merged, firsts.values(), strict=True):
            iface = parse.to_interface(rec)
            assert iface.name == parse.canonical_name(want["port"], names)
            assert (
                iface.name.split("/")[0].rstrip("0123456789")
                in set(names.values()) | {"mgmt", "Ethernet"}
                or iface.name == want["port"]
            )
            desc = want["name"].strip()
            assert iface.description == (None if desc in ("", "--") else desc)
            admin, oper = parse.map_status(want["status"])
            assert (iface.admin_up, iface.oper_up) == (admin, oper)
            vlan = want["vlan_id"]
            if vlan.isdigit():
                assert iface.mode == PortMode.ACCESS and iface.access_vlan == int(vlan)
            elif vlan in ("trunk", "routed"):
                assert iface.mode == PortMode(vlan)
            else:
                assert (
                    iface.mode == PortMode.UNKNOWN
                )  # "in Po49", a LAG member: not ours to guess
            speed = want["speed"]
            if speed.lower() in ("auto", "unconf", ""):
                assert iface.speed_mbps is None
            else:
                assert iface.speed_mbps and iface.speed_mbps >= 10
    elif key in ("switchport", "port_switchport"):
        for rec, want in zip(renamed, expected, strict=True):
            iface = parse.to_interface(rec)
            assert iface.name == want["interface"]
            assert iface.mode == parse.map_mode(want["mode"])
            if iface.mode == PortMode.ACCESS:
                assert iface.access_vlan == int(want["access_vlan"])
            if iface.mode == PortMode.TRUNK:
                assert iface.trunk_vlans == parse.parse_vlan_list(
                    want["trunking_vlans"]
                )
    elif key in ("lldp", "lldp_summary"):
        for rec, want in zip(renamed, expected, strict=True):
            n = parse.to_neighbor(rec, names)
            assert n.local_port == parse.canonical_name(want["local_interface"], names)
            assert n.remote_system == (want["neighbor_name"] or None)
            assert n.remote_port == (want["neighbor_interface"] or None)
            if "chassis_id" in f:
                assert n.remote_chassis_id == (want["chassis_id"] or None)
    elif key == "inventory":
        chassis = parse.chassis(renamed)
        assert chassis["model"] or chassis["serial"]
    elif key == "vlans":
        assert all(str(r["vlan"]).isdigit() for r in renamed)


# ---------------------------------------------------------------- SONiC


def _sonic(name: str) -> str:
    path = OUTPUTS / "sonic" / name
    if not path.is_file():
        pytest.skip(f"{path} absent")
    return path.read_text()


def test_sonic_interfaces_merge_status_descriptions_and_vlans() -> None:
    p = load_platform("sonic")
    tables = [
        parse.rename(parse.run_parser(p.show[k].parser, _sonic(f)), p.show[k].fields)
        for k, f in (
            ("interfaces", "show_interfaces_status.raw"),
            ("switchport", "show_vlan_config.raw"),
            ("descriptions", "show_interfaces_description.raw"),
        )
    ]
    merged = parse.merge_by_name(*tables)
    ifaces = {r["name"]: parse.to_interface(r) for r in merged if p.is_port(r["name"])}
    assert sorted(ifaces, key=lambda n: int(n[8:])) == [
        "Ethernet0", "Ethernet16", "Ethernet24", "Ethernet28", "Ethernet32",
        "Ethernet36", "Ethernet112", "Ethernet116", "Ethernet120", "Ethernet124",
    ]  # fmt: skip
    e0 = ifaces["Ethernet0"]
    assert (e0.admin_up, e0.oper_up, e0.speed_mbps, e0.mode) == (
        True,
        False,
        25000,
        PortMode.ROUTED,
    )
    assert e0.description == "ARISTA01T2:Ethernet1"
    e16 = ifaces["Ethernet16"]  # untagged member of Vlan1000 in `show vlan config`
    assert (e16.mode, e16.access_vlan, e16.speed_mbps) == (PortMode.ACCESS, 1000, 100)
    assert (
        ifaces["Ethernet28"].access_vlan == 2000
        and ifaces["Ethernet28"].speed_mbps == 1000
    )
    assert ifaces["Ethernet32"].mode == PortMode.UNKNOWN  # a PortChannel1001 member
    assert (
        ifaces["Ethernet36"].speed_mbps == 10
        and ifaces["Ethernet36"].description == "Servers8:eth0"
    )
    # PortChannel1001 is tagged in VLAN 4000 but is no front-panel port
    pc = {r["name"]: r for r in merged}["PortChannel1001"]
    assert not p.is_port("PortChannel1001") and pc["admin"] == "N/A"


def test_sonic_vlan_membership() -> None:
    recs = {
        r["name"]: r for r in parse.sonic_vlan_members(_sonic("show_vlan_config.raw"))
    }
    assert (
        recs["Ethernet4"]["access_vlan"] == "1000"
        and recs["Ethernet4"]["mode"] == "access"
    )
    assert (
        recs["PortChannel1001"]["mode"] == "trunk"
        and recs["PortChannel1001"]["trunk_vlans"] == "4000"
    )
    vlans = parse.rename(
        parse.sonic_table(_sonic("show_vlan_config.raw")), {"vlan": "vid"}
    )
    assert {int(r["vlan"]) for r in vlans} == {1000, 2000, 3000, 4000}


def test_sonic_lldp_table() -> None:
    p = load_platform("sonic")
    recs = parse.rename(
        parse.run_parser(p.show["lldp"].parser, _sonic("show_lldp_table.raw")),
        p.show["lldp"].fields,
    )
    ns = [parse.to_neighbor(r) for r in recs]
    assert [(n.local_port, n.remote_system, n.remote_port) for n in ns] == [
        ("Ethernet0", "dummy", "00:00:00:00:00:01"),
        ("Ethernet0", "dummy", "00:00:00:00:00:02"),
    ]


def test_sonic_vlan_brief_is_not_misread_as_a_dashed_table() -> None:
    # `show vlan brief` is a grid table; fleetctl reads `show vlan config` instead.
    assert parse.dashed_table(_sonic("show_vlan_brief.raw")) == []
