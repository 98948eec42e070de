"""The fleet as an Ansible dynamic inventory.

Groups: ``site_<name>``, ``rack_<name>``, ``role_<server|leaf|spine|management>``,
``state_<lifecycle state>``, ``accel_<mncore2|gpu|...>``. Host variables carry
what an operator's playbook needs (BMC URL, rack, position, serial, model,
NIC MACs); never a secret, and not even the credential reference.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from sqlalchemy import select

from fleetctl.errors import NotFound


def _group(prefix: str, value: str) -> str:
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', value)}"


def _hosts(conn: Any) -> dict[str, dict[str, Any]]:
    from fleetctl.inventory.queries import board_t, hm_t, nic_t, rack_t, site_t, srv_t, sw_t

    hosts: dict[str, dict[str, Any]] = {}
    kinds: dict[int, set[str]] = defaultdict(set)
    for r in conn.execute(select(board_t.c.server_id, board_t.c.kind)):
        if r.server_id is not None:
            kinds[r.server_id].add(r.kind)
    macs: dict[int, dict[str, str]] = defaultdict(dict)
    for r in conn.execute(select(nic_t.c.server_id, nic_t.c.name, nic_t.c.mac)):
        if r.mac:
            macs[r.server_id][r.name] = r.mac
    for r in conn.execute(
        select(srv_t.c.id, srv_t.c.name, srv_t.c.serial, srv_t.c.position, srv_t.c.state, srv_t.c.bmc_url,
               rack_t.c.name.label("rack"), site_t.c.name.label("site"), hm_t.c.name.label("model"))  # fmt: skip
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
    ):
        hosts[r.name] = {
            "vars": {
                "fleetctl_kind": "server", "fleetctl_serial": r.serial, "fleetctl_site": r.site,
                "fleetctl_rack": r.rack, "fleetctl_position": r.position, "fleetctl_state": r.state,
                "fleetctl_model": r.model, "fleetctl_bmc_url": r.bmc_url,
                "fleetctl_accelerators": sorted(kinds[r.id]), "fleetctl_macs": macs[r.id],
            },  # fmt: skip
            "groups": [_group("site", r.site), _group("rack", r.rack), "role_server", _group("state", r.state)]
            + [_group("accel", k) for k in sorted(kinds[r.id])],
        }
    for r in conn.execute(
        select(sw_t.c.name, sw_t.c.role, sw_t.c.platform, sw_t.c.mgmt_address, sw_t.c.position,
               rack_t.c.name.label("rack"), site_t.c.name.label("site"))  # fmt: skip
        .join(rack_t, rack_t.c.id == sw_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
    ):
        hosts[r.name] = {
            "vars": {
                "fleetctl_kind": "switch", "fleetctl_site": r.site, "fleetctl_rack": r.rack,
                "fleetctl_position": r.position, "fleetctl_platform": r.platform,
                "ansible_host": r.mgmt_address,
            },  # fmt: skip
            "groups": [_group("site", r.site), _group("rack", r.rack), _group("role", r.role)],
        }
    return hosts


def ansible_inventory(url: str | None = None) -> dict[str, Any]:
    from fleetctl.store import get_engine

    with get_engine(url).connect() as conn:
        hosts = _hosts(conn)
    groups: dict[str, list[str]] = defaultdict(list)
    for name in sorted(hosts):
        for g in hosts[name]["groups"]:
            groups[g].append(name)
    out: dict[str, Any] = {g: {"hosts": members} for g, members in sorted(groups.items())}
    out["all"] = {"children": sorted(groups) + ["ungrouped"]}
    out["_meta"] = {"hostvars": {n: h["vars"] for n, h in sorted(hosts.items())}}
    return out


def host_vars(name: str, url: str | None = None) -> dict[str, Any]:
    from fleetctl.store import get_engine

    with get_engine(url).connect() as conn:
        hosts = _hosts(conn)
    if name not in hosts:
        raise NotFound(f"no host named {name!r}")
    return hosts[name]["vars"]
