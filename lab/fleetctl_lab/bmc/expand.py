"""The lab's ``$expand`` query (DSP0266, "$expand"): ``.``, ``*`` and ``~``, with ``($levels=N)``.

``.`` expands the subordinate references (every ``{"@odata.id": ...}`` not under ``Links``; a collection's
``Members`` are), ``~`` only those under ``Links``, ``*`` both. Level 1 expands the references of the answered
document itself; each level further expands the references of what the level before brought in, so
``Chassis/Self/PCIeDevices?$expand=.($levels=3)`` carries the devices, each device's PCIeFunctions collection
and that collection's functions. ``$levels`` is served up to the dialect's ``Flavour.expand_levels`` (the
``ExpandQuery.MaxLevels`` its service root advertises); past it the answer stops at MaxLevels.

An answer at ``$levels=1`` (or without ``$levels``) is byte for byte what the lab served before levels
existed: a collection's members inline, nothing else.
"""

from __future__ import annotations

import re
from typing import Any

from fleetctl_lab.bmc.resources import dispatch
from fleetctl_lab.bmc.state import SimBMC

_QUERY = re.compile(r"^([.*~])(?:\(\$levels=(\d+)\))?$")


def parse_expand(query: str | None, max_levels: int) -> tuple[str, int] | None:
    """``(kind, levels)`` of a ``$expand`` value, levels clamped to ``max_levels``; None when not one the lab serves."""
    m = _QUERY.match(query or "")
    if m is None:
        return None
    levels = int(m.group(2)) if m.group(2) else 1
    return m.group(1), max(1, min(levels, max_levels))


def expanded(bmc: SimBMC, doc: dict[str, Any], query: str | None) -> dict[str, Any]:
    """``doc`` with its references expanded as ``query`` (the ``$expand`` value) asks; ``doc`` itself otherwise."""
    asked = parse_expand(query, bmc.flavour.expand_levels)
    if asked is None:
        return doc
    kind, levels = asked
    if levels == 1 and kind in ".*" and "Members" not in doc:
        return doc  # what the lab answered before levels: a resource that is no collection, unexpanded
    own = doc.get("@odata.id")
    return _expand(bmc, doc, kind, levels, {own} if isinstance(own, str) else set())


def _expand(bmc: SimBMC, doc: dict[str, Any], kind: str, levels: int, above: set[str]) -> dict[str, Any]:
    """One document with its references ``levels`` deep; ``above`` (the links on the way down) is not expanded
    again (``*`` and ``~`` follow Links, which may point back up)."""
    if levels == 1 and kind in ".*" and "Members" in doc:
        # Level 1 of a collection: only its members (the answer the lab gave before levels, kept identical).
        return {**doc, "Members": [_member(bmc, ref, kind, 0, above) for ref in doc.get("Members") or []]}
    return {k: _value(bmc, k, v, kind, levels, above, in_links=False) for k, v in doc.items()}


def _value(bmc: SimBMC, key: str, value: Any, kind: str, levels: int, above: set[str], *, in_links: bool) -> Any:
    in_links = in_links or key == "Links"
    if isinstance(value, list):
        return [_value(bmc, key, v, kind, levels, above, in_links=in_links) for v in value]
    if not isinstance(value, dict):
        return value
    if _is_ref(value):
        wanted = kind == "*" or (kind == "." and not in_links) or (kind == "~" and in_links)
        return _member(bmc, value, kind, levels - 1, above) if wanted else value
    return {k: _value(bmc, k, v, kind, levels, above, in_links=in_links) for k, v in value.items()}


def _member(bmc: SimBMC, ref: Any, kind: str, deeper: int, above: set[str]) -> Any:
    """The document a reference names (the reference itself when it fails or points back up), ``deeper`` more levels."""
    if not _is_ref(ref):
        return ref
    link = ref["@odata.id"]
    if link in above:
        return ref
    status, member, _ = dispatch(bmc, "GET", link.rstrip("/"), None)
    if status != 200 or not isinstance(member, dict):
        return ref
    return _expand(bmc, member, kind, deeper, above | {link}) if deeper > 0 else member


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("@odata.id"), str) and bool(value["@odata.id"])
