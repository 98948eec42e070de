"""The fleet as an Ansible dynamic inventory.

Groups (names made safe for Ansible: every character other than a letter, a
digit or ``_`` becomes ``_``):

- ``site_<site>``, ``rack_<rack>``: every server and switch. Rack names are
  unique only within a site, so with several sites a rack group can span
  them; target one rack with ``site_tyo1:&rack_rack_12``.
- ``role_server`` for servers; ``role_leaf``, ``role_spine``,
  ``role_management`` for switches.
- ``state_<lifecycle state>`` (``state_in_service`` ...): servers.
- ``accel_<kind>`` (``accel_mncore2``, ``accel_gpu``): servers whose hardware
  model holds boards of that kind, and servers holding at least one such
  board, so a server whose boards are not recorded yet is still found.
- ``tag_<tag>``: servers carrying the tag.

Host variables carry what an operator's playbook needs (BMC URL, rack,
position, serial, model, NIC MACs); never a secret, and not even the
credential reference. A BMC URL that carries a user or password has them
removed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import select

from fleetctl.errors import NotFound
from fleetctl.inventory.queries import board_t, hm_t, nic_t, rack_t, site_t, srv_t, sw_t, tag_t
from fleetctl.store import get_engine


def group_name(prefix: str, value: str) -> str:
    """``("rack", "rack-12")`` -> ``rack_rack_12``: a name Ansible accepts without a warning."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', value)}"


def _public_url(url: str | None) -> str | None:
    """The URL without any ``user:password@`` part."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _hosts(conn: Any, name: str | None = None, *, servers_only: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every server and switch (or only ``name``; or only the servers ``servers_only``): variables and groups."""
    servers = (
        select(srv_t.c.id, srv_t.c.name, srv_t.c.serial, srv_t.c.position, srv_t.c.state, srv_t.c.bmc_url,
               rack_t.c.name.label("rack"), site_t.c.name.label("site"), hm_t.c.name.label("model"),
               hm_t.c.board_kind, hm_t.c.board_count, srv_t.c.host_address, srv_t.c.host_vars)  # fmt: skip
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
    )
    switches = (
        select(sw_t.c.name, sw_t.c.serial, sw_t.c.role, sw_t.c.platform, sw_t.c.mgmt_address, sw_t.c.position,
               rack_t.c.name.label("rack"), site_t.c.name.label("site"), hm_t.c.name.label("model"))  # fmt: skip
        .join(rack_t, rack_t.c.id == sw_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == sw_t.c.model_id)
    )
    kinds_q = select(board_t.c.server_id, board_t.c.kind).where(board_t.c.server_id.is_not(None))
    nics_q = select(nic_t.c.server_id, nic_t.c.name, nic_t.c.mac).where(nic_t.c.mac.is_not(None))
    tags_q = select(tag_t.c.server_id, tag_t.c.tag)
    if servers_only is not None:
        # A workflow's batch: its servers' variables, without reading the whole fleet.
        some = sorted(servers_only)
        servers = servers.where(srv_t.c.name.in_(some))
        switches = switches.where(sw_t.c.name.is_(None))
        ids = select(srv_t.c.id).where(srv_t.c.name.in_(some)).scalar_subquery()
        kinds_q = kinds_q.where(board_t.c.server_id.in_(ids))
        nics_q = nics_q.where(nic_t.c.server_id.in_(ids))
        tags_q = tags_q.where(tag_t.c.server_id.in_(ids))
    if name is not None:
        servers = servers.where(srv_t.c.name == name)
        switches = switches.where(sw_t.c.name == name)
        one = select(srv_t.c.id).where(srv_t.c.name == name).scalar_subquery()
        kinds_q = kinds_q.where(board_t.c.server_id == one)
        nics_q = nics_q.where(nic_t.c.server_id == one)
        tags_q = tags_q.where(tag_t.c.server_id == one)

    kinds: dict[int, set[str]] = defaultdict(set)
    for r in conn.execute(kinds_q):
        kinds[r.server_id].add(r.kind)
    macs: dict[int, dict[str, str]] = defaultdict(dict)
    for r in conn.execute(nics_q):
        macs[r.server_id][r.name] = r.mac
    tags: dict[int, list[str]] = defaultdict(list)
    for r in conn.execute(tags_q):
        tags[r.server_id].append(r.tag)

    hosts: dict[str, dict[str, Any]] = {}
    for r in conn.execute(servers):
        accel_kinds = set(kinds[r.id])
        if r.board_kind and r.board_count:
            accel_kinds.add(r.board_kind)
        accel = sorted(accel_kinds)
        server_tags = sorted(tags[r.id])
        # What the playbooks' device checks expect, from the hardware model.
        expected = {}
        if r.board_kind and r.board_count:
            expected["fleetctl_expected_gpus" if r.board_kind == "gpu" else "fleetctl_expected_boards"] = r.board_count
        hosts[r.name] = {
            "vars": {
                "fleetctl_kind": "server", "fleetctl_role": "server", "fleetctl_serial": r.serial,
                "fleetctl_site": r.site, "fleetctl_rack": r.rack, "fleetctl_position": r.position,
                "fleetctl_state": r.state, "fleetctl_model": r.model, "fleetctl_bmc_url": _public_url(r.bmc_url),
                "fleetctl_accelerators": accel, "fleetctl_macs": dict(sorted(macs[r.id].items())),
                "fleetctl_tags": server_tags, **expected,
                **_host_address_vars(r.host_address), **(r.host_vars or {}),
            },  # fmt: skip
            "groups": [group_name("site", r.site), group_name("rack", r.rack), "role_server", group_name("state", r.state)]
            + [group_name("accel", k) for k in accel]
            + [group_name("tag", t) for t in server_tags],
        }
    for r in conn.execute(switches):
        hosts[r.name] = {
            "vars": {
                "fleetctl_kind": "switch", "fleetctl_role": r.role, "fleetctl_serial": r.serial,
                "fleetctl_site": r.site, "fleetctl_rack": r.rack, "fleetctl_position": r.position,
                "fleetctl_model": r.model, "fleetctl_platform": r.platform, "fleetctl_address": r.mgmt_address,
                "ansible_host": r.mgmt_address,
            },  # fmt: skip
            "groups": [group_name("site", r.site), group_name("rack", r.rack), group_name("role", r.role)],
        }
    return hosts


def _host_address_vars(address: str | None) -> dict[str, Any]:
    """``ansible_host``/``ansible_port`` of a server whose OS is not reached by its name on port 22."""
    if not address:
        return {}
    host, port = split_host_port(address)
    return {"ansible_host": host, **({"ansible_port": port} if port != 22 else {})}


def split_host_port(address: str, default_port: int = 22) -> tuple[str, int]:
    """("host", port) of ``host``, ``host:port`` or ``[v6]:port``."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if address.count(":") == 1:
        host, _, port = address.partition(":")
        return host, int(port)
    return address, default_port


def ansible_inventory(url: str | None = None) -> dict[str, Any]:
    """The ``--list`` answer: every group with its hosts, and ``_meta.hostvars``.

    With ``_meta`` present Ansible never calls ``--host`` per host.
    """
    with get_engine(url).connect() as conn:
        hosts = _hosts(conn)
    groups: dict[str, list[str]] = defaultdict(list)
    for name in sorted(hosts):
        for g in hosts[name]["groups"]:
            groups[g].append(name)
    out: dict[str, Any] = {g: {"hosts": members} for g, members in sorted(groups.items())}
    out["all"] = {"children": [*sorted(groups), "ungrouped"]}
    out["_meta"] = {"hostvars": {n: h["vars"] for n, h in sorted(hosts.items())}}
    return out


def host_vars(name: str, url: str | None = None) -> dict[str, Any]:
    """The ``--host NAME`` answer: one host's variables.

    Raises:
        NotFound: no server or switch has that name.
    """
    with get_engine(url).connect() as conn:
        hosts = _hosts(conn, name)
    if name not in hosts:
        raise NotFound(f"no host named {name!r}")
    return hosts[name]["vars"]
