"""A sweep's verdicts where the scheduler sees them (docs/kubernetes.md, "Verdicts the scheduler sees").

After a finished sweep run, for every swept server that is a node of a declared
cluster: the policy's condition (``FleetctlHealthy``: False on an open finding
the policy calls unhealthy or unfit, its reason the worst one's check in
CamelCase), and the policy's ``NoSchedule`` taint while an open finding makes
the node unfit (its value the finding's check), removed once no such finding is
open (resolved, or acknowledged). Open means in the run and not acknowledged now.

The circuit breaker: if the run would leave more nodes of a pool (a rack, or
the nodes sharing a label's value) tainted than the policy allows, no new taint
is written in that cluster; conditions are set and taints of resolved findings
removed all the same (both only ever give nodes back). A sweep bug or a switch
outage then never empties a cluster.

Writes go through :func:`fleetctl.k8s.writes.update_node` (only the policy's
taint key is touched, every other taint is written back as read) and the
client's ``set_condition``; a node whose taint and condition are already as
wanted is not written to.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from fleetctl.errors import FleetError, NotFound
from fleetctl.interfaces.k8s import ClusterClient, ClusterRef, Condition, Node, NodePatch, Taint
from fleetctl.k8s.labels import label_value
from fleetctl.k8s.nodes import NodeRef, node_refs
from fleetctl.k8s.policy import Policy
from fleetctl.k8s.status import Opener, find_node, open_cluster
from fleetctl.k8s.writes import update_node, with_taint, without_taint

_RANK = {"critical": 0, "unknown": 1, "warning": 2}
#: A condition's message is for people reading `kubectl describe node`: bounded.
MAX_MESSAGE = 1024
_NOT_REASON = re.compile(r"[^A-Za-z0-9]+")


def reason_of(check: str) -> str:
    """A check's name as a condition reason, CamelCase as the API's reasons are: ``gpu.memory`` -> ``GpuMemory``."""
    words = [w for w in _NOT_REASON.split(check) if w]
    reason = "".join(w[:1].upper() + w[1:] for w in words) or "Finding"
    return reason if reason[0].isalpha() else f"Check{reason}"


@dataclass(frozen=True)
class OpenFinding:
    """A finding of the run still open now (not acknowledged)."""

    check: str
    subject: str
    status: str
    message: str

    def line(self) -> str:
        part = f" {self.subject}" if self.subject else ""
        return f"{self.status}: {self.check}{part}: {self.message}"


@dataclass
class Verdict:
    """What one node is to carry, and what was done."""

    ref: NodeRef
    node: str | None
    condition: Condition | None = None
    taint: Taint | None = None  # wanted; None: the node must not carry the policy's taint
    action: str = ""  # tainted, untainted, kept, held (by the breaker), none
    written: bool = False
    error: str | None = None

    def row(self) -> dict[str, Any]:
        c = self.condition
        return {"server": self.ref.server, "cluster": self.ref.cluster.name if self.ref.cluster else None, "node": self.node,
                "condition": {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message} if c else None,
                "taint": self.taint.model_dump() if self.taint else None, "action": self.action, "written": self.written,
                "error": self.error}  # fmt: skip


@dataclass
class Tripped:
    """The breaker of one cluster: the first pool over its bound."""

    cluster: str
    pool: str
    tainted: int
    size: int
    allowed: int

    def line(self, policy: Policy) -> str:
        b = policy.breaker
        return (f"cluster {self.cluster}: circuit breaker: this sweep would leave {self.tainted} of the {self.size} nodes of "
                f"{self.pool} tainted {policy.taint} (at most {self.allowed}: share {b.share:g}, at least {b.at_least}): "
                "no node tainted, conditions set (docs/kubernetes.md)")  # fmt: skip


@dataclass
class Publication:
    run_id: int
    verdicts: list[Verdict] = field(default_factory=list)
    tripped: list[Tripped] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one line per cluster that could not be read or written

    @property
    def writes(self) -> int:
        return sum(1 for v in self.verdicts if v.written)

    def summary(self) -> str:
        n = [v for v in self.verdicts if v.node]
        count = {a: sum(1 for v in n if v.action == a) for a in ("tainted", "untainted", "held")}
        unhealthy = sum(1 for v in n if v.condition and v.condition.status == "False")
        return (f"k8s: sweep {self.run_id}'s verdicts on {len(n)} nodes: {unhealthy} not healthy, {count['tainted']} tainted, "
                f"{count['untainted']} untainted" + (f", {count['held']} held back" if count["held"] else "")
                + f"; {self.writes} written")  # fmt: skip


def open_findings(conn: Any, run_id: int, servers: list[str], *, now: dt.datetime | None = None) -> dict[str, list[OpenFinding]]:
    """{server: the run's findings on it not acknowledged now}, worst first."""
    from fleetctl.store import tables as T
    from fleetctl.times import aware_utc

    now = now or dt.datetime.now(dt.UTC)
    f, a = T.finding.c, T.finding_ack.c
    out: dict[str, list[OpenFinding]] = {}
    for i in range(0, len(servers), 500):
        chunk = servers[i : i + 500]
        acked = set()
        for r in conn.execute(select(a.target, a.check, a.subject, a.status, a.until).where(
                a.kind == "server", a.target.in_(chunk), a.ended_at.is_(None))):  # fmt: skip
            until = aware_utc(r.until)
            if until is None or until > now:
                acked.add((r.target, r.check, r.subject, r.status))
        q = select(f.target, f.check, f.subject, f.status, f.message).where(f.run_id == run_id, f.kind == "server", f.target.in_(chunk))
        for r in conn.execute(q):
            if r.status != "ok" and (r.target, r.check, r.subject, r.status) not in acked:
                out.setdefault(r.target, []).append(OpenFinding(r.check, r.subject, r.status, r.message))
    for found in out.values():
        found.sort(key=lambda x: (_RANK.get(x.status, 3), x.check, x.subject))
    return out


def wanted(policy: Policy, found: list[OpenFinding]) -> tuple[Condition, Taint | None]:
    """The condition and the taint (None: none) a node with these open findings carries."""
    unfit = [x for x in found if policy.unfit_rule(x.check, x.status)]
    taint = Taint(key=policy.taint, value=label_value(unfit[0].check), effect="NoSchedule") if unfit else None
    if not found:
        return Condition(type=policy.condition, status="True", reason="NoOpenFinding", message="the last sweep found nothing open"), None
    worst = unfit[0] if unfit else found[0]
    healthy = not unfit and worst.status not in policy.unhealthy
    more = len(found) - 1
    message = worst.line() + (f" (and {more} more open finding{'s' if more > 1 else ''}: fleetctl sweep show)" if more else "")
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return Condition(type=policy.condition, status="True" if healthy else "False", reason=reason_of(worst.check), message=message), taint


def swept_servers(conn: Any, run_id: int) -> list[str]:
    from fleetctl.store import tables as T

    st = T.sweep_target.c
    return [r.name for r in conn.execute(select(st.name).where(st.run_id == run_id, st.kind == "server").order_by(st.name))]


def publish(conn: Any, run_id: int, policy: Policy, *, servers: Iterable[str] | None = None, opener: Opener | None = None,
            dry_run: bool = False) -> Publication:  # fmt: skip
    """Publish run ``run_id``'s verdicts on the nodes of its swept servers (``servers``: only these of them).

    A cluster that cannot be opened, read or written is one line in ``failed``; the other clusters are published all the
    same. Returns what was (or, ``dry_run``, would be) done.
    """
    names = swept_servers(conn, run_id)
    if servers is not None:
        keep = set(servers)
        names = [n for n in names if n in keep]
    refs = [r for r in node_refs(conn, names) if r.cluster is not None]
    found = open_findings(conn, run_id, [r.server for r in refs])
    out = Publication(run_id)
    by_cluster: dict[ClusterRef, list[NodeRef]] = {}
    for r in refs:
        assert r.cluster is not None
        by_cluster.setdefault(r.cluster, []).append(r)
    for cluster, members in by_cluster.items():
        try:
            with (opener or open_cluster)(cluster) as client:
                verdicts, tripped = _cluster(conn, client, members, found, policy, dry_run=dry_run)
        except FleetError as e:
            out.failed.append(str(e))
            out.verdicts += [Verdict(r, None, error=str(e)) for r in members]
            continue
        out.verdicts += verdicts
        if tripped is not None:
            out.tripped.append(tripped)
    return out


def _cluster(conn: Any, client: ClusterClient, members: list[NodeRef], found: dict[str, list[OpenFinding]], policy: Policy, *,
             dry_run: bool) -> tuple[list[Verdict], Tripped | None]:  # fmt: skip
    listed = {n.name: n for n in client.nodes()}  # one listing: the pools' sizes and taints need every node anyway
    verdicts: list[Verdict] = []
    nodes: dict[str, Node] = {}
    for r in members:
        try:
            node, _ = find_node(client, r, listed)
        except NotFound as e:
            verdicts.append(Verdict(r, None, error=str(e)))
            continue
        if node is None:
            verdicts.append(Verdict(r, None, action="none"))
            continue
        cond, taint = wanted(policy, found.get(r.server, []))
        nodes[node.name] = node
        has = any(t.key == policy.taint and t.effect == "NoSchedule" for t in node.taints)
        action = ("kept" if has else "tainted") if taint else ("untainted" if has else "none")
        verdicts.append(Verdict(r, node.name, cond, taint, action))
    tripped = _breaker(conn, client, listed, [v for v in verdicts if v.node], policy)
    if tripped is not None:
        for v in verdicts:
            if v.action == "tainted":
                v.action, v.taint = "held", None
    if dry_run:
        return verdicts, tripped
    for v in verdicts:
        if v.node is None or v.condition is None:
            continue
        node = nodes[v.node]
        if v.action in ("tainted", "untainted") or (v.action == "kept" and _taint_of(node, policy) != v.taint):
            update_node(client, v.node, functools.partial(_taint_patch, v=v, policy=policy))
            v.written = True
        now = node.condition(policy.condition)
        c = v.condition
        if now is None or (now.status, now.reason, now.message) != (c.status, c.reason, c.message):
            client.set_condition(v.node, c)
            v.written = True
    return verdicts, tripped


def _taint_of(node: Node, policy: Policy) -> Taint | None:
    return next((t for t in node.taints if t.key == policy.taint and t.effect == "NoSchedule"), None)


def _taint_patch(node: Node, v: Verdict, policy: Policy) -> NodePatch | None:
    """The node's taints with the policy's set as wanted, every other one as read; None when already so."""
    if v.action == "held":
        return None
    taints = with_taint(node.taints, v.taint) if v.taint is not None else without_taint(node.taints, policy.taint, "NoSchedule")
    return None if taints == node.taints else NodePatch(taints=taints)


def _breaker(conn: Any, client: ClusterClient, listed: dict[str, Node], verdicts: list[Verdict], policy: Policy) -> Tripped | None:
    """The first pool this publication would leave with more tainted nodes than the policy allows (None: none)."""
    new = [v for v in verdicts if v.action == "tainted"]
    if not new:
        return None
    b = policy.breaker
    by_node = {v.node: v for v in verdicts}
    key = b.label
    pools: dict[str, list[str]] = {}  # pool -> its nodes in this cluster
    if key is not None:
        for n in listed.values():
            pools.setdefault(f"the pool {key}={n.labels.get(key, '')}", []).append(n.name)
    else:
        pools = _rack_pools(conn, client, listed, {v.ref.rack for v in new})
    for pool, members in sorted(pools.items()):
        if not any(by_node.get(m) is not None and by_node[m].action == "tainted" for m in members):
            continue
        tainted = 0
        for m in members:
            v = by_node.get(m)
            if v is not None:
                tainted += v.taint is not None
            elif _taint_of(listed[m], policy) is not None:
                tainted += 1  # tainted by an earlier sweep, not swept now: it stays tainted
        allowed = b.allowed(len(members))
        if tainted > allowed:
            return Tripped(client.ref.name, pool, tainted, len(members), allowed)
    return None


def _rack_pools(conn: Any, client: ClusterClient, listed: dict[str, Node], racks: set[str]) -> dict[str, list[str]]:
    """{rack pool: the nodes of this cluster that are servers of the rack}, from the inventory and the listing."""
    from fleetctl.store import tables as T

    q = select(T.server.c.name).join(T.rack, T.rack.c.id == T.server.c.rack_id).where(T.rack.c.name.in_(sorted(racks)))
    refs = node_refs(conn, [r.name for r in conn.execute(q)])
    pools: dict[str, list[str]] = {}
    for r in refs:
        if r.cluster != client.ref:
            continue
        try:
            node, _ = find_node(client, r, listed)
        except NotFound:
            continue
        if node is not None:
            pools.setdefault(f"rack {r.rack}", []).append(node.name)
    return pools
