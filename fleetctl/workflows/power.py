"""Power-on that respects each rack's power budget and spreads inrush.

From the hardware models' power figures: a server that is on (or turning on)
is counted at its peak draw, conservatively. Within a rack, servers are
started ``stagger_s`` apart, and one starts only while the rack's counted
draw stays within its budget; a server that would exceed it is not started
and says why. Racks without a budget are only staggered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from fleetctl.store import tables as T


@dataclass
class PowerSlot:
    server: str
    rack: str
    start_s: float | None  # seconds after the first power-on; None: not started
    peak_w: int
    reason: str | None = None


@dataclass
class PowerPlan:
    slots: list[PowerSlot] = field(default_factory=list)
    rack_draw_w: dict[str, int] = field(default_factory=dict)  # counted draw once all started
    budgets: dict[str, int | None] = field(default_factory=dict)

    def start_of(self, name: str) -> float | None:
        return next((s.start_s for s in self.slots if s.server == name), None)


def plan_power_on(
    servers: list[tuple[str, str, int | None]],
    *,
    already_on: dict[str, list[tuple[str, int | None]]],
    budgets: dict[str, int | None],
    stagger_s: float,
) -> PowerPlan:
    """Schedule power-ons.

    Args:
        servers: (name, rack, peak watts) of the servers to start, in order.
        already_on: rack -> (name, peak watts) of servers already drawing power.
        budgets: rack -> budget in watts (None: no budget).
        stagger_s: seconds between two starts in the same rack.
    """
    plan = PowerPlan(budgets=dict(budgets))
    draw = {rack: sum(p or 0 for _, p in on) for rack, on in already_on.items()}
    next_start: dict[str, float] = {}
    for name, rack, peak in servers:
        peak_w = peak or 0
        budget = budgets.get(rack)
        current = draw.get(rack, 0)
        if budget is not None and current + peak_w > budget:
            plan.slots.append(PowerSlot(name, rack, None, peak_w,
                                        f"rack {rack} would draw {current + peak_w} W at peak, over its {budget} W budget"))  # fmt: skip
            continue
        start = next_start.get(rack, 0.0)
        plan.slots.append(PowerSlot(name, rack, start, peak_w))
        next_start[rack] = start + stagger_s
        draw[rack] = current + peak_w
    plan.rack_draw_w = draw
    return plan


def power_figures(
    conn: Any, names: list[str]
) -> tuple[dict[str, tuple[str, int | None]], dict[str, int | None], dict[str, list[tuple[str, int | None]]]]:
    """(server -> (rack key, peak W)), (rack key -> budget), and every server of those racks with its peak."""
    q = (
        select(T.server.c.name, T.rack.c.id.label("rack_id"), T.rack.c.name.label("rack"), T.rack.c.power_budget_w,
               T.hardware_model.c.power_peak_w, T.site.c.name.label("site"))  # fmt: skip
        .join(T.rack, T.rack.c.id == T.server.c.rack_id)
        .join(T.site, T.site.c.id == T.rack.c.site_id)
        .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
    )
    rows = list(conn.execute(q))
    wanted = set(names)
    racks = {r.rack_id for r in rows if r.name in wanted}
    by_server = {r.name: (f"{r.site}/{r.rack}", r.power_peak_w) for r in rows if r.rack_id in racks}
    budgets = {f"{r.site}/{r.rack}": r.power_budget_w for r in rows if r.rack_id in racks}
    members: dict[str, list[tuple[str, int | None]]] = {}
    for r in rows:
        if r.rack_id in racks:
            members.setdefault(f"{r.site}/{r.rack}", []).append((r.name, r.power_peak_w))
    return by_server, budgets, members
