"""The network side of the plan: which port should carry what, and who is cabled where.

``port_plan`` turns the cabling plan into the wanted configuration of every
switch port of the target servers; ``expected_neighbours`` into the LLDP
neighbour each cabled port should see; ``compare_lldp`` sets what switches
report against that. Pure functions of inventory rows, so they are tested
without a switch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from fleetctl.interfaces.switch import PortConfig, PortMode
from fleetctl.store import tables as T


@dataclass
class PortWant:
    switch: str
    port: str
    mode: str
    vlans: list[int]
    who: str  # "server/nic" or "peer:port"
    uplink: bool
    server_state: str | None = None

    def config(self) -> Any:
        if self.mode == "access":
            return PortConfig(mode=PortMode.ACCESS, access_vlan=self.vlans[0], admin_up=True)
        return PortConfig(mode=PortMode.TRUNK, trunk_vlans=self.vlans, admin_up=True)


def _cables(conn: Any) -> list[Any]:
    peer_port = T.switch_port.alias("peer_port")
    peer_sw = T.switch.alias("peer_sw")
    q = (
        select(
            T.switch.c.name.label("switch"), T.switch_port.c.name.label("port"), T.link.c.mode, T.link.c.vlans,
            T.server.c.name.label("server"), T.server.c.state.label("server_state"), T.nic.c.name.label("nic"),
            T.nic.c.mac, peer_sw.c.name.label("peer"), peer_port.c.name.label("peer_port"),
        )  # fmt: skip
        .join(T.switch_port, T.switch_port.c.id == T.link.c.port_id)
        .join(T.switch, T.switch.c.id == T.switch_port.c.switch_id)
        .outerjoin(T.nic, T.nic.c.id == T.link.c.nic_id)
        .outerjoin(T.server, T.server.c.id == T.nic.c.server_id)
        .outerjoin(peer_port, peer_port.c.id == T.link.c.peer_port_id)
        .outerjoin(peer_sw, peer_sw.c.id == peer_port.c.switch_id)
    )
    return list(conn.execute(q))


def port_plan(conn: Any, servers: set[str] | None = None, switches: set[str] | None = None) -> dict[str, list[PortWant]]:
    """{switch: [PortWant]} for the server ports of ``servers`` (or of ``switches``).

    Only ports cabled to a server are planned: uplinks between switches are
    never reconfigured by a plan.
    """
    out: dict[str, list[PortWant]] = {}
    for c in _cables(conn):
        if c.server is None:
            continue
        if servers is not None and c.server not in servers:
            continue
        if switches is not None and c.switch not in switches:
            continue
        vlans = [int(v) for v in c.vlans.split(",") if v]
        out.setdefault(c.switch, []).append(
            PortWant(c.switch, c.port, c.mode, vlans, f"{c.server}/{c.nic}", False, c.server_state)
        )
    return out


def protected_ports(conn: Any) -> dict[str, set[str]]:
    """{switch: ports} that need --force: uplinks, and ports of servers in service."""
    out: dict[str, set[str]] = {}
    for c in _cables(conn):
        if c.server is None:
            out.setdefault(c.switch, set()).add(c.port)
            if c.peer:
                out.setdefault(c.peer, set()).add(c.peer_port)
        elif c.server_state == "in-service":
            out.setdefault(c.switch, set()).add(c.port)
    return out


@dataclass
class Expected:
    system: str
    ports: set[str]  # any of these is the right far-end port (name or MAC)
    label: str = ""  # how to show it: the NIC or port name

    def __str__(self) -> str:
        return f"{self.system}:{self.label or sorted(self.ports)[0]}"


def expected_neighbours(conn: Any, switches: set[str]) -> dict[str, dict[str, Expected]]:
    """{switch: {port: Expected}} from the cabling plan, both ends of switch links."""
    out: dict[str, dict[str, Expected]] = {}
    for c in _cables(conn):
        if c.server is not None:
            if c.switch in switches:
                far = {c.nic} | ({c.mac, c.mac.replace(":", "")} if c.mac else set())
                out.setdefault(c.switch, {})[c.port] = Expected(c.server, far, c.nic)
        elif c.peer:
            if c.switch in switches:
                out.setdefault(c.switch, {})[c.port] = Expected(c.peer, {c.peer_port}, c.peer_port)
            if c.peer in switches:
                out.setdefault(c.peer, {})[c.peer_port] = Expected(c.switch, {c.port}, c.port)
    return out


@dataclass
class CablingReport:
    switch: str
    ok: list[str] = field(default_factory=list)
    miscabled: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    unexpected: list[dict[str, Any]] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return len(self.miscabled) + len(self.missing) + len(self.unexpected)


def _norm(name: str | None) -> str:
    return (name or "").strip().lower().split(".")[0]


def compare_lldp(switch: str, expected: dict[str, Expected], neighbours: list[Any]) -> CablingReport:
    """Set LLDP neighbours (objects with local_port, remote_system, remote_port) against the plan."""
    report = CablingReport(switch)
    seen: dict[str, Any] = {}
    for n in neighbours:
        seen.setdefault(n.local_port, n)
    for port, want in sorted(expected.items()):
        n = seen.get(port)
        if n is None:
            report.missing.append({"port": port, "expected": str(want)})
            continue
        system_ok = _norm(n.remote_system) == _norm(want.system)
        port_ok = (n.remote_port or "").lower() in {p.lower() for p in want.ports}
        if system_ok and port_ok:
            report.ok.append(port)
        else:
            report.miscabled.append({
                "port": port, "expected": str(want),
                "found": f"{n.remote_system}:{n.remote_port}",
            })  # fmt: skip
    for port, n in sorted(seen.items()):
        if port not in expected:
            report.unexpected.append({"port": port, "found": f"{n.remote_system}:{n.remote_port}"})
    return report
