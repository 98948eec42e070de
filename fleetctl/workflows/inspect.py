"""Inspection: compare what a BMC reports with what the inventory declares.

What the site files declared is the operator's word: a disagreement (a board
missing, a serial changed, a MAC different) is reported as drift and never
silently overwritten. What the inventory left open is filled in: boards of a
server that declares none become AcceleratorBoard rows, and a declared NIC
without a MAC takes the MAC the BMC reports under the same name. With
``accept`` the BMC's view replaces the declared one. Changes go through the
same checks as an import (service.edit_site), so inspection can never make an
inventory an import would refuse.

A server enrolled by its BMC alone (``server add NAME --bmc URL --credential
REF``) carries the placeholders of ``inventory.edits``: the model
``unidentified`` and the serial ``UNKNOWN-NAME``. Inspection fills both: the
serial as the BMC reports it, the model by matching the BMC's manufacturer and
model against the declared hardware models (``match_model``), or, where none
matches, a new model declared from what the BMC reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update

from fleetctl.inventory import edits as inv_edits
from fleetctl.inventory.boards import board_slot, board_where, is_placeholder_board_serial, placeholder_board_serial
from fleetctl.inventory.edits import UNIDENTIFIED_MODEL, is_placeholder_serial
from fleetctl.inventory.schema import BoardSpec, ModelSpec
from fleetctl.inventory.service import actor, edit_site, export_inventory
from fleetctl.lifecycle.machine import move
from fleetctl.store import write_transaction
from fleetctl.times import utcnow


@dataclass
class Reconciled:
    server: str
    drift: list[str] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    boards_found: int = 0
    boards_expected: int | None = None
    # For a server enrolled without a model: the declared model it was matched to, or the new one proposed.
    model: str | None = None
    new_model: dict[str, Any] | None = None
    # What is so and is no drift: a board the BMC reports without a serial, known by its slot.
    notes: list[str] = field(default_factory=list)


# Words a BMC's Manufacturer carries that a site file's vendor may leave out
# (Dell Inc. / Dell, Super Micro Computer, Inc. / Supermicro).
_CORPORATE = frozenset({"inc", "corp", "corporation", "co", "ltd", "limited", "llc", "gmbh", "ag", "sa", "computer", "company"})


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9]+", " ", text.casefold()).split()


def same_vendor(declared: str, reported: str) -> bool:
    """Whether a declared vendor and a BMC's Manufacturer name the same maker (case, punctuation, Inc. ignored)."""
    a = "".join(w for w in _words(declared) if w not in _CORPORATE)
    b = "".join(w for w in _words(reported) if w not in _CORPORATE)
    return bool(a) and a == b


def same_model(declared: str, reported: str) -> bool:
    """Whether a declared model string and a BMC's Model are the same (case, spaces, punctuation ignored)."""
    a, b = "".join(_words(declared)), "".join(_words(reported))
    return bool(a) and a == b


@dataclass
class ModelMatch:
    """What a BMC's manufacturer and model say about a server's hardware model.

    ``name``: the one declared model that matches; ``new``: a model to declare
    (nothing matched); ``problem``: why neither (several match, the BMC says nothing).
    """

    name: str | None = None
    new: dict[str, Any] | None = None
    problem: str | None = None


def match_model(manufacturer: str | None, model: str | None, models: list[Any], *, boards: list[Any] | None = None) -> ModelMatch:
    """Match a BMC's Manufacturer and Model against the declared server models (``ModelSpec``).

    A declared model matches when its model string is the BMC's (case, spaces
    and punctuation aside) and, where the BMC names a manufacturer, its vendor
    is that manufacturer. No match: a new model is proposed from the BMC's
    words (1U until someone says otherwise; the boards it found, of one kind).
    """
    reported = (model or "").strip()
    maker = (manufacturer or "").strip()
    if not reported:
        return ModelMatch(problem="the BMC reports no model")
    found = [m for m in models if m.kind == "server" and m.name != UNIDENTIFIED_MODEL and same_model(m.model, reported)
             and (not maker or same_vendor(m.vendor, maker))]  # fmt: skip
    if len(found) == 1:
        return ModelMatch(name=found[0].name)
    if found:
        names = ", ".join(sorted(m.name for m in found))
        return ModelMatch(problem=f"the BMC reports {maker} {reported}, which models {names} all declare; "
                                  "set one with `fleetctl server set NAME --model`")  # fmt: skip
    base = "-".join(_words(f"{maker} {reported}"))[:63].strip("-") or "model"
    taken = {m.name for m in models}
    name, n = base, 2
    while name in taken:
        suffix = f"-{n}"
        name, n = base[: 63 - len(suffix)] + suffix, n + 1
    new: dict[str, Any] = {"name": name, "kind": "server", "vendor": maker or "unknown", "model": reported, "height": 1}
    kinds = {b.kind for b in boards or []}
    if len(kinds) == 1:
        new["boards"] = {"kind": kinds.pop(), "count": len(boards or [])}
    return ModelMatch(new=new)


def _board_label(serial: str, position: int | None, slot: int | None, server: str) -> str:
    if is_placeholder_board_serial(server, serial):
        return f"in slot {slot} (no serial reported)"
    return serial if position is None else f"{serial} #{position}"


def compare(declared: Any, model: Any, facts: Any, models: list[Any] | None = None) -> tuple[Reconciled, dict[str, Any]]:
    """Drift between a declared ServerSpec and the BMC's SystemFacts, and the edits to make.

    Returns the findings and ``edits``: ``boards`` (list of BoardSpec dicts to
    set, or None) and ``macs`` ({nic: mac} to fill), ``serial`` (to accept),
    ``fill_serial`` (for a placeholder serial), ``model`` and ``new_model`` (for
    the placeholder model, matched against ``models`` when they are given),
    ``boards_filled`` (the boards change only where they were left open: a
    serial reported at last, a module's twin numbered; applied without --accept).

    Boards are compared by (serial, position); one the BMC reports without a
    serial by its slot (``r.notes`` says "no serial reported"), recorded as
    ``UNKNOWN-<server>-<n>`` (issue 20).
    """
    r = Reconciled(declared.name)
    edits: dict[str, Any] = {"boards": None, "macs": {}, "serial": None, "accept_macs": {}, "fill_serial": None,
                             "model": None, "new_model": None, "boards_filled": False}  # fmt: skip
    reported_serial = (facts.serial or "").strip()
    if is_placeholder_serial(declared.name, declared.serial):
        # Enrolled by its BMC alone: the serial is filled, not drift.
        if reported_serial:
            edits["fill_serial"] = reported_serial
            r.filled.append(f"serial {reported_serial}")
        else:
            r.drift.append("serial: not declared, and the BMC reports none")
    elif reported_serial and reported_serial != declared.serial:
        r.drift.append(f"serial: declared {declared.serial}, BMC reports {reported_serial}")
        edits["serial"] = reported_serial
    if declared.model == UNIDENTIFIED_MODEL and models is not None:
        m = match_model(facts.manufacturer, facts.model, models, boards=list(facts.boards))
        if m.problem:
            r.drift.append(f"model: {m.problem}")
        elif m.name:
            edits["model"] = r.model = m.name
            model = next(x for x in models if x.name == m.name)
            r.filled.append(f"model {m.name}")
        elif m.new:
            edits["model"] = r.model = m.new["name"]
            edits["new_model"] = r.new_model = m.new
            model = None
            r.filled.append(f"model {m.new['name']} (new: {m.new['vendor']} {m.new['model']}, {m.new['height']}U assumed)")
    elif declared.model == UNIDENTIFIED_MODEL:
        # Without the declared models (provisioning's own inspection) a placeholder is not filled: said, not ignored.
        r.drift.append(f"model: not identified yet; `fleetctl server inspect {declared.name}` reads it from the BMC")

    found = [b for b in facts.boards]
    r.boards_found = len(found)
    if model is not None and model.boards:
        r.boards_expected = model.boards.count
        if len(found) != model.boards.count:
            r.drift.append(f"model {model.name} holds {model.boards.count} {model.boards.kind} boards, the BMC shows {len(found)}")
    # A board is known by (serial, position); one the BMC reports without a
    # serial by its slot: it keeps the placeholder recorded for that slot, so a
    # second inspection, and the sweep, find the same board (issue 20).
    declared_at = {b.slot: b for b in declared.boards}
    # Standard Redfish carries no PCI address; keep the declared one of the
    # same board rather than erase it.
    declared_pci = {(b.serial, b.position): b.pci for b in declared.boards}
    keys: list[tuple[str, int | None] | None] = []
    for i, b in enumerate(found):
        serial, position = (b.serial or "").strip(), b.position
        if serial and position is None:
            # One board of a module left reporting the module's serial (its twin stopped): it
            # keeps the position it was recorded with, the one in its slot first.
            recorded = sorted((d for d in declared.boards if d.serial == serial and d.position is not None),
                              key=lambda d: d.slot != board_slot(b, i))  # fmt: skip
            position = recorded[0].position if recorded else None
        keys.append((serial, position) if serial else None)
    reported = {k for k in keys if k is not None}
    serials = {b.serial for b in declared.boards} | {k[0] for k in reported}
    found_specs: list[dict[str, Any]] = []
    no_serial: list[str] = []
    for i, b in enumerate(found):
        slot = board_slot(b, i)
        key = keys[i]
        if key is None:
            # the board recorded in this slot, unless the BMC reports that one elsewhere by its serial
            d = declared_at.get(slot)
            if d is not None and (d.serial, d.position) not in reported:
                key = (d.serial, d.position)
            else:
                n = i
                while placeholder_board_serial(declared.name, n) in serials:
                    n += 1
                key = (placeholder_board_serial(declared.name, n), None)
            where = board_where(b)
            no_serial.append(f"board in slot {slot}{f' ({where})' if where else ''}: no serial reported")
        reported.add(key)
        serials.add(key[0])
        found_specs.append({"serial": key[0], "position": key[1], "slot": slot, "kind": b.kind,
                            "pci": b.pci_address or declared_pci.get(key), "model": b.model,
                            "firmware": dict(b.firmware)})  # fmt: skip
    r.notes.extend(no_serial)
    declared_keys = {(b.serial, b.position): b.slot for b in declared.boards}
    found_keys = {(b["serial"], b["position"]): b["slot"] for b in found_specs}
    if declared.boards:
        gone = {k: slot for k, slot in declared_keys.items() if k not in found_keys}
        new = {k: slot for k, slot in found_keys.items() if k not in declared_keys}
        # What was left open is filled, not drift: a board recorded without a serial that reports one
        # now, or one recorded alone whose module's twin now reports the same serial (a position given).
        for k, slot in sorted(gone.items(), key=lambda kv: kv[1] if kv[1] is not None else -1):
            twin = next((f for f, fslot in new.items() if fslot == slot
                         and (is_placeholder_board_serial(declared.name, k[0]) or (f[0] == k[0] and k[1] is None))), None)  # fmt: skip
            if twin is not None:
                del gone[k], new[twin]
                r.filled.append(f"board in slot {slot}: {_board_label(*twin, slot, declared.name)}")
                edits["boards_filled"] = True
        for (s, p), slot in sorted(gone.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            r.drift.append(f"board {_board_label(s, p, slot, declared.name)}: declared, not seen by the BMC")
        for (s, p), slot in sorted(new.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            r.drift.append(f"board {_board_label(s, p, slot, declared.name)}: seen by the BMC, not declared")
        if set(declared_keys) != set(found_keys):
            edits["boards"] = found_specs
    elif found_specs:
        edits["boards"] = found_specs
        r.filled.append(f"{len(found_specs)} boards" + (f" ({len(no_serial)} without a serial reported: recorded by slot)"
                                                        if no_serial else ""))  # fmt: skip

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


def reconcile(facts_by_server: dict[str, Any], *, accept: bool = False, url: str | None = None, dry_run: bool = False) -> list[Reconciled]:
    """Compare, fill what is open, report drift (or accept it), and move clean servers to inspected.

    ``dry_run``: the same findings and the edits checked as an import would
    check them (a refused edit raises), but nothing is written.
    """
    from fleetctl.models import Event, Server

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
                    res, ed = compare(spec, models.get(spec.model), facts_by_server[spec.name], list(models.values()))
                    results[spec.name] = res
                    plans[spec.name] = ed

        def mutate(doc: Any, plans: dict[str, dict[str, Any]] = plans) -> None:
            for name, ed in plans.items():
                _, spec = inv_edits.find_server(doc, name)
                res = results[name]
                # What a server enrolled by its BMC alone left open: its serial and its model.
                if ed["fill_serial"]:
                    spec.serial = ed["fill_serial"]
                if ed["new_model"] and not any(m.name == ed["new_model"]["name"] for m in doc.models):
                    doc.models.append(ModelSpec.model_validate(ed["new_model"]))
                if ed["model"]:
                    spec.model = ed["model"]
                # Filling what was left open is always done; replacing what was declared only when accepted.
                # Boards are replaced where none were recorded, where drift is accepted, or where only
                # what was left open changes (a serial reported at last); never over drift otherwise.
                only_filled = ed.get("boards_filled") and not any(d.startswith("board ") for d in res.drift)
                if ed["boards"] is not None and (not spec.boards or accept or only_filled):
                    if spec.boards and not only_filled:
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

        if any(p["boards"] is not None or p["macs"] or p["fill_serial"] or p["model"] or (accept and (p["serial"] or p["accept_macs"]))
               for p in plans.values()):  # fmt: skip
            reason = "filled from the BMC" + (" (drift accepted)" if accept else "")
            edit_site(site, mutate, action="server.inspect", reason=reason, url=url, dry_run=dry_run)

    if dry_run:
        return [results[n] for n in facts_by_server if n in results]

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
