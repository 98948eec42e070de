"""Read-only queries behind the CLI's list and show commands.

SQLAlchemy Core, one query per listing with its joins and filters in SQL,
rows returned as plain dicts: a filtered list over 10,000 servers stays well
under the time it takes Python to start.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from fleetctl.errors import InputError, NotFound
from fleetctl.inventory.naming import natural_key
from fleetctl.lifecycle.states import ServerState
from fleetctl.store import tables as T

# Light Core tables (generated from the models): the read path never imports
# SQLModel, pydantic or the ORM, which would cost it more than its query.
srv_t = T.server
rack_t = T.rack
site_t = T.site
hm_t = T.hardware_model
tag_t = T.server_tag
board_t = T.accelerator_board
nic_t = T.nic
sw_t = T.switch
port_t = T.switch_port
link_t = T.link
fb_t = T.firmware_baseline
event_t = T.event


def resolve_rack(conn: Connection, ref: str) -> Any:
    """A rack row from ``rack-12`` or ``site/rack-12``."""
    site, _, name = ref.rpartition("/")
    q = select(rack_t, site_t.c.name.label("site")).join(site_t, site_t.c.id == rack_t.c.site_id).where(rack_t.c.name == name)
    if site:
        q = q.where(site_t.c.name == site)
    rows = list(conn.execute(q))
    if not rows:
        raise NotFound(f"no rack named {ref!r}")
    if len(rows) > 1:
        sites = ", ".join(sorted(f"{r.site}/{r.name}" for r in rows))
        raise InputError(f"rack {ref!r} is ambiguous: say which of {sites}")
    return rows[0]


def check_filters(conn: Connection, **filters: str | None) -> None:
    """Refuse a filter given with an empty or unknown value.

    A filter that is skipped when empty would widen a selection to the whole
    fleet: ``power off "state=$S"`` with S unset must not power off
    everything. Only ``all`` says all (see fleetctl.targets).
    """
    for key, value in filters.items():
        if value is None:
            continue
        if not value.strip():
            raise InputError(f"{key}= needs a value; an empty one would select every server (say `all` for that)", field=key)
        if key == "state" and value not in {s.value for s in ServerState}:
            raise InputError(f"state={value}: no such state (one of {', '.join(s.value for s in ServerState)})", field=key)
        column = {"site": site_t.c.name, "model": hm_t.c.name, "tag": tag_t.c.tag}.get(key)
        if column is not None and conn.execute(select(column).where(column == value).limit(1)).first() is None:
            raise NotFound(f"{key}={value}: no {'server carries that tag' if key == 'tag' else f'{key} of that name'}")


def list_servers(
    conn: Connection,
    *,
    rack: str | None = None,
    site: str | None = None,
    state: str | None = None,
    model: str | None = None,
    tag: str | None = None,
) -> list[dict[str, Any]]:
    boards = (
        select(board_t.c.server_id, func.count().label("n"))
        .group_by(board_t.c.server_id)
        .subquery()
    )
    q = (
        select(
            srv_t.c.name, srv_t.c.serial, site_t.c.name.label("site"), rack_t.c.name.label("rack"),
            srv_t.c.position, srv_t.c.height, hm_t.c.name.label("model"), hm_t.c.vendor, srv_t.c.state,
            srv_t.c.bmc_url, func.coalesce(boards.c.n, 0).label("boards"), srv_t.c.id,
        )  # fmt: skip
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
        .outerjoin(boards, boards.c.server_id == srv_t.c.id)
    )
    if rack:
        q = q.where(rack_t.c.id == resolve_rack(conn, rack).id)
    if site:
        q = q.where(site_t.c.name == site)
    if state:
        q = q.where(srv_t.c.state == state)
    if model:
        q = q.where(hm_t.c.name == model)
    if tag:
        q = q.where(srv_t.c.id.in_(select(tag_t.c.server_id).where(tag_t.c.tag == tag)))
    check_filters(conn, rack=rack, site=site, state=state, model=model, tag=tag)
    rows = [dict(r._mapping) for r in conn.execute(q)]
    ids = [r.pop("id") for r in rows]
    tags: dict[int, list[str]] = {}
    if ids and len(ids) <= 20000:
        for r in conn.execute(select(tag_t).where(tag_t.c.server_id.in_(ids))):
            tags.setdefault(r.server_id, []).append(r.tag)
    for row, i in zip(rows, ids, strict=True):
        row["tags"] = sorted(tags.get(i, []))
    rows.sort(key=lambda r: (natural_key(r["site"]), natural_key(r["rack"]), r["position"]))
    return rows


def server_detail(conn: Connection, name: str) -> dict[str, Any]:
    row = conn.execute(
        select(srv_t, site_t.c.name.label("site"), rack_t.c.name.label("rack"), hm_t.c.name.label("model_name"),
               hm_t.c.vendor, hm_t.c.model.label("model_label"), hm_t.c.board_kind, hm_t.c.board_count)  # fmt: skip
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
        .where(srv_t.c.name == name)
    ).first()
    if row is None:
        raise NotFound(f"no server named {name!r}")
    nics = []
    for n in conn.execute(select(nic_t).where(nic_t.c.server_id == row.id)):
        cable = conn.execute(
            select(sw_t.c.name, port_t.c.name.label("port"), link_t.c.vlans, link_t.c.mode)
            .join(port_t, port_t.c.id == link_t.c.port_id)
            .join(sw_t, sw_t.c.id == port_t.c.switch_id)
            .where(link_t.c.nic_id == n.id)
        ).first()
        nics.append({
            "name": n.name, "mac": n.mac,
            "switch": cable.name if cable else None, "port": cable.port if cable else None,
            "vlans": cable.vlans if cable else None, "mode": cable.mode if cable else None,
        })  # fmt: skip
    nics.sort(key=lambda n: natural_key(n["name"]))
    boards = [
        {"slot": b.slot, "kind": b.kind, "serial": b.serial, "position": b.position, "pci": b.pci_address, "model": b.model,
         "state": b.state, "firmware": b.firmware}  # fmt: skip
        for b in conn.execute(select(board_t).where(board_t.c.server_id == row.id).order_by(board_t.c.slot))
    ]
    tags = sorted(r.tag for r in conn.execute(select(tag_t.c.tag).where(tag_t.c.server_id == row.id)))
    baseline = {r.component: r.version for r in conn.execute(select(fb_t).where(fb_t.c.model_id == row.model_id))}
    return {
        "name": row.name, "serial": row.serial, "site": row.site, "rack": row.rack, "position": row.position,
        "height": row.height, "model": row.model_name, "vendor": row.vendor, "product": row.model_label,
        "state": row.state, "target_state": row.target_state, "last_error": row.last_error,
        "bmc": row.bmc_url, "system_id": row.bmc_system_id, "credential": row.credential,
        "fingerprint": row.bmc_fingerprint, "host": row.host_address or f"{row.name} (port 22)",
        "host_vars": dict(sorted((row.host_vars or {}).items())), "locked_by": row.reservation,
        "locked_for": row.reserved_for, "locked_since": row.reserved_at.isoformat() if row.reserved_at else None,
        "tags": tags, "expected_boards": f"{row.board_count} {row.board_kind}" if row.board_kind else None,
        "firmware_baseline": baseline, "nics": nics, "boards": boards,
    }  # fmt: skip


def list_racks(conn: Connection, *, site: str | None = None) -> list[dict[str, Any]]:
    used = (
        select(srv_t.c.rack_id, func.sum(srv_t.c.height).label("u"), func.count().label("n"),
               func.sum(hm_t.c.power_peak_w).label("peak"))  # fmt: skip
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
        .group_by(srv_t.c.rack_id)
        .subquery()
    )
    sw_used = select(sw_t.c.rack_id, func.sum(sw_t.c.height).label("u"), func.count().label("n")).group_by(sw_t.c.rack_id).subquery()
    q = (
        select(
            site_t.c.name.label("site"), rack_t.c.name, rack_t.c.row, rack_t.c.position, rack_t.c.height,
            rack_t.c.power_budget_w.label("power_budget"),
            func.coalesce(used.c.n, 0).label("servers"), func.coalesce(sw_used.c.n, 0).label("switches"),
            (func.coalesce(used.c.u, 0) + func.coalesce(sw_used.c.u, 0)).label("used_u"),
            func.coalesce(used.c.peak, 0).label("peak_w"),
        )  # fmt: skip
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .outerjoin(used, used.c.rack_id == rack_t.c.id)
        .outerjoin(sw_used, sw_used.c.rack_id == rack_t.c.id)
    )
    if site:
        q = q.where(site_t.c.name == site)
    rows = [dict(r._mapping) for r in conn.execute(q)]
    rows.sort(key=lambda r: (natural_key(r["site"]), natural_key(r["name"])))
    return rows


def rack_elevation(conn: Connection, ref: str) -> dict[str, Any]:
    """A rack and the devices in it, unit by unit."""
    rack = resolve_rack(conn, ref)
    devices = []
    for r in conn.execute(
        select(srv_t.c.name, srv_t.c.position, srv_t.c.height, srv_t.c.state, hm_t.c.name.label("model"),
               hm_t.c.board_kind, hm_t.c.power_peak_w)  # fmt: skip
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
        .where(srv_t.c.rack_id == rack.id)
    ):
        devices.append({"kind": "server", "name": r.name, "position": r.position, "height": r.height,
                        "state": r.state, "model": r.model, "boards": r.board_kind, "peak_w": r.power_peak_w})  # fmt: skip
    for w in conn.execute(
        select(sw_t.c.name, sw_t.c.position, sw_t.c.height, sw_t.c.role, hm_t.c.name.label("model"), hm_t.c.power_peak_w)
        .join(hm_t, hm_t.c.id == sw_t.c.model_id)
        .where(sw_t.c.rack_id == rack.id)
    ):
        devices.append({"kind": "switch", "name": w.name, "position": w.position, "height": w.height,
                        "state": w.role, "model": w.model, "boards": None, "peak_w": w.power_peak_w})  # fmt: skip
    devices.sort(key=lambda d: d["position"])
    return {
        "site": rack.site, "name": rack.name, "row": rack.row, "position": rack.position, "height": rack.height,
        "power_budget": rack.power_budget_w,
        "peak_w": sum(d["peak_w"] or 0 for d in devices if d["kind"] == "server"),
        "devices": devices,
    }  # fmt: skip


def is_board(name: str, serial: str, position: int | None) -> bool:
    """Whether an operator's board name is this board: its serial, or SERIAL/POSITION where boards share a serial."""
    return name == serial if position is None else name in (f"{serial}/{position}", serial)


def list_boards(
    conn: Connection, *, server: str | None = None, rack: str | None = None, kind: str | None = None, state: str | None = None
) -> list[dict[str, Any]]:
    q = (
        select(board_t.c.serial, board_t.c.position, board_t.c.kind, board_t.c.model, srv_t.c.name.label("server"), board_t.c.slot,
               board_t.c.pci_address.label("pci"), board_t.c.state, rack_t.c.name.label("rack"), board_t.c.firmware)  # fmt: skip
        .outerjoin(srv_t, srv_t.c.id == board_t.c.server_id)
        .outerjoin(rack_t, rack_t.c.id == srv_t.c.rack_id)
    )
    if server:
        q = q.where(srv_t.c.name == server)
    if rack:
        q = q.where(rack_t.c.id == resolve_rack(conn, rack).id)
    if kind:
        q = q.where(board_t.c.kind == kind)
    if state:
        q = q.where(board_t.c.state == state)
    rows = [dict(r._mapping) for r in conn.execute(q)]
    rows.sort(key=lambda r: (natural_key(r["server"] or ""), r["slot"] if r["slot"] is not None else -1))
    return rows


def list_switches(conn: Connection, *, rack: str | None = None, role: str | None = None, site: str | None = None) -> list[dict[str, Any]]:
    cabled = (
        select(port_t.c.switch_id, func.count().label("n"))
        .where(port_t.c.id.in_(select(link_t.c.port_id).union(select(link_t.c.peer_port_id).where(link_t.c.peer_port_id.is_not(None)))))
        .group_by(port_t.c.switch_id)
        .subquery()
    )
    q = (
        select(sw_t.c.name, sw_t.c.role, sw_t.c.platform, hm_t.c.name.label("model"), sw_t.c.mgmt_address.label("address"),
               site_t.c.name.label("site"), rack_t.c.name.label("rack"), sw_t.c.position, sw_t.c.serial,
               func.coalesce(cabled.c.n, 0).label("cabled_ports"))  # fmt: skip
        .join(rack_t, rack_t.c.id == sw_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == sw_t.c.model_id)
        .outerjoin(cabled, cabled.c.switch_id == sw_t.c.id)
    )
    if rack:
        q = q.where(rack_t.c.id == resolve_rack(conn, rack).id)
    if role:
        q = q.where(sw_t.c.role == role)
    if site:
        q = q.where(site_t.c.name == site)
    rows = [dict(r._mapping) for r in conn.execute(q)]
    rows.sort(key=lambda r: natural_key(r["name"]))
    return rows


def switch_detail(conn: Connection, name: str) -> dict[str, Any]:
    sw = switch_row(conn, name)
    ports = []
    sid = conn.execute(select(sw_t.c.id).where(sw_t.c.name == name)).scalar_one()
    peer_port = port_t.alias("peer_port")
    peer_sw = sw_t.alias("peer_sw")
    far_port = port_t.alias("far_port")
    far_sw = sw_t.alias("far_sw")
    links: dict[int, str] = {}
    vl: dict[int, tuple[str, str]] = {}
    # Cables where this switch is the near end ...
    for r in conn.execute(
        select(link_t.c.port_id, link_t.c.vlans, link_t.c.mode, srv_t.c.name.label("server"), nic_t.c.name.label("nic"),
               peer_sw.c.name.label("peer"), peer_port.c.name.label("peer_port"))  # fmt: skip
        .join(port_t, port_t.c.id == link_t.c.port_id)
        .outerjoin(nic_t, nic_t.c.id == link_t.c.nic_id)
        .outerjoin(srv_t, srv_t.c.id == nic_t.c.server_id)
        .outerjoin(peer_port, peer_port.c.id == link_t.c.peer_port_id)
        .outerjoin(peer_sw, peer_sw.c.id == peer_port.c.switch_id)
        .where(port_t.c.switch_id == sid)
    ):
        links[r.port_id] = f"{r.server}/{r.nic}" if r.server else f"{r.peer}:{r.peer_port}"
        vl[r.port_id] = (r.vlans, r.mode)
    # ... and where it is the far end of a switch-to-switch cable.
    for far in conn.execute(
        select(link_t.c.peer_port_id, link_t.c.vlans, link_t.c.mode, far_sw.c.name, far_port.c.name.label("port"))
        .join(port_t, port_t.c.id == link_t.c.peer_port_id)
        .join(far_port, far_port.c.id == link_t.c.port_id)
        .join(far_sw, far_sw.c.id == far_port.c.switch_id)
        .where(port_t.c.switch_id == sid)
    ):
        links[far.peer_port_id] = f"{far.name}:{far.port}"
        vl[far.peer_port_id] = (far.vlans, far.mode)
    for p in conn.execute(select(port_t).where(port_t.c.switch_id == sid)):
        vlans, mode = vl.get(p.id, (None, None))
        ports.append({"port": p.name, "cabled_to": links.get(p.id), "vlans": vlans, "mode": mode})
    ports.sort(key=lambda p: natural_key(p["port"]))
    sw["ports"] = ports
    return sw


def switch_row(conn: Connection, name: str) -> dict[str, Any]:
    row = conn.execute(
        select(sw_t.c.name, sw_t.c.role, sw_t.c.platform, hm_t.c.name.label("model"), sw_t.c.mgmt_address.label("address"),
               site_t.c.name.label("site"), rack_t.c.name.label("rack"), sw_t.c.position, sw_t.c.serial, sw_t.c.credential)  # fmt: skip
        .join(rack_t, rack_t.c.id == sw_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == sw_t.c.model_id)
        .where(sw_t.c.name == name)
    ).first()
    if row is None:
        raise NotFound(f"no switch named {name!r}")
    return dict(row._mapping)


def list_sites(conn: Connection) -> list[dict[str, Any]]:
    racks = select(rack_t.c.site_id, func.count().label("n")).group_by(rack_t.c.site_id).subquery()
    servers = (
        select(rack_t.c.site_id, func.count().label("n"))
        .join(srv_t, srv_t.c.rack_id == rack_t.c.id)
        .group_by(rack_t.c.site_id)
        .subquery()
    )
    q = (
        select(site_t.c.name, site_t.c.description, func.coalesce(racks.c.n, 0).label("racks"),
               func.coalesce(servers.c.n, 0).label("servers"))  # fmt: skip
        .outerjoin(racks, racks.c.site_id == site_t.c.id)
        .outerjoin(servers, servers.c.site_id == site_t.c.id)
    )
    rows = [dict(r._mapping) for r in conn.execute(q)]
    rows.sort(key=lambda r: natural_key(r["name"]))
    return rows


# ProvisioningSpec's defaults (fleetctl/inventory/schema.py), here so the read
# path needs no pydantic; tests/unit/inventory/test_provisioning.py keeps them equal.
PROVISIONING_DEFAULTS: dict[str, Any] = {
    "image": None,
    "firmware_images": None,
    "firmware_template": "{base}/{id}-{version}.bin",
    "install_timeout": 3600,
    "ssh_user": "root",
    "ssh_key": None,
    "known_hosts": None,
    "k8s": None,
}
PROVISIONING_KEYS = ("vlan", "boot", "image", "firmware_images", "firmware_template", "install_timeout",
                     "ssh_user", "ssh_key", "known_hosts", "k8s")  # fmt: skip


def site_provisioning(conn: Connection, site_name: str) -> dict[str, Any] | None:
    """A site's provisioning settings with the defaults filled in, or None when it has none.

    Every key is present, in the site file's order: ``vlan`` (int), ``boot``
    (``pxe``/``vmedia``), ``image``, ``firmware_images`` (URL or None),
    ``firmware_template``, ``install_timeout`` (seconds), ``ssh_user``,
    ``ssh_key`` (a path or None) and ``k8s`` (None or a dict of ``endpoint``,
    ``token`` (a credential reference, unresolved) and ``ca_cert_hash``).
    Raises NotFound when there is no such site.
    """
    row = conn.execute(select(site_t.c.provisioning).where(site_t.c.name == site_name)).first()
    if row is None:
        raise NotFound(f"no site named {site_name!r}")
    stored = row.provisioning
    if stored is None:
        return None
    merged = {**PROVISIONING_DEFAULTS, **stored}
    if merged["k8s"] is not None:
        merged["k8s"] = dict(merged["k8s"])
    return {k: merged.get(k) for k in PROVISIONING_KEYS}


def list_events(conn: Connection, *, limit: int = 50, name: str | None = None) -> list[dict[str, Any]]:
    q = select(event_t).order_by(event_t.c.id.desc()).limit(limit)
    if name:
        q = q.where(event_t.c.object_name.contains(name))
    return [
        {"at": r.at.isoformat(timespec="seconds") if r.at else None, "actor": r.actor, "action": r.action,
         "object": f"{r.object_kind} {r.object_name}", "reason": r.reason, "detail": r.detail}  # fmt: skip
        for r in conn.execute(q)
    ]

