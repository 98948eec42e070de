"""The switch contract: what every switch driver answers, checked per capability against a table of peers.

A peer is one switch the suite reaches (a simulator, a Linux switch in a
network namespace, recorded output served over SSH). What it can do is one
row, :class:`Peer`: each capability of :data:`CAPABILITIES` is either ``YES``
(the typed result must be sane and match what the peer is known to hold) or
:class:`Refused` (the driver must raise its own
:class:`~fleetctl.errors.SwitchError` whose message names the switch and
matches the pattern: never a crash, never a silent empty list). Writes (an
access port moved to another VLAN and back, a port made a trunk and back, a
missing VLAN refused) run on the peers that take configuration.

The capabilities are those of ``fleetctl.interfaces.switch`` (``sw.facts``,
``sw.interfaces``, ``sw.lldp``, ``sw.ports``) and the driver's ``vlans()``;
a driver whose ``sw.platform`` knows its front-panel port names
(``is_port``) has every listed port checked against it.

To run it for a driver, subclass :class:`SwitchContract` in a test module
(the subclass's name starts with ``Test``), give it ``PEERS`` and say how a
peer is reached::

    from fleetctl_drivers.testing.switch import Peer, SwitchContract, all_caps

    class TestMySwitch(SwitchContract):
        PEERS = {"my-sim": Peer("sim", "eos", all_caps(), port="Ethernet1", vlans=frozenset({100, 200}))}

        def connect(self, request, name):
            return MyDriver(SwitchTarget(name, ...)).open(), self.PEERS[name]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from fleetctl.errors import SwitchError
from fleetctl.interfaces.switch import Interface, LldpNeighbor, PortConfig, PortMode, SwitchFacts

__all__ = ["CAPABILITIES", "CHECKS", "YES", "Peer", "Refused", "SwitchContract", "all_caps", "assert_refused", "check_capability",
           "check_table"]  # fmt: skip

CAPABILITIES = ("facts", "interfaces", "lldp", "vlans", "port_read", "port_write", "trunk_write")


@dataclass(frozen=True)
class Refused:
    """The peer lacks the capability: the driver must raise a SwitchError matching ``match``."""

    match: str
    why: str
    unnamed: str = ""  # a known driver bug: the message does not name the switch (what and where)


YES = True


@dataclass(frozen=True)
class Peer:
    """One switch peer and what it supports (subclass it to add how your suite reaches a peer).

    Attributes:
        kind: how the suite reaches the peer (the subclass's ``connect`` reads it).
        platform: fleetctl's platform name.
        caps: every capability of :data:`CAPABILITIES`: ``YES`` or ``Refused``.
        port: an access port to read and change; ``trunk_port`` one to make a trunk.
        other_vlan: a VLAN that exists, other than ``port``'s.
        facts: what facts must say.
        os_version_has: text the facts' OS version must hold (a Linux switch's kernel release).
        ports: port name -> fields it must read with.
        all_ports: the interface list is exactly ``ports``; else it holds them.
        port_count: how many front-panel ports exactly, where known.
        neighbors: local port -> fields of an LLDP neighbour there.
        neighbor_count: how many LLDP neighbours exactly, where known.
        first_neighbor: the first LLDP row, all fields (the switch's order is kept).
        vlans: VLANs the switch must list; ``all_vlans``: exactly these.
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
    facts: dict[str, Any] = field(default_factory=dict)
    os_version_has: str = ""
    ports: dict[str, dict[str, Any]] = field(default_factory=dict)
    all_ports: bool = False
    port_count: int | None = None
    neighbors: dict[str, dict[str, Any]] = field(default_factory=dict)
    neighbor_count: int | None = None
    first_neighbor: dict[str, Any] | None = None
    vlans: frozenset[int] = frozenset()
    all_vlans: bool = False
    vlans_cover_ports: bool = True
    known_bugs: dict[str, str] = field(default_factory=dict)


def all_caps(**overrides: Any) -> dict[str, Any]:
    """Every capability supported, but for ``overrides`` (capability -> ``Refused``)."""
    caps: dict[str, Any] = {c: YES for c in CAPABILITIES}
    caps.update(overrides)
    return caps


def assert_refused(exc: BaseException, name: str, refused: Refused) -> None:
    """``exc`` is the driver's SwitchError, says what ``refused`` expects and names the switch first."""
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
    if peer.os_version_has:
        assert peer.os_version_has in (facts.os_version or "")
    if bugs:
        pytest.xfail("known driver bug: " + "; ".join(f"{k} reads {a!r}, want {b!r}: {peer.known_bugs[k]}" for k, (a, b) in bugs.items()))


def check_interfaces(sw: Any, peer: Peer) -> list[Interface]:
    ports = sw.interfaces.list()
    assert ports and all(isinstance(p, Interface) for p in ports)
    names = [p.name for p in ports]
    assert len(names) == len(set(names)), f"ports repeat: {names}"
    is_port = getattr(getattr(sw, "platform", None), "is_port", None)  # a driver with a table of port names
    for p in ports:
        if is_port is not None:
            assert is_port(p.name), f"{p.name} is not a front-panel port name of {peer.platform}"
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
    if peer.all_vlans:
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


#: One check per capability, by the capability's name.
CHECKS: dict[str, Callable[[Any, Peer], Any]] = {name: globals()[f"check_{name}"] for name in CAPABILITIES}


def check_table(peers: Mapping[str, Peer]) -> None:
    """Every capability has a check, and every peer says for each capability."""
    assert set(CHECKS) == set(CAPABILITIES)
    for name, peer in peers.items():
        assert set(peer.caps) == set(CAPABILITIES), f"{name}: say for every capability"
        assert all(v is YES or isinstance(v, Refused) for v in peer.caps.values()), name


def check_capability(sw: Any, name: str, peer: Peer, cap: str, support: Any) -> None:
    """A supported capability answers a sane typed result; a lacking one is a clear SwitchError."""
    if support is YES:
        CHECKS[cap](sw, peer)
        return
    with pytest.raises(Exception) as ei:  # any exception: the assertion below names a wrong type
        CHECKS[cap](sw, peer)
    assert_refused(ei.value, name, support)


# --------------------------------------------------------------------------
# The base test class
# --------------------------------------------------------------------------


class SwitchContract:
    """The switch contract's tests; a subclass named ``Test...`` gives the peers and how to reach them.

    ``PEERS``: name -> :class:`Peer`. ``connect`` must be given: an open driver
    and the peer's row as the contract checks it (fill in what is known only
    once the peer runs, e.g. a simulator's facts). Each peer is opened once
    for the class and closed (``close()``) at its end.
    """

    PEERS: ClassVar[Mapping[str, Peer]] = {}

    def connect(self, request: pytest.FixtureRequest, name: str) -> tuple[Any, Peer]:
        """An open driver for peer ``name`` and the row to check it against."""
        raise NotImplementedError(f"{type(self).__name__} must say how peer {name!r} is reached")

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """One ``test_capability`` per peer and capability of its row."""
        if metafunc.function.__name__ == "test_capability":
            metafunc.parametrize(("name", "cap", "support"), [
                pytest.param(name, cap, support, id=f"{name}-{cap}") for name, peer in self.PEERS.items()
                for cap, support in peer.caps.items()
            ])  # fmt: skip

    @pytest.fixture(scope="class")
    @classmethod
    def sessions(cls) -> Iterator[dict[str, tuple[Any, Peer]]]:
        """The peers opened so far in this class, each closed at its end."""
        opened: dict[str, tuple[Any, Peer]] = {}
        yield opened
        for sw, _ in opened.values():
            sw.close()

    @pytest.fixture
    def switch(self, request: pytest.FixtureRequest, sessions: dict[str, tuple[Any, Peer]]) -> Callable[[str], tuple[Any, Peer]]:
        """``get(name)``: peer ``name`` opened (once for the class) and its row."""

        def get(name: str) -> tuple[Any, Peer]:
            if name not in sessions:
                sessions[name] = self.connect(request, name)
            return sessions[name]

        return get

    def test_every_capability_has_a_check_and_every_peer_a_full_row(self) -> None:
        check_table(self.PEERS)

    def test_capability(self, switch: Callable[[str], tuple[Any, Peer]], name: str, cap: str, support: Any) -> None:
        """A supported capability answers a sane typed result; a lacking one is a clear SwitchError."""
        sw, peer = switch(name)
        check_capability(sw, name, peer, cap, support)
