"""Inventory operations the CLI calls: import, export, and edits.

Every change, from a folder of site files or from one `server add`, goes the
same way: the desired inventory is built, checked as a whole, diffed against
the store, and the plan applied in one transaction (or only shown, with
--dry-run). So a CLI edit can never make an inventory an import would refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetctl.errors import InputError, InventoryError, NotFound
from fleetctl.holders import actor  # (defined below the store; many callers import it from here)
from fleetctl.inventory.loader import load_path
from fleetctl.inventory.plan import Plan, diff
from fleetctl.inventory.schema import SiteFile, SiteSpec
from fleetctl.inventory.validate import check, merge, parse_source
from fleetctl.lifecycle.states import BoardState
from fleetctl.store import get_engine, write_transaction


def _integrity(e: Exception) -> InventoryError:
    orig = getattr(e, "orig", e)
    return InventoryError(f"the database refused the change: {str(orig).splitlines()[0]}")


def import_path(path: Path, *, dry_run: bool = False, reason: str | None = None, url: str | None = None) -> Plan:
    """Import a site file or a folder of them, all or nothing."""
    import gc

    # Parsing builds a million small containers and frees none: the cyclic
    # collector would walk them again and again for nothing (a third of the
    # time of a 10,000-server import).
    gc.disable()
    try:
        sources = load_path(path)
        return _change(sources, [parse_source(s) for s in sources], dry_run=dry_run, action="inventory.import", reason=reason, url=url)
    finally:
        gc.enable()


def _plan(conn: Any, sources: list[Any], files: list[Any]) -> Plan:
    """Check the files against the store and diff them; only the plan survives.

    The specs (current and desired) are dropped when this returns, so that a
    10,000-server import does not hold them while it writes.
    """
    from fleetctl.inventory.snapshot import read_inventory

    current = read_inventory(conn)
    desired = merge(current, sources, files)
    files.clear()
    warnings = check(desired)
    before_sites = {s.name: s for s in current.sites if s.name in desired.touched_sites}
    after_sites = {n: desired.sites[n] for n in desired.touched_sites}
    plan = diff({m.name: m for m in current.models}, before_sites, desired.models, after_sites, consume=True,
                before_profiles={p.name: p for p in current.bios_profiles}, after_profiles=desired.bios_profiles)
    plan.warnings = warnings
    return plan


def _change(sources: list[Any], files: list[Any], *, dry_run: bool, action: str, reason: str | None, url: str | None) -> Plan:
    from sqlalchemy.exc import IntegrityError

    from fleetctl.inventory.apply import apply

    with write_transaction(url) as conn:
        plan = _plan(conn, sources, files)
        if dry_run or plan.empty:
            conn.rollback()
            return plan
        try:
            apply(conn, plan, actor=actor(), action=action, reason=reason)
        except IntegrityError as e:
            raise _integrity(e) from e
    return plan


def edit_site(
    site_name: str,
    mutate: Callable[[Any], None],
    *,
    action: str,
    dry_run: bool = False,
    reason: str | None = None,
    url: str | None = None,
    create: bool = False,
) -> Plan:
    """Apply ``mutate`` to a copy of one site's spec, then check and apply it.

    ``mutate`` receives a ``SiteFile`` holding the site (and every model, so
    a check can see them); it raises InputError for bad arguments.
    """
    from fleetctl.inventory.snapshot import read_inventory

    with get_engine(url).connect() as conn:
        current = read_inventory(conn, {site_name})
    site = next((s for s in current.sites if s.name == site_name), None)
    if create:
        if site is not None:
            raise InventoryError(f"site {site_name!r} exists")
        site = SiteSpec(name=site_name)
    elif site is None:
        raise NotFound(f"no site named {site_name!r}")
    doc = SiteFile.model_construct(bios_profiles=[], models=[], sites=[site.model_copy(deep=True)])
    mutate(doc)
    # Re-validate the edited site through the schema, as a file would be.
    from pydantic import ValidationError

    try:
        checked = SiteFile.model_validate(doc.model_dump())
    except ValidationError as e:
        first = e.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")
        raise InventoryError(f"{'.'.join(str(p) for p in first['loc'])}: {msg}") from None
    return _change([None], [checked], dry_run=dry_run, action=action, reason=reason, url=url)


def remove_site(site_name: str, *, dry_run: bool = False, reason: str | None = None, url: str | None = None) -> Plan:
    """Remove a site that holds no racks."""
    from fleetctl.inventory.apply import apply
    from fleetctl.inventory.snapshot import read_inventory

    with write_transaction(url) as conn:
        current = read_inventory(conn, {site_name})
        if not current.sites:
            raise NotFound(f"no site named {site_name!r}")
        site = current.sites[0]
        if site.racks:
            raise InventoryError(f"site {site_name!r} still has {len(site.racks)} racks; remove them first")
        models = {m.name: m for m in current.models}
        plan = diff(models, {site_name: site}, models, {})
        if dry_run:
            conn.rollback()
            return plan
        apply(conn, plan, actor=actor(), action="site.remove", reason=reason)
    return plan


def export_inventory(url: str | None = None, site_names: set[str] | None = None):  # type: ignore[no-untyped-def]
    from fleetctl.inventory.snapshot import read_inventory

    with get_engine(url).connect() as conn:
        return read_inventory(conn, site_names)


def set_board_state(serial: str, state: str, *, reason: str | None = None, dry_run: bool = False, force: bool = False,
                    url: str | None = None) -> str:  # fmt: skip
    """Move a board to ok, suspect, failed, rma or unknown along the board table; returns the old state.

    ``force`` makes a move the table refuses (audited as forced). A dry run
    checks the move as it would be made, then rolls it back.
    """
    from sqlalchemy import select

    from fleetctl.lifecycle.boards import move_board
    from fleetctl.models import AcceleratorBoard

    try:
        BoardState(state)
    except ValueError:
        raise InputError(
            f"{state!r} is not a board state ({', '.join(s.value for s in BoardState)})", field="--state"
        ) from None
    bt = AcceleratorBoard.__table__
    with write_transaction(url) as conn:
        # A board is its serial, or SERIAL/POSITION where boards share a serial (GB200/GB300 modules).
        where = bt.c.serial == serial
        rows = conn.execute(select(bt.c.id, bt.c.state, bt.c.position).where(where)).all()
        head, _, pos = serial.rpartition("/")
        if not rows and head and pos.isdigit():
            where = (bt.c.serial == head) & (bt.c.position == int(pos))
            rows = conn.execute(select(bt.c.id, bt.c.state, bt.c.position).where(where)).all()
        if not rows:
            raise NotFound(f"no board with serial {serial!r}")
        if len(rows) > 1:
            positions = ", ".join(f"{serial}/{r.position}" for r in sorted(rows, key=lambda r: r.position or 0))
            raise InputError(f"{len(rows)} boards share serial {serial!r}: name one ({positions})", field="SERIAL")
        old = move_board(conn, rows[0].id, state, actor=actor(), reason=reason, expected=rows[0].state, force=force)
        if dry_run:
            conn.rollback()
    return old
