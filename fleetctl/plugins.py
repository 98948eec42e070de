"""Driver registries, one per kind of driver, filled from entry points.

Third parties ship a driver by declaring an entry point in one of these
groups; fleetctl never needs to know their module names. Names are sorted and
a name registered twice is refused rather than silently shadowed.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

from fleetctl.errors import FleetError

GROUPS = {
    "bmc": "fleetctl.bmc",
    "switch": "fleetctl.switch",
    "snmp": "fleetctl.snmp",
    "accel": "fleetctl.accel",
}


@cache
def _entry_points(kind: str) -> dict[str, Any]:
    group = GROUPS[kind]
    found: dict[str, Any] = {}
    for ep in entry_points(group=group):
        if ep.name in found and found[ep.name].value != ep.value:
            raise FleetError(
                f"driver {ep.name!r} is registered twice in {group}: {found[ep.name].value} and {ep.value}"
            )
        found[ep.name] = ep
    return dict(sorted(found.items()))


def driver_names(kind: str) -> list[str]:
    """The names of the drivers of one kind, sorted."""
    return list(_entry_points(kind))


def load_driver(kind: str, name: str) -> Any:
    """The class (or factory) registered as ``name`` for ``kind``."""
    eps = _entry_points(kind)
    if name not in eps:
        known = ", ".join(eps) or "none"
        raise FleetError(f"no {kind} driver named {name!r} (installed: {known})", exit_code=2)
    return eps[name].load()
