"""The Kubernetes maintenance around a workflow's disruptive unit: plan the waves, cordon and drain, act, uncordon.

Used by every described workflow that disrupts a server (burn-in, firmware
update, provisioning with ``--restart``), on either engine:

- the command calls :func:`plan_drain` with its servers before anything is
  touched: which are live nodes of a declared cluster (the cluster must
  answer, each declared node must be there), and their waves under
  ``--max-unavailable`` per rack, counting the nodes of each rack already out
  (cordoned or not Ready). The result, :class:`DrainPlan`, is plain values: it
  travels in the request, and so in a Temporal history (no credential: the
  clusters are named, their references resolved on the worker);
- the description puts each unit in its server's wave (:meth:`DrainPlan.wave`);
- the unit runs its work inside :func:`maintenance`: for a live node,
  :func:`fleetctl.k8s.maintenance.enter` (journaled: a killed run's next pass
  resumes it) before, :func:`~fleetctl.k8s.maintenance.leave` after: the node
  uncordoned when the unit says it went well, left cordoned with the
  ``fleetctl.io/maintenance`` taint naming the job when it did not (or was
  interrupted), listed by ``fleetctl k8s status`` until someone looks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from fleetctl.errors import FleetError, InputError
from fleetctl.k8s.waves import parse_max_unavailable, plan_waves

#: The default bound on the nodes of one rack out at once: one, as kured's default concurrency.
DEFAULT_MAX_UNAVAILABLE = "1"


@dataclass
class DrainPlan:
    """Which servers of a run are live nodes and their waves, and how they are drained: plain values (a request's part)."""

    wave_of: dict[str, int] = field(default_factory=dict)  # live node's server -> its wave (0 first)
    max_unavailable: str = DEFAULT_MAX_UNAVAILABLE
    timeout_s: float = 600.0
    delete_emptydir_data: bool = False
    force: bool = False
    grace_s: int | None = None

    def wave(self, server: str) -> int:
        """The server's wave; a server that is no node runs in the first."""
        return self.wave_of.get(server, 0)

    def options(self) -> Any:
        from fleetctl.k8s.maintenance import DrainOptions

        return DrainOptions(timeout_s=self.timeout_s, delete_emptydir_data=self.delete_emptydir_data, force=self.force,
                            grace_s=self.grace_s)  # fmt: skip


def plan_drain(conn: Any, servers: Sequence[str], *, max_unavailable: str = DEFAULT_MAX_UNAVAILABLE, timeout_s: float = 600.0,
               delete_emptydir_data: bool = False, force: bool = False, grace_s: int | None = None,
               opener: Any = None) -> DrainPlan | None:  # fmt: skip
    """The drain plan of a run's servers in service, checked before anything is touched; None when none is a live node.

    Raises:
        InputError: (exit 2) ``max_unavailable`` unreadable; a rack that may lose no more node now (the figures named).
        MaintenanceRefused: (exit 2) pods a drain may not evict without a flag; a node another running job holds.
        K8sError: (exit 2) a cluster that cannot be opened or does not answer; a declared node it lacks.
    """
    from fleetctl.inventory.queries import rack_t, srv_t
    from fleetctl.k8s.maintenance import check
    from fleetctl.k8s.nodes import node_refs
    from fleetctl.k8s.status import statuses

    limit = parse_max_unavailable(max_unavailable)
    # A server in service is a node running users' work: it is drained. One in another state (ready, maintenance) runs
    # none by the lifecycle's rules, and its cluster is not asked (a cluster declared but not yet reachable, as a new
    # site's, does not stop a burn-in of servers nobody uses yet).
    refs = [r for r in node_refs(conn, list(servers)) if r.cluster is not None and r.state == "in-service"]
    if not refs:
        return None
    # The racks' other servers: how many nodes each rack has, and how many are out already, from the cluster itself.
    racks = sorted({r.rack for r in refs})
    mates = [n for (n,) in conn.execute(select(srv_t.c.name).join(rack_t, rack_t.c.id == srv_t.c.rack_id).where(rack_t.c.name.in_(racks)))]
    every = [r for r in node_refs(conn, mates) if r.cluster is not None]
    seen = statuses(every, pods=False, opener=opener)
    nodes = [s for s in seen if s.node is not None]
    chosen = set(servers)
    live = {s.ref.server: s for s in nodes if s.ref.server in chosen}
    if not live:
        return None
    sizes = Counter(f"rack {s.ref.rack}" for s in nodes)
    out = Counter(f"rack {s.ref.rack}" for s in nodes if s.node is not None and (s.node.unschedulable or s.node.ready != "True")
                  and s.ref.server not in chosen)  # fmt: skip
    plan = plan_waves({name: [f"rack {s.ref.rack}"] for name, s in live.items()}, sizes, limit, out)
    if plan.refused:
        first = sorted(plan.refused)
        raise InputError(f"{', '.join(first[:3])}{' and more' if len(first) > 3 else ''}: {plan.refused[first[0]]}",
                         field="--max-unavailable")  # fmt: skip
    wave_of = {name: i for i, wave in enumerate(plan.waves) for name in wave}
    drain = DrainPlan(wave_of, str(limit), timeout_s, delete_emptydir_data, force, grace_s)
    # Each node's pods by kubectl drain's filters (local data, unmanaged pods), and no running job holding it: every
    # refusal in one line before the first node is cordoned.
    check(conn, sorted(live), options=drain.options(), opener=opener)
    return drain


class NotDrained(FleetError):
    """The server's node could not be drained (a budget held past the timeout, pods it may not evict, the cluster gone):
    the unit's work was not done; the node stays cordoned, journaled. The message is the drain's own."""


@dataclass
class Held:
    """A unit's maintenance: what enter did (None: no node, or no drain planned), and how the unit ended."""

    entered: Any = None
    ok: bool = True
    reason: str = ""

    def failed(self, reason: str) -> None:
        """The unit's work did not go well: the node stays cordoned, with why."""
        self.ok, self.reason = False, reason


@contextlib.asynccontextmanager
async def maintenance(plan: DrainPlan | None, server: str, *, job: int, why: str) -> AsyncIterator[Held]:
    """Cordon and drain the server's node before the block, uncordon after it if it went well (see the module's doc).

    Raises:
        NotDrained: (before the block runs) the drain did not finish: the unit records it as its server's error.
    """
    if plan is None or server not in plan.wave_of:
        yield Held()
        return
    from fleetctl.k8s import maintenance as m
    from fleetctl.store import get_engine

    def enter() -> Any:
        with get_engine().connect() as c:
            return m.enter(c, server, job=job, why=why, options=plan.options())

    def leave(ok: bool, reason: str) -> None:
        with get_engine().connect() as c:
            m.leave(c, server, job=job, ok=ok, reason=reason)

    try:
        held = Held(await asyncio.to_thread(enter))
    except FleetError as e:
        raise NotDrained(str(e), exit_code=e.exit_code) from e
    try:
        yield held
    except BaseException as e:
        # Interrupted or failed: the node stays cordoned, the journal says by which job and why; the next pass resumes.
        why_not = "interrupted" if isinstance(e, asyncio.CancelledError | KeyboardInterrupt) else f"{type(e).__name__}: {e}"
        await asyncio.shield(asyncio.to_thread(leave, False, why_not))
        raise
    await asyncio.to_thread(leave, held.ok, held.reason)
