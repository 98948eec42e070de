"""Firmware to the baseline, in waves: a canary, then batches, halting on failure.

Per server, each component that differs from its model's baseline is updated
with Redfish SimpleUpdate, one at a time (as Ironic does: a failure stops the
rest of that server), the task followed to its end, and the version read back;
a component already at the baseline is never flashed again, so a re-run after
a crash or a kill only does what is left. Across servers, a canary wave goes
first; any failure in a wave stops the waves after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fleetctl.errors import BMCError

DEFAULT_TEMPLATE = "{base}/{id}-{version}.bin"


def baseline_key(want: dict[str, str], comp: Any) -> str | None:
    """The baseline component a reported firmware component answers to.

    By id or name, case-insensitively; a board's component (the lab and
    several vendors say ``mncore2_slot0_mncore2-board``) also by its suffix.
    """
    cid, name = comp.id.lower(), (getattr(comp, "name", None) or "").lower()
    for k in want:
        lk = k.lower()
        if lk in (cid, name) or cid.endswith("_" + lk):
            return k
    return None


@dataclass
class ComponentUpdate:
    id: str
    baseline: str
    before: str | None
    after: str | None = None
    image: str = ""
    state: str = "planned"  # planned, updated, failed, at-baseline
    message: str | None = None


@dataclass
class ServerPlan:
    server: str
    updates: list[ComponentUpdate] = field(default_factory=list)


def plan_for(inventory: list[Any], want: dict[str, str], *, template: str, base: str, only: set[str] | None) -> list[ComponentUpdate]:
    out = []
    for comp in inventory:
        key = baseline_key(want, comp)
        if key is None or (only and key not in only and comp.id not in only):
            continue
        if comp.version == want[key]:
            continue
        image = template.format(base=base.rstrip("/"), id=comp.id, component=key, version=want[key])
        out.append(ComponentUpdate(comp.id, want[key], comp.version, image=image))
    return out


def operation(want_by_server: dict[str, dict[str, str]], *, template: str, base: str, only: set[str] | None,
              dry_run: bool, timeout: float = 3600.0) -> Callable[[Any], Awaitable[list[ComponentUpdate]]]:  # fmt: skip
    """The per-server operation for the BMC sweep."""

    async def op(bmc: Any) -> list[ComponentUpdate]:
        name = bmc.target.name
        updates = plan_for(await bmc.firmware.inventory(), want_by_server.get(name, {}), template=template, base=base, only=only)
        if dry_run:
            return updates
        for u in updates:
            result = await bmc.firmware.simple_update(u.image, timeout=timeout)
            now = {c.id: c.version for c in await bmc.firmware.inventory()}
            u.after = now.get(u.id)
            if str(result.state).lower() not in ("completed", "ok") or u.after != u.baseline:
                u.state = "failed"
                u.message = "; ".join(result.messages) or f"task ended {result.state}, version {u.after}"
                # One failed component stops this server: the next may depend on it.
                raise BMCError(f"{name}: {u.id} {u.before} -> {u.baseline} failed: {u.message}")
            u.state = "updated"
        return updates

    return op
