"""Edits the CLI makes to a site's spec before it is checked and applied.

Each function takes the ``SiteFile`` that ``service.edit_site`` hands over
(one site in it) and changes it in place; bad arguments raise InputError
naming the option.
"""

from __future__ import annotations

from typing import Any, TypedDict

from sqlalchemy import select

from fleetctl.errors import InputError, NotFound
from fleetctl.inventory.queries import rack_t, resolve_rack, site_t, srv_t, sw_t
from fleetctl.inventory.schema import ModelSpec, RackSpec, ServerSpec, SiteFile, SwitchSpec
from fleetctl.store import get_engine


def _site_of(table: Any, name: str, noun: str) -> str:
    with get_engine().connect() as c:
        site = c.execute(
            select(site_t.c.name)
            .join(rack_t, rack_t.c.site_id == site_t.c.id)
            .join(table, table.c.rack_id == rack_t.c.id)
            .where(table.c.name == name)
        ).scalar()
    if site is None:
        raise NotFound(f"no {noun} named {name!r}")
    return site


def site_of_server(name: str) -> str:
    return _site_of(srv_t, name, "server")


def site_of_switch(name: str) -> str:
    return _site_of(sw_t, name, "switch")


def site_of_rack(ref: str) -> tuple[str, str]:
    with get_engine().connect() as c:
        r = resolve_rack(c, ref)
    return r.site, r.name


def the_site(doc: SiteFile) -> Any:
    return doc.sites[0]


def find_rack(doc: SiteFile, name: str) -> RackSpec:
    for r in the_site(doc).racks:
        if r.name == name:
            return r
    raise NotFound(f"no rack named {name!r} in site {the_site(doc).name!r}")


def find_server(doc: SiteFile, name: str) -> tuple[RackSpec, ServerSpec]:
    for r in the_site(doc).racks:
        for s in r.servers:
            if s.name == name:
                return r, s
    raise NotFound(f"no server named {name!r}")


def find_switch(doc: SiteFile, name: str) -> tuple[RackSpec, SwitchSpec]:
    for r in the_site(doc).racks:
        for s in r.switches:
            if s.name == name:
                return r, s
    raise NotFound(f"no switch named {name!r}")


class NicText(TypedDict):
    """A NIC as `--nic` gives it: the fields of a NicSpec."""

    name: str
    mac: str | None


def parse_nic(text: str) -> NicText:
    """``eth0=aa:bb:cc:dd:ee:ff`` or ``eth0``."""
    name, _, mac = text.partition("=")
    if not name:
        raise InputError(f"--nic {text!r}: expected NAME or NAME=MAC", field="--nic")
    return {"name": name, "mac": mac or None}


def drop_cables_of(doc: SiteFile, *, server: str | None = None, switch: str | None = None) -> int:
    """Remove the plan's cables that end at a device being removed."""
    site = the_site(doc)
    before = len(site.cabling)
    site.cabling = [
        c
        for c in site.cabling
        if not ((server and c.server == server) or (switch and switch in (c.switch, c.peer)))
    ]
    return before - len(site.cabling)


# A server enrolled by its BMC alone (`server add NAME --bmc URL --credential
# REF`, as Ironic enrolls a node with a driver and its BMC address) has no model
# and no serial yet: it gets these placeholders, which `server inspect` replaces
# with what the BMC reports. Placeholders rather than NULL columns: every
# listing, selector and target resolution joins a server to its model, and the
# site files stay importable as they are exported.
UNIDENTIFIED_MODEL = "unidentified"


def placeholder_serial(server: str) -> str:
    """The serial of a server enrolled without one, until inspection reads it."""
    return f"UNKNOWN-{server}"


def is_placeholder_serial(server: str, serial: str | None) -> bool:
    return serial == placeholder_serial(server)


def ensure_unidentified_model(doc: SiteFile) -> None:
    """Declare the placeholder model (a 1U server holding no boards) if the inventory does not yet."""
    if not any(m.name == UNIDENTIFIED_MODEL for m in doc.models):
        doc.models.append(ModelSpec(name=UNIDENTIFIED_MODEL, kind="server", vendor="unknown", model="unknown", height=1))
