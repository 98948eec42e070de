"""Where a BMC sits, from the switches' MAC tables and the cabling plan.

A BMC's MAC learned on a switch port (:class:`MacSighting`, read by
:func:`read_sightings` over SNMP, the CLI and LLDP) plus the plan's cable on
that port (``Link`` -> ``Nic`` -> ``Server``: rack and U position) is where
the server sits (:class:`Placement`). The site-file schema cables a port to
a declared server's NIC (``cabling: {switch, port, server, nic}``); it cannot
name a bare rack position, so a server not yet in the inventory is placed at
the position of the server the plan declares on that port (``server``), and
the discovery plan matches by it.

What the tables cannot say for sure is a :class:`PlacementProblem`, never a
guess: a MAC on two access ports, a port the plan does not cable to a
server, a position the plan gives to a server whose NIC has another MAC.
Ports that carry many MACs (uplinks, peer links) say nothing about where a
MAC sits and are left out, as are the ports the plan cables switch to switch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select
from sqlalchemy.engine import Connection

from fleetctl.discovery.mactable import MacSighting, read_inventory_switches
from fleetctl.inventory.schema import normalise_mac

__all__ = [
    "UPLINK_MACS",
    "MacSighting",
    "Placement",
    "PlacementProblem",
    "place",
    "read_sightings",
]

#: A port on which more distinct MACs are learned than this is an uplink or a
#: peer link (a server's BMC port carries one, a shared NIC two or three): its
#: MACs are learned through it, not cabled to it.
UPLINK_MACS = 8

ProblemKind = Literal["two-ports", "port-not-in-plan", "position-taken"]


@dataclass(frozen=True)
class Placement:
    """A MAC placed by the cabling plan.

    Attributes:
        mac: the MAC placed.
        site, rack, position: where the plan puts the server cabled to the port.
        switch, port: where the MAC was learned.
        nic: the plan's NIC on that port (``bmc``), None where it names none.
        server: the server the plan declares on that port (the discovery plan
            matches a new server by it: the site file cables ports to servers,
            not to bare positions).
    """

    mac: str
    site: str
    rack: str
    position: int
    switch: str
    port: str
    nic: str | None
    server: str | None = None


@dataclass(frozen=True)
class PlacementProblem:
    """Why a MAC that was seen is not placed.

    Attributes:
        mac: the MAC.
        kind: ``two-ports`` (learned on more than one access port),
            ``port-not-in-plan`` (its port is cabled to no server, or is no
            port of the plan), ``position-taken`` (the plan's position there
            holds a server whose NIC has another MAC, or the MAC is another
            server's).
        detail: one line for the operator.
        ports: the ``switch:port`` places it was seen.
    """

    mac: str
    kind: str  # ProblemKind
    detail: str
    ports: tuple[str, ...] = ()


def read_sightings(
    c: Connection,
    switches: Sequence[str] | None = None,
    *,
    deadline_s: float = 60.0,
) -> tuple[list[MacSighting], list[str]]:
    """Read the MAC tables (and LLDP neighbours) of the inventory's switches.

    Each switch is read over SNMP when the inventory gives it SNMP settings,
    else over its CLI (the platform's MAC table command, parsed with
    ntc-templates); see :mod:`fleetctl.discovery.mactable`.

    Args:
        c: a connection to the inventory.
        switches: switch TARGETs as ``fleetctl switch`` takes them (names,
            racks, sites, ``role=management``); None: every switch.
        deadline_s: seconds for the whole read; a switch still unread then is
            an error line.

    Returns:
        The sightings, and one line per switch that could not be read (why).
    """
    return read_inventory_switches(c, switches, deadline_s=deadline_s)


@dataclass(frozen=True)
class _PlanPort:
    port_id: int
    peer_link: bool  # cabled switch to switch
    nic: str | None = None
    nic_mac: str | None = None
    server: str | None = None
    rack: str | None = None
    site: str | None = None
    position: int | None = None


def _plan(c: Connection) -> tuple[dict[tuple[str, str], _PlanPort], dict[str, tuple[str, str]]]:
    """The plan's ports by (switch, port), and every declared NIC MAC -> (server, nic)."""
    from fleetctl.inventory.queries import link_t, nic_t, port_t, rack_t, site_t, srv_t, sw_t

    ports: dict[tuple[str, str], _PlanPort] = {}
    rows = c.execute(select(port_t.c.id, port_t.c.name, sw_t.c.name.label("switch")).join(sw_t, sw_t.c.id == port_t.c.switch_id))
    by_id: dict[int, tuple[str, str]] = {}
    for r in rows:
        by_id[r.id] = (r.switch, r.name)
        ports[(r.switch, r.name)] = _PlanPort(r.id, peer_link=False)
    # A switch-to-switch cable makes both its ends peer links.
    for pl in c.execute(select(link_t.c.port_id, link_t.c.peer_port_id).where(link_t.c.peer_port_id.is_not(None))):
        for pid in (pl.port_id, pl.peer_port_id):
            key = by_id.get(pid)
            if key is not None:
                ports[key] = _PlanPort(pid, peer_link=True)
    q = (
        select(link_t.c.port_id, nic_t.c.name.label("nic"), nic_t.c.mac, srv_t.c.name.label("server"), srv_t.c.position,
               rack_t.c.name.label("rack"), site_t.c.name.label("site"))  # fmt: skip
        .join(nic_t, nic_t.c.id == link_t.c.nic_id)
        .join(srv_t, srv_t.c.id == nic_t.c.server_id)
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
    )
    for sl in c.execute(q):
        key = by_id.get(sl.port_id)
        if key is not None and not ports[key].peer_link:
            ports[key] = _PlanPort(sl.port_id, False, sl.nic, sl.mac, sl.server, sl.rack, sl.site, sl.position)
    macs: dict[str, tuple[str, str]] = {}
    nq = select(nic_t.c.mac, nic_t.c.name, srv_t.c.name.label("server")).join(srv_t, srv_t.c.id == nic_t.c.server_id)
    for r in c.execute(nq.where(nic_t.c.mac.is_not(None))):
        macs[r.mac] = (r.server, r.name)
    return ports, macs


def place(
    c: Connection,
    sightings: Sequence[MacSighting],
    macs: Collection[str],
    *,
    uplink_macs: int = UPLINK_MACS,
) -> dict[str, Placement | PlacementProblem]:
    """Place the MACs asked for by where they were learned and the cabling plan.

    Args:
        c: a connection to the inventory (the plan is read from it).
        sightings: what the switches said (:func:`read_sightings`).
        macs: the MACs to place, in any spelling ``Nic.mac`` accepts.
        uplink_macs: a port with more distinct MACs than this is an uplink
            and places nothing (:data:`UPLINK_MACS`).

    Returns:
        For each MAC asked that was seen on an access port, keyed by its
        normalised form (lower-case, colon-separated): its :class:`Placement`
        or the :class:`PlacementProblem` that stops one. A MAC seen nowhere
        (or only through uplinks) is absent.

    Raises:
        ValueError: a MAC asked for is not a MAC.
    """
    wanted = {normalise_mac(m) for m in macs}
    if not wanted:
        return {}
    plan, declared = _plan(c)
    on_port: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in sightings:
        on_port[(s.switch, s.port)].add(s.mac)
    uplinks = {key for key, seen in on_port.items() if len(seen) > uplink_macs}
    uplinks |= {key for key, p in plan.items() if p.peer_link}
    where: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in sorted(on_port):
        if key in uplinks:
            continue
        for mac in on_port[key] & wanted:
            where[mac].append(key)
    out: dict[str, Placement | PlacementProblem] = {}
    for mac in sorted(where):
        keys = where[mac]
        labels = tuple(f"{sw}:{port}" for sw, port in keys)
        if len(keys) > 1:
            out[mac] = PlacementProblem(mac, "two-ports", f"{mac} is learned on {len(keys)} access ports: {', '.join(labels)}", labels)
            continue
        switch, port = keys[0]
        p = plan.get((switch, port))
        if p is None or p.server is None:
            why = "is no port of the plan" if p is None else "is cabled to no server in the plan"
            out[mac] = PlacementProblem(mac, "port-not-in-plan", f"{mac} is on {switch}:{port}, which {why}", labels)
            continue
        assert p.rack is not None and p.site is not None and p.position is not None  # set with server
        at = f"{p.site}/{p.rack} U{p.position}"
        if p.nic_mac is not None and p.nic_mac != mac:
            out[mac] = PlacementProblem(
                mac, "position-taken",
                f"{mac} is on {switch}:{port}, cabled to {p.server} {p.nic} at {at}, whose {p.nic} MAC is {p.nic_mac}", labels,
            )  # fmt: skip
            continue
        owner = declared.get(mac)
        if owner is not None and owner[0] != p.server:
            out[mac] = PlacementProblem(
                mac, "position-taken",
                f"{mac} is {owner[0]} {owner[1]}'s, but is on {switch}:{port}, cabled to {p.server} {p.nic} at {at}", labels,
            )  # fmt: skip
            continue
        out[mac] = Placement(mac, p.site, p.rack, p.position, switch, port, p.nic, p.server)
    return out
