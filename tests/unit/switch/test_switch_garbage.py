"""Output a switch parser does not recognise is an error, never "nothing" (issue 20, item 7).

Every show command of every shipped platform is sent garbage (random text,
an error message the platform's error list lacks, an empty answer, binary
junk) through :meth:`NetmikoSwitch.show`: each must raise SwitchError naming
the switch and the command. Output that is legitimately empty (a header with
no rows, "Total entries displayed: 0") still parses to no records.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fleetctl_drivers.switch import NetmikoSwitch, load_platform, parse, platform_names
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetctl.errors import SwitchError
from fleetctl.interfaces.switch import SwitchTarget

GARBAGE = {
    "random text": "lorem ipsum dolor sit amet\nconsectetur 12 adipiscing 3/4 elit\n",
    # IOS-style; NX-OS prints its own "% Invalid command", so its error list lacks this one
    "an error message": "                ^\n% Invalid input detected at '^' marker.\n",
    "an empty output": "",
    "binary junk": "\x00\x01\xfe\xff\x1b[2J\x7f\x00garbage\x00\n\x03\x04",
    "a login banner": "*** Authorised access only ***\nThis system is monitored.\n",
}


class _Answers:
    """A netmiko connection stand-in that prints the same output to every command."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.commands: list[str] = []

    def send_command(self, command: str, **_: object) -> str:
        self.commands.append(command)
        # shell platforms append `; echo @@rc=$?`: the command "succeeded" and printed garbage
        return self.text + ("\n@@rc=0\n" if "@@rc=" in command else "")

    def enable(self) -> str:
        return ""

    def disconnect(self) -> None:
        pass


def _switch(platform: str, text: str) -> NetmikoSwitch:
    fake = _Answers(text)
    return NetmikoSwitch(
        SwitchTarget("leaf7", "192.0.2.7", platform=platform, username="root"),
        connect=lambda **_: fake,
    )


COMMANDS = [(p, key) for p in platform_names() for key in load_platform(p).show]


def _show(sw: NetmikoSwitch, key: str) -> list[parse.Record]:
    return sw.show(key, port="Ethernet1")


def _legitimately_empty(platform: str, key: str, text: str) -> bool:
    empty = load_platform(platform).show[key].empty
    return empty is not None and re.search(empty, text, re.MULTILINE) is not None


@pytest.mark.parametrize("kind", list(GARBAGE))
@pytest.mark.parametrize(("platform", "key"), COMMANDS, ids=[f"{p}-{k}" for p, k in COMMANDS])
def test_garbage_raises_naming_switch_and_command(platform: str, key: str, kind: str) -> None:
    text = GARBAGE[kind]
    if _legitimately_empty(platform, key, text):
        pytest.skip(f"{platform} {key}: {kind} is what the switch prints when there is nothing")
    sw = _switch(platform, text)
    with pytest.raises(SwitchError) as err:
        _show(sw, key)
    message = str(err.value)
    assert message.startswith("leaf7: "), message
    shown = load_platform(platform).show[key].command.split("{")[0].strip()
    assert shown[:20] in message, message


def test_only_commands_that_may_say_nothing_accept_an_empty_output() -> None:
    # LLDP without neighbours, switchport on an all-routed switch, lldpd/bridges on Linux.
    may = {(p, k) for p, k in COMMANDS if _legitimately_empty(p, k, "")}
    assert may == {
        ("eos", "lldp"),
        ("eos", "switchport"),
        ("nxos", "switchport"),
        ("linux", "lldp"),
        ("linux", "vlans"),
    }


# Output a switch prints when there is nothing: recognised, so no records and no error.
EMPTY_BUT_RECOGNISED = [
    (
        "nxos",
        "lldp",
        "Capability codes:\n  (R) Router, (B) Bridge, (T) Telephone, (C) DOCSIS Cable Device\n"
        "  (W) WLAN Access Point, (P) Repeater, (S) Station, (O) Other\n"
        "Device ID            Local Intf      Hold-time  Capability  Port ID\n\n"
        "Total entries displayed: 0\n",
    ),
    (
        "nxos",
        "lldp_summary",
        "Capability codes:\n  (R) Router, (B) Bridge, (T) Telephone, (C) DOCSIS Cable Device\n"
        "Device ID            Local Intf      Hold-time  Capability  Port ID\n\n"
        "Total entries displayed: 0\n",
    ),
    ("eos", "lldp", "Interface Ethernet1 detected 0 LLDP neighbors:\n\nInterface Ethernet2 detected 0 LLDP neighbors:\n"),
    (
        "eos",
        "lldp_summary",
        "Last table change time   : 0:03:12 ago\nNumber of table inserts  : 0\n"
        "Port          Neighbor Device ID       Neighbor Port ID    TTL\n"
        "---------- ------------------------ ---------------------- ---\n",
    ),
    (
        "sonic",
        "lldp",
        "Capability codes: (R) Router, (B) Bridge, (O) Other\n"
        "LocalPort    RemoteDevice    RemotePortID       Capability    RemotePortDescr\n"
        "-----------  --------------  -----------------  ------------  -----------------\n"
        "--------------------------------------------------\nTotal entries displayed:  0\n",
    ),
    ("sonic", "vlans", "Name    VID    Member    Mode\n------  -----  --------  ------\n"),
    ("sonic", "switchport", "Name    VID    Member    Mode\n------  -----  --------  ------\n"),
    ("linux", "vlans", "[ ]\n"),
]


@pytest.mark.parametrize(("platform", "key", "text"), EMPTY_BUT_RECOGNISED, ids=lambda x: str(x)[:20])
def test_recognised_empty_output_parses_to_nothing(platform: str, key: str, text: str) -> None:
    assert _show(_switch(platform, text), key) == []


def test_nxos_facts_from_an_error_message_are_an_error_not_an_empty_switch() -> None:
    # The case of the issue: NX-OS's `show version` answered by something that is no version.
    sw = _switch("nxos", GARBAGE["an error message"])
    with pytest.raises(SwitchError, match=r"^leaf7: 'show version': output not recognised"):
        sw.facts.get()


def test_sonic_ports_from_garbage_are_an_error_not_a_switch_without_ports() -> None:
    sw = _switch("sonic", GARBAGE["random text"])
    with pytest.raises(SwitchError, match=r"^leaf7: 'show interfaces status': output not recognised"):
        sw.interfaces.list()


def test_a_table_with_the_wrong_columns_is_not_recognised() -> None:
    # SONiC's `show interfaces status` answered by another dashed table (`show ip interfaces`).
    other = (
        "Interface    Master    IPv4 address/mask    Admin/Oper    BGP Neighbor    Neighbor IP\n"
        "-----------  --------  -------------------  ------------  --------------  -------------\n"
        "Loopback0              10.1.0.1/32          up/up         N/A             N/A\n"
    )
    sw = _switch("sonic", other)
    assert _show(sw, "interfaces")[0]["name"] == "Loopback0"  # same first column: a port name
    with pytest.raises(SwitchError, match="output not recognised"):
        _show(sw, "lldp")  # no LocalPort column: not an LLDP table
    with pytest.raises(SwitchError, match="output not recognised"):
        _show(sw, "vlans")


def test_ip_json_that_is_no_list_of_links_is_refused() -> None:
    for text in ("0", '{"ifname": "swp1"}', "[1, 2]", "null"):
        with pytest.raises(SwitchError):
            _show(_switch("linux", text), "interfaces")


_WORD = st.from_regex(r"[A-Za-z0-9%^'.,:()/_-]{1,12}", fullmatch=True)
_LINE = st.lists(_WORD, min_size=2, max_size=8).map(" ".join)
_GARBAGE_TEXT = st.one_of(
    st.lists(_LINE, min_size=1, max_size=12).map("\n".join),
    st.binary(min_size=1, max_size=200).map(lambda b: "\x00" + b.decode("latin-1")),
    st.sampled_from(
        [
            "% Invalid input detected at '^' marker.",
            "% Invalid command at '^' marker.",
            "Syntax error while parsing 'show lldp neighbors detail'",
            "% Permission denied",
            "Connection to 192.0.2.7 closed by remote host.",
        ]
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_GARBAGE_TEXT)
def test_any_garbage_raises_on_every_command(text: str) -> None:
    for platform, key in COMMANDS:
        assume(not _legitimately_empty(platform, key, text))
        with pytest.raises(SwitchError):
            _show(_switch(platform, text), key)


def test_a_recorded_sonic_show_version_is_recognised() -> None:
    # sonic-utilities' Command Reference example (a Mellanox SN2700): see tests/data/switch/SOURCES.md.
    recorded = (Path(__file__).resolve().parents[2] / "data" / "switch" / "sonic" / "show_version.raw").read_text()
    records = _show(_switch("sonic", recorded), "version")
    facts = parse.to_facts("sonic", records)
    assert (facts.os_version, facts.model, facts.serial, facts.uptime_s) == (
        "SONiC.HEAD.32-21ea29a",
        "MSN2700-CS2FO",
        "MT1822K07815",
        180,
    )
    # the same command answered by the Docker table alone (a truncated answer) is not a version
    with pytest.raises(SwitchError, match="output not recognised"):
        _show(_switch("sonic", recorded[recorded.index("Docker images:") :]), "version")
