"""Lab switches from the inventory: one LabSwitchSpec per EOS or SONiC switch.

Ports come from the switch's port list; LLDP neighbours from the cabling
plan (a server NIC: the server's name and the NIC's name, its MAC as chassis
ID; a switch-to-switch cable: both ends see each other). Switch-to-switch
links start configured as planned (the uplinks carry the VLANs); server
ports start unconfigured (``port_vlans="default"``: access VLAN 1 on EOS,
no VLAN on SONiC), which is what ``switch apply-plan`` is for, or as the
plan says with ``port_vlans="plan"``. Every VLAN the plan names exists.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from sqlalchemy import select

log = logging.getLogger("fleetctl_lab.switch")

LAB_PLATFORMS = {"eos", "sonic"}
#: Made-up stations each uplink learns besides the peer switch's servers.
UPLINK_STATIONS = 24


def _speed(platform: str, port: str) -> int:
    if port.lower().startswith(("management", "mgmt")):
        return 1000
    if platform == "eos" and "/" not in port:
        return 25_000  # DCS-7050SX3-48YC8: 48 x 25G SFP28, then 8 x 100G QSFP (EthernetN/1)
    return 100_000


def switch_specs_from_inventory(conn: Any, password: str, names: set[str] | None = None,
                                port_vlans: Literal["default", "plan"] = "default") -> list[Any]:  # fmt: skip
    """LabSwitchSpecs for the inventory's EOS and SONiC switches.

    Args:
        conn: a SQLAlchemy connection to the inventory.
        password: the lab credential (user ``admin``).
        names: server or switch names; switches cabled to a named server, or
            named themselves, are included. None: every switch.
        port_vlans: how server ports start (see the module docstring).
    """
    from fleetctl.inventory.queries import (
        fb_t,
        hm_t,
        link_t,
        nic_t,
        port_t,
        srv_t,
        sw_t,
    )
    from fleetctl.inventory.snapshot import natural_key
    from fleetctl_lab.switch.spec import (
        DEFAULT_MODEL,
        LabNeighbor,
        LabSwitchPort,
        LabSwitchSpec,
        lab_mac,
    )

    switches = {r.id: r for r in conn.execute(select(sw_t, hm_t.c.model.label("product")).join(hm_t, hm_t.c.id == sw_t.c.model_id))}
    baseline: dict[int, dict[str, str]] = {}
    for r in conn.execute(select(fb_t)):
        baseline.setdefault(r.model_id, {})[r.component] = r.version
    ports = {r.id: r for r in conn.execute(select(port_t))}
    nics = {r.id: r for r in conn.execute(select(nic_t.c.id, nic_t.c.name, nic_t.c.mac, srv_t.c.name.label("server"))
                                          .join(srv_t, srv_t.c.id == nic_t.c.server_id))}  # fmt: skip
    neighbor: dict[int, Any] = {}
    config: dict[int, tuple[str, list[int], bool]] = {}  # port id -> (mode, vlans, is uplink)
    wanted: set[int] = set()
    for ln in conn.execute(select(link_t)):
        near = ports.get(ln.port_id)
        if near is None:
            continue
        vlans = [int(v) for v in str(ln.vlans or "").replace(" ", "").split(",") if v.isdigit()]
        if ln.nic_id is not None and ln.nic_id in nics:
            n = nics[ln.nic_id]
            neighbor[near.id] = LabNeighbor(system=n.server, port=n.name, kind="server", chassis_id=n.mac or "")
            config[near.id] = (ln.mode, vlans, False)
            if names is not None and n.server in names:
                wanted.add(near.switch_id)
        elif ln.peer_port_id is not None and ln.peer_port_id in ports:
            far = ports[ln.peer_port_id]
            near_sw, far_sw = switches.get(near.switch_id), switches.get(far.switch_id)
            if near_sw is None or far_sw is None:
                continue
            neighbor[near.id] = LabNeighbor(system=far_sw.name, port=far.name, kind="switch", chassis_id=lab_mac(far_sw.name))
            neighbor[far.id] = LabNeighbor(system=near_sw.name, port=near.name, kind="switch", chassis_id=lab_mac(near_sw.name))
            config[near.id] = config[far.id] = (ln.mode, vlans, True)
    by_switch: dict[int, list[Any]] = {}
    for p in ports.values():
        by_switch.setdefault(p.switch_id, []).append(p)
    # What an uplink learns: the stations behind its peer switch (the NICs cabled
    # there) and more besides (UPLINK_STATIONS made-up ones: the rest of the
    # network), so a MAC-table reader meets a port carrying many MACs.
    stations: dict[int, list[str]] = {}
    for pid, nb in neighbor.items():
        if nb.kind == "server" and nb.chassis_id:
            stations.setdefault(ports[pid].switch_id, []).append(nb.chassis_id.lower())
    behind: dict[int, list[str]] = {}
    for ln in conn.execute(select(link_t).where(link_t.c.peer_port_id.is_not(None))):
        near, far = ports.get(ln.port_id), ports.get(ln.peer_port_id)
        if near is None or far is None:
            continue
        behind[near.id] = stations.get(far.switch_id, []) + [lab_mac(f"behind/{near.id}/{k}") for k in range(UPLINK_STATIONS)]
        behind[far.id] = stations.get(near.switch_id, []) + [lab_mac(f"behind/{far.id}/{k}") for k in range(UPLINK_STATIONS)]
    specs = []
    for sid, sw in sorted(switches.items(), key=lambda kv: natural_key(kv[1].name)):
        if sw.platform not in LAB_PLATFORMS:
            log.info("lab: switch %s runs %s, which the lab does not speak; skipped", sw.name, sw.platform)
            continue
        if names is not None and sw.name not in names and sid not in wanted:
            continue
        plist = []
        all_vlans: set[int] = set()
        for p in sorted(by_switch.get(sid, []), key=lambda p: natural_key(p.name)):
            mode, vlans, uplink = config.get(p.id, ("access", [], False))
            all_vlans.update(vlans)
            if mode == "trunk" and (uplink or port_vlans == "plan"):
                lp = LabSwitchPort(name=p.name, mode="trunk", vlans=vlans)
            elif port_vlans == "plan" and vlans:
                lp = LabSwitchPort(name=p.name, mode="access", vlans=vlans[:1])
            else:
                lp = LabSwitchPort(name=p.name)
            lp.speed_mbps = _speed(sw.platform, p.name)
            lp.neighbor = neighbor.get(p.id)
            lp.learned = list(behind.get(p.id, []))
            if p.description:
                lp.description = p.description
            plist.append(lp)
        fw = baseline.get(sw.model_id, {})
        version = fw.get("EOS") if sw.platform == "eos" else fw.get("SONiC")
        specs.append(
            LabSwitchSpec(
                name=sw.name, platform=sw.platform, serial=sw.serial or "", os_version=version or "",
                model=sw.product if sw.platform == "eos" and sw.product else DEFAULT_MODEL[sw.platform],
                username="admin", password=password, vlans=sorted(all_vlans), ports=plist,
            )
        )  # fmt: skip
    return specs
