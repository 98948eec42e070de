"""Carry out a Plan in one transaction.

Order matters for the database's constraints: removals first (so a serial or
MAC can move to a new device in the same import), then models, sites and
racks, then devices, boards and cables, then empty racks and sites go, and
last the rack-unit occupancy of every rack that changed is rebuilt (its
primary key is what refuses two devices in one unit). New rows go in with
executemany, which keeps a 10,000-server import in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import islice
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from fleetctl.inventory.plan import Plan, board_identity
from fleetctl.inventory.schema import expand_ports
from fleetctl.models import (
    AcceleratorBoard,
    BiosProfile,
    Event,
    FirmwareBaseline,
    HardwareModel,
    Link,
    Nic,
    Rack,
    RackUnit,
    Server,
    ServerTag,
    Site,
    Switch,
    SwitchPort,
)
from fleetctl.models.base import TableModel, utcnow

_MODELS: tuple[type[TableModel], ...] = (
    AcceleratorBoard, BiosProfile, Event, FirmwareBaseline, HardwareModel, Link, Nic, Rack, RackUnit, Server, ServerTag, Site, Switch,
    SwitchPort,
)  # fmt: skip
T = {m: m.__table__ for m in _MODELS}


def _ids(conn: Connection, table: Any, *cols: str) -> dict[Any, int]:
    rows = conn.execute(select(table.c.id, *[table.c[c] for c in cols]))
    if len(cols) == 1:
        return {r[1]: r[0] for r in rows}
    return {tuple(r[1:]): r[0] for r in rows}


def _chunked(conn: Connection, stmt: Any, rows: Iterable[dict[str, Any]], size: int = 5000) -> None:
    """executemany in chunks; ``rows`` may be a generator, so a big import
    never holds every row dict at once."""
    it = iter(rows)
    while chunk := list(islice(it, size)):
        conn.execute(stmt, chunk)


def _board_is(board_t: Any, key: Any) -> Any:
    """The row of one board key (serial alone, or serial and position)."""
    serial, position = board_identity(key)
    pos = board_t.c.position.is_(None) if position is None else board_t.c.position == position
    return (board_t.c.serial == serial) & pos


def apply(conn: Connection, plan: Plan, *, actor: str, action: str, reason: str | None = None) -> None:
    after, before = plan.after, plan.before
    srv, sw, nic_t, board_t = T[Server], T[Switch], T[Nic], T[AcceleratorBoard]
    port_t, link_t, rack_t, site_t = T[SwitchPort], T[Link], T[Rack], T[Site]
    hm, fb, tag_t = T[HardwareModel], T[FirmwareBaseline], T[ServerTag]

    # 1. removals and cables that change (re-inserted below)
    cable_out = [c.key for c in plan.changes if c.kind == "cable" and c.action in ("remove", "change")]
    if cable_out:
        port_ids = _port_ids(conn)
        ids = [port_ids[k] for k in cable_out if k in port_ids]
        for i in range(0, len(ids), 5000):
            conn.execute(delete(link_t).where(link_t.c.port_id.in_(ids[i : i + 5000])))
    for key in [c.key for c in plan.of("board", "remove") if not isinstance(c.key, str)]:
        conn.execute(delete(board_t).where(_board_is(board_t, key)))
    for kind, table, col in (("board", board_t, "serial"), ("server", srv, "name"), ("switch", sw, "name")):
        keys = [c.key for c in plan.of(kind, "remove") if isinstance(c.key, str)]
        if kind == "board":  # a serial of its own: the row without a position
            for i in range(0, len(keys), 5000):
                conn.execute(delete(table).where(table.c.serial.in_(keys[i : i + 5000]), table.c.position.is_(None)))
            continue
        for i in range(0, len(keys), 5000):
            conn.execute(delete(table).where(table.c[col].in_(keys[i : i + 5000])))

    # 2. BIOS profiles, then models and their baselines
    bp = T[BiosProfile]
    for c in plan.of("bios_profile", "add") + plan.of("bios_profile", "change"):
        p = after["bios_profile"][c.key]
        values = {"name": p["name"], "description": p["description"], "attributes": p["attributes"]}
        if c.action == "add":
            conn.execute(insert(bp).values(**values))
        else:
            conn.execute(update(bp).where(bp.c.name == c.key).values(**values))
    for c in plan.of("model", "add") + plan.of("model", "change"):
        m = after["model"][c.key]
        values = {
            "name": m["name"], "kind": m["kind"], "vendor": m["vendor"], "model": m["model"],
            "height": m["height"],
            "power_idle_w": m["power"]["idle"] if m["power"] else None,
            "power_peak_w": m["power"]["peak"] if m["power"] else None,
            "board_kind": m["boards"]["kind"] if m["boards"] else None,
            "board_count": m["boards"]["count"] if m["boards"] else 0,
            "bios_profile": m["bios_profile"],
            "ports": "\n".join(m["ports"]) if m["ports"] else None,
            "driver": m["driver"],
        }  # fmt: skip
        if c.action == "add":
            key = conn.execute(insert(hm).values(**values)).inserted_primary_key
            assert key is not None  # a single-row INSERT has one
            model_id = key[0]
        else:
            conn.execute(update(hm).where(hm.c.name == c.key).values(**values))
            model_id = conn.execute(select(hm.c.id).where(hm.c.name == c.key)).scalar_one()
            conn.execute(delete(fb).where(fb.c.model_id == model_id))
        if m["firmware"]:
            conn.execute(insert(fb), [{"model_id": model_id, "component": k, "version": v} for k, v in m["firmware"].items()])
    model_ids = _ids(conn, hm, "name")
    # A model that grew or shrank resizes every device of it.
    for c in plan.of("model", "change"):
        if "height" in c.fields:
            for table in (srv, sw):
                conn.execute(update(table).where(table.c.model_id == model_ids[c.key]).values(height=c.fields["height"][1]))

    # 3. sites and racks
    for c in plan.of("site", "add"):
        conn.execute(insert(site_t).values(name=c.key, **after["site"][c.key]))
    for c in plan.of("site", "change"):
        conn.execute(update(site_t).where(site_t.c.name == c.key).values(**after["site"][c.key]))
    site_ids = _ids(conn, site_t, "name")

    def rack_values(key: tuple[str, str]) -> dict[str, Any]:
        r = after["rack"][key]
        return {"row": r["row"], "position": r["position"], "height": r["height"], "power_budget_w": r["power_budget"]}

    new_racks = [{"site_id": site_ids[k[0]], "name": k[1], **rack_values(k)} for k in (c.key for c in plan.of("rack", "add"))]
    if new_racks:
        conn.execute(insert(rack_t), new_racks)
    for c in plan.of("rack", "change"):
        conn.execute(
            update(rack_t).where(rack_t.c.site_id == site_ids[c.key[0]], rack_t.c.name == c.key[1]).values(**rack_values(c.key))
        )
    site_names = {v: k for k, v in site_ids.items()}
    rack_ids = {(site_names[k[0]], k[1]): v for k, v in _ids(conn, rack_t, "site_id", "name").items()}

    # 4. servers, their NICs and tags
    def server_values(name: str) -> dict[str, Any]:
        s = after["server"][name]
        height = after["model"].get(s["model"], {}).get("height") or before["model"].get(s["model"], {}).get("height", 1)
        return {
            "name": name, "serial": s["serial"], "model_id": model_ids[s["model"]],
            "rack_id": rack_ids[(s["site"], s["rack"])], "position": s["position"], "height": height,
            "bmc_url": s["bmc"], "bmc_system_id": s["system_id"], "credential": s["credential"],
            "bmc_fingerprint": s["fingerprint"], "host_address": s["host"], "host_vars": s["host_vars"] or None,
            "k8s_cluster": s["cluster"], "k8s_node": s["node"],
        }  # fmt: skip

    now = utcnow()
    changed_servers = plan.of("server", "change")
    # Unique values that move between devices in one import (two serials
    # swapped to fix a label, a MAC moving to another server) would collide
    # whichever row goes first: park them all before any row takes its new value.
    for c in changed_servers:
        park: dict[str, str | None] = {}
        if "serial" in c.fields:
            park["serial"] = f"~parked~{c.key}"
        if {"bmc", "system_id"} & set(c.fields):
            park["bmc_url"] = None
        if park:
            conn.execute(update(srv).where(srv.c.name == c.key).values(**park))
    server_id_of = _ids(conn, srv, "name") if changed_servers else {}
    for c in changed_servers:
        if "nics" not in c.fields:
            continue
        sid = server_id_of[c.key]
        old, new = dict(c.fields["nics"][0]), dict(c.fields["nics"][1])
        gone = [n for n in old if n not in new]
        if gone:
            conn.execute(delete(nic_t).where(nic_t.c.server_id == sid, nic_t.c.name.in_(gone)))
        moved = [n for n in new if n in old and old[n] != new[n]]
        if moved:
            conn.execute(update(nic_t).where(nic_t.c.server_id == sid, nic_t.c.name.in_(moved)).values(mac=None))
    for c in changed_servers:
        conn.execute(update(srv).where(srv.c.name == c.key).values(**server_values(c.key), updated_at=now))
    added = [c.key for c in plan.of("server", "add")]
    if added:
        rows = ({**server_values(n), "state": after["server"][n]["state"], "created_at": now, "updated_at": now} for n in added)
        _chunked(conn, insert(srv), rows)
    server_ids = _ids(conn, srv, "name") if (added or changed_servers) else {}
    nic_rows, tag_rows = [], []
    for name in added:
        s = after["server"][name]
        nic_rows += [{"server_id": server_ids[name], "name": n, "mac": mac} for n, mac in s["nics"]]
        tag_rows += [{"server_id": server_ids[name], "tag": t} for t in s["tags"]]
    for c in changed_servers:
        sid = server_ids[c.key]
        if "tags" in c.fields:
            conn.execute(delete(tag_t).where(tag_t.c.server_id == sid))
            tag_rows += [{"server_id": sid, "tag": t} for t in after["server"][c.key]["tags"]]
        if "nics" in c.fields:
            old = dict(c.fields["nics"][0])
            new = dict(c.fields["nics"][1])
            moved = [n for n in new if n in old and old[n] != new[n]]  # parked above
            for n in moved:
                conn.execute(update(nic_t).where(nic_t.c.server_id == sid, nic_t.c.name == n).values(mac=new[n]))
            nic_rows += [{"server_id": sid, "name": n, "mac": new[n]} for n in new if n not in old]
    if nic_rows:
        _chunked(conn, insert(nic_t), nic_rows)
    if tag_rows:
        _chunked(conn, insert(tag_t), tag_rows)

    # 5. switches and their ports
    def switch_values(name: str) -> dict[str, Any]:
        s = after["switch"][name]
        height = after["model"].get(s["model"], {}).get("height", 1)
        return {
            "name": name, "serial": s["serial"], "model_id": model_ids[s["model"]], "platform": s["platform"],
            "role": s["role"], "mgmt_address": s["address"], "credential": s["credential"],
            "ssh_port": None if s["ssh_port"] == 22 else s["ssh_port"],
            "snmp_version": s["snmp"]["version"] if s["snmp"] else None,
            "snmp_credential": s["snmp"]["credential"] if s["snmp"] else None,
            "snmp_port": s["snmp"]["port"] if s["snmp"] else None,
            "rack_id": rack_ids[(s["site"], s["rack"])], "position": s["position"], "height": height,
        }  # fmt: skip

    for c in plan.of("switch", "change"):
        park = {}
        if "serial" in c.fields:
            park["serial"] = None
        if "address" in c.fields:
            park["mgmt_address"] = f"~parked~{c.key}"
        if park:
            conn.execute(update(sw).where(sw.c.name == c.key).values(**park))
    for c in plan.of("switch", "change"):
        conn.execute(update(sw).where(sw.c.name == c.key).values(**switch_values(c.key)))
    added_sw = [c.key for c in plan.of("switch", "add")]
    if added_sw:
        _chunked(conn, insert(sw), [switch_values(n) for n in added_sw])
    changed_port_models = {c.key for c in plan.of("model", "change") if "ports" in c.fields}
    resync = set(added_sw) | {c.key for c in plan.of("switch", "change") if "model" in c.fields}
    resync |= {n for n, s in after["switch"].items() if s["model"] in changed_port_models}
    if resync:
        switch_ids = _ids(conn, sw, "name")
        existing: dict[int, set[str]] = {}
        for r in conn.execute(select(port_t.c.switch_id, port_t.c.name)):
            existing.setdefault(r.switch_id, set()).add(r.name)
        port_rows = []
        for name in sorted(resync):
            sid = switch_ids[name]
            want = expand_ports(after["model"][after["switch"][name]["model"]]["ports"] or [])
            have = existing.get(sid, set())
            extra = have - set(want)
            if extra:
                conn.execute(delete(port_t).where(port_t.c.switch_id == sid, port_t.c.name.in_(sorted(extra))))
            port_rows += [{"switch_id": sid, "name": p} for p in want if p not in have]
        if port_rows:
            _chunked(conn, insert(port_t), port_rows)

    # 6. boards
    board_add = [c.key for c in plan.of("board", "add")]
    board_change = plan.of("board", "change")
    if board_add or board_change:
        server_ids = server_ids or _ids(conn, srv, "name")

        def board_values(key: Any) -> dict[str, Any]:
            b = after["board"][key]
            serial, position = board_identity(key)
            return {
                "serial": serial, "position": position, "kind": b["kind"], "server_id": server_ids[b["server"]],
                "slot": b["slot"], "pci_address": b["pci"], "model": b["model"], "firmware": b["firmware"],
            }  # fmt: skip

        # Boards that change slot or server are first parked (slot NULL) so
        # that two boards can swap slots without tripping the unique slot.
        parked = [c.key for c in board_change if {"server", "slot"} & set(c.fields)]
        alone = [k for k in parked if isinstance(k, str)]
        if alone:
            conn.execute(update(board_t).where(board_t.c.serial.in_(alone), board_t.c.position.is_(None)).values(slot=None))
        for k in parked:
            if not isinstance(k, str):
                conn.execute(update(board_t).where(_board_is(board_t, k)).values(slot=None))
        for c in board_change:
            conn.execute(update(board_t).where(_board_is(board_t, c.key)).values(**board_values(c.key)))
        if board_add:
            _chunked(conn, insert(board_t), ({**board_values(s), "state": after["board"][s]["state"]} for s in board_add))

    # 7. cables
    cable_in = [c.key for c in plan.changes if c.kind == "cable" and c.action in ("add", "change")]
    if cable_in:
        port_ids = _port_ids(conn)
        nic_ids = _nic_ids(conn)
        rows = (
            {
                "port_id": port_ids[key],
                "nic_id": nic_ids[(c["server"], c["nic"])] if c["server"] else None,
                "peer_port_id": port_ids[(c["peer"], c["peer_port"])] if c["peer"] else None,
                "mode": c["mode"],
                "vlans": ",".join(str(v) for v in c["vlans"]),
            }
            for key, c in ((k, after["cable"][k]) for k in cable_in)
        )
        _chunked(conn, insert(link_t), rows)

    # 8. racks and sites that are gone (empty by now)
    for c in plan.of("rack", "remove"):
        site_id = site_ids[c.key[0]]
        conn.execute(delete(rack_t).where(rack_t.c.site_id == site_id, rack_t.c.name == c.key[1]))
    for c in plan.of("site", "remove"):
        conn.execute(delete(site_t).where(site_t.c.name == c.key))

    # 9. rack units of every rack whose devices moved, came or went
    racks_touched: set[tuple[str, str]] = set()
    height_models = {c.key for c in plan.of("model", "change") if "height" in c.fields}
    for kind in ("server", "switch"):
        for c in plan.changes:
            if c.kind != kind:
                continue
            for side in (before[kind].get(c.key), after[kind].get(c.key)):
                if side and (c.action != "change" or {"site", "rack", "position", "model"} & set(c.fields)):
                    racks_touched.add((side["site"], side["rack"]))
        for s in after[kind].values():
            if s["model"] in height_models:
                racks_touched.add((s["site"], s["rack"]))
    live = [k for k in racks_touched if k in after["rack"]]
    if live:
        _rebuild_units(conn, [rack_ids[k] for k in live])

    # 10. the audit log: one event for the whole change, with its counts
    if plan.changes:
        detail = {"counts": plan.counts(), "first": [f"{c.action} {c.kind} {c.label}" for c in plan.changes[:50]]}
        conn.execute(
            insert(T[Event]).values(
                at=utcnow(), actor=actor, action=action, object_kind="inventory",
                # A small change names its objects; a big import names its sites.
                object_name=(", ".join(f"{c.kind} {c.label}" for c in plan.changes) if len(plan.changes) <= 3
                             else ",".join(sorted(_touched_sites(plan))) or "models"),
                detail=json.dumps(detail, sort_keys=True), reason=reason,
            )  # fmt: skip
        )


def _touched_sites(plan: Plan) -> set[str]:
    out = set()
    for c in plan.changes:
        for side in (plan.before.get(c.kind, {}).get(c.key), plan.after.get(c.kind, {}).get(c.key)):
            if side and "site" in side:
                out.add(side["site"])
        if c.kind == "site":
            out.add(c.key)
    return out


def _port_ids(conn: Connection) -> dict[tuple[str, str], int]:
    sw, port_t = T[Switch], T[SwitchPort]
    rows = conn.execute(select(port_t.c.id, sw.c.name, port_t.c.name).join(sw, sw.c.id == port_t.c.switch_id))
    return {(r[1], r[2]): r[0] for r in rows}


def _nic_ids(conn: Connection) -> dict[tuple[str, str], int]:
    srv, nic_t = T[Server], T[Nic]
    rows = conn.execute(select(nic_t.c.id, srv.c.name, nic_t.c.name).join(srv, srv.c.id == nic_t.c.server_id))
    return {(r[1], r[2]): r[0] for r in rows}


def _rebuild_units(conn: Connection, rack_ids: list[int]) -> None:
    ru, srv, sw = T[RackUnit], T[Server], T[Switch]
    rows = []
    for i in range(0, len(rack_ids), 5000):
        chunk = rack_ids[i : i + 5000]
        conn.execute(delete(ru).where(ru.c.rack_id.in_(chunk)))
        for r in conn.execute(select(srv.c.id, srv.c.rack_id, srv.c.position, srv.c.height).where(srv.c.rack_id.in_(chunk))):
            units = range(r.position, r.position + r.height)
            rows += [{"rack_id": r.rack_id, "unit": u, "server_id": r.id, "switch_id": None} for u in units]
        for r in conn.execute(select(sw.c.id, sw.c.rack_id, sw.c.position, sw.c.height).where(sw.c.rack_id.in_(chunk))):
            units = range(r.position, r.position + r.height)
            rows += [{"rack_id": r.rack_id, "unit": u, "server_id": None, "switch_id": r.id} for u in units]
    if rows:
        _chunked(conn, insert(ru), rows)
