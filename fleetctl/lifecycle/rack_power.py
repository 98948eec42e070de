"""A rack's power budget and inrush stagger, kept by every process that powers servers on in it.

One provisioning run used to keep its racks' counted draw and the time of the
last start in memory. Two operators provisioning different servers of one rack,
or two Temporal workers of one site, each counted only their own power-ons:
together they could take the rack over its budget (a tripped PDU breaker) and
start servers closer than the stagger. Every admission now goes through the
store, in one short write transaction (``immediate``: serialised on SQLite and
on PostgreSQL alike):

- the draw counted is the union, by server, of what the caller read from the
  BMCs (``drawing``, at ``read_at``) and of every admission, by anyone, whose
  start comes after that reading (less a margin for a power-on to show on its
  BMC): a power-on the reading already saw is not counted twice, and one it
  could not have seen is counted;
- the server's start is the rack's last admitted start plus the stagger (or
  now): the caller waits for it outside the transaction.

A server that would go over the budget is refused with the figures; nothing is
written for it. Admissions are never taken back: a server admitted and then
not started (the run died) is counted, conservatively, until readings taken
after its slot show it off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select

from fleetctl.errors import FleetError
from fleetctl.store import immediate
from fleetctl.store import tables as T

MARGIN_S = 60.0  # a power-on shows on its BMC within this after its slot
KEEP_S = 86400.0  # admissions are pruned after a day


class OverBudget(FleetError):
    """Starting this server would take its rack over its power budget."""


@dataclass(frozen=True)
class Admission:
    start_at: float  # when the server may start (seconds since the epoch)
    draw_w: int  # the rack's counted draw at peak with it


class RackPower:
    """Power-on admissions for some racks, shared through the store with every other process.

    Args:
        engine: the store.
        budgets: rack (``site/rack``) -> budget in watts (None: only staggered).
        members: rack -> (server, peak watts) of every server in it.
        drawing: the servers the caller found drawing power (on, turning on, or unreadable).
        read_at: when the caller read those power states (seconds since the epoch).
        stagger_s: seconds between two starts in one rack.
        holder: who admits (recorded with each admission).
    """

    def __init__(self, engine: Any, *, budgets: dict[str, int | None], members: dict[str, list[tuple[str, int | None]]],
                 drawing: Iterable[str], read_at: float, stagger_s: float, holder: str) -> None:  # fmt: skip
        self.engine = engine
        self.budgets = budgets
        self.peaks = {rack: {n: p or 0 for n, p in ms} for rack, ms in members.items()}
        self.drawing = set(drawing)
        self.read_at = read_at
        self.stagger_s = stagger_s
        self.holder = holder
        self._locks: dict[str, asyncio.Lock] = {}

    def counted(self, conn: Any, rack: str) -> tuple[dict[str, int], float]:
        """(server -> peak W) counted as drawing in ``rack``, and the rack's last admitted start (0: none)."""
        pa = T.power_admission
        peaks = self.peaks.get(rack, {})
        counted = {n: w for n, w in peaks.items() if n in self.drawing}
        last = 0.0
        for server, peak_w, start_at in conn.execute(select(pa.c.server, pa.c.peak_w, pa.c.start_at).where(pa.c.rack == rack)):
            last = max(last, start_at)
            if start_at >= self.read_at - MARGIN_S:
                counted[server] = max(counted.get(server, 0), peak_w)
        return counted, last

    def admit(self, rack: str, server: str, peak_w: int, *, already_drawing: bool) -> Admission:
        """Admit one power-on (or cycle, ``already_drawing``): its start time and the rack's draw; OverBudget if it does not fit."""
        pa = T.power_admission
        now = time.time()
        with immediate(self.engine) as conn:
            conn.execute(delete(pa).where(pa.c.start_at < now - KEEP_S))
            counted, last = self.counted(conn, rack)
            if already_drawing:
                counted.setdefault(server, peak_w)  # on already: it adds nothing, but it is in the draw
            current = sum(counted.values())
            add = 0 if server in counted else peak_w
            budget = self.budgets.get(rack)
            if budget is not None and current + add > budget:
                raise OverBudget(f"rack {rack} would draw {current + add} W at peak, over its {budget} W budget")
            start_at = max(time.time(), last + self.stagger_s)  # now, after the reads: the first start is not early
            conn.execute(insert(pa).values(rack=rack, server=server, peak_w=peak_w, start_at=start_at, holder=self.holder))
        return Admission(start_at, current + add)

    async def take_turn(self, rack: str, server: str, peak_w: int, *, already_drawing: bool) -> Admission:
        """:meth:`admit`, then wait for the start: call it when the server is ready to start, not before
        (a slot is counted from its admission)."""
        # one admission at a time per rack in this process (in the order asked): the store serialises the rest
        async with self._locks.setdefault(rack, asyncio.Lock()):
            got = await asyncio.to_thread(self.admit, rack, server, peak_w, already_drawing=already_drawing)
        wait = got.start_at - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        return got


__all__ = ["KEEP_S", "MARGIN_S", "Admission", "OverBudget", "RackPower"]
