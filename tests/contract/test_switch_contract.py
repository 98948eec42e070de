"""One switch contract, every switch peer (after NAPALM's shared getter tests).

The same tests run against each peer through the driver class the registry
hands out (``load_driver("switch", "netmiko")``) and its per-switch
capabilities (``sw.facts``, ``sw.interfaces``, ``sw.lldp``, ``sw.ports``,
and the driver's ``vlans()``):

- the lab's EOS and SONiC switches (``fleetctl_lab.switch``, SSH in-process);
- a Linux switch in a network namespace (bridges per VLAN, sshd; needs root);
- fakenos's recorded Arista EOS and Cisco NX-OS (canned output, no config).

What each peer can do is one table, :data:`PEERS`: a capability is either
supported (the typed result must be sane and match what the peer is known to
hold) or refused (the driver must raise its own ``SwitchError`` naming the
switch and matching the pattern: never a crash, never a silent empty list).
Writes (an access port moved to another VLAN and back, a port made a trunk
and back, a missing VLAN refused) run on the peers that take configuration.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from fleetctl.errors import SwitchError
from fleetctl.interfaces.switch import Interface, LldpNeighbor, PortConfig, PortMode, SwitchFacts, SwitchTarget
from fleetctl.plugins import load_driver

CAPABILITIES = ("facts", "interfaces", "lldp", "vlans", "port_read", "port_write", "trunk_write")


@dataclass(frozen=True)
class Refused:
    """The peer lacks the capability: the driver must raise a SwitchError matching ``match``."""

    match: str
    why: str
    unnamed: str = ""  # a known driver bug: the message does not name the switch (what and where)


YES = True
FAKENOS_NO_PORT = Refused(
    r"no port .* \(or it cannot be read\)", "fakenos has no recording of the per-port `show interface X ...` commands"
)


@dataclass(frozen=True)
class Peer:
    """One switch peer and what it supports.

    Attributes:
        kind: ``lab`` (spec = the lab switch's name), ``netns`` or ``fakenos``.
        platform: fleetctl's platform name.
        caps: every capability of :data:`CAPABILITIES`: ``YES`` or ``Refused``.
        port: an access port to read and change; ``trunk_port`` one to make a trunk.
        other_vlan: a VLAN that exists, other than ``port``'s.
        show_quirks: show commands replaced for this peer (``Platform.with_commands``).
        facts: what facts must say (the lab's come from its spec).
        ports: port name -> fields it must read with (the lab's from its spec).
        all_ports: the interface list is exactly ``ports``; else it holds them.
        port_count: how many front-panel ports exactly, where known.
        neighbors: local port -> fields of an LLDP neighbour there (the lab's from its cabling).
        neighbor_count: how many LLDP neighbours exactly, where known.
        first_neighbor: the first LLDP row, all fields (the switch's order is kept).
        vlans: VLANs the switch must list (the lab's from its spec).
        vlans_cover_ports: every access VLAN of a port is among the VLANs (false for
            recordings taken from different switches).
        known_bugs: facts field -> a driver bug that makes it differ (the test
            xfails on it, and fails once it reads right, so the entry goes).
    """

    kind: str
    platform: str
    caps: dict[str, Any]
    port: str = ""
    trunk_port: str = ""
    other_vlan: int = 200
    spec: str = ""
    show_quirks: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    ports: dict[str, dict[str, Any]] = field(default_factory=dict)
    all_ports: bool = False
    port_count: int | None = None
    neighbors: dict[str, dict[str, Any]] = field(default_factory=dict)
    neighbor_count: int | None = None
    first_neighbor: dict[str, Any] | None = None
    vlans: frozenset[int] = frozenset()
    vlans_cover_ports: bool = True
    known_bugs: dict[str, str] = field(default_factory=dict)


def _all(**overrides: Any) -> dict[str, Any]:
    caps = {c: YES for c in CAPABILITIES}
    caps.update(overrides)
    return caps


PEERS: dict[str, Peer] = {
    "lab-eos": Peer("lab", "eos", _all(), spec="ct-eos-1", port="Ethernet1", trunk_port="Ethernet2"),
    "lab-sonic": Peer(
        "lab",
        "sonic",
        _all(),
        spec="ct-sonic-1",
        port="Ethernet0",
        trunk_port="Ethernet4",
    ),
    "linux-netns": Peer(
        "netns",
        "linux",
        _all(
            lldp=Refused(r"LLDP is not supported by this switch", "no lldpd runs in the switch namespace"),
            trunk_write=Refused(r"trunk ports are not supported", "one bridge per VLAN: a port sits in one"),
        ),
        port="swp2",
        ports={  # not lo, mgmt0 or the bridges; veths say 10000 Mb/s
            "swp1": {"admin_up": True, "oper_up": True, "speed_mbps": 10000, "mode": PortMode.ACCESS, "access_vlan": 100},
            "swp2": {"admin_up": True, "oper_up": True, "mode": PortMode.ACCESS, "access_vlan": 100},
            "swp3": {"mode": PortMode.ACCESS, "access_vlan": 200},
        },
        all_ports=True,
        vlans=frozenset({100, 200}),  # the bridges br100, br200
    ),
    "fakenos-eos": Peer(
        "fakenos",
        "eos",
        _all(
            interfaces=Refused(
                r"could not parse 'show interfaces status'",
                "fakenos's EOS recording has its columns squeezed to one space: TextFSM cannot follow it",
            ),
            port_read=FAKENOS_NO_PORT,
            port_write=FAKENOS_NO_PORT,  # it takes no configuration: refused at the read before any change
            trunk_write=FAKENOS_NO_PORT,
        ),
        port="Ethernet1",
        # vEOS prints no serial: read from `show inventory`; uptime "1 hour and 5 minutes"
        facts={"os_version": "4.14.7M", "model": "vEOS", "hostname": "spine1", "uptime_s": 3900, "serial": "JPE13120702"},
        neighbor_count=20,
        first_neighbor={
            "local_port": "Ethernet1",
            "remote_system": "spine2.company.com",
            "remote_port": "Ethernet1",
            "remote_chassis_id": "2cc2.6081.eaf9",
        },
        vlans=frozenset({1, 10, 20, 30}),
        vlans_cover_ports=False,
    ),
    "fakenos-nxos": Peer(
        "fakenos",
        "nxos",
        _all(port_read=FAKENOS_NO_PORT, port_write=FAKENOS_NO_PORT, trunk_write=FAKENOS_NO_PORT),
        # NOTE(fakenos 1.2): its NX-OS recording answers `show interfaces switchport`
        # (the plural, which NX-OS also takes), not `show interface switchport`.
        show_quirks={"switchport": "show interfaces switchport"},
        port="Ethernet1/1",
        facts={
            "os_version": "7.1(4)N1(1)",
            "serial": "FOC17153X08",
            "model": "5596",
            "hostname": "IEDP02-N5K-SW01",
            "uptime_s": 749 * 86400 + 15 * 3600 + 17 * 60 + 48,
        },
        ports={
            # `show interface status`: connected, 1000; switchport: access VLAN 3
            "Ethernet1/1": {"admin_up": True, "oper_up": True, "speed_mbps": 1000, "mode": PortMode.ACCESS, "access_vlan": 3},
            # xcvrAbsen; a trunk with every VLAN allowed
            "Ethernet1/2": {"admin_up": True, "oper_up": False, "mode": PortMode.TRUNK, "trunk_vlans": list(range(1, 4095))},
        },
        port_count=54,  # mgmt0 is no front-panel port
        neighbors={
            "Ethernet1/1": {"remote_system": "n9k2.company.com", "remote_chassis_id": "5087.89a1.d8d6"},
            "mgmt0": {"remote_port": "Fa1/0/9"},
        },
        vlans=frozenset({1}),
        vlans_cover_ports=False,  # its `show vlan brief` lists VLAN 1 alone, its ports sit in 3 and more
    ),
}


def _lab_port(p: Any) -> dict[str, Any]:
    """What a lab switch port must read as, from its spec (ports left in the default VLAN say less)."""
    want: dict[str, Any] = {"admin_up": p.enabled, "oper_up": p.neighbor is not None, "speed_mbps": p.speed_mbps}
    if p.mode == "access" and p.vlans:
        want.update(mode=PortMode.ACCESS, access_vlan=p.vlans[0])
    if p.mode == "trunk" and p.vlans:
        want.update(mode=PortMode.TRUNK, trunk_vlans=sorted(p.vlans))
    return want


def _cases() -> list[Any]:
    return [pytest.param(name, cap, support, id=f"{name}-{cap}") for name, peer in PEERS.items() for cap, support in peer.caps.items()]


# --------------------------------------------------------------------------
# Reaching a peer: one open session per peer for the module
# --------------------------------------------------------------------------

Driver = load_driver("switch", "netmiko")


def _connect(request: pytest.FixtureRequest, name: str) -> tuple[Any, Peer]:
    """An open driver for peer ``name`` and the peer's row, its facts filled in from the lab's spec."""
    peer = PEERS[name]
    if peer.kind == "lab":
        lab, specs = request.getfixturevalue("lab_switches")
        spec = specs[peer.spec].filled()
        host, port = lab.ssh_of(spec.name)
        t = SwitchTarget(name, host, port, peer.platform, spec.username, spec.password, timeout=10)
        peer = replace(
            peer,
            facts={"os_version": spec.os_version, "serial": spec.serial, "model": spec.model, "hostname": spec.name},
            ports={p.name: _lab_port(p) for p in spec.ports},
            all_ports=True,
            neighbors={p.name: {"remote_system": p.neighbor.system, "remote_port": p.neighbor.port} for p in spec.ports if p.neighbor},
            neighbor_count=sum(1 for p in spec.ports if p.neighbor),
            vlans=frozenset(spec.vlans),
        )
    elif peer.kind == "netns":
        ns = request.getfixturevalue("netns_peer")
        ns.reset()  # the older namespace tests share this switch
        t = SwitchTarget(name, ns.host, 22, peer.platform, ns.username, ns.password, timeout=15)
        peer = replace(peer, facts={"hostname": os.uname().nodename})
    else:
        hosts = request.getfixturevalue("fakenos_peer")
        t = SwitchTarget(name, "127.0.0.1", hosts[name].port, peer.platform, "admin", "fleet-pw", timeout=10)
    platform = None
    if peer.show_quirks:
        from fleetctl_drivers.switch import load_platform

        platform = load_platform(peer.platform).with_commands(**peer.show_quirks)
    return Driver(t, platform=platform).open(), peer


@pytest.fixture(scope="module")
def sessions() -> Iterator[dict[str, tuple[Any, Peer]]]:
    opened: dict[str, tuple[Any, Peer]] = {}
    yield opened
    for sw, _ in opened.values():
        sw.close()


@pytest.fixture
def switch(request: pytest.FixtureRequest, sessions: dict[str, tuple[Any, Peer]]) -> Any:
    def get(name: str) -> tuple[Any, Peer]:
        if name not in sessions:
            sessions[name] = _connect(request, name)
        return sessions[name]

    return get


def assert_refused(exc: BaseException, name: str, refused: Refused) -> None:
    assert isinstance(exc, SwitchError), f"{type(exc).__name__} is not the driver's SwitchError: {exc}"
    msg = str(exc)
    assert re.search(refused.match, msg), f"{msg!r} does not say {refused.match!r} ({refused.why})"
    if refused.unnamed and not msg.startswith(f"{name}:"):
        pytest.xfail(f"known driver bug: {refused.unnamed}")
    assert msg.startswith(f"{name}:"), f"the message does not name the switch: {msg}"


# --------------------------------------------------------------------------
# What a sane answer is, per capability
# --------------------------------------------------------------------------


def _text(value: Any, what: str) -> None:
    assert value is None or (isinstance(value, str) and value and value == value.strip()), f"{what}: {value!r}"


def _vlan(v: Any) -> bool:
    return isinstance(v, int) and 1 <= v <= 4094


def check_facts(sw: Any, peer: Peer) -> None:
    facts = sw.facts.get()
    assert isinstance(facts, SwitchFacts)
    assert facts.platform == peer.platform
    for f in ("os_version", "serial", "model", "hostname"):
        _text(getattr(facts, f), f)
    assert facts.os_version and facts.hostname
    assert facts.uptime_s is None or facts.uptime_s >= 0
    got = {k: getattr(facts, k) for k in peer.facts}
    bugs = {k: (got[k], peer.facts[k]) for k in peer.known_bugs if k in got and got[k] != peer.facts[k]}
    assert {k: v for k, v in got.items() if k not in bugs} == {k: v for k, v in peer.facts.items() if k not in bugs}
    stale = set(peer.known_bugs) - set(bugs)
    assert not stale, f"fixed: drop {sorted(stale)} from the peer's known_bugs"
    if peer.kind == "netns":
        assert os.uname().release in (facts.os_version or "")
    if bugs:
        pytest.xfail("known driver bug: " + "; ".join(f"{k} reads {a!r}, want {b!r}: {peer.known_bugs[k]}" for k, (a, b) in bugs.items()))


def check_interfaces(sw: Any, peer: Peer) -> list[Interface]:
    ports = sw.interfaces.list()
    assert ports and all(isinstance(p, Interface) for p in ports)
    names = [p.name for p in ports]
    assert len(names) == len(set(names)), f"ports repeat: {names}"
    for p in ports:
        assert sw.platform.is_port(p.name), f"{p.name} is not a front-panel port name of {peer.platform}"
        assert p.speed_mbps is None or p.speed_mbps > 0, p
        assert not (p.oper_up and p.admin_up is False), f"{p.name}: up while shut down"
        if p.mode == PortMode.ACCESS:
            assert _vlan(p.access_vlan) and p.trunk_vlans == [], p
        if p.mode == PortMode.TRUNK:
            assert p.trunk_vlans == sorted(set(p.trunk_vlans)) and all(_vlan(v) for v in p.trunk_vlans), p
    assert set(peer.ports) <= set(names), f"missing ports: {sorted(set(peer.ports) - set(names))}"
    if peer.all_ports:
        assert set(names) == set(peer.ports)
    if peer.port_count is not None:
        assert len(names) == peer.port_count
    by_name = {p.name: p for p in ports}
    for name, want in peer.ports.items():
        got = {k: getattr(by_name[name], k) for k in want}
        assert got == want, name
    return ports


def check_lldp(sw: Any, peer: Peer) -> None:
    neighbors = sw.lldp.neighbors()
    assert all(isinstance(n, LldpNeighbor) for n in neighbors)
    for n in neighbors:
        assert n.local_port and (n.remote_system or n.remote_chassis_id), n
        _text(n.remote_system, "remote system")
        _text(n.remote_port, "remote port")
    for local, want in peer.neighbors.items():
        there = [{k: getattr(n, k) for k in want} for n in neighbors if n.local_port == local]
        assert want in there, f"{local}: no neighbour {want} (seen {there})"
    if peer.neighbor_count is not None:
        assert len(neighbors) == peer.neighbor_count
    if peer.first_neighbor is not None:
        assert neighbors and neighbors[0].model_dump() == peer.first_neighbor


def check_vlans(sw: Any, peer: Peer) -> None:
    vlans = sw.vlans()
    assert isinstance(vlans, set) and vlans and all(_vlan(v) for v in vlans), vlans
    assert peer.vlans <= vlans, f"missing VLANs: {sorted(peer.vlans - vlans)}"
    if peer.kind == "netns":
        assert vlans == peer.vlans
    if peer.vlans_cover_ports and peer.caps["interfaces"] is YES:
        access = {p.access_vlan for p in sw.interfaces.list() if p.mode == PortMode.ACCESS}
        assert access <= vlans, f"ports in VLANs the switch does not list: {sorted(access - vlans)}"


def _same(config: PortConfig, port: Interface) -> None:
    assert (config.admin_up, config.mode, config.access_vlan, config.trunk_vlans) == (
        port.admin_up,
        port.mode,
        port.access_vlan,
        port.trunk_vlans,
    )
    assert (config.description or "") == (port.description or "")


def check_port_read(sw: Any, peer: Peer) -> None:
    config = sw.ports.get(peer.port)
    assert isinstance(config, PortConfig)
    (listed,) = [p for p in sw.interfaces.list() if p.name == peer.port]
    _same(config, listed)  # one port read alone reads as in the whole list


def check_port_write(sw: Any, peer: Peer) -> None:
    """Move an access port to another VLAN with a description, read back, no-op again, put back."""
    before = sw.ports.get(peer.port)
    assert before.mode == PortMode.ACCESS and before.access_vlan != peer.other_vlan, before
    wish = PortConfig(access_vlan=peer.other_vlan, description="contract test")
    plan = sw.ports.apply(peer.port, wish, dry_run=True)
    assert plan.diff and plan.commands and not plan.applied
    try:
        change = sw.ports.apply(peer.port, wish)
        assert change.before == before  # the dry run changed nothing
        assert change.applied and change.verified and not change.rolled_back, change.message
        now = change.after  # read back over the switch's own commands
        assert now is not None and (now.access_vlan, now.description) == (peer.other_vlan, "contract test")
        (listed,) = [p for p in sw.interfaces.list() if p.name == peer.port]
        _same(now, listed)
        again = sw.ports.apply(peer.port, wish)
        assert again.diff == {} and again.verified and not again.commands
        with pytest.raises(SwitchError, match="VLAN 3999 does not exist"):
            sw.ports.apply(peer.port, PortConfig(access_vlan=3999))
        assert sw.ports.get(peer.port) == now
    finally:
        back = sw.ports.apply(peer.port, PortConfig(access_vlan=before.access_vlan, description=before.description or ""))
        assert back.verified, back.message
    assert back.after == before


def check_trunk_write(sw: Any, peer: Peer) -> None:
    """Make an access port a trunk carrying two VLANs, read back, then an access port again."""
    port = peer.trunk_port or peer.port
    before = sw.ports.get(port)
    assert before.mode == PortMode.ACCESS, before
    vlans = sorted({before.access_vlan or 1, peer.other_vlan})
    try:
        change = sw.ports.apply(port, PortConfig(mode=PortMode.TRUNK, trunk_vlans=vlans))
        assert change.applied and change.verified, change.message
        assert change.after is not None and (change.after.mode, change.after.trunk_vlans) == (PortMode.TRUNK, vlans)
    finally:
        back = sw.ports.apply(port, PortConfig(mode=PortMode.ACCESS, access_vlan=before.access_vlan))
        assert back.verified, back.message
    assert back.after == before


CHECKS = {name: globals()[f"check_{name}"] for name in CAPABILITIES}


# --------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------


def test_every_capability_has_a_check_and_every_peer_a_full_row() -> None:
    assert set(CHECKS) == set(CAPABILITIES)
    for name, peer in PEERS.items():
        assert set(peer.caps) == set(CAPABILITIES), f"{name}: say for every capability"
        assert all(v is YES or isinstance(v, Refused) for v in peer.caps.values()), name


@pytest.mark.parametrize(("name", "cap", "support"), _cases())
def test_capability(switch: Any, name: str, cap: str, support: Any) -> None:
    """A supported capability answers a sane typed result; a lacking one is a clear SwitchError."""
    sw, peer = switch(name)
    if support is YES:
        CHECKS[cap](sw, peer)
        return
    with pytest.raises(Exception) as ei:  # any exception: the assertion below names a wrong type
        CHECKS[cap](sw, peer)
    assert_refused(ei.value, name, support)
