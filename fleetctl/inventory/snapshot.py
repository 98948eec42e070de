"""Read the inventory from the store into site-file specs.

The same specs serve export (render them), import (diff them against the
files) and the CLI's add/set/remove (edit them, then validate and apply like
an import), so there is one path that validates and one that writes.
Rows come out through SQLAlchemy Core in a handful of queries; the specs are
built with ``model_construct`` because what the database holds was validated
on the way in.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from fleetctl.inventory.naming import natural_key
from fleetctl.inventory.schema import (
    BiosProfileSpec,
    BoardSpec,
    BoardsSpec,
    CableSpec,
    ClusterSpec,
    K8sJoinSpec,
    ModelSpec,
    NicSpec,
    PowerSpec,
    ProvisioningSpec,
    RackSpec,
    ServerSpec,
    SiteFile,
    SiteSpec,
    SnmpSpec,
    SwitchSpec,
)
from fleetctl.models import (
    AcceleratorBoard,
    BiosProfile,
    FirmwareBaseline,
    HardwareModel,
    Link,
    Nic,
    Rack,
    Server,
    ServerTag,
    Site,
    Switch,
    SwitchPort,
)


def _t(model: Any) -> Any:
    return model.__table__


def read_models(conn: Connection) -> list[ModelSpec]:
    hm, fb = _t(HardwareModel), _t(FirmwareBaseline)
    firmware: dict[int, dict[str, str]] = defaultdict(dict)
    for row in conn.execute(select(fb.c.model_id, fb.c.component, fb.c.version)):
        firmware[row.model_id][row.component] = row.version
    out = []
    for r in conn.execute(select(hm)):
        out.append(
            ModelSpec.model_construct(
                name=r.name,
                kind=r.kind,
                vendor=r.vendor,
                model=r.model,
                height=r.height,
                power=PowerSpec.model_construct(idle=r.power_idle_w, peak=r.power_peak_w)
                if r.power_idle_w is not None and r.power_peak_w is not None
                else None,
                boards=BoardsSpec.model_construct(kind=r.board_kind, count=r.board_count)
                if r.board_kind and r.board_count
                else None,
                bios_profile=r.bios_profile,
                firmware=dict(sorted(firmware[r.id].items())),
                ports=r.ports.split("\n") if r.ports else None,
                driver=r.driver,
            )
        )
    out.sort(key=lambda m: natural_key(m.name))
    return out


def read_sites(conn: Connection, names: set[str] | None = None) -> list[SiteSpec]:
    """The sites (all, or those named) with everything in them."""
    site_t, rack_t, srv_t = _t(Site), _t(Rack), _t(Server)
    sites_q = select(site_t)
    if names is not None:
        sites_q = sites_q.where(site_t.c.name.in_(sorted(names)))
    site_rows = list(conn.execute(sites_q))
    site_ids = [r.id for r in site_rows]
    if not site_ids:
        return []
    model_names = {r.id: r.name for r in conn.execute(select(_t(HardwareModel).c.id, _t(HardwareModel).c.name))}
    rack_rows = list(conn.execute(select(rack_t).where(rack_t.c.site_id.in_(site_ids))))
    rack_ids = [r.id for r in rack_rows]

    servers_by_rack: dict[int, list[ServerSpec]] = defaultdict(list)
    server_rows = list(conn.execute(select(srv_t).where(srv_t.c.rack_id.in_(rack_ids)))) if rack_ids else []
    server_ids = [r.id for r in server_rows]
    server_name = {r.id: r.name for r in server_rows}

    nics: dict[int, list[NicSpec]] = defaultdict(list)
    nic_owner: dict[int, tuple[str, str]] = {}
    tags: dict[int, list[str]] = defaultdict(list)
    boards: dict[int, list[BoardSpec]] = defaultdict(list)
    if server_ids:
        nic_t, tag_t, board_t = _t(Nic), _t(ServerTag), _t(AcceleratorBoard)
        for chunk in _chunks(server_ids):
            for r in conn.execute(select(nic_t).where(nic_t.c.server_id.in_(chunk))):
                nics[r.server_id].append(NicSpec.model_construct(name=r.name, mac=r.mac))
                nic_owner[r.id] = (server_name[r.server_id], r.name)
            for r in conn.execute(select(tag_t).where(tag_t.c.server_id.in_(chunk))):
                tags[r.server_id].append(r.tag)
            for r in conn.execute(select(board_t).where(board_t.c.server_id.in_(chunk))):
                boards[r.server_id].append(
                    BoardSpec.model_construct(
                        serial=r.serial,
                        position=r.position,
                        slot=r.slot,
                        kind=r.kind,
                        pci=r.pci_address,
                        model=r.model,
                        firmware=dict(sorted((r.firmware or {}).items())),
                        state=r.state,
                    )
                )
    for r in server_rows:
        servers_by_rack[r.rack_id].append(
            ServerSpec.model_construct(
                name=r.name,
                serial=r.serial,
                model=model_names[r.model_id],
                position=r.position,
                bmc=r.bmc_url,
                system_id=r.bmc_system_id,
                credential=r.credential,
                fingerprint=r.bmc_fingerprint,
                host=r.host_address,
                host_vars=dict(sorted((r.host_vars or {}).items())),
                nics=sorted(nics[r.id], key=lambda n: natural_key(n.name)),
                boards=sorted(boards[r.id], key=lambda b: (b.slot, b.serial)),
                tags=sorted(tags[r.id]),
                state=r.state,
                cluster=r.k8s_cluster,
                node=r.k8s_node,
            )
        )

    sw_t, port_t, link_t = _t(Switch), _t(SwitchPort), _t(Link)
    switches_by_rack: dict[int, list[SwitchSpec]] = defaultdict(list)
    switch_rows = list(conn.execute(select(sw_t).where(sw_t.c.rack_id.in_(rack_ids)))) if rack_ids else []
    for r in switch_rows:
        switches_by_rack[r.rack_id].append(
            SwitchSpec.model_construct(
                name=r.name,
                model=model_names[r.model_id],
                platform=r.platform,
                role=r.role,
                address=r.mgmt_address,
                position=r.position,
                serial=r.serial,
                credential=r.credential,
                ssh_port=r.ssh_port or 22,
                snmp=SnmpSpec.model_construct(version=r.snmp_version, credential=r.snmp_credential, port=r.snmp_port)
                if r.snmp_credential
                else None,
            )
        )

    rack_site = {r.id: r.site_id for r in rack_rows}
    switch_site = {r.id: rack_site[r.rack_id] for r in switch_rows}
    switch_name = {r.id: r.name for r in switch_rows}
    cabling: dict[int, list[CableSpec]] = defaultdict(list)
    switch_ids = list(switch_site)
    if switch_ids:
        port_name: dict[int, tuple[int, str]] = {}
        for chunk in _chunks(switch_ids):
            for r in conn.execute(select(port_t.c.id, port_t.c.switch_id, port_t.c.name).where(port_t.c.switch_id.in_(chunk))):
                port_name[r.id] = (r.switch_id, r.name)
        for r in conn.execute(select(link_t)):
            if r.port_id not in port_name:
                continue  # a link of another site
            sw_id, pname = port_name[r.port_id]
            vlans = [int(v) for v in r.vlans.split(",") if v]
            if r.nic_id is not None:
                srv, nic = nic_owner[r.nic_id]
                cable = CableSpec.model_construct(
                    switch=switch_name[sw_id], port=pname, server=srv, nic=nic, peer=None, peer_port=None,
                    vlans=vlans, mode=r.mode,
                )  # fmt: skip
            else:
                peer_sw, peer_port = port_name.get(r.peer_port_id, (None, None))
                cable = CableSpec.model_construct(
                    switch=switch_name[sw_id], port=pname, server=None, nic=None,
                    peer=switch_name.get(peer_sw) if peer_sw else None, peer_port=peer_port,
                    vlans=vlans, mode=r.mode,
                )  # fmt: skip
            cabling[switch_site[sw_id]].append(cable)

    racks_by_site: dict[int, list[RackSpec]] = defaultdict(list)
    for r in rack_rows:
        racks_by_site[r.site_id].append(
            RackSpec.model_construct(
                name=r.name,
                row=r.row,
                position=r.position,
                height=r.height,
                power_budget=r.power_budget_w,
                servers=sorted(servers_by_rack[r.id], key=lambda s: (s.position, natural_key(s.name))),
                switches=sorted(switches_by_rack[r.id], key=lambda s: (s.position, natural_key(s.name))),
            )
        )
    sites = [
        SiteSpec.model_construct(
            name=r.name,
            description=r.description,
            provisioning=_provisioning(r.provisioning),
            clusters=[ClusterSpec.model_construct(**c) for c in r.k8s_clusters or []],
            racks=sorted(racks_by_site[r.id], key=lambda k: natural_key(k.name)),
            cabling=sorted(cabling[r.id], key=lambda c: (natural_key(c.switch), natural_key(c.port))),
        )
        for r in site_rows
    ]
    sites.sort(key=lambda s: natural_key(s.name))
    return sites


def _provisioning(stored: dict[str, Any] | None) -> ProvisioningSpec | None:
    """The stored minimal dict back as a spec (its defaults filled in, not marked as set)."""
    if stored is None:
        return None
    values = dict(stored)
    if values.get("k8s") is not None:
        values["k8s"] = K8sJoinSpec.model_construct(**values["k8s"])
    return ProvisioningSpec.model_construct(**values)


def read_bios_profiles(conn: Connection) -> list[BiosProfileSpec]:
    t = _t(BiosProfile)
    out = [
        BiosProfileSpec.model_construct(name=r.name, description=r.description, attributes=dict(sorted((r.attributes or {}).items())))
        for r in conn.execute(select(t))
    ]
    out.sort(key=lambda p: natural_key(p.name))
    return out


def read_inventory(conn: Connection, site_names: set[str] | None = None) -> SiteFile:
    return SiteFile.model_construct(bios_profiles=read_bios_profiles(conn), models=read_models(conn), sites=read_sites(conn, site_names))


def _chunks(ids: list[int], size: int = 20000) -> list[list[int]]:
    # SQLite allows 32766 bound parameters per statement; stay well below.
    return [ids[i : i + size] for i in range(0, len(ids), size)]
