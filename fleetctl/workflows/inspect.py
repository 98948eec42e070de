"""Inspection: compare what a BMC reports with what the inventory declares.

What the site files declared is the operator's word: a disagreement (a board
missing, a serial changed, a MAC different) is reported as drift and never
silently overwritten. What the inventory left open is filled in: boards of a
server that declares none become AcceleratorBoard rows, and a declared NIC
without a MAC takes the MAC the BMC reports under the same name. With
``accept`` the BMC's view replaces the declared one. Changes go through the
same checks as an import (service.edit_site), so inspection can never make an
inventory an import would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update


@dataclass
class Reconciled:
    server: str
    drift: list[str] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    boards_found: int = 0
    boards_expected: int | None = None


def _slot(value: Any, fallback: int) -> int:
    try:
        return int(str(value).rsplit(" ", 1)[-1])
    except (TypeError, ValueError):
        return fallback


def compare(declared: Any, model: Any, facts: Any) -> tuple[Reconciled, dict[str, Any]]:
    """Drift between a declared ServerSpec and the BMC's SystemFacts, and the edits to make.

    Returns the findings and ``edits``: ``boards`` (list of BoardSpec dicts to
    set, or None) and ``macs`` ({nic: mac} to fill), ``serial`` (to accept).
    """
    r = Reconciled(declared.name)
    edits: dict[str, Any] = {"boards": None, "macs": {}, "serial": None, "accept_macs": {}}
    if facts.serial and facts.serial.strip() and facts.serial.strip() != declared.serial:
        r.drift.append(f"serial: declared {declared.serial}, BMC reports {facts.serial.strip()}")
        edits["serial"] = facts.serial.strip()

    found = [b for b in facts.boards]
    r.boards_found = len(found)
    if model is not None and model.boards:
        r.boards_expected = model.boards.count
        if len(found) != model.boards.count:
            r.drift.append(f"model {model.name} holds {model.boards.count} {model.boards.kind} boards, the BMC shows {len(found)}")
    # Standard Redfish carries no PCI address; keep the declared one of the
    # same board rather than erase it.
    declared_pci = {b.serial: b.pci for b in declared.boards}
    found_specs = [
        {"serial": b.serial or f"UNKNOWN-{declared.name}-{i}", "slot": _slot(b.slot, i), "kind": b.kind,
         "pci": b.pci_address or declared_pci.get(b.serial or ""), "model": b.model, "firmware": dict(b.firmware)}  # fmt: skip
        for i, b in enumerate(found)
    ]
    declared_serials = {b.serial for b in declared.boards}
    found_serials = {b["serial"] for b in found_specs}
    if declared.boards:
        for s in sorted(declared_serials - found_serials):
            r.drift.append(f"board {s}: declared, not seen by the BMC")
        for s in sorted(found_serials - declared_serials):
            r.drift.append(f"board {s}: seen by the BMC, not declared")
        if declared_serials != found_serials:
            edits["boards"] = found_specs
    elif found_specs:
        edits["boards"] = found_specs
        r.filled.append(f"{len(found_specs)} boards")

    seen = {n.mac.lower(): n.name for n in facts.nics if n.mac}
    by_name = {n.name: n.mac.lower() for n in facts.nics if n.mac}
    for nic in declared.nics:
        if nic.mac and nic.mac not in seen:
            r.drift.append(f"NIC {nic.name}: declared MAC {nic.mac} not seen by the BMC")
            if nic.name in by_name:
                edits["accept_macs"][nic.name] = by_name[nic.name]
        elif not nic.mac and nic.name in by_name:
            edits["macs"][nic.name] = by_name[nic.name]
            r.filled.append(f"MAC of {nic.name}")
    return r, edits


def reconcile(facts_by_server: dict[str, Any], *, accept: bool = False, url: str | None = None) -> list[Reconciled]:
    """Compare, fill what is open, report drift (or accept it), and move clean servers to inspected."""
    from fleetctl.inventory import edits as inv_edits
    from fleetctl.inventory.schema import BoardSpec
    from fleetctl.inventory.service import actor, edit_site, export_inventory
    from fleetctl.lifecycle.machine import move
    from fleetctl.models import Event, Server
    from fleetctl.models.base import utcnow
    from fleetctl.store import write_transaction

    by_site: dict[str, list[str]] = {}
    for name in facts_by_server:
        by_site.setdefault(inv_edits.site_of_server(name), []).append(name)
    results: dict[str, Reconciled] = {}
    for site, names in by_site.items():
        inv = export_inventory(url, {site})
        models = {m.name: m for m in inv.models}
        plans: dict[str, dict[str, Any]] = {}
        for rack in inv.sites[0].racks:
            for spec in rack.servers:
                if spec.name in names:
                    res, ed = compare(spec, models.get(spec.model), facts_by_server[spec.name])
                    results[spec.name] = res
                    plans[spec.name] = ed

        def mutate(doc: Any, plans: dict[str, dict[str, Any]] = plans) -> None:
            for name, ed in plans.items():
                _, spec = inv_edits.find_server(doc, name)
                res = results[name]
                # Filling what was left open is always done; replacing what was declared only when accepted.
                if ed["boards"] is not None and (not spec.boards or accept):
                    if spec.boards:
                        res.accepted.append(f"{len(ed['boards'])} boards as the BMC reports them")
                    spec.boards = [BoardSpec.model_validate(b) for b in ed["boards"]]
                for nic in spec.nics:
                    if nic.name in ed["macs"]:
                        nic.mac = ed["macs"][nic.name]
                    elif accept and nic.name in ed["accept_macs"]:
                        nic.mac = ed["accept_macs"][nic.name]
                        res.accepted.append(f"MAC of {nic.name}")
                if accept and ed["serial"]:
                    spec.serial = ed["serial"]
                    res.accepted.append(f"serial {ed['serial']}")

        if any(p["boards"] is not None or p["macs"] or (accept and (p["serial"] or p["accept_macs"])) for p in plans.values()):
            reason = "filled from the BMC" + (" (drift accepted)" if accept else "")
            edit_site(site, mutate, action="server.inspect", reason=reason, url=url)

    srv_t, ev_t = Server.__table__, Event.__table__
    with write_transaction(url) as conn:
        for name, res in results.items():
            clean = not res.drift or accept
            if clean:
                state = conn.execute(select(srv_t.c.state).where(srv_t.c.name == name)).scalar()
                why = "inspection matched the inventory" if not res.drift else "inspection drift accepted: " + "; ".join(res.drift)[:500]
                if state == "registered":
                    move(conn, name, "inspected", actor=actor(), reason=why, expected="registered")
                conn.execute(
                    update(srv_t).where(srv_t.c.name == name, srv_t.c.last_error.like("inspection drift:%")).values(last_error=None)
                )
            else:
                conn.execute(update(srv_t).where(srv_t.c.name == name).values(last_error="inspection drift: " + "; ".join(res.drift)[:900]))
            if res.drift:
                conn.execute(insert(ev_t).values(at=utcnow(), actor=actor(), action="server.drift", object_kind="server",
                                                 object_name=name, detail="; ".join(res.drift)[:4000],
                                                 reason="accepted" if accept else None))  # fmt: skip
    return [results[n] for n in facts_by_server if n in results]
